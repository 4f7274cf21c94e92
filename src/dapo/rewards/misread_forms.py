"""Forms math-verify reads as another value, rewritten to one it reads as meant.

- A *ratio of three parts or more* (``1:2:3``, ``1\\colon 2\\colon 3``, ``a:b:c = 1:2:3``, ``(1:2:3)``, ``1:2:3
  \\text{ (by mass)}``): math-verify reads ``a:b:c`` as ``a/b/c``, so ``1:3:2`` equalled ``1:2:3`` (both 1/6),
  ``1:2:3`` equalled ``\\frac16`` and ``2:4:6`` did not equal ``1:2:3``. When both answers are such ratios
  (:func:`ratios_as_tuples`), each becomes the tuple of its parts divided by the first that is not 0,
  ``(\\frac{1}{1}, \\frac{2}{1}, \\frac{3}{1})``: the same ratio in any scale, in its order (``2:4:6`` is ``1:2:3``;
  ``1:3:2`` is not). A ratio against a number is two different answers; against anything else (a tuple, a
  list) it is left to math-verify as before, and so is a ratio of two (``a:b`` is the fraction ``a/b``).
- A *double factorial* of a numeral (``5!!`` = 5·3·1 = 15): math-verify reads ``(5!)!``.
- A *mixed number before a factor* (``2\\frac{1}{2}\\pi``, two and a half pi): math-verify multiplies
  ``2 \\cdot \\frac12 \\cdot \\pi``, though it reads ``2\\frac{1}{2}`` alone as two and a half. The
  whole number and a proper fraction of numerals after it are joined, ``\\frac{5}{2}\\pi``; not after a
  power, an index, a brace or a command whose argument it is (``x^2\\frac{1}{2}``, ``\\sqrt{2}\\frac12``,
  ``\\sqrt 2\\frac12``).
- A *binomial coefficient in TeX's own form* without its braces (``10 \\choose 3``, the whole answer, as a
  box's braces make it): math-verify reads 3 unless it is braced (``{10 \\choose 3}``); it becomes
  ``\\binom{10}{3}``.

String rewriting of bounded length, in the math-verify worker only.
"""

from __future__ import annotations

import math
import re

from dapo.rewards.exact_numbers import exact_rational

_RATIO_COLON = re.compile(r"\s{0,3}(?:\\colon|:)\s{0,3}")
# What a ratio's part never holds: a relation or a set's bar (set-builder "\{x : x > 0\}", "f: A \to B")
_NOT_A_RATIO = re.compile(r"[<>=|]|\\(?:mid|in|to|le|ge|leq|geq|neq|rightarrow|mapsto|\{|\})(?![A-Za-z])")
_TEXT_AFTER = re.compile(r"(?:\s{0,3}\\text\{[^{}]{0,80}\})+$")
_AROUND = re.compile(r"^(?:\\left)?\(\s{0,3}([^()]{1,400}?)\s{0,3}(?:\\right)?\)$")
_OPENING = "{(["
_CLOSING = "})]"
_DOUBLE_FACTORIAL = re.compile(r"(?<![0-9.])([0-9]{1,2})\s{0,3}!!(?!!)")
_CHOOSE = re.compile(r"\s{0,3}\{?\s{0,3}([0-9]{1,4}|[A-Za-z])\s{0,3}\\choose\s{0,3}([0-9]{1,4}|[A-Za-z])\s{0,3}\}?\s{0,3}")
_COMMAND_BEFORE = re.compile(r"\\[A-Za-z]+\s{1,3}$")
_MIXED_BEFORE_FACTOR = re.compile(
    r"(?<![0-9.^_{A-Za-z\\])([0-9]{1,9})\s{0,3}\\[dt]?frac(?:\{\s{0,3}([0-9]{1,9})\s{0,3}\}|([0-9]))"
    r"(?:\{\s{0,3}([0-9]{1,9})\s{0,3}\}|([0-9]))(?=\s{0,3}[\\A-Za-z(])")


def as_meant(answer: str) -> str:
    """``answer`` with the forms of the module rewritten (each left as it is where it does not apply)."""
    if "choose" in answer and (choose := _CHOOSE.fullmatch(answer.strip().strip("$"))) is not None:
        answer = f"\\binom{{{choose.group(1)}}}{{{choose.group(2)}}}"
    if "!!" in answer:
        answer = _DOUBLE_FACTORIAL.sub(_double_factorial, answer)
    if "frac" in answer:
        answer = _MIXED_BEFORE_FACTOR.sub(_mixed_number, answer)
    return answer


def ratios_as_tuples(pred: str, ground_truth: str) -> tuple[str, str] | None:
    """Both answers as tuples (:func:`ratio_as_tuple`) when both are ratios of three parts or more; None when
    one is and the other is a rational number (``1:2:3`` for ``\\frac16``: two answers); else both as they are."""
    pred_tuple, gold_tuple = ratio_as_tuple(pred), ratio_as_tuple(ground_truth)
    if pred_tuple is not None and gold_tuple is not None:
        return pred_tuple, gold_tuple
    if (pred_tuple, gold_tuple) != (None, None) and exact_rational(pred if pred_tuple is None else ground_truth) is not None:
        return None
    return pred, ground_truth


def ratio_as_tuple(answer: str) -> str | None:
    """``1:2:3`` -> ``\\left(\\frac{1}{1}, \\frac{2}{1}, \\frac{3}{1}\\right)``, or None when ``answer`` is no ratio of three
    parts or more. What is left of an ``=`` is dropped (``a:b:c = 1:2:3``, ``1:2:3 = 2:4:6``: the last form
    stated), so are brackets around it (``(1:2:3)``) and a remark after it in ``\\text{}``."""
    if ":" not in answer and "\\colon" not in answer:
        return None
    text = _TEXT_AFTER.sub("", answer.strip().strip("$").strip())
    if text.count("=") == 1:
        text = text.partition("=")[2].strip()
    text = _AROUND.sub(r"\1", text)
    parts = _top_level_parts(text)
    if len(parts) < 3 or any(not part for part in parts) or _NOT_A_RATIO.search(text):
        return None
    divisor = next((part for part in parts if part.strip("{}() ") not in ("0", "-0")), None)
    if divisor is None:
        return None
    return "\\left(" + ", ".join(f"\\frac{{{part}}}{{{divisor}}}" for part in parts) + "\\right)"


def _top_level_parts(text: str) -> list[str]:
    """``text`` split at the colons outside brackets and braces, each part stripped."""
    parts, depth, start = [], 0, 0
    for match in re.finditer(r"[{}()\[\]]|" + _RATIO_COLON.pattern, text):
        token = match.group(0)
        if token in _OPENING:
            depth += 1
        elif token in _CLOSING:
            depth -= 1
        elif depth == 0 and token.strip() in (":", "\\colon"):
            parts.append(text[start:match.start()].strip())
            start = match.end()
    return [*parts, text[start:].strip()] if parts else [text]


def _double_factorial(match: re.Match[str]) -> str:
    number = int(match.group(1))
    return str(math.prod(range(number, 0, -2)))


def _mixed_number(match: re.Match[str]) -> str:
    whole, braced_top, top, braced_bottom, bottom = match.groups()
    numerator, denominator = int(braced_top or top), int(braced_bottom or bottom)
    if not 0 < numerator < denominator:
        return match.group(0)  # "2\\frac{3}{2}\\pi": not a mixed number (a product, as math-verify reads)
    if _COMMAND_BEFORE.search(match.string, 0, match.start()):
        return match.group(0)  # "\\sqrt 2\\frac12\\pi": the 2 is the root's argument
    return f"\\frac{{{int(whole) * denominator + numerator}}}{{{denominator}}}"
