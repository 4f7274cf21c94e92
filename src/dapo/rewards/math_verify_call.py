"""The math-verify call: the verdict on answers string operations could not decide.

Runs only inside a scorer worker process with a hard deadline (or in-process from ``verify``),
on answers no longer than :data:`MAX_MATH_CHARS`; only a bool leaves it.
"""

from __future__ import annotations

import logging
import re
from decimal import Decimal

from dapo.rewards.number_forms import is_plain_number

MAX_MATH_CHARS = 1000  # longer answers are not parsed at all (and count as wrong)
_SCIENTIFIC = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE]([+-]?[0-9]{1,6})")


def silence_math_verify_logging() -> None:
    """math-verify logs the strings it failed on; model output must never reach the logs."""
    for name in ("math_verify", "math_verify.parser", "math_verify.grader", "math_verify.utils"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.CRITICAL + 1)
        logger.propagate = False


def math_equal(pred: str, ground_truth: str) -> bool:
    """math-verify's verdict on ``pred`` against ``ground_truth`` (both bare LaTeX answers).

    No time limit here (math-verify's own ``signal.alarm`` timeouts are disabled: they do not
    stop every input and break in threads); callers bound the time by running this in a worker
    process that is killed at its deadline. Parsed objects are never printed: only a bool leaves.
    """
    from math_verify import parse, verify  # heavy (sympy): imported only where it is used

    silence_math_verify_logging()
    if len(pred) > MAX_MATH_CHARS or len(ground_truth) > MAX_MATH_CHARS:
        return False
    gold = parse(f"${_expanded(ground_truth)}$", parsing_timeout=None)  # type: ignore[arg-type]
    target = parse(f"${_expanded(pred)}$", parsing_timeout=None)  # type: ignore[arg-type]
    if not gold or not target:
        return False
    if is_plain_number(pred) and _is_irrational(gold[0]):
        return False
    return bool(verify(gold, target, timeout_seconds=None))


def _expanded(answer: str) -> str:
    """A scientific literal (``1e3``, ``-2.5E-2``) written out (``1000``, ``-0.025``): math-verify
    reads ``1e3`` as 1 x e x 3, Euler's number, equal to ``3e``. Exponents past 100 stay as written."""
    match = _SCIENTIFIC.fullmatch(answer.strip())
    if match is None or abs(int(match.group(1))) > 100:
        return answer
    text = format(Decimal(answer.strip()), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _is_irrational(parsed: object) -> bool:
    """Whether math-verify's parse is a number known to be irrational (``\\pi``, ``\\sqrt{2}``,
    ``e^2``). A plain decimal answer is rational, so never one of them (``3.141593`` for ``\\pi``),
    though math-verify's 6-digit rounding accepts it (verl's string match does not). The other way
    round, a decimal ground truth is often a rounded exact value: ``\\sqrt{17}`` for
    ``4.123105625617661`` is left to math-verify (the Math-Verify suite counts it right)."""
    return getattr(parsed, "is_number", False) is True and getattr(parsed, "is_rational", None) is False
