"""Units on both sides: ``34 hours`` is not ``34 \\text{ minutes}``, whatever the numbers say.

The number rules drop a unit after a number (``34 cm`` is 34) and math-verify drops it too, on
both sides; so when the ground truth and the answer both name a unit, the units must agree.
Only units this module knows are compared (length, time, mass, angle, temperature, percent,
money; their symbols, names and plurals, ``cm^2`` with its power; a rate of two, ``m/s``, ``km per
hour``): an unknown word, or a unit on one side only (``34`` for ``34 \\text{ cm}``), is left to the
number rules as before.

A restatement in other units of the same quantity (``5 cm, i.e. 50 mm``, ``2 h (= 120 min)``, ``1 kg (i.e.
1000 g)``) restates the value when the two are equal exactly (:func:`other_units_change`): the factors are exact by
definition (an inch is 0.0254 m, a pound 0.45359237 kg), so a rounded conversion (``1 mi, i.e. 1.6 km``) is
another value, as any restatement as another number is. Units without a fixed factor (a month, a year), an angle
(a radian is irrational in degrees), a temperature (an offset, not a factor) and percent are not converted.
An "or" offering the quantity in another unit is read the same way (``5 cm, or 50 mm`` states 5 cm; ``5 cm, or
5 mm`` and ``5 cm, or 5 s`` two values: before, an "or" was left to the number rules, which saw only that every
number was 5, and a hedge with the same quantity). So are the two quantities written in two ``$...$`` segments
(:func:`join_quantities`: ``$5$ cm, i.e. $50$ mm`` was two candidates, a hedge).
"""

from __future__ import annotations

import re
from fractions import Fraction

from dapo.rewards.exact_numbers import exact_rational
from dapo.rewards.remark_words import OR_ADVERBS, RESTATING_WORDS

_UNIT_NAMES = {
    "mm": ("mm", "millimeter", "millimetre"), "cm": ("cm", "centimeter", "centimetre"),
    "m": ("m", "meter", "metre"), "km": ("km", "kilometer", "kilometre"), "in": ("in", "inch", "inche"),
    "ft": ("ft", "foot", "feet"), "yd": ("yd", "yard"), "mi": ("mi", "mile"),
    "s": ("s", "sec", "second"), "ms": ("ms", "millisecond"), "min": ("min", "minute"), "h": ("h", "hr", "hour"), "day": ("day",),
    "week": ("week", "wk"), "month": ("month",), "year": ("year", "yr"),
    "mg": ("mg", "milligram"), "g": ("g", "gram"), "kg": ("kg", "kilogram"), "lb": ("lb", "pound"),
    "deg": ("°", "degree", "deg"), "rad": ("rad", "radian"),
    "degC": ("°c", "degreec", "degreecelsius", "degreescelsius", "celsius"),
    "degF": ("°f", "degreef", "degreefahrenheit", "degreesfahrenheit", "fahrenheit"),
    "%": ("%", "percent"), "dollar": ("dollar", "usd"), "cent": ("cent", "¢"),
}
_CANONICAL = {name: unit for unit, names in _UNIT_NAMES.items() for name in names}
# An angle in degrees and a temperature in degrees: "34^\circ" names no scale, so fits either.
_COMPATIBLE = {frozenset(("deg", "degC")), frozenset(("deg", "degF"))}
# What follows the number: the unit, possibly in \text{}/\mathrm{}, with a degree sign or a power. A command
# name or a power is taken whole (a lookahead's capture, then its backreference: an atomic group). Read letter by
# letter, or a power without its closing brace, they split one text many ways, and a tail that is no unit
# ("1\boxed\boxed...(") backtracked through every split: 8 s at 11 \boxed. Taken whole, the same tails match.
_TAIL = re.compile(r"[0-9}.]((?:(?=(\\[a-z]{1,12}|\^\{?[23]\}?))\2|\\[,;: ]|[\s{}^~°%¢A-Za-z/]){1,60})$")
_DEGREE = re.compile(r"\^\s{0,3}\{?\s{0,3}\\circ\s{0,3}\}?|\\circ|\\degree")
_POWER = re.compile(r"\^\s{0,3}\{?\s{0,3}([23])\s{0,3}\}?")
_POWER_WORDS = {"squared": "2", "cubed": "3"}
_MARKUP = re.compile(r"\\(?:text|textrm|mathrm|mbox|textnormal|operatorname)\s{0,3}|\\[,;: ]|[{}\s~]")


def unit_of(answer: str) -> str | None:
    """The known unit ``answer`` states after its number (``cm``, ``cm^2``, ``deg``, ``%``), or None."""
    # math delimiters go; a currency sign before the number ("\$34") is cleaned off before this
    found = _unit_at_end(answer[-80:].replace("\\$", "").replace("$", "").replace("\\%", "%"))
    return found[0] if found is not None else None


def _unit_at_end(text: str) -> tuple[str, int] | None:
    """The known unit after the number that ends ``text`` and where it starts (past the number's own
    closing braces: ``\\frac{1}{2} cm``), or None; ``text`` is read as it is (see :func:`unit_of`,
    :func:`number_and_unit`)."""
    tail = _TAIL.search(text)
    if tail is None:
        return None
    unit = _DEGREE.sub("°", tail.group(1))
    power = _POWER.search(unit)
    unit = _MARKUP.sub("", _POWER.sub("", unit)).lower()
    power_word = next((word for word in _POWER_WORDS if unit.endswith(word) and unit != word), None)
    if power_word is not None:  # "cm squared" is cm^2
        unit = unit[: -len(power_word)]
    canonical = _canonical(unit)
    if canonical is None:
        return None
    closing = len(tail.group(1)) - len(tail.group(1).lstrip("}"))  # "\\frac{1}{2} cm": the braces are the number's
    exponent = power.group(1) if power is not None else _POWER_WORDS.get(power_word or "")
    return (f"{canonical}^{exponent}" if exponent else canonical), tail.start(1) + closing


_RATE = re.compile(r"(.+?)(?:/|per)(.+)")  # "m/s", "km/h", "meters per second" (its spaces gone)


def _canonical(unit: str) -> str | None:
    """A known unit's canonical name (plurals too: hours, inches as inche, degrees), or a rate of two
    (``m/s``, ``meters per second``: ``m/s``); None for any other text."""
    if unit.endswith("s") and unit[:-1] in _CANONICAL and unit not in _CANONICAL:
        unit = unit[:-1]
    if unit in _CANONICAL:
        return _CANONICAL[unit]
    rate = _RATE.fullmatch(unit)
    if rate is None or "/" in rate.group(2):
        return None
    numerator, denominator = _canonical(rate.group(1)), _canonical(rate.group(2))
    return f"{numerator}/{denominator}" if numerator and denominator and "/" not in numerator else None


def without_unit_power(remark: str) -> str:
    """``remark`` with the power of the known unit after its last number dropped (``that is, 34
    cm^2`` -> ``that is, 34 cm``; ``(i.e. 34 m^{2})`` -> ``(i.e. 34 m)``): a number restated in square
    units restates the number, where the power, read as arithmetic, made it 34 squared. Other text
    is returned as it is (``34 x^2``: no unit)."""
    kept = remark.rstrip(" .,;)$")
    found = _unit_at_end(kept) if len(kept) <= 200 else None
    if found is None or "^" not in found[0]:
        return remark
    return kept[: found[1]] + _POWER.sub("", kept[found[1]:], count=1) + remark[len(kept):]


_DOLLAR_BEFORE = re.compile(r"[\s$-]{0,4}\\\$")


def in_dollars(ground_truth: str) -> bool:
    """Whether a ground truth as written starts with a dollar sign (``\\$5``, ``$-\\$5$``)."""
    return _DOLLAR_BEFORE.match(ground_truth) is not None


def units_differ(pred: str, ground_truth: str, gold_in_dollars: bool = False) -> bool:
    """Whether both sides name a known unit and the units differ (``34 hours`` for ``34 minutes``);
    ``gold_in_dollars``: the ground truth was written with a dollar sign before its number, which
    cleaning took off (``\\$5``: ``5 cents``, ``5\\%`` or ``5^\\circ`` is not it)."""
    gold_unit = unit_of(ground_truth) or ("dollar" if gold_in_dollars else None)  # usually none: not read then
    pred_unit = unit_of(pred) if gold_unit is not None else None
    if pred_unit is None or gold_unit is None or pred_unit == gold_unit:
        return False
    return frozenset((pred_unit, gold_unit)) not in _COMPATIBLE


def number_and_unit(answer: str) -> tuple[str, str | None]:
    """``2 \\text{ cm}`` -> (``2``, ``cm``): ``answer`` without the known unit after its number
    (:func:`unit_of`), and that unit; (``answer``, None) when it names none (a ``$`` or ``\\%`` after it:
    not read, the text is not cleaned as :func:`unit_of` cleans it)."""
    found = _unit_at_end(answer) if len(answer) <= 80 else None
    if found is None:
        return answer, None
    unit, start = found
    return answer[:start].rstrip(), unit


# Each unit with a fixed factor: (its dimension, the size of the unit in that dimension's base unit), exact.
_FACTORS: dict[str, tuple[str, Fraction]] = {
    "mm": ("length", Fraction(1, 1000)), "cm": ("length", Fraction(1, 100)), "m": ("length", Fraction(1)),
    "km": ("length", Fraction(1000)), "in": ("length", Fraction("0.0254")), "ft": ("length", Fraction("0.3048")),
    "yd": ("length", Fraction("0.9144")), "mi": ("length", Fraction("1609.344")),
    "ms": ("time", Fraction(1, 1000)), "s": ("time", Fraction(1)), "min": ("time", Fraction(60)),
    "h": ("time", Fraction(3600)), "day": ("time", Fraction(86400)), "week": ("time", Fraction(604800)),
    "mg": ("mass", Fraction(1, 1000)), "g": ("mass", Fraction(1)), "kg": ("mass", Fraction(1000)),
    "lb": ("mass", Fraction("453.59237")), "dollar": ("money", Fraction(1)), "cent": ("money", Fraction(1, 100)),
}
# What opens a restatement of a quantity, bracketed or not: "=", "i.e.", "that is", "which is", "equivalently", or an
# "or" that offers the quantity again ("or 50 mm", "or equivalently 50 mm"): group 1 holds a parenthesis opening it.
_RESTATED_AS = re.compile(r"[\s,;]{0,4}(\(?)\s{0,3}(?:=|(?:" + RESTATING_WORDS + r"|or(?:\s{1,3}(?:" + OR_ADVERBS
                          + r"))?)(?![A-Za-z]))[\s,:$]{0,4}", re.IGNORECASE)
# A unit written after a $...$ segment, outside it ("$5$ cm", "$5$ \\text{ cm}", "$3$ cm^2"), and what may join two
# quantities' segments: the unit, then a restatement (_RESTATED_AS) ending just before the second segment.
_UNIT_AFTER_SEGMENT = re.compile(r"\s{0,3}(?:\\(?:text|textrm|mathrm|mbox)\s{0,3}\{[^{}$]{1,30}\}|[A-Za-z°]{1,20}(?:\^\{?[23]\}?)?)")
_CLOSING = re.compile(r"\s{0,3}\)")
_MAX_SEGMENTS = 16  # segments on a line read for two joined quantities


def quantity(text: str) -> tuple[str, Fraction] | None:
    """``text``, a number and its known unit with a fixed factor (``50 mm``, ``2 \\text{ h}``, ``3 cm^2``), as
    (its dimension, with the unit's power, and its exact value in that dimension's base unit), or None."""
    number, unit = number_and_unit(text.replace("$", " ").strip().rstrip(". ").strip())
    base, _, power = (unit or "").partition("^")
    factor = _FACTORS.get(base)
    value = exact_rational(number.replace(",", "")) if factor is not None else None
    if factor is None or value is None:
        return None
    return f"{factor[0]}^{power or 1}", value * factor[1] ** int(power or 1)


def other_units_change(remark: str, answer: str) -> bool | None:
    """For ``remark`` after ``answer`` when both state a number with a known unit of fixed factor, the
    remark opening with a restatement (``=``, "i.e.", "that is", "which is", "equivalently") or an "or", in brackets
    or not: False when it is the same quantity (``5 cm, i.e. 50 mm``, ``2 h (= 120 min)``, ``5 in, that is, 12.7 cm``,
    ``5 cm, or 50 mm``), True when another (``5 cm, i.e. 5 mm``, ``1 mi, i.e. 1.6 km``: exact factors, so a rounded
    conversion is another value; ``5 cm, i.e. 5 s``, ``5 cm (or 5 mm)``). None when either has no such unit (``34,
    that is, 34 cm``, ``5 cm, i.e. 50``, ``or about 50 mm``: the number rules decide)."""
    opening = _RESTATED_AS.match(remark[:200])
    if opening is None or unit_of(answer) is None:
        return None
    restated_text = remark[opening.end() : 200].rstrip(". ")
    if opening.group(1):  # "(or 50 mm)": the quantity is what the parenthesis holds
        if not restated_text.endswith(")"):
            return None
        restated_text = restated_text[:-1]
    stated, restated = quantity(answer[-80:]), quantity(restated_text)
    return None if stated is None or restated is None else stated != restated


def unit_remark_changes(after: str, answer: str) -> bool | None:
    """For ``after``, the text after a box or a ``$...$`` segment that holds ``answer``: whether a restatement of
    the quantity in another unit offers another value (:func:`other_units_change`), read with the known unit that
    opens ``after`` as the value's (``\\boxed{5} cm, i.e. 50 mm`` restates 5 cm; ``\\boxed{5} cm, i.e. 5 mm`` and ``$5$
    cm, or 5 s`` state another quantity: before, the remark was read against the bare 5, so every 5 restated it and
    50 did not) or with the unit inside (``\\boxed{5 \\text{ cm}}, i.e. 5 mm``). None when no quantity is restated
    (``\\boxed{34} cm, that is, 35``, ``\\boxed{5}, i.e. 50 mm``): the other rules decide."""
    after = after[:200].lstrip(" $")
    unit = _UNIT_AFTER_SEGMENT.match(after)
    stated = f"{answer} {unit.group(0).strip()}" if unit is not None else answer
    if unit is not None and unit_of(stated) is not None:  # "cm, i.e. 50 mm" ("or 5 mm": "or" is no unit)
        return other_units_change(after[unit.end() :], stated)
    return other_units_change(after, answer)


def join_quantities(line: str) -> str:
    """``$5$ cm, i.e. $50$ mm`` -> ``$5 cm, i.e. 50 mm$``: two ``$...$`` segments that each state a number with a known
    unit of fixed factor (inside the segment or written right after it), joined by a restatement or an "or"
    (:data:`_RESTATED_AS`, a parenthesis around the second included: ``$5$ cm (i.e. $50$ mm)``), are one quantity and
    its restatement, read as in one segment (:func:`other_units_change`: the same quantity restates it, another is a
    second value). Before, they were two candidates, a hedge (wrong even when the conversion was exact). ``line``
    itself otherwise (``$34$, or $35$``, ``$5$ cm, i.e. $50$``: a number without a unit is no quantity)."""
    if "\\$" in line or line.count("$") > 2 * _MAX_SEGMENTS:
        return line
    parts = line.split("$")
    for index in range(1, len(parts) - 3, 2):
        gap, after = parts[index + 1], parts[index + 3]
        unit = _UNIT_AFTER_SEGMENT.match(gap)
        opening = _RESTATED_AS.fullmatch(gap, unit.end()) if unit is not None else None
        if opening is None:  # "$5 cm$ or $50 mm$": no unit outside ("or" is no unit)
            unit, opening = None, _RESTATED_AS.fullmatch(gap)
        if opening is None or len(gap) > 60:
            continue
        second_unit = _UNIT_AFTER_SEGMENT.match(after)
        closing = _CLOSING.match(after, second_unit.end() if second_unit is not None else 0) if opening.group(1) else None
        if opening.group(1) and closing is None:
            continue
        first = parts[index] + (unit.group(0) if unit is not None else "")
        second = parts[index + 2] + (second_unit.group(0) if second_unit is not None else "")
        if quantity(first) is None or quantity(second) is None:
            continue
        end = closing.end() if closing is not None else second_unit.end() if second_unit is not None else 0
        joined = first + opening.group(0) + second + (")" if closing is not None else "")
        return "$".join(parts[:index]) + "$" + joined + "$" + after[end:] + "".join("$" + part for part in parts[index + 4 :])
    return line
