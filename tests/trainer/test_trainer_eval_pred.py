"""maj@k with the verifier off: the reward function correctness comes from votes with its
``"pred"`` (verl's ``math_dapo`` returns one); without one there is no maj@k, not a 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from dapo.builtin import build_tokenizer
from dapo.config.schema import RewardConfig, RewardFunctionSpec
from dapo.data.records import Problem
from dapo.rewards import RewardScorer
from dapo.rollout.base import SamplingParams
from dapo.trainer.evaluate import evaluate
from tests.trainer.test_trainer_evaluate import ScriptedEngine

MATH_DAPO_LIKE = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    pred = solution_str.rpartition("Answer:")[2].strip()
    return {"score": 1.0 if pred == ground_truth else -1.0, "acc": pred == ground_truth, "pred": pred}

def without_pred(data_source, solution_str, ground_truth, extra_info=None):
    right = solution_str.rpartition("Answer:")[2].strip() == ground_truth
    return {"score": 1.0 if right else -1.0, "acc": right}
'''


@pytest.mark.parametrize("function", ["compute_score", "without_pred"])
def test_maj_at_k_votes_on_the_functions_pred(tmp_path: Path, function: str) -> None:
    path = tmp_path / "verl_reward.py"
    path.write_text(MATH_DAPO_LIKE)
    tokenizer = build_tokenizer()
    problems = [Problem(uid=str(i), prompt=f"{i} + 1 =", ground_truth=str(i + 1)) for i in range(3)]
    # problem 0: 1 of 3 right (two vote "-1"), problem 1: 2 of 3 right, problem 2: none right
    engine = ScriptedEngine(tokenizer, problems, [1, 2, 0])
    reward = RewardConfig(num_workers=1, verifier_weight=0, functions=[RewardFunctionSpec(path=f"{path}:{function}")])
    with RewardScorer(reward) as scorer:
        result = evaluate(engine, tokenizer, scorer, [[1]] * 3, problems, SamplingParams(n=3, seed=0))
    assert result.metrics["eval/avg@3"] == pytest.approx(3 / 9)
    if function == "without_pred":
        assert "eval/maj@3" not in result.metrics  # no answers to vote on: left out, not 0
        assert all(sample["vote"] is None and sample["pred"] == "" for sample in result.samples)
        return
    assert result.metrics["eval/maj@3"] == pytest.approx(1 / 3)  # problem 1's majority only
    assert [sample["pred"] for sample in result.samples[:3]] == ["1", "-1", "-1"]
    assert [sample["vote"] for sample in result.samples[:3]] == ["1", "-1", "-1"]
