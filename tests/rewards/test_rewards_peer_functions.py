"""Reward functions written for verl or TRL, scored as those call them (dapo.rewards.peer_functions):
in the scorer's worker processes, per response and batched."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from tests.rewards.test_rewards_user_functions import _one_and_batched

from dapo.config.schema import RewardConfig, RewardFunctionSpec
from dapo.rewards import RewardFunctionError, RewardScorer, load_reward_function
from dapo.rewards.start_checks import DataSample, function_extra


def test_a_function_written_to_verls_contract_is_called_as_verl_calls_it(tmp_path: Path) -> None:
    """verl's compute_score(data_source, solution_str, ground_truth, extra_info=None) passed the
    three-argument check and was called positionally: the response arrived as data_source and the
    ground truth as solution_str, and every response scored wrongly without an error. It is called
    by keyword now, with the row's data_source and extra_info column; batched with verl's plural
    names; the text values of its dicts (verl's math_dapo returns "pred") are no metric."""
    cfg = _one_and_batched(tmp_path / "verl_scores.py", "compute_score", "compute_score_batch", 2,
                           "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                           "    right = solution_str.endswith(ground_truth) and data_source == 'math'\n"
                           "    return {'score': 1.0 if right else -1.0, 'acc': right, 'pred': solution_str[-1:],\n"
                           "            'index': float(extra_info.get('index', -1))}\n"
                           "def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **kwargs):\n"
                           "    return [float(s.endswith(g)) + 10 * float(i.get('index', -1)) if d == 'math' else 0.0\n"
                           "            for d, s, g, i in zip(data_sources, solution_strs, ground_truths, extra_infos)]\n")
    extras = [{"extra_info": {"index": 7}}, {}, {"extra_info": {"index": 9}}]
    with RewardScorer(cfg) as scorer:
        results = scorer.score(["Answer: 1", "Answer: 2", "Answer: 3"], ["1", "2", "4"], ["math", "code", "math"], extras)
    assert not any(r.failed for r in results)
    assert [r.extra["compute_score/score"] for r in results] == [1.0, -1.0, -1.0]
    assert [r.extra["compute_score/index"] for r in results] == [7.0, -1.0, 9.0]  # extra_info: the row's column
    assert "compute_score/pred" not in results[0].extra
    assert [r.extra["compute_score_batch/score"] for r in results] == [71.0, 0.0, 90.0]


TRL_FUNCTIONS = '''
import asyncio

def accuracy(completions, solution, **kwargs):  # TRL's accuracy_reward's shape: conversational or text
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [None if s is None else float(t.endswith(s)) for t, s in zip(texts, solution)]

async def judged(prompts, completions, **kwargs):  # an async judge reading the question and a column
    await asyncio.sleep(0)
    return [float(len(str(p))) + 100 * float(k == "geo") for p, k in zip(prompts, kwargs["kind"])]
'''


@pytest.mark.parametrize("chat", [False, True])
def test_a_function_written_to_trls_contract_is_called_as_trl_calls_it(tmp_path: Path, chat: bool) -> None:
    """TRL's reward functions, reward(prompts, completions, **kwargs) with the dataset's columns as
    keyword lists, failed the three-argument check. Called as TRL calls them: lists (of one where
    not batched), completions in TRL's conversational format where the prompt is a chat, the row's
    columns by name, None where a function does not apply."""
    module = tmp_path / "trl_rewards.py"
    module.write_text(TRL_FUNCTIONS)
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{module}:accuracy"),
                                  RewardFunctionSpec(path=f"{module}:judged", batch_size=2)], num_workers=1)
    prompts = [[{"role": "user", "content": q}] for q in ("1+0?", "2+0?", "3+0?")] if chat else ["1+0?", "2+0?", "33+0?"]
    extras = [{"solution": "1", "kind": "geo"}, {"solution": "5", "kind": "alg"}, {"kind": "geo"}]
    with RewardScorer(cfg) as scorer:
        results = scorer.score(["Answer: 1", "Answer: 2", "Answer: 3"], ["1", "2", "3"], ["math"] * 3, extras, prompts)
    assert not any(r.failed for r in results)
    assert [r.extra.get("accuracy/score") for r in results] == [1.0, 0.0, None]
    assert [r.extra["accuracy/not_applicable"] for r in results] == [0.0, 0.0, 1.0]  # no solution column: None
    lengths = [float(len(str(p))) for p in prompts]
    assert [r.extra["judged/score"] for r in results] == [lengths[0] + 100, lengths[1], lengths[2] + 100]


def test_a_trl_function_that_needs_what_dapo_rl_does_not_pass_is_refused_at_load(tmp_path: Path) -> None:
    module = tmp_path / "needs_ids.py"
    module.write_text("def reward(completions, completion_ids, **kwargs):\n    return [0.0] * len(completions)\n"
                      "def native(completions, ground_truths, extras):\n    return [0.0] * len(completions)\n")
    with pytest.raises(RewardFunctionError, match=r"needs_ids.py:reward'.*requires completion_ids: dapo-rl passes"):
        load_reward_function(f"{module}:reward")
    # this project's batched contract, whatever its first parameter's name (no **kwargs: not TRL's)
    assert load_reward_function(f"{module}:native")(["a"], ["b"], [{}]) == [0.0]


def test_a_trl_function_naming_prompts_after_completions_gets_them_once() -> None:
    """``prompts`` required after ``completions`` was passed twice (as itself and as a column)."""
    from dapo.rewards.peer_functions import called_as_its_peer_does

    def reward(completions, prompts, **kwargs):
        return [float(len(prompt)) for prompt in prompts]

    assert called_as_its_peer_does(reward)("Answer: 1", "1", {"prompt": "1+0?", "data_source": "math"}) == 4.0


def test_a_trl_function_gets_a_chats_assistant_prefill_in_the_completion_not_the_prompt() -> None:
    """A chat ending in an assistant message (a prefill the response continues) reached a TRL
    function in the prompt, and the completion lacked it; TRL moves it into the completion."""
    from dapo.rewards.peer_functions import called_as_its_peer_does

    def reward(prompts, completions, **kwargs):
        return [f"{[m['role'] for m in p]} {c[0]['content']}" for p, c in zip(prompts, completions)]

    chat = [{"role": "user", "content": "1+0?"}, {"role": "assistant", "content": "<think>\n"}]
    extra = {"prompt": chat, "data_source": "math"}
    assert called_as_its_peer_does(reward)("so 1.</think>\nAnswer: 1", "1", extra) == "['user'] <think>\nso 1.</think>\nAnswer: 1"
    assert chat[-1] == {"role": "assistant", "content": "<think>\n"}  # the row's prompt is left as it was
    assert called_as_its_peer_does(reward)("Answer: 1", "1", {"prompt": chat[:1]}) == "['user'] Answer: 1"



def test_a_verl_function_is_called_per_response_or_with_lists_as_its_names_say(tmp_path: Path) -> None:
    """The singular names with batch_size > 0 got lists (and raised on every item), the plural ones
    without got strings; verl's math_dapo shape (solution_str first, a flag after it) took the
    extra dict as its flag. Each is now called as its names say, whichever way dapo-rl calls it."""
    cfg = _one_and_batched(tmp_path / "verl_shapes.py", "plural", "singular", 2,
                           "def plural(data_sources, solution_strs, ground_truths, extra_infos):\n"
                           "    return [float(s.endswith(g)) for s, g in zip(solution_strs, ground_truths)]\n"
                           "def singular(data_source, solution_str, ground_truth, extra_info=None):\n"
                           "    return float(solution_str.endswith(ground_truth))\n"
                           "def math_dapo_shaped(solution_str, ground_truth, strict_box_verify=False, **kwargs):\n"
                           "    return -1.0 if strict_box_verify else float(solution_str.endswith(ground_truth))\n")
    cfg.functions.append(RewardFunctionSpec(path=f"{tmp_path / 'verl_shapes.py'}:math_dapo_shaped"))
    with RewardScorer(cfg) as scorer:
        results = scorer.score(["Answer: 1", "Answer: 2", "Answer: 3"], ["1", "5", "3"], ["math"] * 3, [{}] * 3)
    assert not any(r.failed for r in results)
    for label in ("plural", "singular", "math_dapo_shaped"):
        assert [r.extra[f"{label}/score"] for r in results] == [1.0, 0.0, 1.0], label


def test_a_trl_function_returning_no_list_is_refused_at_start_and_a_completions_column_is_no_clash(tmp_path) -> None:
    """A TRL function returning a number started the run and then failed on every response (its
    error only warned of at start); a dataset column named completions clashed with TRL's own."""
    module = tmp_path / "trl_shapes.py"
    module.write_text("def scalar(completions, **kwargs):\n    return 1.0\n"
                      "def listed(prompts, completions, **kwargs):\n    return [float(c == 'Answer: 1') for c in completions]\n")
    with pytest.raises(RewardFunctionError, match=r"scalar.*returned a bad value: a function of lists .* returns a list "
                                                  r"with one value per response; for one, it returned 1.0"):
        RewardScorer(RewardConfig(functions=[RewardFunctionSpec(path=f"{module}:scalar")], num_workers=1))
    with RewardScorer(RewardConfig(functions=[RewardFunctionSpec(path=f"{module}:listed")], num_workers=1)) as scorer:
        results = scorer.score(["Answer: 1", "Answer: 2"], ["1", "1"], ["math"] * 2, [{"completions": "x"}] * 2)
    assert [r.extra["listed/score"] for r in results] == [1.0, 0.0] and not any(r.failed for r in results)


COLUMN_FUNCTIONS = '''
def accuracy(completions, solution, **kwargs):  # TRL's accuracy_reward's shape
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [None if s is None else float(t.endswith(s)) for t, s in zip(texts, solution)]

def chat_only(prompts, completions, **kwargs):  # TRL's conversational format alone
    return [float(len(p[0]["content"]) > 0) + float(c[0]["content"].endswith(s)) for p, c, s in
            zip(prompts, completions, kwargs["answer"])]

def with_default(completions, solution=None, **kwargs):
    return [0.0 for _ in completions]
'''


def _sample(columns: set[str], prompt, answer: str = "1", **extra) -> DataSample:
    extra = {"answer": answer, **extra}
    item = (f"Reasoning...\nAnswer: {answer}", answer, function_extra(extra, "math", prompt))
    return DataSample("training data", "data/train.jsonl, line 1", item, frozenset(columns | {"prompt", "data_source"}),
                      "answer", ("data/train.jsonl",))


def test_a_trl_function_requiring_a_column_no_row_has_is_refused_before_the_run(tmp_path: Path) -> None:
    """A TRL function's parameter names a dataset column; where no row of the data has it, it got
    None for every response, silently (TRL itself fails every call). Refused once the data has
    loaded, naming the column, the split's files and columns, and the two ways out."""
    module = tmp_path / "trl_columns.py"
    module.write_text(COLUMN_FUNCTIONS)
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{module}:accuracy"),
                                  RewardFunctionSpec(path=f"{module}:with_default", batch_size=4)], num_workers=1)
    with RewardScorer(cfg) as scorer:
        with pytest.raises(RewardFunctionError) as refused:
            scorer.check_data([_sample({"answer", "level"}, "1+0?")])
        scorer.check_data([_sample({"answer", "solution"}, "1+0?", solution="1")])  # one row has it: enough
    message = str(refused.value)
    assert "trl_columns.py:accuracy'" in message and "the column 'solution', which no row of the training data " \
        "(data/train.jsonl) has" in message
    assert "columns: answer, data_source, level, prompt; the ground truth is its column 'answer'" in message
    assert "(solution=None)" in message and "with_default" not in message  # a parameter with a default is not required


def test_a_chat_format_trl_function_is_tried_on_the_datas_first_row(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """The start-up item's prompt is text and it has no columns: a function written for TRL's
    conversational format fails there, and only there. Tried on the data's first row (a chat, its
    columns), it returns, and the log says the dummy's failure was the dummy's; one that returns a
    bad value on a real row is refused before the run."""
    module = tmp_path / "chat_rewards.py"
    module.write_text(COLUMN_FUNCTIONS + "def bad_on_rows(prompts, completions, **kwargs):\n"
                      "    return ['x' if kwargs['answer'][0] else 0.0]\n")
    chat = [{"role": "user", "content": "1+0?"}]
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{module}:chat_only")], num_workers=1)
    caplog.set_level(logging.INFO, logger="dapo.rewards")
    with RewardScorer(cfg) as scorer:
        assert scorer.failed_on_the_dummy == {0}
        scorer.check_data([_sample({"answer"}, chat)])
        assert scorer.failed_on_the_dummy == set() and not scorer.first_failure
    assert any("chat_only returned a value on the first row of the training data (data/train.jsonl, line 1): its "
               "failure on the start-up dummy item was the dummy's" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with RewardScorer(cfg) as scorer:  # a text prompt: it raises on the real row too, warned of, not refused
        scorer.check_data([_sample({"answer"}, "1+0?")])
    assert any(r.levelno == logging.WARNING and "raised on the first row of the training data" in r.getMessage()
               for r in caplog.records)
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{module}:bad_on_rows")], num_workers=1)
    with RewardScorer(cfg) as scorer, pytest.raises(RewardFunctionError, match=r"bad_on_rows'.* returned a bad value: "
                                                    r".*on the first row of the training data"):
        scorer.check_data([_sample({"answer"}, chat)])


def test_a_peers_call_keeps_its_contract_at_its_edges(tmp_path: Path) -> None:
    """A TRL function's list of two values for one response (its first was taken), a verl function
    taking **kwargs (its extra_info was not passed), a TRL completion_ids with a default (as the
    refusal asks: it was refused still), a function of no parameters (a bare IndexError)."""
    from dapo.rewards.peer_functions import BadReturnValue, called_as_its_peer_does

    def two_values(prompts, completions, **kwargs):
        return [1.0, 2.0]

    def verl_kwargs(data_source, solution_str, ground_truth, **kwargs):
        return float(kwargs["extra_info"]["k"])

    def with_ids_default(prompts, completions, completion_ids=None, **kwargs):
        return [1.0]

    with pytest.raises(BadReturnValue, match="one value per response"):
        called_as_its_peer_does(two_values)("r", "g", {})
    assert called_as_its_peer_does(verl_kwargs)("r", "g", {"extra_info": {"k": 3}}) == 3.0
    assert called_as_its_peer_does(with_ids_default)("r", "g", {}) == 1.0
    (tmp_path / "no_args.py").write_text("def f():\n    return 1.0\n")
    with pytest.raises(RewardFunctionError, match=r"must accept \(response, ground_truth, extra\)"):
        load_reward_function(f"{tmp_path}/no_args.py:f")
