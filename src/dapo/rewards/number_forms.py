"""Number forms: when an answer states a plain integer or decimal, and what around it may go.

An integer is compared as a digit string after cosmetic normalisation: thousands separators in
groups of three (``1,234``, ``1 234``, ``1{,}234``), a leading ``+``, a zero fraction (``34.0``),
Unicode decimal digits mapped to ASCII (``٣٤``, full-width ``３４``), a variable prefix
(``x = 34``), and trailing units, degree, percent or currency signs, or a remark in words
(``7 (mod 10)``; which suffixes may go: :mod:`~dapo.rewards.unit_suffix`). What changes the
number is never dropped: a scale word (``34 thousand``), a word of an expression (``2 pi``), a
remark that offers another answer or multiplies it (``34 (or 35)``, ``34 (x 1000)``:
:func:`remark_changes_the_number`). A K or k glued to a number is a thousand (``34K`` is 34000,
read so in an answer only: :func:`canonical_integer` with ``thousands=True``); a capital K set
apart from it by a space is kelvin, a unit (``300 K``, ``300 \\text{ K}`` are 300). Linear-time
string operations that never call ``int()`` (which refuses more than 4300 digits), so they are
safe on any input.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from decimal import Decimal
from fractions import Fraction

from dapo.rewards.alternatives import NUMBER_OR_THOUSANDS, NUMBER_TOKEN, computed_form
from dapo.rewards.approximations import APPROXIMATELY, is_rounding_of, real_value
from dapo.rewards.counts import counts_the_derivation, item_count, stated_count
from dapo.rewards.disowned import rejected_value, remark_disowns
from dapo.rewards.exact_numbers import DECIMAL_COMMA, exact_rational, is_rounded
from dapo.rewards.loose_roundings import restates_value
from dapo.rewards.offered_values import offered_values
from dapo.rewards.remark_words import (
    APPROXIMATION_WORDS,
    CONDITION_WORDS,
    NAME,
    NUMBER_WORDS,
    OR_ADVERBS,
    RESTATING_WORDS,
    spelled_value,
)
from dapo.rewards.restatements import constant_remark_changes, letters_end_a_value
from dapo.rewards.unit_suffix import (
    ARITHMETIC,
    SCALE_WORDS,
    TRAILING_REMARK,
    UNIT_WRAPPERS,
    is_unit,
    strip_unit_suffix,
)
from dapo.rewards.units import other_units_change, without_unit_power

SPACES = ("\\,", "\\;", "\\:", "\\ ", "~", "\u00a0", "\u2009", "\u202f", "\u2007")
_SUFFIXES = ("^{\\circ}", "^\\circ", "\\circ", "°", "\\degree", "\\%", "%", "\\$")
CACHED_CHARS = 1000  # the longest text whose value is cached (value_of)
_PASSES = 3  # decorations a number sheds from its end, one a pass (_strip_number_decorations)
VARIABLE_PREFIX = re.compile(r"[A-Za-z](?:_\{?[A-Za-z0-9]{1,8}\}?)? {0,4}= {0,4}")
GLUED_COMMA = re.compile(r",\\!\s{0,3}")  # 11,\! 111 is one number
_BRACED_COMMA = re.compile(r" ?\{ ?, ?\} ?")  # 14{,}916 and 14 {, }916
TEXT_WRAPPED = re.compile(r"\\(?:text|textrm|textbf|textit|mbox|mathrm|textnormal)\{([^{}]{0,200})\}")
# A number, then one word (bare or in \text{...}, \mathrm{...}) and the end: "34 thousand", "2 \text{ pi}",
# "34\,\text{thousand}" (LaTeX's spaces between them).
# No two quantifiers compete for the same whitespace (that backtracked quadratically): linear.
_ENDS_IN_WORD = re.compile(r"[0-9](?:[\s}{$~]|\\[,;: ])*(?:\\[a-z]+\{\s*)?([A-Za-z]+)\s*(?:\}\s*)?(?:\$\s*)?$")
_PLAIN_INTEGER = re.compile(r"[+-]?[0-9]+(?:\.0*)?")
# (a first group of 0 is a decimal comma's: 0,125 is no integer)
_GROUPED_INTEGER = re.compile(r"[+-]?[1-9][0-9]{0,2}(?:[, ][0-9]{3})+(?:\.0*)?")
_GROUPED_DECIMAL = re.compile(r"[+-]?[1-9][0-9]{0,2}(?:[, ][0-9]{3})+\.[0-9]+")  # 1,234.56 and 1\,234.56
# Thousands set apart by spaces, in any answer: 1 000/3, 2 000\pi
_SPACED_THOUSANDS = re.compile(r"(?<![0-9.])[1-9][0-9]{0,2}(?:\s[0-9]{3})+(?![0-9])")
# Whitespace, the first group when it parts two digits ("3 1/2")
_WHITESPACE = re.compile(r"(?<=[0-9])(\s+)(?=[0-9])|\s+")
_SPACED_SIGN = re.compile(r"^([+-])\s+(?=[0-9])")
# Unambiguous (no two quantifiers compete for the same characters): linear even on 10^5 digits.
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# A number with a K or k glued to it: "34K", "2.5k", "1,200K" (a thousand times it).
_GLUED_THOUSANDS = re.compile(r"([+-]?)([0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.([0-9]*))?[Kk]")


def to_ascii_digits(text: str) -> str:
    """Map every Unicode decimal digit (Arabic-Indic, full-width, ...) to its ASCII digit."""
    if text.isascii():
        return text
    out = []
    for char in text:
        digit = unicodedata.decimal(char, None)
        out.append(str(digit) if digit is not None else char)
    return "".join(out).replace("\u2212", "-").replace("\uff0b", "+").replace("\uff0c", ",")


def _strip_number_decorations(answer: str, thousands: bool = False) -> str:
    """Remove what can surround a number without changing it: prefixes, units, signs; with
    ``thousands``, a K glued to what is left is read as a thousand (``34K`` -> ``34000``)."""
    answer = GLUED_COMMA.sub(",", to_ascii_digits(answer))
    for space in SPACES:
        answer = answer.replace(space, " ")
    answer = _BRACED_COMMA.sub(",", DECIMAL_COMMA.sub(".", answer)).strip()
    prefix = VARIABLE_PREFIX.match(answer)
    if prefix:
        answer = answer[prefix.end() :]
    answer = _SPACED_SIGN.sub(r"\1", answer)  # "- 1,000": the sign of the number after it
    for _ in range(_PASSES):  # e.g. "34^\circ \text{ F}", "34 degrees Celsius": two passes
        before = answer.strip()
        answer = strip_unit_suffix(before, remark_changes_the_number)
        for suffix in _SUFFIXES:
            if answer.endswith(suffix):
                answer = answer[: -len(suffix)].rstrip()
        if answer == before:
            break
    answer = answer.strip()
    return _times_a_thousand(answer) if thousands else answer


def _times_a_thousand(number: str) -> str:
    """``34K`` -> ``34000``, ``2.5k`` -> ``2500``, ``0.25K`` -> ``0250``: the decimal point moved
    three places (string work, no parsing); anything else is returned as it is."""
    glued = _GLUED_THOUSANDS.fullmatch(number)
    if glued is None:
        return number
    sign, whole, fraction = glued.group(1), glued.group(2).replace(",", ""), glued.group(3) or ""
    fraction = fraction.ljust(3, "0")
    rest = fraction[3:]
    return f"{sign}{whole}{fraction[:3]}" + (f".{rest}" if rest else "")


# A remark that opens with an alternative and a number offers another answer: "(or 35)", "(and
# $35$)", "(but 35 if n is odd)"; after a word that offers it in place of the answer, also math or
# a named value: "(or \frac{69}{2})", "(or x = 35)", "(or $n=35$)", "(or equivalently x_1 = 35)".
# So do "(could also be 35)", "(might be 35)", "(as well as 35)", "(actually 35)", "(wait, 35)", "(if
# wrong, 35)", "(and possibly 35)". "(for both n = 3 and 4)", "(and n = 3)", "(either n = 3 or n = 4)"
# and "(but \pi is irrational)" state conditions or reasons.
_ANOTHER_ANSWER = re.compile(
    r"\s*(?:(?:or|otherwise|else|alternatively)(?![A-Za-z])(?:[\s,]{1,3}(?:" + OR_ADVERBS + r")"
    r"(?![A-Za-z]))?[\s$({]{1,8}(?:" + NAME + r"[\s$]{0,4}=[\s$({]{0,8})?"
    r"|(?:either|possibly|perhaps|maybe|probably|likely|actually|wait|plus"
    r"|(?:could|might|may|can)(?:\s{1,3}also)?\s{1,3}be|as\s{1,3}well\s{1,3}as|if\s{1,3}(?:not|wrong))"
    r"[\s,$({]{1,8})[+\-\u2212]?(?:[0-9]|\\(?:d?frac|sqrt|pi)(?![A-Za-z]))"
    r"|\s*(?:and|but|though|although|also)(?:[\s,]{1,3}(?:" + OR_ADVERBS + r")(?![A-Za-z]))?"
    r"[\s$({]{1,8}[+\-\u2212]?[0-9]", re.IGNORECASE)
# ... and one that opens with a product multiplies it: "(x 1000)", "(times 10)", "(\times 10^3)".
_MULTIPLIES_IT = re.compile(r"\s*(?:x|times|multiplied by|\\times|\\cdot|\*)[\s$({]{0,8}[+\-\u2212]?[0-9]", re.IGNORECASE)
_OPENS_WITH_A_NUMBER = re.compile(r"\s{0,3}[$]?\s{0,3}[+\-\u2212]?[0-9]")
# ... or that restates it as another number: "(which is 35)", "(i.e. 0.6)", "(that is, 35)", "(equivalently 35)", "(= 35)".
_RESTATED_AS = re.compile(r"\s*(?:(?:" + RESTATING_WORDS + r")(?![A-Za-z])|=)"
                          r"[\s,$({]{0,8}[+\-\u2212]?[0-9]", re.IGNORECASE)
# ... or that is only a bound, as "$34$ or more" is: "(or more)", "(at least)", or a bound by another value: "(at most
# 35)", "(no more than $35$)" ("35 (at most 35)" only restates it, as above); not "(at most 2 per row)", nor "(up to
# 1000)", the range a count runs over ("168 primes (up to 1000)").
_BOUNDS_IT = re.compile(r"\s*(?:or\s+(?:more|less|fewer|greater|higher|lower|above|below|over|under)"
                        r"|(?:at\s+(?:least|most)|no\s+(?:more|less|fewer)\s+than)"
                        r"(?:\s{1,3}\$?\s{0,2}[+\-\u2212]?[0-9][0-9.,]{0,30}\s{0,2}\$?)?)[\s.!]*$",
                        re.IGNORECASE)
# ... or that is nothing but an estimate's word: the answer is an estimate ("(approximately)", "(roughly)",
# "(approx.)", "(estimate)"), as in ", roughly" without brackets ("(rounded)" says how a decimal ground truth was
# written, "(upper bound)" what a question may ask for: both left).
_ESTIMATE_REMARK = re.compile(r"\s{0,3}(?:" + APPROXIMATION_WORDS.format(extra="|ca|est|estimated|estimate", signs="~")
                              + r")\s{0,3}", re.IGNORECASE)
# ... or that hedges before another number: "(alt. 35)", "(not sure, could be 35)", "(I also got 35)", "(hmm, 35)".
_UNSURE = re.compile(r"\s*(?:alt\.?|alternative(?:ly)?|hmm+|not\s{1,3}sure|unsure|(?:i\s{1,3})?(?:also|first)\s{1,3}got)"
                     r"(?![A-Za-z])[^0-9]{0,40}[0-9]", re.IGNORECASE)
# ... or that ends in a value after a colon: "(n odd: 35)", "(if n = 2: 35)", "(units: 10^3)".
_ENDS_WITH_A_VALUE = re.compile(r":\s{0,3}\$?\s{0,3}[+\-\u2212]?[0-9][0-9.,^{} ]{0,40}\$?\s{0,3}$")
# A remark that opens with a scale word changes the number: "(in thousands)", "(millions)"; "(one
# thousand)" spells it out.
_OPENING_WORD = re.compile(r"\s*(?:in\s+)?([A-Za-z]+)")
# ... and one that opens with a sign word negates it: "34 (negative)", "34 (below zero)"; not "(below 50)",
# and not a negative answer, which it describes: "-5 (negative)".
_SIGN_WORDS = frozenset(("negative", "minus", "neg", "below"))
_BELOW_ZERO = re.compile(r"\s*below(?:\s+(?:zero|0|sea\s+level|freezing))?\s*$", re.IGNORECASE)
_SCALE_LETTERS = frozenset(("k", "m", "b"))  # 34K, 3M, 2B
# ... but a lower-case m set off from its number by a space is metres (the unit rules read "34 m" so)
_METRES_AFTER_A_NUMBER = re.compile(r"([0-9]) {1,3}m(?![A-Za-z])")
_OR_WORD = re.compile(r"(?<![A-Za-z])(?:or|either)(?![A-Za-z])", re.IGNORECASE)
# ... an "or" naming a transform of the answer, another value: "34 (or its negative)", "(or the reciprocal)"
_OR_TRANSFORM = re.compile(r"(?<![A-Za-z])or\s{1,3}(?:its|the)\s{1,3}(?:negative|opposite|negation|reciprocal|inverse"
                           r"|square|cube|double|half)(?![A-Za-z])", re.IGNORECASE)
# ... but not in a remark that states a condition, whose "or" is the condition's: "(since n is 1 or 3)", "(for n = 1
# or 3)", nor before a variable's value, a condition too: "(either n = 3 or n = 4)"
_NAMED_BEFORE = re.compile(r"[A-Za-z]\s{0,3}=\s{0,3}$")
# ... or a number in words after it: "34 (or thirty-five)", "3 (or four)", "34 (or one more)"
_NUMBER_WORD = re.compile(r"(?<![A-Za-z])(?:" + NUMBER_WORDS + r")(?![A-Za-z])", re.IGNORECASE)
_CONDITION_OPENING = re.compile(r"\s*(?:" + CONDITION_WORDS + r"|as|given|whether|unless)(?![A-Za-z])",
                                re.IGNORECASE)


def remark_changes_the_number(remark: str, answer: str = "") -> bool:
    """A remark after an answer that opens with a second one (``or 35``, ``and 35``, ``possibly 35``,
    ``but 35 if n is odd``, ``35 if n is odd``, ``n odd: 35``) or restates it as another number
    (``which is 35``, ``i.e. 35``, ``equivalently 35``, ``= 35``; an irrational answer's rounding, ``\\sqrt2 (= 1.414)``, is
    its approximation: :func:`~dapo.rewards.loose_roundings.rounds_loosely`), with a product (``x 1000``,
    ``times 10``), with a word that scales it (``in thousands``) or gives it a sign (``negative``), or
    that makes it a bound (``or more``, ``at least``). Given the ``answer`` it follows, a remark whose
    every number is that answer's value restates it (``34 (34 ways)``, ``\\frac12 (or 0.5)``), and a
    sign word describes a negative answer (``-5 (negative)``).

    Approximations (``about``, ``~``, ``\\approx``, also after ``or``, ``i.e.``): a number that is not the
    answer's value (:func:`~dapo.rewards.approximations.real_value` computes a closed form's) rounded to the
    places it gives (a glued K counts thousands), or that a scale word follows, hedges with another value
    (``34 (about 34K)``, ``e^2 (about 9)``); so does a closed form that is not the value (``\\sqrt2 (\\approx
    \\frac{1}{1})``, ``2 (or \\sqrt{2})``: :mod:`~dapo.rewards.alternatives`). An answer not computed (``\\ln
    x``) keeps them remarks. Counts (:mod:`~dapo.rewards.counts`): of the derivation's steps, a remark (``34
    (3 cases)``); of the answer's items, a remark when it is their number or the answer (``34 (1 solution)``,
    ``2 (two solutions)``); any other offers another answer (``34 (2 solutions)``, ``34 (35 ways)``)."""
    if remark_disowns(remark):
        return True  # "34 (wrong)": the answer called wrong
    if (rejected := rejected_value(remark)) is not None:  # "34 (35 is wrong)": 35 ruled out, 34 stated
        return bool(answer) and restates(answer, rejected)
    opening = _opening_word(remark)
    if opening in _SIGN_WORDS and (opening != "below" or _BELOW_ZERO.match(remark)):
        return not _is_negative(answer)
    constant = constant_remark_changes(answer, remark)  # "\\infty (that is, 35)": no value to compare with
    if constant is not None:
        return constant
    converted = other_units_change(remark, answer) if answer else None
    if converted is not None:  # "5 cm (i.e. 50 mm)": the same quantity; "5 cm (i.e. 5 mm)" another
        return converted
    remark = without_unit_power(remark)  # "34 (i.e. 34 cm^2)": 34 restated, not squared
    value = value_of(answer) if answer else None
    form = computed_form(remark, answer, value)  # computed, so it decides: "2 (or \\sqrt{2})" is another
    if form is not None or (answer and (only_restates(answer, remark) or restates_value(remark, answer, value))):
        return form is False
    approximately = APPROXIMATELY.match(remark)
    if approximately is not None and (not (value is None or is_rounding_of(approximately.group(1), value))
                                      or starts_with_scale_word(remark[approximately.end() :])):
        return True  # "34 (about 35)", "34 (about 34K)", "\\frac13 (about 0.33 thousand)": two values
    if answer and (count := stated_count(remark)) is not None:
        return count not in (item_count([answer]), value)  # "34 (1 solution)", "2 (two solutions)": remarks
    if counts_the_derivation(remark):
        return False  # "34 (3 cases)": how it was found
    if _offers_by_or(remark, answer):
        return True  # "34 (the first or 35)", "34 (or its negative)": another value after its "or"
    if _hedges_another_value(remark, answer):
        return True  # "34 (but it might be 35)", "34 (if n is even; 35 if n is odd)"
    return (_ANOTHER_ANSWER.match(remark) is not None or _OPENS_WITH_A_NUMBER.match(remark) is not None
            or _MULTIPLIES_IT.match(remark) is not None or _ENDS_WITH_A_VALUE.search(remark) is not None
            or _RESTATED_AS.match(remark) is not None
            or _BOUNDS_IT.match(remark) is not None or starts_with_scale_word(remark)
            or _ESTIMATE_REMARK.fullmatch(remark) is not None or _UNSURE.match(remark) is not None)


def _offers_by_or(remark: str, answer: str) -> bool:
    """Whether an "or" inside ``remark`` offers another value: a number after it that does not restate
    ``answer`` (``the first or 35``; ``the first or 34`` restates it), unless the remark states a
    condition (``since n is 1 or 3``, ``either n = 3 or n = 4``) or the number is in a closed form
    (:func:`~dapo.rewards.alternatives.computed_form` decides those); a number in words that is not the
    answer's value (``or four`` after 3, ``or one more``; ``or thirty-four`` restates 34); or a transform of
    the answer (``or its negative``)."""
    if _OR_TRANSFORM.search(remark[:400]):
        return True
    if _CONDITION_OPENING.match(remark):
        return False
    for word in _OR_WORD.finditer(remark[:400]):
        after = remark[word.end() : 400]
        number = NUMBER_TOKEN.search(after)
        spelled = _NUMBER_WORD.search(after)
        if spelled is not None and (number is None or spelled.start() < number.start()):
            if not spells_the_value(spelled.group(0), answer):  # "(or thirty-four)" for 34 restates it
                return True
            continue
        if number is None or _NAMED_BEFORE.search(after, 0, number.start()) or "\\" in after[: number.start()]:
            continue  # "(either n = 3 or n = 4)": a variable's values, a condition; "or \\log 100": computed_form's
        if not (answer and restates(answer, after)):  # "(the first or about 0.33)" for \frac13 restates it
            return True
    return False


def _hedges_another_value(remark: str, answer: str) -> bool:
    """Whether ``remark`` offers a value as the answer instead past its opening (:func:`offered_values`:
    ``but it might be 35``, ``my other answer is 35``, ``if n is even; 35 if n is odd``) that does not
    restate ``answer`` (any value, for an answer not given: a list's remark)."""
    return any(not (answer and restates(answer, value)) for value in offered_values(remark))


def spells_the_value(words: str, answer: str) -> bool:
    """Whether ``words``, a number in words (``thirty-four``), is the rational value ``answer`` states."""
    spelled = spelled_value(words)
    return spelled is not None and _rational_value(answer) == spelled


def only_restates(answer: str, text: str) -> bool:
    """Whether ``text`` (a remark, or what follows "or") states a number, and every number it states
    has the rational value ``answer`` states (``34 ways`` or ``answer: 34`` for 34, ``0.5`` for
    ``\\frac12``; a glued K counts thousands: ``34K`` for 34000, not 34), with no scale word (``34
    thousand``); False when ``answer`` is not rational. Digits inside a closed form are no number it
    states: :func:`~dapo.rewards.alternatives.computed_form` decides those first (``or \\sqrt{2}``)."""
    text = _METRES_AFTER_A_NUMBER.sub(r"\1", text[:400])  # "i.e. 34 m" restates 34 in metres, as "Answer: 34 m"
    numbers = NUMBER_OR_THOUSANDS.findall(text)  # "34K" is 34000, as in an approximation
    if not numbers or len(numbers) > 8:
        return False
    stated = _rational_value(answer)
    if stated is None:
        return False
    words = {word.lower() for word in re.findall(r"[A-Za-z]+", NUMBER_OR_THOUSANDS.sub(" ", text))}
    return not words & (SCALE_WORDS | _SCALE_LETTERS) and all(_rational_value(n.rstrip(",")) == stated for n in numbers)


def restates(answer: str, remark: str) -> bool:
    """Whether ``remark`` only restates ``answer``'s value: every number in it is that value
    (:func:`only_restates`: ``or 0.5`` for ``\\frac12``), it is that value in another closed form (``or
    \\frac{1}{\\sqrt2}`` for ``\\frac{\\sqrt2}{2}``, ``or \\sqrt{4}`` for 2; a computed form that is another
    value never restates it, whatever its digits: ``or \\sqrt{2}``, ``\\approx \\sqrt2`` after 2), or it is
    one approximation of the value, rounded to the places it gives (``or about 0.33``, ``\\approx 0.333`` for
    ``\\frac13``, ``or about 1.41`` for ``\\sqrt2``: a value :func:`~dapo.rewards.approximations.real_value`
    computes). A constant with no real value is restated only by itself (``or \\varnothing`` for
    ``\\emptyset``: :func:`~dapo.rewards.restatements.constant_remark_changes`), and a quantity in another unit only
    by the same quantity (``or 50 mm`` for ``5 cm``; ``or 5 mm`` is another, whatever its digits:
    :func:`~dapo.rewards.units.other_units_change`)."""
    changes = constant_remark_changes(answer, remark)  # a constant, or a quantity in another unit: decided here
    if changes is None:
        changes = other_units_change(remark, answer)
    if changes is not None:
        return not changes
    value = value_of(answer)
    form = computed_form(remark, answer, value)  # "\\approx \\sqrt2", "or \\sqrt2" after 2: another value
    if form is not None or only_restates(answer, remark) or restates_value(remark, answer, value):
        return form is not False
    approximately = APPROXIMATELY.match(remark)
    return (approximately is not None and value is not None
            and len(NUMBER_TOKEN.findall(remark[:400])) == 1
            and not starts_with_scale_word(remark[approximately.end() :])
            and is_rounding_of(approximately.group(1), value))


# A parenthesis closing an answer after a value: "\frac{1}{3} (approximately 0.33)", "1/3 (since n is odd)",
# "\pi (about 3.14)", "34 cm (that is, 35)" (after a letter: a constant, a number's unit or counted noun only, see
# without_closing_remark); or an "or" that may restate it: "\frac{1}{3}, or about 0.33", "34 cm, or about 34".
_CLOSING_PARENTHESIS = re.compile(r"(?<=[0-9}A-Za-z]) {0,3}\(([^()]{0,400})\)$")
_CLOSING_OR = re.compile(r"(?<=[0-9}A-Za-z]) {0,3},? {0,3}((?<![A-Za-z])(?:or|\\text\{ {0,3}or {0,3}\})(?![A-Za-z])[^()]{0,400})$")
_COMMAND_NAME = re.compile(r"\\[A-Za-z]+")
_TOLERANCE = re.compile(r"\s{0,3}\$?\s{0,3}(?:\\pm|\\mp|±|∓|\+/-|\+-)\s{0,3}[0-9]")
PERCENT_SIGN = re.compile(r"\s{0,3}\\?%\s{0,3}\$?\s{0,3}$")  # closing an answer: "50\\%", "$50\\%$"


def without_closing_remark(answer: str) -> str | None:
    """``answer`` without a remark that closes it, for any ground truth (the integer rules drop
    one after a number already): a parenthesis after a value (a digit, ``}``, a constant, ``\\infty``, or a
    number's known unit or counted noun, ``34 cm``, ``34 ways``: :func:`~dapo.rewards.restatements.letters_end_a_value`)
    holding words (a word of three letters or more outside LaTeX commands, and something
    else or a fourth letter: ``(mod 7)``, ``(exact)``, not ``(ab)`` or ``(abc)``, which may be a
    product), an approximation (``(\\approx 0.333)``, ``(~0.33)``), an "or" (``(or 0.5)``) or a
    restatement (``(= 0.5)``, ``34 cm (that is, 35)`` after a unit as after ``\\text{ cm}``), and no
    arithmetic (``\\frac12 (x+1)`` is a product, kept) unless it is an approximation by a closed form
    or an alternative in one that is computed (``\\sqrt2 (\\approx \\frac{1}{1})``, ``2 (or \\sqrt{4})``,
    :func:`~dapo.rewards.alternatives.computed_form`).
    None when the remark changes the answer (:func:`remark_changes_the_number`: ``\\frac13 (about
    0.5)``, ``(or 35)``, ``(= 0.6)``); one with an "or" or "either" is dropped only when it restates
    the value (:func:`restates`), else kept for the hedge rule, as is an "or" without brackets after a
    value (``\\frac13, or about 0.33`` is ``\\frac13``, as after a box; ``34 cm, or about 34`` is ``34 cm``).
    ``answer`` itself when there is none."""
    closing = _CLOSING_PARENTHESIS.search(answer[-500:])
    before = answer[: len(answer) - len(closing.group(0))] if closing is not None else ""
    if before[-1:].isalpha() and not letters_end_a_value(before):
        return answer  # "x (mod 7)": after a letter only a constant, unit or counted noun ends a value ("34 cm")
    if closing is None:
        alternative = _CLOSING_OR.search(answer[-500:])
        head = answer[: len(answer) - len(alternative.group(0))] if alternative else ""
        if head[-1:].isalpha() and not letters_end_a_value(head):
            return answer  # "x, or 34": no value before the "or"
        return head.rstrip() if alternative and restates(head, TEXT_WRAPPED.sub(r"\1", alternative.group(1))) else answer
    inside = TEXT_WRAPPED.sub(r"\1", closing.group(1))  # "(\text{about } 0.5)": its words
    head = answer[: len(answer) - len(closing.group(0))].rstrip()
    if _TOLERANCE.match(inside):
        return None  # "34 (\\pm 1)": values within a tolerance, 33 to 35 (math-verify read 1)
    if _bare_number(inside) is not None and (value := value_of(head)) is not None:
        # "\\frac34 (0.75)", "\\frac12 (50\\%)", "\\frac13 (0.333)": the value in another form or rounded,
        # not a product (math-verify's reading: 9/16); another value is a second answer ("\\frac34 (0.5)")
        return head if _restated_in_brackets(inside, head, value) else None
    form = ARITHMETIC.search(inside) and computed_form(inside, head, value_of(head)) is not None  # checked
    is_remark = (states_words(inside) or form or APPROXIMATELY.match(inside) is not None  # "(\\approx \\frac{1}{1})"
                 or _OR_WORD.search(inside) is not None or _RESTATED_AS.match(inside) is not None)
    if not is_remark or (ARITHMETIC.search(inside) and not form and not _CONDITION_OPENING.match(inside)):
        return answer  # "\\frac12 (x+1)" is a product; "\\frac12 (when n+1 is even)" a condition
    if remark_changes_the_number(inside, head):
        return None
    return head if not _OR_WORD.search(inside) or restates(head, inside) else answer


def _bare_number(text: str) -> Fraction | None:
    """The rational number ``text`` is alone (``0.75``, ``$\\frac34$``, ``75\\%`` as 75), else None."""
    return exact_rational(PERCENT_SIGN.sub("", text))


def _restated_in_brackets(number: str, answer: str, value: Fraction | Decimal) -> bool:
    """Whether ``number``, alone in brackets after ``answer`` (whose value is ``value``), restates it:
    the value in another form (``\\frac34 (0.75)``, ``0.75 (3/4)``, ``2^{10} (1024)``), a decimal that
    rounds it (``\\frac13 (0.333)``, ``\\sqrt2 (1.414)``; not ``(0.7)`` for 3/4, nor a fraction or an
    integer near it), or its percentage, exact or so rounded (``\\frac12 (50\\%)``, ``\\frac13 (33.3\\%)``;
    not ``\\frac14 (0.25\\%)``; ``25 (25\\%)`` only names the unit)."""
    digits = PERCENT_SIGN.sub("", number).strip(" $")
    if PERCENT_SIGN.search(number) is None:
        return restates(answer, number) or exact_rational(digits) == value or ("." in digits and _rounds(value, digits))
    if digits == answer.strip(" $"):
        return True
    stated = exact_rational(digits)
    return stated is not None and (stated == 100 * value or ("." in digits and _rounds(100 * value, digits)))


def _rounds(value: Fraction | Decimal, decimal: str) -> bool:
    """Whether ``decimal`` is ``value`` rounded to the places it gives (a computed value: within its margin)."""
    return is_rounding_of(decimal, value) if isinstance(value, Decimal) else is_rounded(decimal, value)


def states_words(remark: str) -> bool:
    """Whether ``remark`` is in words (see :func:`without_closing_remark`), not letters of a product."""
    tokens = _COMMAND_NAME.sub(" ", remark).split()
    longest = max((len(word) for word in re.findall(r"[A-Za-z]+", " ".join(tokens))), default=0)
    return longest >= 4 or (longest == 3 and len(tokens) > 1)


def value_of(answer: str) -> Fraction | Decimal | None:
    """``answer``'s value: exact when rational, else computed for a closed form (``\\sqrt{2}``,
    ``x = 2\\pi``, ``10\\sqrt{2} \\text{ m}``: :func:`~dapo.rewards.approximations.real_value`), else None.

    None at once past :data:`_PASSES` remarks in wrappers (``2 \\text{(a)} \\text{(a)} ...``: a ``\\text``
    would be left; checking each against the value before it took exponential time). Cached up to
    :data:`CACHED_CHARS` characters (not whole boxes of a rambling response)."""
    return _cached_value_of(answer) if len(answer) <= CACHED_CHARS else _value_of(answer)


def _value_of(answer: str) -> Fraction | Decimal | None:
    if sum(answer.count(f"{wrapper}(") for wrapper in UNIT_WRAPPERS) > _PASSES:
        return None
    value = _rational_value(answer)
    return value if value is not None else real_value(_strip_number_decorations(answer))


_cached_value_of = functools.lru_cache(maxsize=4096)(_value_of)


def _rational_value(text: str) -> Fraction | None:
    integer = canonical_integer(text, thousands=True)  # an answer's: "34K" is 34000
    if integer is not None:
        return Fraction(int(integer)) if len(integer) <= 50 else None
    return exact_rational(text)


def _is_negative(answer: str) -> bool:
    answer = to_ascii_digits(answer.strip())
    prefix = VARIABLE_PREFIX.match(answer)
    return answer[prefix.end() if prefix else 0 :].startswith("-")


def starts_with_scale_word(remark: str) -> bool:
    """``in thousands``, ``millions of dollars``: a remark after a number that scales it."""
    return _opening_word(remark) in SCALE_WORDS


def _opening_word(remark: str) -> str:
    opening = _OPENING_WORD.match(remark)
    return opening.group(1).lower() if opening is not None else ""


def changes_the_number(answer: str) -> bool:
    """``34 (in thousands)``, ``34 (and 35)``: a parenthesis after a number whose words change it
    or add another answer (math-verify would read both as 34), in \\text{} too (``34\\text{ (or 35)}``)."""
    for text in (answer, TEXT_WRAPPED.sub(r"\1", answer).rstrip()):
        if (remark := TRAILING_REMARK.search(text)) is not None:
            return remark_changes_the_number(remark.group(1), text[: remark.start()])
    return False


def ends_in_a_word_that_is_not_a_unit(answer: str) -> bool:
    """``34 thousand``, ``2 \\text{ pi}``, ``$2\\mathrm{i}$``: a number, then a word that changes it."""
    match = _ENDS_IN_WORD.search(answer)
    return match is not None and not is_unit(match.group(1))


def ends_in_a_scale_word(answer: str) -> bool:
    """``34 thousand``, ``\\frac{1}{2} \\text{ million}``: a number, then a word that scales it."""
    match = _ENDS_IN_WORD.search(answer)
    return match is not None and match.group(1).lower() in SCALE_WORDS


def canonical_integer(answer: str, thousands: bool = False) -> str | None:
    """The integer ``answer`` states, as a canonical digit string ("-34", "0"), else None. With
    ``thousands`` (an answer, not a ground truth, where ``2k`` may be an expression in k), a K
    glued to the number is a thousand: ``34K`` and ``2.5k`` state 34000 and 2500."""
    text = _strip_number_decorations(answer, thousands)
    if not (_PLAIN_INTEGER.fullmatch(text) or _GROUPED_INTEGER.fullmatch(text)):
        return None
    negative = text.startswith("-")
    digits = text.lstrip("+-").split(".", 1)[0].replace(",", "").replace(" ", "")
    digits = digits.lstrip("0") or "0"
    return "-" + digits if negative and digits != "0" else digits


def is_grouped_number(answer: str) -> bool:
    """An integer or decimal written with thousands separators (``1,234``, ``1,\\!234.56``,
    ``\\$1,234.5``): one number, never the list ``1, 234.56``."""
    text = _strip_number_decorations(answer)  # as canonical_integer reads it
    return any(form.fullmatch(text) for form in (_PLAIN_INTEGER, _GROUPED_INTEGER, _GROUPED_DECIMAL))


def is_plain_number(answer: str, thousands: bool = False) -> bool:
    """True for a decimal or scientific literal (``34.5``, ``3.4e1``, with ``thousands`` also
    ``34.5K``): decidable without parsing."""
    return plain_number(answer, thousands) is not None


def plain_number(answer: str, thousands: bool = False) -> str | None:
    """The decimal or scientific literal ``answer`` states without its decorations, or None
    (``thousands``: as in :func:`canonical_integer`); a decimal with thousands separators
    (``1,000.5``, ``1\\,000.5``) without them."""
    text = _strip_number_decorations(answer, thousands)
    if _GROUPED_DECIMAL.fullmatch(text):
        return text.replace(",", "").replace(" ", "")
    return text if _PLAIN_NUMBER.fullmatch(text) else None


def compact(answer: str) -> str:
    """``answer`` without whitespace, but for one space where it parts two digits other than a
    thousands group's: ``3 1/2`` (three and a half) is not ``31/2``; ``1 000/3`` is ``1000/3``."""
    answer = _SPACED_THOUSANDS.sub(lambda number: "".join(number.group().split()), answer)  # "1 000/3"
    return _WHITESPACE.sub(lambda space: " " if space.group(1) else "", answer)
