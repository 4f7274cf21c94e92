"""Answer equivalence: an exact integer path, and math-verify for general LaTeX answers.

Integers (every DAPO-Math-17K / AIME answer) are compared exactly as digit strings after
cosmetic normalisation: thousands separators in groups of three (``1,234``, ``1 234``,
``1{,}234``), a leading ``+``, a zero fraction (``34.0``), Unicode decimal digits mapped to ASCII
(``٣٤``, full-width ``３４``), a variable prefix (``x = 34``), and trailing units, degree, percent
or currency signs. No tolerance and no percentage scaling: ``0.34`` is not ``34``. A non-integer
plain number (``34.5``, scientific notation such as ``3.4e1`` or ``1e999999``) against an integer
ground truth is wrong without parsing. These checks are linear-time string operations that never
call ``int()`` (which refuses more than 4300 digits), so they are safe on any input.

Everything else (fractions, roots, pi, intervals, tuples, percentages, expressions) is decided by
the ``math-verify`` library in :func:`math_equal`, which the scorer only calls inside a worker
process with a hard deadline, on answers no longer than :data:`MAX_MATH_CHARS`.
"""

from __future__ import annotations

import logging
import re
import unicodedata

MAX_MATH_CHARS = 1000  # longer answers are not parsed at all (and count as wrong)

_SPACES = ("\\,", "\\;", "\\:", "\\ ", "~", "\u00a0", "\u2009", "\u202f", "\u2007")
_SUFFIXES = ("^{\\circ}", "^\\circ", "\\circ", "°", "\\degree", "\\%", "%", "\\$")
_UNIT_WRAPPERS = ("\\text{", "\\textrm{", "\\mbox{", "\\mathrm{", "\\textnormal{")
_VARIABLE_PREFIX = re.compile(r"[A-Za-z](?:_\{?[A-Za-z0-9]{1,8}\}?)? {0,4}= {0,4}")
_PLAIN_INTEGER = re.compile(r"[+-]?[0-9]+(?:\.0*)?")
_GROUPED_INTEGER = re.compile(r"[+-]?[0-9]{1,3}(?:[, ][0-9]{3})+(?:\.0*)?")
# Unambiguous (no two quantifiers compete for the same characters): linear even on 10^5 digits.
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def to_ascii_digits(text: str) -> str:
    """Map every Unicode decimal digit (Arabic-Indic, full-width, ...) to its ASCII digit."""
    if text.isascii():
        return text
    out = []
    for char in text:
        digit = unicodedata.decimal(char, None)
        out.append(str(digit) if digit is not None else char)
    return "".join(out).replace("\u2212", "-").replace("\uff0b", "+").replace("\uff0c", ",")


def _strip_number_decorations(answer: str) -> str:
    """Remove what can surround a number without changing it: prefixes, units, signs."""
    answer = to_ascii_digits(answer)
    for space in _SPACES:
        answer = answer.replace(space, " ")
    answer = answer.replace("{,}", ",").strip()
    prefix = _VARIABLE_PREFIX.match(answer)
    if prefix:
        answer = answer[prefix.end() :]
    for _ in range(3):  # e.g. "34^\circ \text{ F}" needs two passes
        before = answer
        answer = _strip_unit_suffix(answer.strip())
        for suffix in _SUFFIXES:
            if answer.endswith(suffix):
                answer = answer[: -len(suffix)].rstrip()
        if answer == before:
            break
    return answer.strip()


def _strip_unit_suffix(answer: str) -> str:
    """Drop one trailing unit: ``\\text{ cm}`` (no digits inside) or a plain word (``cm``)."""
    if answer.endswith("}"):
        start = max(answer.rfind(wrapper) for wrapper in _UNIT_WRAPPERS)
        if start > 0 and not any(c.isdigit() for c in answer[start:]):
            return answer[:start]
    space = answer.rfind(" ")
    word = answer[space + 1 :]
    if space > 0 and word.isascii() and word.isalpha():
        return answer[:space]
    return answer


def canonical_integer(answer: str) -> str | None:
    """The integer ``answer`` states, as a canonical digit string ("-34", "0"), else None."""
    text = _strip_number_decorations(answer)
    if not (_PLAIN_INTEGER.fullmatch(text) or _GROUPED_INTEGER.fullmatch(text)):
        return None
    negative = text.startswith("-")
    digits = text.lstrip("+-").split(".", 1)[0].replace(",", "").replace(" ", "")
    digits = digits.lstrip("0") or "0"
    return "-" + digits if negative and digits != "0" else digits


def is_plain_number(answer: str) -> bool:
    """True for a decimal or scientific literal (``34.5``, ``3.4e1``): decidable without parsing."""
    return _PLAIN_NUMBER.fullmatch(_strip_number_decorations(answer)) is not None


def _compact(answer: str) -> str:
    return "".join(answer.split())


def quick_verdict(pred: str, ground_truth: str) -> bool | None:
    """Decide equivalence with string operations alone; None means "ask math-verify".

    Integer ground truth: an integer prediction is compared exactly, a plain non-integer number
    is wrong; only symbolic predictions (``\\frac{68}{2}``) go on to math-verify. Any ground
    truth: identical strings (ignoring whitespace) are right; over-long answers are wrong.
    """
    gold_integer = canonical_integer(ground_truth)
    if gold_integer is not None:
        pred_integer = canonical_integer(pred)
        if pred_integer is not None:
            return pred_integer == gold_integer
        if is_plain_number(pred):
            return False
    elif _compact(pred) == _compact(ground_truth):
        return True
    if len(pred) > MAX_MATH_CHARS or len(ground_truth) > MAX_MATH_CHARS:
        return False
    return None


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
    gold = parse(f"${ground_truth}$", parsing_timeout=None)  # type: ignore[arg-type]
    target = parse(f"${pred}$", parsing_timeout=None)  # type: ignore[arg-type]
    if not gold or not target:
        return False
    return bool(verify(gold, target, timeout_seconds=None))
