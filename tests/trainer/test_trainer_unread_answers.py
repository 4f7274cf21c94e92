"""A data_source for which reward.extractor=auto reads the "Answer:" line (its name contains "dapo"
or begins with "aime"), and a model that answers in \\boxed{...}: every response scores wrong. That is
said, once a run (training) and in an evaluation, with the data_source, the extractor and the fix; so is
an <answer> tag under math_dapo or reward.extractor=boxed, and an "Answer:" line under the latter."""

from __future__ import annotations

import json
import warnings

import pytest

from dapo.builtin import build_tokenizer
from dapo.config.schema import RewardConfig
from dapo.data.records import Problem
from dapo.rewards import RewardScorer
from dapo.rollout.base import Completion, GenerationResult, SamplingParams
from dapo.trainer import Trainer
from dapo.trainer.evaluate import evaluate
from tests.trainer.conftest import tiny_config


class BoxingEngine:
    """Answers every prompt with ``... so \\boxed{2}`` (or another format), right for "1 + 1 =";
    the rest of a rollout engine's methods are the wrapped one's."""

    def __init__(self, tokenizer, wrapped=None, text: str = "1 + 1 is 2, so \\boxed{2}") -> None:
        self.tokenizer, self.wrapped, self.text = tokenizer, wrapped, text

    def generate(self, prompt_token_ids, params):
        ids = self.tokenizer(self.text, add_special_tokens=False)["input_ids"]
        completions = [Completion(i, ids, [0.0] * len(ids), "stop")
                       for i in range(len(prompt_token_ids)) for _ in range(params.n)]
        return GenerationResult(completions, 0.0, 0)

    def __getattr__(self, name):
        return getattr(self.wrapped, name)


TAGGED = "<think>1 + 1 is 2</think> <answer>2</answer>"  # DeepSeek-R1-Zero's format (data.template=r1)


def boxed_eval(source: str, extractor: str = "auto", text: str = "1 + 1 is 2, so \\boxed{2}", verifier: str = "dapo-rl"):
    tokenizer = build_tokenizer()
    problems = [Problem(uid=str(i), prompt="1 + 1 =", ground_truth="2", data_source=source) for i in range(3)]
    with RewardScorer(RewardConfig(num_workers=1, extractor=extractor, verifier=verifier)) as scorer:
        return evaluate(BoxingEngine(tokenizer, text=text), tokenizer, scorer, [[1]] * 3, problems,
                        SamplingParams(n=2, seed=0))


def test_an_evaluation_that_reads_no_box_under_the_answer_line_extractor_says_so():
    with pytest.warns(UserWarning, match=r"6 of 6 evaluation responses on data_source aime2025 hold a \\boxed") as said:
        result = boxed_eval("aime2025")
    message = next(str(w.message) for w in said if "boxed" in str(w.message))
    assert 'reward.extractor=auto picks the "Answer:" line extractor' in message
    assert "reward.extractor=boxed" in message and "data.template" in message
    assert result.metrics["eval/avg@2"] == 0.0


@pytest.mark.parametrize("source, extractor, text", [
    ("aime2025", "boxed", "1 + 1 is 2, so \\boxed{2}"),  # the fix: read the box
    ("math500", "auto", "1 + 1 is 2, so \\boxed{2}"),  # auto reads either anchor there
    ("aime2025", "auto", "1 + 1 is 2\nAnswer: 2"),  # the format the extractor reads
    ("aime2025", "auto", "1 + 1 is 2"),  # no box either: nothing the fix would read
    ("aime2025", "auto", TAGGED),  # the Answer-line extractor reads an <answer> tag
    ("math500", "auto", TAGGED),
])
def test_nothing_is_said_where_the_box_is_read_or_absent(source, extractor, text):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = boxed_eval(source, extractor, text)
    assert result.metrics["eval/avg@2"] == (0.0 if text == "1 + 1 is 2" else 1.0)


def test_training_on_an_aime_file_with_boxed_answers_says_it_once(tiny_model_dir, tmp_path):
    data = tmp_path / "aime2025.jsonl"  # no data_source in the rows: the file's name is theirs
    data.write_text("".join(json.dumps({"prompt": f"1 + {i} - {i} =", "reward_model": {"ground_truth": "2"}}) + "\n"
                            for i in range(8)))
    reward_file = tmp_path / "unused.py"
    reward_file.write_text("def unused(response, ground_truth, extra):\n    return 0.0\n")
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", reward_file, f"data.train_files=[{data}]",
                      "reward.verifier_weight=1", "reward.functions=[]", "trainer.total_steps=2",
                      "eval.before_training=false", "eval.every_steps=0", "data.eval_files=[]",
                      "checkpoint.every_steps=0", fn="unused")
    trainer = Trainer(cfg)
    trainer.engine = BoxingEngine(trainer.tokenizer, trainer.engine)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    said = [str(w.message) for w in caught if "\\boxed" in str(w.message)]
    assert len(said) == 1, said  # two steps, three rounds each: said once
    assert "data_source aime2025" in said[0] and "reward.extractor=boxed" in said[0]
    assert '"Answer:" line' in said[0] and "data.template" in said[0]


@pytest.mark.parametrize("extractor, verifier, reads, fix", [
    ("boxed", "dapo-rl", "reward.extractor=boxed reads only boxes", "set reward.extractor=auto (or answer)"),
    ("auto", "math_dapo", 'reward.verifier=math_dapo reads only the "Answer:" line',
     "set reward.verifier=dapo-rl;"),
])
def test_answer_tags_the_extractor_does_not_read_are_said_with_the_one_that_reads_them(extractor, verifier, reads, fix):
    with pytest.warns(UserWarning, match=r"6 of 6 evaluation responses on data_source math500 hold an <answer> tag") as said:
        result = boxed_eval("math500", extractor, TAGGED, verifier)
    message = next(str(w.message) for w in said if "<answer>" in str(w.message))
    assert reads in message and fix in message
    assert result.metrics["eval/avg@2"] == 0.0


def test_answer_lines_the_boxed_extractor_does_not_read_are_said_with_the_template_that_asks_for_a_box():
    with pytest.warns(UserWarning, match=r'6 of 6 evaluation responses on data_source math500 hold an "Answer:" line') as said:
        result = boxed_eval("math500", "boxed", "1 + 1 is 2\nAnswer: 2")
    message = next(str(w.message) for w in said if "Answer:" in str(w.message))
    assert "reward.extractor=boxed reads only boxes" in message and "data.template=boxed" in message
    assert result.metrics["eval/avg@2"] == 0.0
