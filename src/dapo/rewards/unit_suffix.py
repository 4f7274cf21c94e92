"""Unit suffixes: what may follow a number without changing it, and what may not.

A unit (``34 cm``, ``34 \\text{ cm}``, ``cm^2``, ``m/s``; a capital K set apart by a space is kelvin:
``300 K``, ``300 \\text{ K}``) or a remark in words (``7 (mod 10)``, ``7 \\pmod{10}``) after a number
is dropped; a scale word (``34 thousand``), a word of an expression (``2 pi``, ``2 times n``) or a
lone letter other than an SI symbol (``2 i``) is not, nor arithmetic in brackets (``2 (n+1)``).
Whether a remark changes the number (``34 (or 35)``, ``34 (in thousands)``) needs the value of the
number before it, which the number rules compute by stripping suffixes with this module; so the
judge is passed in (:data:`RemarkJudge`, :func:`~dapo.rewards.number_forms.remark_changes_the_number`)
rather than imported, which keeps this module below :mod:`~dapo.rewards.number_forms`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# (remark, the number before it) -> whether the remark changes that number
RemarkJudge = Callable[[str, str], bool]

UNIT_WRAPPERS = ("\\text{", "\\textrm{", "\\mbox{", "\\mathrm{", "\\textnormal{")
_UNIT_WORD = re.compile(r"[A-Za-z]{1,20}(?:\^\{?[0-9]\}?|/[A-Za-z]{1,20})?")  # cm, cm^2, m/s
# A remark after a number: "7 (mod 10)", "34 (since n is even)", "34 (n = 3)", "34 (for n \geq 2)",
# "60 (seconds/minute)"; not arithmetic, which makes a product: "2(n+1)", "4 (2 + \sqrt{2})",
# "34 (\times 10^3)", "2 (n-1)".
TRAILING_REMARK = re.compile(r"(?<=[0-9]) {0,3}\(([^()]{0,400})\)$")
# The same remark as a LaTeX command: "34 \pmod{1000}", "34 \pmod 1000", "34 \mod{1000}".
_TRAILING_PMOD = re.compile(r"(?<=[0-9]) {0,3}\\p?mod(?![A-Za-z]) {0,3}"
                            r"(?:\{ {0,3}[0-9A-Za-z]{1,20} {0,3}\}|[0-9A-Za-z]{1,20})$")
ARITHMETIC = re.compile(r"[+*^]|\\(?:times|sqrt|d?frac|tfrac|cdot|div|pm|mp|pi)(?![A-Za-z])"
                         r"|[0-9] {0,3}[-/] {0,3}[0-9]|(?<![A-Za-z])[A-Za-z] {0,3}[-/] {0,3}(?:[0-9]|[A-Za-z](?![A-Za-z]))")
# Words that change a number's value, so never dropped as units.
SCALE_WORDS = frozenset(("hundred", "hundreds", "thousand", "thousands", "million", "millions", "billion",
                         "billions", "trillion", "trillions", "dozen", "dozens", "squared", "cubed",
                         "grand", "lakh", "lakhs", "crore", "crores", "bn", "mn", "mil"))
# Nor words that make the number part of an expression ("2 pi", "7 and a half", "540 is not
# correct"), nor one letter ("2 i", "3 x", so "2 times n" keeps its n) unless it is an SI unit
# symbol. A count's noun ends an answer without changing it: "3 times", "2 real roots", "34 of them".
_NOT_UNITS = SCALE_WORDS | frozenset((
    "pi", "half", "halves", "third", "thirds", "quarter", "quarters", "fourth", "fourths", "fifth", "fifths",
    "sixth", "sixths", "seventh", "sevenths", "eighth", "eighths", "ninth", "ninths", "tenth", "tenths",
    "hundredth", "hundredths", "thousandth", "thousandths", "millionth", "millionths",
    "over", "minus", "plus", "and", "or", "is", "not", "divided", "root", "sqrt", "factorial",
    "negative", "below", "zero",
))
# metre, gram, second, hour, litre, volt, watt, joule, newton, ampere, Celsius and Fahrenheit (after a
# degree sign), tesla, siemens; K only set apart by a space (kelvin, see strip_unit_suffix): glued
# to the number (34K) it is "thousand"
_UNIT_LETTERS = frozenset("mgshlLVWJNACFTS")
_POWER_OF_A_UNIT = ("squared", "cubed")  # after a unit: its power ("34 cm squared"), not the number's
_POWER_AFTER_A_BRACE = re.compile(r"(?<=\})\s{0,3}\^\s{0,3}\{?\s{0,3}[23]\s{0,3}\}?$")


def strip_unit_suffix(answer: str, remark_changes: RemarkJudge) -> str:
    """Drop one trailing unit: ``\\text{ cm}`` (no digits inside; ``\\text{ K}`` after a space is
    kelvin), a plain word (``cm``; ``K`` after a space is kelvin too), a unit with a power or per
    (``cm^2``, ``m/s``), or a remark
    after a number, in parentheses (``7 (mod 10)``) or as ``7 \\pmod{10}``, unless ``remark_changes``
    says it changes the number (``34 (or 35)``). Not a unit: a scale
    word (``34 thousand`` is not ``34``), a word of an expression (``2 pi``, ``2 times n``) or a
    lone letter other than an SI symbol (``2 i``, ``$2\\mathrm{e}$``)."""
    power = _POWER_AFTER_A_BRACE.search(answer)
    if power is not None:  # "34 \\text{ cm}^2": the power is the wrapped unit's
        unit_dropped = strip_unit_suffix(answer[: power.start()], remark_changes)
        if unit_dropped != answer[: power.start()]:
            return unit_dropped
    if answer.endswith("}"):
        start = max(answer.rfind(wrapper) for wrapper in UNIT_WRAPPERS)
        inner = answer[start:].split("{", 1)[-1].rstrip("}").strip()
        unit = is_unit(inner) or _is_spaced_kelvin(answer, start, inner)
        # the remark last, only for a wrapper that may go: it reads the value before it (see value_of)
        if start > 0 and not any(c.isdigit() for c in answer[start:]) and unit and not (
                inner.startswith("(") and remark_changes(inner.strip("()"), answer[:start])):  # "(negative)"
            return answer[:start]
    pmod = _TRAILING_PMOD.search(answer)
    if pmod:
        return answer[: pmod.start()]
    remark = TRAILING_REMARK.search(answer)
    if remark and _is_remark(remark.group(1), answer[: remark.start()], answer[remark.start()] == " ", remark_changes):
        return answer[: remark.start()]
    space = answer.rfind(" ")
    word = answer[space + 1 :]
    if space > 0 and word.isascii() and _UNIT_WORD.fullmatch(word) and (is_unit(word) or word == "K"):
        return answer[:space]  # "34 cm", "300 K" (kelvin)
    if space > 0 and word in _POWER_OF_A_UNIT:  # "34 cm squared" is an area in cm^2; "10 squared" is 100
        unit = answer[:space].rstrip().rpartition(" ")[2]
        if unit.isascii() and unit.isalpha() and is_unit(unit):
            return answer[:space].rstrip()
    return answer


def is_unit(word: str) -> bool:
    """Whether ``word`` may be a unit after a number (``cm``, ``cm^2``, ``m/s``, ``m``): not a scale word,
    not a word of an expression, not a lone letter other than an SI symbol."""
    name = re.split(r"[\^/]", word, maxsplit=1)[0]  # cm^2, m/s: the unit's name
    return name.lower() not in _NOT_UNITS and (len(name) != 1 or name in _UNIT_LETTERS)


def _is_spaced_kelvin(answer: str, start: int, inner: str) -> bool:
    """``300 \\text{ K}``, ``300\\,\\mathrm{K}``: a K in a text wrapper, set off from the number by a
    space, is kelvin (a unit), as ``300 K`` is; glued to it (``300\\text{K}``) it is neither (kelvin
    or "thousand": not read), and ``300K`` without markup is "thousand"."""
    wrapped = answer[start:].split("{", 1)[-1]
    return inner == "K" and (wrapped[:1].isspace() or answer[:start].endswith(" "))


def _is_remark(inside: str, number: str, spaced: bool, remark_changes: RemarkJudge) -> bool:
    """Whether ``(inside)`` after a number is a remark on it: words (two letters in a row, or one
    letter after a space: "(n = 3)"), no arithmetic, no second answer ("(or 35)") and no scale
    word ("(in thousands)" changes the number)."""
    words = re.search(r"[A-Za-z]{2}", inside) or (spaced and re.search(r"[A-Za-z]", inside))
    return bool(words) and ARITHMETIC.search(inside) is None and not remark_changes(inside, number)
