"""None from a user reward function: "this reward does not apply to this item", as TRL's
GRPOTrainer documents it (multi-task data: a math reward returns None on code prompts and the
other way round). It was a failure: the item scored the failure score and counted in
reward_failures/<fn>, and a function returning None on the start-up dummy item was refused."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dapo.config.schema import RewardConfig, RewardFunctionSpec
from dapo.rewards import RewardFunctionError, RewardScorer
from dapo.rewards.types import RewardResult
from dapo.trainer.step_metrics import reward_function_metrics

FNS = str(Path(__file__).resolve().parent / "not_applicable_fixture.py")
RESPONSES = ["so it is 4", "so it is 5", "print(4)", "print(5)"]
GROUND_TRUTHS = ["4", "4", "print(4)", "print(9)"]
SOURCES = ["math", "math", "code", "code"]


def declined(result: RewardResult) -> list[str]:
    """The functions that returned None on ``result``'s item (its ``<function>/not_applicable`` metric)."""
    return [key.removesuffix("/not_applicable") for key, value in result.extra.items()
            if key.endswith("/not_applicable") and value == 1.0]


def spec(name: str, weight: float = 1.0, batch_size: int = 0) -> RewardFunctionSpec:
    return RewardFunctionSpec(path=f"{FNS}:{name}", weight=weight, batch_size=batch_size)


@pytest.mark.parametrize("names", [("math_reward", "code_reward"), ("code_reward", "math_reward"),
                                   ("batched_math", "code_reward")])
def test_mixed_tasks_each_item_gets_its_applicable_reward_and_no_failure(names: tuple[str, str]) -> None:
    functions = [spec(name, batch_size=3 if name.startswith("batched") else 0) for name in names]
    math_label = names[0] if names[0] != "code_reward" else names[1]
    cfg = RewardConfig(verifier_weight=0.0, functions=functions, num_workers=2)
    with RewardScorer(cfg) as scorer:
        results = scorer.score(RESPONSES, GROUND_TRUTHS, SOURCES, [{}] * 4)
        assert scorer.num_errors == 0 and scorer.num_timeouts == 0
    assert [r.score for r in results] == [1.0, -1.0, 1.0, -1.0]  # no failure score for the other task's function
    # acc from the first function that applies to the item: math's own "acc", code's weighted score
    assert [r.acc for r in results] == [True, False, True, False]
    assert not any(r.error or r.timed_out or r.failed for r in results)
    assert [declined(r) for r in results] == [["code_reward"]] * 2 + [[math_label]] * 2
    assert [r.extra.get(f"{math_label}/score") for r in results] == [1.0, -1.0, None, None]
    assert [r.extra.get("code_reward/score") for r in results] == [None, None, 1.0, -1.0]
    assert [r.extra.get("code_reward/chars") for r in results] == [10.0, 10.0, None, None]  # a None score's metrics
    metrics = reward_function_metrics(results)
    assert metrics[f"reward_failures/{math_label}"] == 0.0 and metrics["reward_failures/code_reward"] == 0.0
    assert metrics[f"reward/{math_label}/not_applicable"] == 0.5
    assert metrics["reward/code_reward/not_applicable"] == 0.5
    assert metrics[f"reward/{math_label}/score"] == 0.0  # over the items it applies to: (1 - 1) / 2


def test_with_the_verifier_a_function_that_does_not_apply_adds_nothing() -> None:
    cfg = RewardConfig(functions=[spec("math_reward", weight=0.5)], num_workers=1)
    with RewardScorer(cfg) as scorer:
        results = scorer.score(["Answer: 4"] * 2, ["4"] * 2, ["math", "code"], [{}] * 2)
    assert [r.score for r in results] == [1.5, 1.0]
    assert [r.acc for r in results] == [True, True]
    assert not any(r.error or r.failed for r in results)
    assert [r.extra["math_reward/not_applicable"] for r in results] == [0.0, 1.0]


def test_a_function_that_returns_none_on_the_start_up_item_starts(caplog: pytest.LogCaptureFixture) -> None:
    """It may not apply to the dummy item (data_source "smoke_test"): no refusal, no warning."""
    cfg = RewardConfig(functions=[spec("always_none"), spec("math_reward")], num_workers=1)
    with caplog.at_level(logging.WARNING, logger="dapo.rewards"), RewardScorer(cfg) as scorer:
        [result] = scorer.score(["Answer: 4"], ["4"], ["math"], [{}])
    assert not caplog.records
    assert result.score == 1.0 + 0.0 + 1.0 and result.acc and not result.failed
    assert declined(result) == ["always_none"]


def test_an_item_no_reward_applies_to_is_a_failure_of_its_own(caplog: pytest.LogCaptureFixture) -> None:
    """Verifier off and every function None: the item has no reward. Not 0 (TRL's nansum), which a
    policy could learn to reach by dodging every function, nor a failure of any one function: it
    scores as if every function had failed, is an error of its own, incorrect, logged once."""
    cfg = RewardConfig(verifier_weight=0.0, functions=[spec("math_reward"), spec("always_none", weight=2.0)],
                       num_workers=1)
    with caplog.at_level(logging.WARNING, logger="dapo.rewards"), RewardScorer(cfg) as scorer:
        for _ in range(2):
            results = scorer.score(["so it is 4", "so it is 4", "so it is 4"], ["4"] * 3, ["math", "code", "poem"],
                                   [{}] * 3)
            assert [r.score for r in results] == [1.0, -3.0, -3.0]  # -1 x 1 and -1 x 2, as failures score
            assert [r.acc for r in results] == [True, False, False]
            assert [r.error for r in results] == [False, True, True]
            assert [r.failed for r in results] == [[], ["no-applicable-reward"], ["no-applicable-reward"]]
        assert scorer.num_errors == 4
        assert "reward.verifier_weight" in scorer.first_failure["no-applicable-reward"]
        # a run whose every response has no reward is stopped, as one whose reward always fails
        from dapo.trainer.scoring import RewardFailureWatch

        watch = RewardFailureWatch(scorer, max_failing_steps=2)
        watch.observe(results[1:])
        with pytest.raises(RewardFunctionError, match="no-applicable-reward failed on every response.*returned None"):
            watch.observe(results[1:])
    shown = [r for r in caplog.records if "no reward function applies" in r.getMessage()]
    assert len(shown) == 1
    metrics = reward_function_metrics(results)
    assert metrics["reward_failures/math_reward"] == 0.0 and metrics["reward_failures/always_none"] == 0.0
    assert metrics["reward_failures/no-applicable-reward"] == 2.0


@pytest.mark.parametrize(("name", "message"), [
    ("returns_nan", "the return value is nan, not a finite number"),
    ("acc_without_score", "'acc' is True but 'score' is None"),
    ("reserved_metric", "'not_applicable' is the name of the metric"),
    ("returns_a_list", r"the return value is a list, not a number .*batch_size"),
])
def test_bad_returns_are_still_refused_at_start_up(name: str, message: str) -> None:
    with pytest.raises(RewardFunctionError, match=message):
        RewardScorer(RewardConfig(functions=[spec(name)], num_workers=1))


def test_none_and_a_dict_s_none_score_are_not_applicable_and_no_bad_value() -> None:
    from dapo.rewards.worker import _batch_outcome, _item_outcome

    assert _item_outcome(None) == ("ok", (None, None, {}, None))
    assert _item_outcome({"score": None}) == ("ok", (None, None, {}, None))
    assert _item_outcome({"score": None, "acc": None, "n": 2}) == ("ok", (None, None, {"n": 2.0}, None))
    assert _batch_outcome([None, 1.0], 2) == ("ok", [("ok", (None, None, {}, None)), ("ok", (1.0, None, {}, None))])
    # a batched function's return is still a list: None for the whole batch is a bad value
    kind, why = _batch_outcome(None, 2)
    assert kind == "bad" and "None" in why


def test_an_array_for_one_response_names_batch_size_too() -> None:
    import pickle

    import numpy

    from dapo.rewards.worker import run_task

    task = pickle.dumps(("fn", 0, "a b", "1", {}))
    kind, why = run_task(task, [lambda response, ground_truth, extra: numpy.ones(2)])
    assert kind == "bad" and why.startswith("the return value is a ndarray that is not a scalar (a batched function")
    assert "batch_size > 0" in why
    assert run_task(task, [lambda response, ground_truth, extra: "1"]) == ("bad", "the return value is a str, not a number")


def test_the_scorer_names_whose_failure_left_correctness_unmeasured() -> None:
    """Correctness comes from math-verify with the verifier on; without it, from the first function
    that scored the item or failed on it (one that declined it is passed over); an item no function
    applies to is unmeasured by its own failure."""
    cfg = RewardConfig(verifier_weight=0.0, functions=[spec("judge"), spec("fmt")], num_workers=1)
    sources = ["judge_fails", "fmt_fails", "judge_declines fmt_fails", "both", "none"]
    with RewardScorer(cfg) as scorer:
        results = scorer.score(["x"] * 5, ["x"] * 5, sources, [{}] * 5)
    assert [r.unmeasured_by for r in results] == ["judge", None, "fmt", None, "no-applicable-reward"]
    with RewardScorer(RewardConfig(functions=[spec("judge")], num_workers=1)) as scorer:
        [judged_out] = scorer.score(["Answer: 4"], ["4"], ["judge_fails"], [{}])
        prepared = scorer._prepare(["Answer: 4"], ["4"], ["x"])[0]
        verifier_down = scorer._combine(prepared, ("timeout", None), [("ok", (1.0, None, {}, None))])
    assert judged_out.unmeasured_by is None and judged_out.acc  # the verifier decides, and measured it
    assert verifier_down.unmeasured_by == "math-verify" and not verifier_down.acc
