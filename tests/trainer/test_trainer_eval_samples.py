"""What an evaluation saves with each sample and counts of the whole set (dapo.trainer.evaluate):
the sample's number and problem, the truncation rate over every sample (the vote maj@k counted:
test_trainer_evaluate.py's math_dapo test)."""

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

