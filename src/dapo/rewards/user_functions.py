"""User reward functions: loading by ``file.py:fn`` / ``pkg.module:fn`` and checking returns.

Contract: ``fn(response: str, ground_truth: str, extra: dict) -> float | dict``. A dict needs a
numeric ``"score"``; an optional ``"acc"`` (bool) is the correctness dynamic sampling filters on;
every other key must be numeric and becomes an extra metric.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import math
import os
import sys
from collections.abc import Callable
from numbers import Real
from typing import Any

RewardFunction = Callable[[str, str, dict], Any]


class RewardFunctionError(ValueError):
    """A user reward function cannot be loaded or returns the wrong kind of value."""


def split_spec(spec: str) -> tuple[str, str]:
    """``"path/to/file.py:fn"`` or ``"pkg.mod:fn"`` -> (location, function name)."""
    location, sep, name = spec.rpartition(":")
    if not sep or not location or not name.isidentifier():
        raise RewardFunctionError(
            f"reward function {spec!r}: expected 'path/to/file.py:function' or "
            "'package.module:function'"
        )
    return location, name


def is_file_spec(location: str) -> bool:
    return location.endswith(".py") or os.sep in location or "/" in location


def absolute_spec(spec: str) -> str:
    """Make a file spec absolute, so worker processes find it whatever their directory."""
    location, name = split_spec(spec)
    return f"{os.path.abspath(location)}:{name}" if is_file_spec(location) else spec


def function_label(spec: str) -> str:
    """Short name for metrics and messages: the function's name."""
    return split_spec(spec)[1]


def load_reward_function(spec: str) -> RewardFunction:
    """Import the function named by ``spec``; raise :class:`RewardFunctionError` saying why not."""
    location, name = split_spec(spec)
    module = _load_file(location, spec) if is_file_spec(location) else _load_module(location, spec)
    if not hasattr(module, name):
        public = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise RewardFunctionError(
            f"reward function {spec!r}: {location} has no attribute {name!r} (callables: {public})"
        )
    function = getattr(module, name)
    if not callable(function):
        raise RewardFunctionError(f"reward function {spec!r}: {name} is not callable")
    _check_signature(function, spec)
    return function


def _load_file(location: str, spec: str) -> Any:
    path = os.path.abspath(location)
    if not os.path.isfile(path):
        raise RewardFunctionError(f"reward function {spec!r}: file {path} does not exist")
    module_name = "dapo_user_reward_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    if module_name in sys.modules:
        return sys.modules[module_name]
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise RewardFunctionError(f"reward function {spec!r}: cannot import {path}")
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        raise RewardFunctionError(
            f"reward function {spec!r}: importing {path} raised {type(exc).__name__}: {exc}"
        ) from exc
    sys.modules[module_name] = module
    return module


def _load_module(location: str, spec: str) -> Any:
    if os.getcwd() not in sys.path:  # "my_rewards:fn" should find my_rewards.py in the run dir
        sys.path.append(os.getcwd())
    try:
        return importlib.import_module(location)
    except Exception as exc:
        raise RewardFunctionError(
            f"reward function {spec!r}: importing module {location} raised "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _check_signature(function: RewardFunction, spec: str) -> None:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return  # builtins without a signature: the smoke call will tell
    try:
        signature.bind("response", "ground truth", {})
    except TypeError as exc:
        raise RewardFunctionError(
            f"reward function {spec!r}: must accept (response, ground_truth, extra); "
            f"its signature is {signature} ({exc})"
        ) from exc


def _finite_number(value: Any, what: str) -> float:
    if callable(getattr(value, "item", None)):  # numpy / torch scalars
        try:
            value = value.item()
        except Exception as exc:
            raise TypeError(f"{what} is a {type(value).__name__} that is not a scalar") from exc
    if isinstance(value, Real):  # bool counts: True is 1.0
        number = float(value)
        if math.isfinite(number):
            return number
        raise TypeError(f"{what} is {number}, not a finite number")
    raise TypeError(f"{what} is a {type(value).__name__}, not a number")


def normalize_return(value: Any) -> tuple[float, bool | None, dict[str, float]]:
    """(score, acc or None, extra metrics) from a user function's return value.

    Raises ``TypeError`` with a message naming the problem for anything but a finite number or
    a dict with a numeric ``"score"`` and numeric other values.
    """
    if not isinstance(value, dict):
        return _finite_number(value, "the return value"), None, {}
    if "score" not in value:
        raise TypeError(f"the returned dict has no 'score' key (keys: {sorted(map(str, value))})")
    score = _finite_number(value["score"], "'score'")
    acc = value.get("acc")
    if acc is not None:
        acc = bool(_finite_number(acc, "'acc'"))
    metrics = {
        str(key): _finite_number(metric, repr(key))
        for key, metric in value.items()
        if key not in ("score", "acc")
    }
    return score, acc, metrics
