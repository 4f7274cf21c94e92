"""User reward functions: what they may return (a number, a dict with a score, a verdict) and how
a bad return value or a function that cannot be loaded is said, before training starts."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
import torch
from tests.rewards.test_rewards_user_functions import FNS, HERE, spec

from dapo.config.schema import RewardConfig, RewardFunctionSpec
from dapo.rewards import RewardFunctionError, RewardScorer, load_reward_function


@pytest.mark.parametrize(
    ("name", "message"),
    [("returns_string", "is a str, not a number"), ("returns_dict_without_score", "no 'score'"),
     ("returns_dict_with_text_score", r"'score' is a str, not a number \(in the returned dict\)")],
)
def test_wrong_return_type_fails_before_training(name: str, message: str) -> None:
    cfg = RewardConfig(functions=[spec(name)], num_workers=1)
    with pytest.raises(RewardFunctionError, match=message) as refused:
        RewardScorer(cfg)
    # which item it was: the user looks for it in their data otherwise
    assert "on the start-up test item (response 'Reasoning...\\nAnswer: 1', ground truth '1', extra {" in str(
        refused.value)


@pytest.mark.parametrize(("value", "why"), [
    ("1.0", "the return value is a str, not a number"),
    (2e6, "the score 2e+06 is beyond +-1e+06: rewards this large make the group advantages overflow; scale the reward down"),
    (-2e6, "the score -2e+06 is beyond +-1e+06"),  # (a penalty overflows as a reward does)
    ({"reward": 1.0}, "the returned dict has no 'score' key (keys: ['reward'])"),  # names the dict already
    ({"score": "1.0"}, "'score' is a str, not a number (in the returned dict)"),
    ({"score": 2e6}, "the score 2e+06 is beyond +-1e+06: rewards this large make the group advantages overflow; "
                     "scale the reward down (in the returned dict)"),
    ({"score": 1.0, "acc": "yes"}, "'acc' is a str, not a number (in the returned dict)"),
    # a judge's probability is not a verdict: bool(0.3) would mark the response correct
    ({"score": 0.3, "acc": 0.3}, "'acc' is 0.3: a verdict is True or False (or 1 or 0); a judge's probability or "
                                 "partial credit belongs in 'score' (or a metric of its own) (in the returned dict)"),
    ({"score": 1.0, "acc": -1}, "'acc' is -1: a verdict is True or False (or 1 or 0)"),
    ({"score": 1.0, "judge": [0.5]}, "'judge' is a list, not a number (in the returned dict)"),
])
def test_a_bad_return_value_is_named_and_a_dict_s_bad_field_says_where_it_is(value: object, why: str) -> None:
    """A dict's bad field is told by its exception's type (DictFieldError), not by what the
    message says; per response of a batched function too."""
    from dapo.rewards.worker import _batch_outcome, _item_outcome

    outcome, message = _item_outcome(value)
    assert outcome == "bad" and message.startswith(why)
    assert _batch_outcome([value, 1.0], 2) == ("ok", [("bad", message), ("ok", (1.0, None, {}, None))])


@pytest.mark.parametrize("value", [np.array(1.0), torch.tensor(1.0)])
def test_a_batched_function_returning_a_zero_d_array_is_a_bad_value_not_a_dead_worker(value: object) -> None:
    """(len() raised in the worker, outside the task's try: the worker died, said as a possible
    out-of-memory kill, restarted at every call until the breaker tripped)"""
    from dapo.rewards.worker import _batch_outcome

    outcome, message = _batch_outcome(value, 2)
    assert outcome == "bad" and message.startswith("a batched function returns a list of scores, one per response "
                                                   f"(got a {type(value).__name__} that is not one")
    assert _batch_outcome(np.array([1.0, 0.0]), 2) == ("ok", [("ok", (1.0, None, {}, None)), ("ok", (0.0, None, {}, None))])


@pytest.mark.parametrize(("acc", "verdict"), [(True, True), (False, False), (1, True), (0, False), (1.0, True),
                                              (np.bool_(True), True), (np.float32(0.0), False), (torch.tensor(1), True)])
def test_acc_takes_bools_and_exact_ones_and_zeros(acc: object, verdict: bool) -> None:
    from dapo.rewards.user_functions import normalize_return

    assert normalize_return({"score": 0.5, "acc": acc}) == (0.5, verdict, {}, None)


@pytest.mark.parametrize(("value", "score"), [(Decimal("0.25"), 0.25), (Fraction(1, 4), 0.25), (np.float64(0.25), 0.25),
                                              ({"score": Decimal("1.5"), "x": Decimal("2")}, 1.5)])
def test_exact_and_numpy_numbers_are_scores(value: object, score: float) -> None:
    """A Decimal (a judge's exact arithmetic) is a number, as a Fraction is: it was refused as
    "a Decimal, not a number"; Decimal("NaN") still is not a finite one."""
    from dapo.rewards.user_functions import normalize_return

    assert normalize_return(value)[0] == score
    with pytest.raises(TypeError, match="not a finite number"):
        normalize_return(Decimal("NaN"))


def test_import_error_fails_before_training() -> None:
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{HERE}/broken_import_fixture.py:f")],
                       num_workers=1)
    with pytest.raises(RewardFunctionError, match="deliberately broken"):
        RewardScorer(cfg)


@pytest.mark.parametrize(
    ("spec_text", "message"),
    [
        (f"{FNS}:no_such_function", "has no attribute 'no_such_function'"),
        (f"{FNS}:not_callable", "is not callable"),
        (f"{FNS}:wrong_arity", r"must accept .*its signature is \(response: .?str.?\) -> .?float.?, which a call with those 3 arguments "),
        ("/nonexistent/rewards.py:f", "does not exist"),
        ("no_such_package_xyz.mod:f", "No module named"),
        ("just_a_name", "expected 'path/to/file.py:function'"),
        ("rewards.py:", "expected 'path/to/file.py:function'"),  # no function name
        ("rewards.py:my-reward", "expected 'path/to/file.py:function'"),  # no Python name
        (f"{HERE}/broken_import_fixture.py:f", "ImportError"),
    ],
)
def test_load_errors_are_clear(spec_text: str, message: str) -> None:
    with pytest.raises(RewardFunctionError, match=message):
        load_reward_function(spec_text)


def test_load_by_module_path() -> None:
    assert load_reward_function("os.path:join")("a", "b", "c") == "a/b/c"  # type: ignore[arg-type]
    assert load_reward_function(f"{FNS}:length_bonus")("x" * 10, "", {}) == pytest.approx(0.01)
