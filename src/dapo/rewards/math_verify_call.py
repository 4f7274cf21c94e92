"""The math-verify call: the verdict on answers string operations could not decide.

Runs only inside a scorer worker process with a hard deadline (or in-process from ``verify``),
on answers no longer than :data:`MAX_MATH_CHARS`; only a bool leaves it.
"""

from __future__ import annotations

import logging
import re
from decimal import Decimal
from fractions import Fraction

from dapo.rewards.exact_numbers import rounds_to
from dapo.rewards.misread_forms import as_meant, ratios_as_tuples
from dapo.rewards.number_forms import is_plain_number

MAX_MATH_CHARS = 1000  # longer answers are not parsed at all (and count as wrong)
# 1e3, -2.5E-2, 1.5 \times 10^{-6}, 1.5\cdot10^3: the mantissa, and the exponent (group 3)
_SCIENTIFIC = re.compile(r"\$?\s{0,3}([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:[eE]|\s{0,3}(\\times|\\cdot)\s{0,3}10\^)"
                         r"\{?([+-]?[0-9]{1,6})\}?\s{0,3}\$?")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_UPRIGHT_CONSTANT = re.compile(r"\\(?:mathrm|text|textrm|textit|operatorname|rm)\{\s{0,3}([ie])\s{0,3}\}")
_LG = re.compile(r"\\lg(?![A-Za-z])")
# {x | 1 < x < 3}, {x \in \mathbb{R} \mid x > 1}: the variable, and the condition on it (reals only)
_SET_BUILDER = re.compile(r"\\\{\s{0,3}([A-Za-z])\s{0,3}(?:\\in\s{0,3}\\mathbb\{R\}\s{0,3})?(?:\\mid|\||:)"
                          r"\s{0,3}([^{}]{1,300}?)\s{0,3}\\\}")
_RELATION = re.compile(r"[<>]|\\(?:le|ge|leq|geq|leqslant|geqslant|lt|gt|neq|ne)(?![A-Za-z])")


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
    pair = ratios_as_tuples(pred, ground_truth)  # "1:3:2" for "1:2:3" (math-verify: a/b/c, 1/6 both)
    if pair is None:
        return False  # "1:2:3" for "\\frac16"
    gold = parse(f"${_as_math_verify_reads(pair[1])}$", parsing_timeout=None)  # type: ignore[arg-type]
    target = parse(f"${_as_math_verify_reads(pair[0])}$", parsing_timeout=None)  # type: ignore[arg-type]
    if not gold or not target:
        return False
    if is_plain_number(pred) and _is_irrational(gold[0]):
        return False
    if not verify(gold, target, timeout_seconds=None):
        return False
    # math-verify rounds both sides to 6 places: 0.0 equals 1/6^10, 10^{-9} equals 0.0000001
    return _decimal_holds(pred, gold[0], truncated=False) and _decimal_holds(ground_truth, target[0], truncated=True)


def _decimal_holds(answer: str, other: object, truncated: bool) -> bool:
    """False when ``answer`` is a decimal (``0.000000``, ``2e-8``, ``1.5 \\times 10^{-6}``) that is not
    ``other``'s value (math-verify's parse of the other side) rounded to the places it gives (or, with
    ``truncated``, cut there: a ground truth may be), or is 0 for a value that is not: a decimal states
    no more than its places. True for anything else (no decimal, or a value not computed here)."""
    decimal = _expanded(answer).strip().strip("$").strip()
    if _DECIMAL.fullmatch(decimal) is None:
        return True
    value = _exact_value(other)
    if value is None:
        return True
    stated, places = Fraction(Decimal(decimal)), len(decimal.partition(".")[2])
    if stated == value:
        return True
    if stated == 0:
        return False  # "0.000000" for 1/2598960
    cut = Fraction(int(value * 10**places), 10**places)  # toward zero
    return rounds_to(value, places, stated) or (truncated and cut == stated)


def _exact_value(parsed: object) -> Fraction | None:
    """The value of math-verify's parse, exact for a rational number, else to 60 digits; None when it is
    not a real number."""
    if getattr(parsed, "is_Rational", False):
        return Fraction(int(parsed.p), int(parsed.q))  # type: ignore[attr-defined]
    if getattr(parsed, "is_number", False) is not True or getattr(parsed, "is_real", None) is not True:
        return None
    try:
        return Fraction(Decimal(str(parsed.evalf(60))))  # type: ignore[attr-defined]
    except (ArithmeticError, ValueError, TypeError):
        return None


def _as_math_verify_reads(answer: str) -> str:
    """``answer`` in the notation math-verify knows: upright constants as letters (``2\\mathrm{i}``,
    ``\\mathrm{e}^{2}``: it dropped them, reading ``3+2\\mathrm{i}`` as 5), ``\\colon`` as ``:`` in a ratio of two (``2\\colon 3``
    was read as 3), ``\\lg`` as ``\\log_{10}`` (dropped), a set of reals in set-builder notation as its
    condition (``\\{x \\mid 1<x<3\\}`` was read as 1), a scientific literal written out (:func:`_expanded`),
    and a double factorial, a mixed number before a factor or an unbraced ``\\choose`` as meant
    (:mod:`~dapo.rewards.misread_forms`; ratios are paired before, :func:`~dapo.rewards.misread_forms.ratios_as_tuples`)."""
    answer = as_meant(_UPRIGHT_CONSTANT.sub(r"\1", answer))
    if answer.count("\\colon") == 1:  # (a:b:c is read as a/b/c there: ratios_as_tuples made two of them tuples)
        answer = answer.replace("\\colon", ":")
    answer = _LG.sub(r"\\log_{10}", answer)
    builder = _SET_BUILDER.fullmatch(answer.strip())
    if builder is not None and _RELATION.search(builder.group(2)):
        answer = builder.group(2)
    return _expanded(answer)


def _expanded(answer: str) -> str:
    """A scientific literal (``1e3``, ``-2.5E-2``, ``1.5 \\times 10^{-6}``) written out (``1000``,
    ``-0.025``, ``0.0000015``): math-verify reads ``1e3`` as 1 x e x 3, Euler's number, equal to ``3e``.
    Exponents past 100 stay as written."""
    match = _SCIENTIFIC.fullmatch(answer.strip())
    if match is None or abs(int(match.group(3))) > 100:
        return answer
    text = format(Decimal(f"{match.group(1)}e{match.group(3)}"), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _is_irrational(parsed: object) -> bool:
    """Whether math-verify's parse is a number known to be irrational (``\\pi``, ``\\sqrt{2}``,
    ``e^2``). A plain decimal answer is rational, so never one of them (``3.141593`` for ``\\pi``),
    though math-verify's 6-digit rounding accepts it (verl's string match does not). The other way
    round, a decimal ground truth is often a rounded exact value: ``\\sqrt{17}`` for
    ``4.123105625617661`` is left to math-verify (the Math-Verify suite counts it right)."""
    return getattr(parsed, "is_number", False) is True and getattr(parsed, "is_rational", None) is False
