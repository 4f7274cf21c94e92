"""What an evaluation saves with each sample and counts of the whole set (dapo.trainer.evaluate):
the sample's number and problem, the vote maj@k counted, the truncation rate over every sample."""

from __future__ import annotations

import pytest

from dapo.builtin import build_tokenizer
from dapo.config.schema import RewardConfig
from dapo.data.records import Problem
from dapo.rewards import RewardScorer
from dapo.rollout.base import Completion, GenerationResult, SamplingParams
from dapo.trainer.evaluate import evaluate
from tests.trainer.test_trainer_evaluate import ScriptedEngine


class CutSecondSamples(ScriptedEngine):
    """ScriptedEngine's answers, each problem's second sample cut at the token limit."""

    def generate(self, prompt_token_ids, params):
        result = super().generate(prompt_token_ids, params)
        cut = [Completion(c.prompt_index, c.token_ids, c.logprobs, "length" if i % params.n == 1 else "stop")
               for i, c in enumerate(result.completions)]
        return GenerationResult(cut, result.seconds, result.num_generated_tokens)


def test_each_sample_is_numbered_within_its_problem_and_the_truncation_rate_is_over_samples():
    tokenizer = build_tokenizer()
    problems = [Problem(uid=f"p{i}", prompt=f"{i} + 1 =", ground_truth=str(i + 1)) for i in range(5)]
    engine = CutSecondSamples(tokenizer, problems, [2, 1, 0, 3, 1])
    with RewardScorer(RewardConfig(num_workers=1)) as scorer:
        result = evaluate(engine, tokenizer, scorer, [[1]] * 5, problems, SamplingParams(n=3, seed=0))
    assert [s["sample"] for s in result.samples] == [0, 1, 2] * 5
    assert [s["uid"] for s in result.samples] == [f"p{i}" for i in range(5) for _ in range(3)]
    assert [s["prompt"] for s in result.samples[3:6]] == ["1 + 1 ="] * 3
    assert result.metrics["eval/truncation_rate"] == pytest.approx(5 / 15)


def test_the_saved_vote_is_the_one_math_dapo_s_maj_at_k_counted():
    """math_dapo tells 34. from 34.0 (string answers): the saved votes keep them apart as maj@k did,
    so that maj@k can be recounted from generations.jsonl."""

    class Texts:
        def generate(self, prompt_token_ids, params):
            ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
            return GenerationResult([Completion(0, i, [0.0] * len(i), "stop") for i in ids], 0.0, 0)

    tokenizer = build_tokenizer()
    texts = ["Answer: 34"] * 3 + ["Answer: 34."] * 2 + ["Answer: 34.0"] * 2
    problems = [Problem(uid="0", prompt="17 * 2 =", ground_truth="34")]
    with RewardScorer(RewardConfig(num_workers=1, verifier="math_dapo")) as scorer:
        result = evaluate(Texts(), tokenizer, scorer, [[1]], problems, SamplingParams(n=7, seed=0))
    wrong = [s["vote"] for s in result.samples if not s["acc"]]
    assert len(wrong) == 4 and wrong[0] == wrong[1] != wrong[2] == wrong[3]
    assert result.metrics["eval/maj@7"] == 1.0  # three correct against two and two
