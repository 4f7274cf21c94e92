"""Exact rational values: repeating decimals, fractions and decimals compared without tolerance.

math-verify reads ``34.\\overline{3}`` and ``0.(3)`` as 34 and 0 (it drops what it does not
know) and compares numbers rounded to 6 decimals, so ``0.5000001`` equals ``\\frac{1}{2}`` there.
Here both sides that state a rational number (an integer, a plain decimal, a simple fraction
``\\frac{a}{b}`` / ``a/b``, or a repeating decimal ``0.1\\overline{6}``, ``0.(3)``, ``0.\\dot{3}``) are
compared exactly. A plain decimal and a fraction that differ are the same answer only when the
decimal is the fraction's expansion rounded to the places it gives, with at least
:data:`MIN_ROUNDED_DECIMALS` of them, on either side (``0.333333`` or ``0.3333333`` for ``\\frac13``
and ``\\frac13`` for a ground truth ``0.333333``, as math-verify's default; not ``0.5000001`` for
``\\frac12``, nor ``0.33``). Numerals are at most 50 digits, so ``int()`` never sees a long one.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction

MIN_ROUNDED_DECIMALS = 6  # math-verify's default float rounding: fewer digits are not the value
_DIGITS = "[0-9]{0,50}"
# 0.1\overline{6}, 0.\overline3, 0.(3), 0.\dot{3}: the digits before the point, after it, and the period.
_REPEATING = re.compile(rf"([+-]?)({_DIGITS})\.({_DIGITS})(?:\\overline\{{([0-9]{{1,50}})\}}|\\overline([0-9])"
                        r"|\\dot\{([0-9])\}|\\dot([0-9])|\(([0-9]{1,50})\))")
_DECIMAL = re.compile(rf"([+-]?)({_DIGITS})(?:\.({_DIGITS}))?")
# \frac{a}{b} (\dfrac, \tfrac; \frac12 with one-digit arguments unbraced) or a/b
_FRACTION = re.compile(r"([+-]?)\\[dt]?frac(?:\{([+-]?[0-9]{1,50})\}|([0-9]))(?:\{([+-]?[0-9]{1,50})\}|([0-9]))"
                       r"|([+-]?[0-9]{1,50})/([+-]?[0-9]{1,50})")
# A mixed number, "2 1/2" or "2\frac{1}{2}" (2 and a half, as math-verify reads it too)
_MIXED = re.compile(r"([+-]?)([0-9]{1,50})(?: ([0-9]{1,50})/([0-9]{1,50})"
                    r"|\\[dt]?frac(?:\{([0-9]{1,50})\}|([0-9]))(?:\{([0-9]{1,50})\}|([0-9])))")
# Math delimiters and sizing, and spaces that do not separate digits ("1 2" is not 12).
# \left. and \right. are invisible delimiters ("\left. 34 \right." is 34, not .34).
_NOISE = re.compile(r"\$|\\left(?![A-Za-z])\.?|\\right(?![A-Za-z])\.?|(?<![0-9])\s+|\s+(?![0-9])")
# LaTeX's decimal comma, 34{,}5 and 0{,}125 (34.5, 0.125): a braced comma after a lone 0, or before
# other than a group of three digits (1{,}234 is a thousand and more)
DECIMAL_COMMA = re.compile(r"(?<=[0-9]) ?\{ ?, ?\}(?=[0-9]{1,2}(?![0-9])|[0-9]{4})|(?<=0)(?<![0-9]0) ?\{ ?, ?\}(?=[0-9])")


def _number_text(answer: str) -> str:
    return DECIMAL_COMMA.sub(".", _NOISE.sub("", answer))


def exact_rational(answer: str) -> Fraction | None:
    """The rational number ``answer`` states exactly (``-12.5``, ``\\frac{3}{4}``, ``7/2``, ``2 1/2``, ``2\\frac12``,
    ``0.1\\overline{6}``), or None (an expression, a unit, an irrational number, a long numeral)."""
    text = _number_text(answer)
    if len(text) > 120:
        return None
    if (repeating := _REPEATING.fullmatch(text)) is not None:
        sign, whole, fixed, *periods = repeating.groups()
        period = next(p for p in periods if p is not None)
        value = Fraction(int(whole or "0")) + Fraction(int(fixed or "0"), 10 ** len(fixed))
        value += Fraction(int(period), (10 ** len(period) - 1) * 10 ** len(fixed))
        return -value if sign == "-" else value
    if (decimal := _DECIMAL.fullmatch(text)) is not None and (decimal.group(2) or decimal.group(3)):
        return Fraction(Decimal(text))
    if (fraction := _FRACTION.fullmatch(text)) is not None:
        sign, braced_top, top, braced_bottom, bottom, slash_numerator, slash_denominator = fraction.groups()
        numerator, denominator = braced_top or top, braced_bottom or bottom
        if slash_numerator is not None:
            sign, numerator, denominator = "", slash_numerator, slash_denominator
        if int(denominator) == 0:
            return None
        value = Fraction(int(numerator), int(denominator))
        return -value if sign == "-" else value
    if (mixed := _MIXED.fullmatch(text)) is not None:
        sign, whole, plain_top, plain_bottom, braced_top, top, braced_bottom, bottom = mixed.groups()
        numerator = int(plain_top or braced_top or top)
        denominator = int(plain_bottom or braced_bottom or bottom)
        if 0 < numerator < denominator:
            value = int(whole) + Fraction(numerator, denominator)
            return -value if sign == "-" else value
    return None


def is_repeating_decimal(answer: str) -> bool:
    """Whether ``answer`` is a repeating decimal (``0.\\overline{3}``, ``0.(3)``)."""
    return _REPEATING.fullmatch(_number_text(answer)) is not None


def rational_verdict(pred: str, ground_truth: str) -> bool | None:
    """Exact verdict when both sides state rational numbers (see the module rule), else None."""
    gold_value = exact_rational(ground_truth)
    pred_value = exact_rational(pred) if gold_value is not None else None
    if pred_value is None or gold_value is None:
        return None
    pred_places, gold_places = _decimal_places(pred), _decimal_places(ground_truth)
    if pred_places is not None and gold_places is not None:
        return pred_value == gold_value  # two decimals: exact values only (12.5 and 12.50)
    # A decimal with enough places is right for a fraction (on either side: a ground truth given as
    # 0.333333 is a rounded 1/3) when it is the fraction rounded to that many places.
    if gold_places is not None:
        return _is_or_rounds(gold_value, gold_places, pred_value)
    return _is_or_rounds(pred_value, pred_places, gold_value)  # fractions, repeating decimals: exact


def states_fraction(text: str, value: Fraction) -> bool | None:
    """Whether ``text``, a rational number, is ``value`` as :func:`rational_verdict` reads two answers:
    exactly, or as a decimal of at least :data:`MIN_ROUNDED_DECIMALS` places that is ``value`` rounded
    (``0.666667`` for 2/3); None when ``text`` states no rational number."""
    stated = exact_rational(text)
    return None if stated is None else _is_or_rounds(stated, _decimal_places(text), value)


def _is_or_rounds(stated: Fraction, places: int | None, value: Fraction) -> bool:
    """The rule of the module, for one side: ``stated`` (given with ``places`` decimal places, None when
    not a plain decimal) is ``value`` exactly, or rounds it to at least :data:`MIN_ROUNDED_DECIMALS` places."""
    return stated == value or (places is not None and places >= MIN_ROUNDED_DECIMALS
                               and rounds_to(value, places, stated))


def is_rounded(decimal: str, value: Fraction) -> bool:
    """Whether ``decimal`` is ``value`` rounded to the places it gives, half up or to even (``0.8`` for
    3/4, not ``0.7``; any number of places, unlike :func:`states_fraction`)."""
    places, stated = _decimal_places(decimal), exact_rational(decimal)
    return places is not None and stated is not None and rounds_to(value, places, stated)


def _decimal_places(answer: str) -> int | None:
    """How many places a plain decimal gives (``0.3333`` -> 4, ``12`` -> 0), None when not one."""
    decimal = _DECIMAL.fullmatch(_number_text(answer))
    return len(decimal.group(3) or "") if decimal is not None else None


def rounds_to(value: Fraction, places: int, rounded: Fraction) -> bool:
    """Whether ``rounded`` is ``value`` rounded to ``places`` decimal places (half up or half to even)."""
    with localcontext() as context:  # enough digits for every place a decimal gives (<= 50)
        context.prec = 200
        quantum = Decimal(1).scaleb(-places)
        exact = Decimal(value.numerator) / Decimal(value.denominator)
        return any(Fraction(exact.quantize(quantum, rounding=mode)) == rounded
                   for mode in (ROUND_HALF_UP, ROUND_HALF_EVEN))
