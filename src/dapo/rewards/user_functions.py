"""User reward functions: loading by ``file.py:fn`` / ``pkg.module:fn`` and checking returns.

Contract: ``fn(response: str, ground_truth: str, extra: dict) -> float | dict | None``, or for a
batched function (``batch_size`` > 0) lists of each in and a list of values out, one per response.
A function written to verl's or TRL's contract is called as they call it (:mod:`dapo.rewards.peer_functions`).
A dict needs a numeric ``"score"``; an optional ``"acc"`` (bool) is the correctness dynamic
sampling filters on; an optional ``"pred"`` (text) is the answer the function read in the
response (verl's ``math_dapo`` returns one), what maj@k votes on with the verifier off and what
the logs show as ``pred``; every other key must be numeric and becomes an extra metric, or None: that
metric has no value for this response (a judge's confidence where it gave none), so it is left
out of the response's metrics (its mean is over the responses that have it) and the score still
counts; refusing it failed the whole response for a missing figure. None (or a dict whose
``"score"`` is None) is TRL's "this reward does not apply to this item": the function adds
nothing to the item's reward, and it is no failure.
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Callable, Sequence
from decimal import Decimal
from numbers import Real
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from dapo.errors import UserError
from dapo.rewards.peer_functions import called_as_its_peer_does
from dapo.user_code import import_user_code, is_file_location, shadowing_note

if TYPE_CHECKING:  # (workers import this module: no config for them)
    from dapo.config.generation import RewardConfig

RewardFunction = Callable[[str, str, dict], Any]


class RewardFunctionError(UserError, ValueError):
    """A user reward function cannot be loaded, returns the wrong kind of value, or fails on everything."""


class DictFieldError(TypeError):
    """A returned dict's ``"score"``, ``"acc"`` or metric is wrong. The message names the key
    (``'score' is a str, not a number``) but not the dict, which whoever shows it adds (the
    scoring worker: ``... (in the returned dict)``); raised apart from the TypeError of a wrong
    return value as a whole, whose message names the value or the dict already."""


def split_spec(spec: str) -> tuple[str, str]:
    """``"path/to/file.py:fn"`` or ``"pkg.mod:fn"`` -> (location, function name)."""
    location, sep, name = spec.rpartition(":")
    if not sep or not location or not name.isidentifier() or location.endswith(":"):
        # (rewards.py::fn imported a module "rewards.py:"; "fn " failed with no word of the space)
        found = ("; it has two colons" if location.endswith(":") else
                 f"; {name!r} has spaces around it" if name.strip() != name and name.strip().isidentifier() else "")
        raise RewardFunctionError(
            f"reward function {spec!r}: expected 'path/to/file.py:function' or "
            f"'package.module:function'{found}"
        )
    return location, name


def absolute_spec(spec: str) -> str:
    """Make a file spec absolute, so worker processes find it whatever their directory."""
    location, name = split_spec(spec)
    return f"{os.path.abspath(os.path.expanduser(location))}:{name}" if is_file_location(location) else spec


def function_labels(specs: list[str]) -> list[str]:
    """Short names for metrics and messages, one per spec and all different: the function's name;
    ``module.name`` where two modules define functions of that name (``a.py:reward`` and
    ``b.py:reward``: ``a.reward``, ``b.reward``); a repeated spec numbered (``a.reward#2``)."""
    parts = [split_spec(spec) for spec in specs]
    names = [name for _, name in parts]
    labels = [name if names.count(name) == 1 else f"{_module_name(location)}.{name}" for location, name in parts]
    return [label if labels[:i].count(label) == 0 else f"{label}#{labels[:i].count(label) + 1}"
            for i, label in enumerate(labels)]


def _module_name(location: str) -> str:
    """``path/to/a.py`` -> ``a``; ``pkg.mod`` -> ``mod``."""
    return Path(location).stem if location.endswith(".py") else location.rpartition(".")[2]


def load_reward_function(spec: str) -> RewardFunction:
    """Import the function named by ``spec``; raise :class:`RewardFunctionError` saying why not."""
    location, name = split_spec(spec)
    module = import_user_code(location, f"reward function {spec!r}", RewardFunctionError)
    if not hasattr(module, name):
        public = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise RewardFunctionError(
            f"reward function {spec!r}: {location} has no attribute {name!r} (callables: {public}){shadowing_note(location, module, name)}"
        )
    function = getattr(module, name)
    if not callable(function):
        raise RewardFunctionError(f"reward function {spec!r}: {name} is not callable")
    try:
        as_a_peer_calls_it = called_as_its_peer_does(function)  # verl's or TRL's contract
    except TypeError as error:
        raise RewardFunctionError(f"reward function {spec!r}: {error}") from None
    if as_a_peer_calls_it is not None:
        return as_a_peer_calls_it
    _check_signature(function, spec)
    return function


def _check_signature(function: RewardFunction, spec: str) -> None:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return  # builtins without a signature: the smoke call will tell
    try:
        signature.bind("response", "ground truth", {})
    except TypeError as exc:
        first = next(iter(signature.parameters), "")
        trl = (" (a TRL reward function, as its first parameter's name says, takes **kwargs: TRL passes the "
               "dataset's columns by keyword, and dapo-rl calls a function of that shape as TRL does)"
               if first in ("prompts", "completions") else "")
        raise RewardFunctionError(
            f"reward function {spec!r}: must accept (response, ground_truth, extra), or lists of each when "
            "batched (batch_size > 0); "
            f"its signature is {signature}, which a call with those 3 arguments does not fit ({exc}){trl}"
        ) from exc


# Largest |score| a reward function may return: group advantages square the scores' deviations
# (std), which overflows float32 long before the scores do (1e200: the std is inf, every advantage 0).
MAX_ABS_SCORE = 1e6


def _bounded_score(score: float) -> float:
    if abs(score) > MAX_ABS_SCORE:
        raise TypeError(f"the score {score:g} is beyond +-{MAX_ABS_SCORE:g}: rewards this large make the "
                        "group advantages overflow; scale the reward down")
    return score


def _number(value: Any, what: str) -> float:
    """``value`` as a float: a number, or a numpy / torch scalar (NaN and infinities included)."""
    if callable(getattr(value, "item", None)):  # numpy / torch scalars
        try:
            value = value.item()
        except Exception as exc:
            raise TypeError(f"{what} is a {type(value).__name__} that is not a scalar") from exc
    if isinstance(value, Real | Decimal):  # bool counts: True is 1.0; Decimal is no numbers.Real
        return float(value)
    raise TypeError(f"{what} is a {type(value).__name__}, not a number")


def _finite_number(value: Any, what: str) -> float:
    number = _number(value, what)
    if math.isfinite(number):
        return number
    raise TypeError(f"{what} is {number}, not a finite number")


# The metric of the items a function does not apply to (``reward/<function>/not_applicable``),
# which no key of a returned dict may be named.
NOT_APPLICABLE_KEY = "not_applicable"


# A dict's key that holds the answer the function read, not a metric
PRED_KEY = "pred"


class Returned(NamedTuple):
    """A user function's return for one response, checked."""

    score: float | None  # None: the function does not apply to the item
    acc: bool | None  # its verdict, None where it gave none
    metrics: dict[str, float]  # its dict's other numeric values
    pred: str | None = None  # the answer it read in the response (its dict's "pred"), None where it gave none


def normalize_return(value: Any) -> Returned:
    """(score, acc or None, extra metrics, pred or None) from a user function's return value; score
    None (for a return of None, or a dict's ``"score": None``): the function does not apply to the item.

    A dict's metric of None, NaN or infinity is left out of the metrics: the metric has no value for this item.

    Raises ``TypeError`` with a message naming the problem for anything but None, a finite number
    or a dict with a numeric (or None) ``"score"`` and numeric (or None) other values, or a score
    beyond MAX_ABS_SCORE: :class:`DictFieldError` when it is one of a dict's values.
    """
    if value is None:
        return Returned(None, None, {})
    if not isinstance(value, dict):
        return Returned(_bounded_score(_finite_number(value, "the return value")), None, {})
    if "score" not in value:
        raise TypeError(f"the returned dict has no 'score' key (keys: {sorted(map(str, value))})")
    try:
        return _dict_fields(value)
    except Exception as exc:  # whatever a value's conversion raised: its message names its key
        raise DictFieldError(str(exc)) from exc


def _verdict(acc: Any) -> bool:
    """A dict's ``"acc"`` as a bool: True or False (numpy's and torch's bools too), or a number
    that is exactly 1 or 0. Anything else is refused: a judge's probability (0.3) read as
    ``bool(0.3)`` would mark every such response correct, in dynamic sampling's filter and avg@k."""
    number = _finite_number(acc, "'acc'")
    if number not in (0.0, 1.0):
        raise TypeError(f"'acc' is {repr(acc)[:40]}: a verdict is True or False (or 1 or 0); a judge's probability or "
                        "partial credit belongs in 'score' (or a metric of its own)")
    return number == 1.0


def _dict_fields(value: dict) -> Returned:
    """:func:`normalize_return` of a dict that has a ``"score"``."""
    score = None if value["score"] is None else _bounded_score(_finite_number(value["score"], "'score'"))
    acc = value.get("acc")
    if acc is not None:
        if score is None:
            raise TypeError(f"'acc' is {repr(acc)[:40]} but 'score' is None: a function that does not apply to an "
                            "item (a score of None) gives it no verdict either (leave 'acc' out, or None)")
        acc = _verdict(acc)
    if NOT_APPLICABLE_KEY in value:
        raise TypeError(f"{NOT_APPLICABLE_KEY!r} is the name of the metric the trainer keeps of the items a function "
                        f"does not apply to (reward/<function>/{NOT_APPLICABLE_KEY}): name yours otherwise")
    metrics = {}  # a metric of None (or NaN, inf: a ratio of 0/0) has no value for this item: left out, so its
    for key, metric in value.items():  # mean is over the items with one, and the score counts
        if key not in ("score", "acc", PRED_KEY) and metric is not None:
            number = _number(metric, repr(key))
            if math.isfinite(number):
                metrics[str(key)] = number
    return Returned(score, acc, metrics, _pred(value.get(PRED_KEY)))


def _pred(pred: Any) -> str | None:
    """A dict's ``"pred"``: text, or a number (as ``str`` writes it: 34, 0.5), or None."""
    if pred is None or isinstance(pred, str):
        return pred
    if isinstance(pred, Real) and not isinstance(pred, bool):
        return str(pred)
    raise TypeError(f"{PRED_KEY!r} is a {type(pred).__name__}: it is the answer the function read in the response, "
                    "as text (maj@k votes on it), or None; a number to average belongs under another key")


def reward_formula(reward: RewardConfig, labels: Sequence[str]) -> str:
    """The summed reward in one line, for a run with user functions (``labels``: theirs, in order):
    TRL's reward_funcs are the whole reward, where here the built-in verifier stays in the sum
    unless its weight is 0, so a user's 0/1 function reads 2 for a right answer, -1 for a wrong one."""
    terms = " + ".join(f"{spec.weight:g} x {label}" for label, spec in zip(labels, reward.functions))
    if reward.verifier_weight == 0:
        return (f"reward: {terms}; correctness (acc, avg@k): the first of them that applies to a "
                "response, its acc (else its weighted score > 0)")
    return (f"reward: {reward.verifier_weight:g} x the built-in verifier ({reward.verifier}: {reward.correct_score:g} "
            f"right, {reward.incorrect_score:g} wrong) + {terms}; reward.verifier_weight=0 leaves the functions "
            "alone, as TRL's reward_funcs are; correctness (acc, avg@k) is the verifier's")
