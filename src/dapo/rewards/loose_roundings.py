"""Loose roundings: a decimal written with ``=`` or "i.e." after an irrational answer, where ``\\approx`` is meant.

``\\boxed{\\sqrt2} (= 1.414)``, ``\\pi = 3.14`` and ``\\sqrt2, i.e. 1.414`` say "equals" of a number that only
rounds the answer: no finite decimal equals a root, ``\\pi``, ``e``, a function or a fractional power, so such a
decimal can only be its approximation, and it restates the answer when it is the answer's value rounded to the
places it gives (:func:`~dapo.rewards.approximations.is_rounding_of`, as after ``\\approx``). The reading is
loose, so the number must show that it is a rounding (:func:`shows_a_rounding`):

- **a decimal point with a digit after it, and at least two significant digits**: ``1.414``, ``1.4``, ``3.14``,
  ``6.28``, ``0.014`` (for ``\\frac{\\sqrt2}{100}``). An integer after ``=`` states an integer:
  ``\\pi, that is, 3``, ``\\pi (= 3)``, ``\\sqrt2, i.e. 1``, ``e, that is, 3`` and ``e^{10}, i.e. 22026`` state a
  second value (before, ``3`` was accepted as pi rounded to the units, a false reward for a claim that pi
  is 3). One significant digit is too coarse to tell the value from another answer (``0.01`` for
  ``\\frac{\\sqrt2}{100}``, ``0.3`` for ``\\frac{\\pi}{10}``).
- **or the value itself**: a number the answer equals exactly is no rounding (``\\sqrt{4} (= 2)``, ``\\sqrt4, i.e.
  2.0``) and restates it.

A rational answer keeps the strict rule (``\\frac13 (= 0.33)``, ``\\frac13, i.e. 0`` and ``34 (= 35)`` state
another value), and an explicit approximation (``(about 3)``, ``\\approx 3``) is read by its own rule, a
rounding to the places it gives (:data:`~dapo.rewards.approximations.APPROXIMATELY`). Bounded regular
expressions on at most :data:`~dapo.rewards.approximations.MAX_CHARS` characters: linear, safe in the
parent process.
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

from dapo.rewards.approximations import MAX_CHARS, equals_value, is_rounding_of, states_the_value
from dapo.rewards.exact_numbers import exact_rational
from dapo.rewards.remark_words import RESTATING_WORDS

# A restatement as one decimal and nothing after it: "= 1.414", "i.e. 1.41", "which is 1.414".
_RESTATED_DECIMAL = re.compile(r"\s*(?:=|(?:" + RESTATING_WORDS + r")(?![A-Za-z]))"
                               r"[\s,$]{0,8}([+\-\u2212]?[0-9][0-9,]{0,60}(?:\.[0-9]{1,50})?)[\s$.]{0,8}$", re.IGNORECASE)
# What makes a closed form's value possibly irrational: a root, pi, e, a function, or a fractional power.
_IRRATIONAL_PART = re.compile(r"\\(?:sqrt|pi|exp|ln|log|sin|cos|tan)(?![A-Za-z])|[√π]|(?<![A-Za-z\\])e(?![A-Za-z])"
                              r"|\^\s{0,3}\{[^{}]{0,40}(?:\\d?frac|/|\.)")


def rounds_loosely(remark: str, answer: str, value: Fraction | Decimal | None) -> bool:
    """Whether ``remark`` restates ``answer`` as its value rounded to the places it gives, written
    with ``=`` (or "i.e.", "that is", "which is") where ``\\approx`` is meant: ``\\sqrt2 (= 1.414)``,
    ``\\pi = 3.14``, ``e^2 (= 7.39)``. Only for an answer whose ``value`` was computed (a
    :class:`~decimal.Decimal`, not a plain rational) and that has a root, ``\\pi``, ``e``, a function or a
    fractional power: no finite decimal equals such a value, so the decimal can only be its approximation.
    A rounding must show that it is one (:func:`shows_a_rounding`: a decimal point and two significant
    digits): ``\\pi (= 3)``, ``\\sqrt2, i.e. 1`` and ``\\frac{\\sqrt2}{100} (= 0.01)`` state another value,
    as an integer or a single digit is no visible rounding; a number that is the value exactly
    (``\\sqrt{4} (= 2)``) restates it. A rational answer keeps the strict rule: ``\\frac13 (= 0.33)`` and
    ``34 (= 35)`` state another value."""
    restated = _RESTATED_DECIMAL.match(remark[:MAX_CHARS])
    if not isinstance(value, Decimal) or restated is None or _IRRATIONAL_PART.search(answer[:MAX_CHARS]) is None:
        return False
    number = restated.group(1)
    exact = exact_rational(number.replace("\u2212", "-").replace(",", ""))
    if exact is not None and equals_value(exact, value):
        return True
    return shows_a_rounding(number) and is_rounding_of(number, value)


def shows_a_rounding(number: str) -> bool:
    """Whether ``number``, written after ``=`` or "i.e." for an irrational value, shows that it rounds it: a
    decimal point with a digit after it and at least two significant digits (``1.414``, ``3.1``, ``0.14``,
    ``3.0``), not an integer (``3`` for ``\\pi``, ``22026`` for ``e^{10}``: an integer after ``=`` states an
    integer) nor a single significant digit (``0.01``, ``0.3``: too coarse to tell the value from another)."""
    whole, point, places = number.partition(".")
    significant = (whole + places).lstrip("+-\u2212,0").replace(",", "")
    return bool(point) and places.rstrip(",.") != "" and len(significant) >= 2


def restates_value(remark: str, answer: str, value: Fraction | Decimal | None) -> bool:
    """Whether ``remark`` restates ``answer`` (of ``value``) in another closed form
    (:func:`~dapo.rewards.approximations.states_the_value`, when it has a LaTeX command) or as its approximation written with
    ``=`` (:func:`rounds_loosely`)."""
    return ("\\" in remark and states_the_value(remark, value)) or rounds_loosely(remark, answer, value)
