"""The stop of a reward scorer failing on every response names what gives no learning signal:
that scorer, and whether the verifier (or another function) still gives some."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dapo.config.schema import RewardConfig
from dapo.rewards.types import RewardResult
from dapo.rewards.user_functions import RewardFunctionError, absolute_spec, function_labels
from dapo.trainer.scoring import RewardFailureWatch


def stop_message(reward: RewardConfig, label: str) -> str:
    labels = tuple(function_labels([absolute_spec(f.path) for f in reward.functions]))  # as RewardScorer's
    scorer = SimpleNamespace(cfg=reward, labels=labels, first_failure={label: f"{label} raised ConnectionError: down"})
    watch = RewardFailureWatch(scorer, 2)
    failed = [RewardResult(score=0.0, acc=False, error=True, failed=[label]) for _ in range(4)]
    watch.observe(failed)
    with pytest.raises(RewardFunctionError) as stopped:
        watch.observe(failed)
    return str(stopped.value)


def test_a_judge_failing_beside_the_verifier_is_said_to_give_no_signal_itself():
    message = stop_message(RewardConfig(functions=[{"path": "judge.py:judge", "weight": 0.5}]), "judge")
    assert "reward scorer judge failed on every response of the last 2 steps that it applies to (4 of 4" in message
    assert "so judge gives no learning signal" in message
    assert "the verifier's still does" in message and "the reward gives no learning signal" not in message


def test_the_only_scorer_failing_leaves_the_reward_without_signal():
    message = stop_message(RewardConfig(verifier_weight=0, functions=[{"path": "judge.py:judge"}]), "judge")
    assert "so judge gives no learning signal" in message
    assert "reward.verifier_weight=0" in message and "the reward gives none" in message


def test_another_function_still_giving_signal_is_named():
    reward = RewardConfig(verifier_weight=0, functions=[{"path": "judge.py:judge"}, {"path": "fmt.py:fmt"}])
    message = stop_message(reward, "judge")
    assert "so judge gives no learning signal" in message and "fmt still does" in message


def test_math_verify_failing_is_the_verifier_giving_none():
    message = stop_message(RewardConfig(), "math-verify")
    assert "so the verifier (math-verify) gives no learning signal" in message and "the reward gives none" in message


def test_a_function_failing_wherever_it_applies_is_stopped_too():
    """A function that returns None (does not apply) on some responses and fails on all the others
    gives no signal either: it was never stopped, as it did not fail on every response."""
    reward = RewardConfig(functions=[{"path": "judge.py:judge"}])
    scorer = SimpleNamespace(cfg=reward, labels=("judge",), first_failure={"judge": "judge raised ConnectionError"})
    watch = RewardFailureWatch(scorer, 2)
    failed = RewardResult(score=0.0, acc=False, error=True, failed=["judge"], extra={"judge/not_applicable": 0.0})
    skipped = RewardResult(score=1.0, acc=True, extra={"judge/not_applicable": 1.0})
    watch.observe([failed, skipped, failed])
    with pytest.raises(RewardFunctionError, match=r"that it applies to \(2 of 3 this step\)"):
        watch.observe([failed, skipped, failed])
    watch = RewardFailureWatch(scorer, 2)  # one response it applies to and scores: signal, no stop
    scored = RewardResult(score=1.0, acc=True, extra={"judge/not_applicable": 0.0})
    for _ in range(3):
        watch.observe([failed, skipped, scored])
