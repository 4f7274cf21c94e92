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


def test_max_failure_rate_stops_a_function_failing_on_that_share_of_what_it_applies_to():
    """A partly broken judge scored its failure score where it failed, said once and then only
    counted: reward.max_failure_rate=0.5 stops one that fails on half the responses it applies to
    (those it returns None for left out) in each of max_failing_steps steps; less does not count."""
    reward = RewardConfig(functions=[{"path": "judge.py:judge"}], max_failure_rate=0.5)
    scorer = SimpleNamespace(cfg=reward, labels=("judge",), first_failure={"judge": "judge raised KeyError"})
    failed = RewardResult(score=0.0, acc=False, error=True, failed=["judge"], extra={"judge/not_applicable": 0.0})
    scored = RewardResult(score=1.0, acc=True, extra={"judge/not_applicable": 0.0})
    skipped = RewardResult(score=1.0, acc=True, extra={"judge/not_applicable": 1.0})
    watch = RewardFailureWatch(scorer, 2, reward.max_failure_rate)
    for _ in range(3):  # 1 of 3 it applies to: 33%, below the rate
        watch.observe([failed, scored, scored, skipped])
    watch.observe([failed, scored, skipped, skipped])  # 1 of 2: counts
    watch.observe([failed, scored, scored, scored])  # 1 of 4: the streak ends
    watch.observe([failed, failed, scored, skipped])
    with pytest.raises(RewardFunctionError, match=r"judge failed on at least 50% of the responses it applies to in "
                                                   r"each of the last 2 steps \(reward.max_failure_rate=0.5; 50%, 1 "
                                                   r"of 4, this step\); first failure: judge raised KeyError"):
        watch.observe([failed, scored, skipped, skipped])
    # the default (1.0) stops only a function failing on every response it applies to
    watch = RewardFailureWatch(scorer, 2)
    for _ in range(3):
        watch.observe([failed, failed, failed, scored])


@pytest.mark.parametrize("rate", [0.0, -0.5, 1.5])
def test_max_failure_rate_is_a_share(rate):
    from dapo.config import ConfigError

    with pytest.raises(ConfigError, match=rf"reward.max_failure_rate={rate} is a share of the responses: in \(0, 1\]"):
        RewardConfig(max_failure_rate=rate)
