"""Answer equivalence: an exact integer path, and math-verify for general LaTeX answers.

Integers (every DAPO-Math-17K / AIME answer) are compared exactly as digit strings after
cosmetic normalisation (:mod:`~dapo.rewards.number_forms`: thousands separators in groups of
three, a leading ``+``, a zero fraction, Unicode digits, a variable prefix ``x = 34``, trailing
units, degree, percent or currency signs). No tolerance and no percentage scaling: ``0.34`` is
not ``34``. A non-integer plain number (``34.5``, scientific notation such as ``3.4e1`` or
``1e999999``) against an integer ground truth is wrong without parsing. These checks are
linear-time string operations that never call ``int()`` (which refuses more than 4300 digits),
so they are safe on any input. Two plain numbers are compared by exact decimal value (``12.5``
and ``12.50``; the same decorations dropped, so ``12.5\\%`` is ``12.5``), two rational numbers
exactly (:mod:`~dapo.rewards.exact_numbers`: ``0.\\overline{3}`` is ``\\frac13``, ``0.5000001`` is
not ``\\frac12``), and two word answers as words, ignoring case and spacing (``\\text{East}`` and
``east``; math-verify would read ``ACB`` as a product equal to ``ABC``).

List and set answers (a ground truth ``1, 2``, ``\\{1,2\\}``, ``3 and 5``) are split and compared
in :mod:`~dapo.rewards.answer_lists` (re-exported here).

Everything else (fractions, roots, pi, intervals, tuples, expressions) is decided by
the ``math-verify`` library in :func:`~dapo.rewards.math_verify_call.math_equal` (re-exported
here), which the scorer only calls inside a worker process with a hard deadline, on answers no
longer than :data:`MAX_MATH_CHARS`.
"""

from __future__ import annotations

import contextlib
import re
from decimal import Decimal, InvalidOperation

from dapo.rewards.answer_lists import answer_items as answer_items
from dapo.rewards.answer_lists import join_items as join_items
from dapo.rewards.answer_lists import quick_list_verdict as quick_list_verdict
from dapo.rewards.exact_numbers import exact_rational, is_repeating_decimal, rational_verdict
from dapo.rewards.math_verify_call import MAX_MATH_CHARS
from dapo.rewards.math_verify_call import math_equal as math_equal
from dapo.rewards.math_verify_call import silence_math_verify_logging as silence_math_verify_logging
from dapo.rewards.number_forms import (
    PERCENT_SIGN,
    SPACES,
    TEXT_WRAPPED,
    canonical_integer,
    changes_the_number,
    compact,
    ends_in_a_scale_word,
    ends_in_a_word_that_is_not_a_unit,
    is_grouped_number,
    is_plain_number,
    plain_number,
    remark_changes_the_number,
)
from dapo.rewards.number_forms import starts_with_scale_word as starts_with_scale_word
from dapo.rewards.unit_suffix import SCALE_WORDS as SCALE_WORDS
from dapo.rewards.unit_suffix import strip_unit_suffix

_WORDS = re.compile(r"[A-Za-z]{2,40}(?:[ '-]{1,3}[A-Za-z]{1,40}){0,8}")

# LaTeX that does not change an answer's value, dropped from maj@k's vote keys (\left, not \leftarrow)
_SIZING = re.compile(r"\\(?:left|right|displaystyle)(?![A-Za-z])")
_COSMETIC = ("\\!", "\\$", "$", *SPACES)  # an escaped dollar (currency) before the math delimiter
# A \frac or \sqrt whose argument is one character without braces (\frac12, \frac1{2}, \sqrt2)
_FRACTION_ARGUMENTS = re.compile(r"\\frac(\{[^{}]{0,200}\}|[0-9A-Za-z])(\{[^{}]{0,200}\}|[0-9A-Za-z])")
_ROOT_ARGUMENT = re.compile(r"\\sqrt([0-9A-Za-z])")
_SIMPLE_FRACTION = re.compile(r"(-?)\\frac\{(-?[0-9]{1,50})\}\{([0-9]{1,50})\}|(-?[0-9]{1,50})/([0-9]{1,50})")


# A number, a symbol that joins two statements or sets, a number ("34 \\Rightarrow 35"); not in
# a limit ("n \\to \\infty") or a set of intervals ("(1, 2) \\cup (3, 4)"): digits on both sides.
_GAP = r"(?:\s|~|\\[ ,;:!]|\\q?quad(?![A-Za-z])){0,3}"  # spaces, LaTeX's too ("34\\ \\&\\ 35", "34 \\quad \\& \\quad 35")
_JOINED_NUMBERS = re.compile(
    rf"(?<![A-Za-z_^0-9.])-?[0-9]+(?:\.[0-9]+)?\}}?{_GAP}\\(?:vee|lor|wedge|land|cup|cap|mid|to|rightarrow|Rightarrow"
    r"|longrightarrow|Longrightarrow|implies|iff|leftrightarrow|Leftrightarrow|mapsto|in|ni|parallel|vert|Vert)(?![A-Za-z])"
    rf"{_GAP}\{{?-?[0-9]"
    rf"|(?<![A-Za-z_^0-9.])-?[0-9]+(?:\.[0-9]+)?{_GAP}(?:\\\\|\\&|&|\\?\|){_GAP}-?[0-9]")  # a line break, "&", "|", "\\|"
# A choice's letter: in brackets, or alone, or before a period or colon and its text
_CHOICE_LETTER = re.compile(r"\s{0,3}(?:\\(?:textbf|text|mathrm|mathbf)\{\s{0,3})?"
                            r"(?:\(([A-E])\)|([A-E])(?=[.:]\s|[.:]?\s{0,3}\}?\s{0,3}$))")
_BRACKETED_CHOICE = re.compile(r"(?<![A-Za-z}\\_^])\(([A-E])\)")  # not an argument: "P(A)", "f(B)"
# "1, 2, \ldots, 34", "1 + 2 + \cdots + 34", "1, 2, ..., 34", and one that goes on: "34, \ldots"
_ENUMERATION = re.compile(r"[,+]\s{0,3}(?:\\[lc]?dots(?![A-Za-z])|\.\.\.|\u2026)\s{0,3}(?:[,+]|\\?\}?\s{0,3}$)")


# Two numbers side by side, set apart by spacing alone or each in its braces
_NUMBER = r"[+-]?[0-9]{1,50}(?:\.[0-9]{1,50})?"
_SIDE_BY_SIDE = re.compile(rf"\$?\s*(?:{_NUMBER}(?:\s|~|\\[,;: ]|\\q?quad(?![A-Za-z])|\\text\{{\s*\}})+{_NUMBER}"
                           rf"|\{{\s*{_NUMBER}\s*\}}\s*\{{\s*{_NUMBER}\s*\}})\s*\$?")


def _braced_fraction(match: re.Match[str]) -> str:
    return "\\frac" + "".join(arg if arg.startswith("{") else f"{{{arg}}}" for arg in match.groups())


def vote_key(answer: str) -> str:
    """The form maj@k counts ``answer``'s vote under: answers of the same key vote together. An
    integer is its digits (``x = 34``, ``34.0``); otherwise the text without whitespace, LaTeX
    spacing, sizing or math delimiters, ``\\dfrac``/``\\tfrac`` as ``\\frac``, a final period,
    one-character arguments braced (``\\frac12``, ``\\sqrt2`` as ``\\frac{1}{2}``, ``\\sqrt{2}``)
    and ``a/b`` as ``\\frac{a}{b}`` (``1/3``, ``\\dfrac{1}{3}``, ``\\frac13`` and ``\\frac{1}{3}`` vote together).
    String operations only, linear time: other equal values (``0.5`` and ``\\frac{1}{2}``) still
    vote apart."""
    if (integer := canonical_integer(answer)) is not None:
        return integer
    answer = _SIZING.sub("", answer)
    for cosmetic in _COSMETIC:
        answer = answer.replace(cosmetic, "")
    answer = compact(answer).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").rstrip(".")
    answer = _ROOT_ARGUMENT.sub(r"\\sqrt{\1}", _FRACTION_ARGUMENTS.sub(_braced_fraction, answer))
    fraction = _SIMPLE_FRACTION.fullmatch(answer)
    if fraction is None:
        return answer
    sign, numerator, denominator, slash_numerator, slash_denominator = fraction.groups()
    if slash_numerator is not None:
        sign, numerator, denominator = "", slash_numerator, slash_denominator
    negative = (sign == "-") != numerator.startswith("-")
    return f"{'-' if negative else ''}\\frac{{{numerator.lstrip('-')}}}{{{denominator}}}"


def choice_of(answer: str) -> str | None:
    """The multiple-choice letter an answer opens with: ``C``, ``(C)``, ``(C) 12``, ``C. 12``,
    ``\\textbf{(C)}\\ 12``, ``\\textbf{(C) }12``; None for anything else (``A = 5`` names a variable)."""
    opened = _CHOICE_LETTER.match(answer)
    return (opened.group(1) or opened.group(2)) if opened else None


def states_more_values(answer: str) -> bool:
    """Two numbers joined by a logical, set or arrow symbol (``34 \\wedge 35``, ``34 \\cup 35``,
    ``3 \\mid 12``, ``3 \\vert 4``, ``34 \\to 35``), or an enumeration (``1, 2, \\ldots, 34``, ``1 + 2 + \\cdots + 34``):
    an answer that states several values, of which math-verify reads only the last."""
    return _JOINED_NUMBERS.search(answer) is not None or _ENUMERATION.search(answer) is not None


def quick_verdict(pred: str, ground_truth: str) -> bool | None:
    """Decide equivalence with string operations alone; None means "ask math-verify".

    Integer ground truth: an integer prediction is compared exactly (a K glued to it is a thousand:
    ``34K`` is 34000, never 34; ``300 K``, spaced, is kelvin, 300), a plain non-integer number,
    a repeating decimal (``34.\\overline{3}``) or two values (``34 \\approx 35``) are wrong; only
    symbolic predictions (``\\frac{68}{2}``) go on. Any ground truth: identical strings (ignoring
    whitespace) are right; over-long answers and a scale word the ground truth lacks
    (``\\frac12 \\text{ thousand}``) are wrong; two plain numbers compare by exact value, two
    rational numbers exactly (:mod:`~dapo.rewards.exact_numbers`), two word answers as words.
    """
    if (gold_choice := choice_of(ground_truth)) is not None and (pred_choice := choice_of(pred)) is not None:
        if len(set(_BRACKETED_CHOICE.findall(pred)) - {pred_choice}) > 0:
            return False  # "(B), (C)", "(B)(C)": two choices (math-verify's reading paid the first)
        return pred_choice == gold_choice  # "(C) 12" for "C": the letter is the answer; its text repeats it
    gold_integer = canonical_integer(ground_truth)
    if gold_integer is not None:
        if "\\approx" in pred:  # "x \approx 11" states 11 (as math-verify reads it); "34 \approx 35" two values
            named, _, pred = pred.rpartition("\\approx")
            if any(char.isdigit() for char in named):
                return False
        pred_integer = canonical_integer(pred, thousands=True)  # "34K" is 34000
        if pred_integer is not None:
            return pred_integer == gold_integer
        if is_plain_number(pred, thousands=True) or ends_in_a_word_that_is_not_a_unit(pred) or changes_the_number(pred):
            return False  # 34.5; 34 thousand or 2 \text{ pi} (which math-verify reads as 34 and 2)
        if is_repeating_decimal(pred):  # 34.\overline{3}, which math-verify reads as 34
            return rational_verdict(pred, ground_truth) is True
    elif compact(pred) == compact(ground_truth):
        return True
    if len(pred) > MAX_MATH_CHARS or len(ground_truth) > MAX_MATH_CHARS:
        return False
    if _SIDE_BY_SIDE.fullmatch(pred) and not is_grouped_number(pred):
        return False  # "12 34", "3 \quad 4", "{3}{4}": two numbers, no operator (math-verify added them)
    if states_more_values(pred) and not states_more_values(ground_truth):
        return False  # "34 \to 35", "1, 2, \ldots, 34": math-verify reads the last number alone
    if ends_in_a_scale_word(pred) and not ends_in_a_scale_word(ground_truth):
        return False  # "\frac{1}{2} \text{ thousand}": math-verify drops the word
    pred_number, gold_number = plain_number(pred, thousands=True), plain_number(ground_truth)
    if pred_number is not None and gold_number is not None:  # 12.5 and 12.50, 12.5\% and 12.5
        with contextlib.suppress(InvalidOperation):  # an exponent past 10^18 digits: math-verify's
            return Decimal(pred_number) == Decimal(gold_number)
    # 0.\overline{3} and \frac13, not 0.5000001 and \frac12; "3 1/2 hours" and 3.5, not 2 (math-verify's (3+1)/2)
    rational = rational_verdict(_number_without_unit(pred), _number_without_unit(ground_truth))
    if rational is not None:
        return rational
    pred_word, gold_word = _word_answer(pred), _word_answer(ground_truth)
    if pred_word and gold_word:  # math-verify reads "seat" as s*e*a*t, which equals "east"
        return pred_word == gold_word
    return None


def _number_without_unit(answer: str) -> str:
    """``answer`` without the unit or percent sign after its number when what is left is a rational
    number (``3 1/2 hours``, ``12 1/2\\%``: ``3 1/2``, ``12 1/2``; a percentage is compared as its number,
    ``50\\%`` is not ``\\frac12``), else ``answer``."""
    number = PERCENT_SIGN.sub("", strip_unit_suffix(answer, remark_changes_the_number)).strip()
    return number if exact_rational(number) is not None else answer


def _word_answer(answer: str) -> str | None:
    """A word answer's letters, lower-cased (``\\text{East}``, ``New York``, ``ACB``), or None
    when it is not two or more letters alone (``x``, ``2x``, ``\\pi``)."""
    answer = TEXT_WRAPPED.sub(r"\1", answer).strip()
    return compact(answer).lower() if _WORDS.fullmatch(answer) else None
