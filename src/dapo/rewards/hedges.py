"""Hedges around a list answer, and approximations written without brackets.

Rules (each a false positive before: a hedge or a second value was accepted):

- **A list answer is hedged as a single one is.** Text around ``\\boxed{34, 5}`` or ``$34, 5$``
  that offers another answer or continues its math (``(or 35)``, ``^2``, ``thousand``, ``or 35``)
  makes it wrong for a list ground truth too (the extractors flag it, :attr:`Extracted.qualified
  <dapo.rewards.answer_text.Extracted>`). A remark after a list (:func:`list_remark_changes`) is
  read as after one answer, with the list's values in place of the answer's: a count of the items
  with a counting noun is a remark when it is their number (``\\boxed{1, 2} (2 solutions)``; ``(3
  solutions)`` offers another), so is a remark in words (``(since n is odd)``) and one whose numbers
  restate the items (``(i.e. 5 and 34)``, ``(\\approx 0.33, 0.5)`` for ``\\frac13, \\frac12``; a glued
  K counts thousands: ``(\\approx 34K, 5K)`` for ``34000, 5000``, not ``34, 5``); an "or" or an
  approximation with another number (``(or 35)``, ``(about 35)``) offers another.
- **A restatement without brackets in the answer's own text is judged as in brackets**
  (:func:`restatement_changes`): after "i.e.", "ie", "that is" or "equivalently" (a comma or semicolon
  before it or none, also in ``\\text{, i.e. }``), a computed form with another value makes the answer
  wrong (``Answer: 34, i.e. \\frac{2}{3}``, ``2; i.e. \\sqrt{2}``, ``x = 2, i.e. \\sqrt{2}``, ``34 i.e.
  35``; before, math-verify read one of the two values), one with its value leaves the head (``2, i.e.
  \\sqrt{4}``, ``\\frac12, i.e. 0.5``); a number follows the number rules (``\\sqrt2, i.e. 1.414`` is its
  rounding); a form not computed (``34, i.e. 2x``) or words are left as before. A number's known unit
  ends its value as ``\\text{ cm}`` does (``34 cm, that is, 35`` is wrong; before, math-verify read 35), and
  so do its counted noun and a LaTeX constant (``34 ways, i.e. 35``, ``\\infty, i.e. 35``, ``\\infty \\approx 35``
  are wrong; a constant with no real value is restated only by itself:
  :mod:`~dapo.rewards.restatements`).
- **An approximation without brackets is a remark as in brackets** (:func:`bare_remark_changes`,
  :func:`without_bare_remark`): ``\\boxed{\\frac13} \\approx 0.33``, ``\\sqrt2 \\approx 1.414``,
  ``\\frac13, i.e. about 0.33`` restate the answer (its value rounded to the places given),
  ``\\frac13 \\approx 0.5``, ``\\sqrt2 \\approx 7`` and ``\\boxed{\\frac13}, i.e. about 0.5`` offer
  another value (wrong), and so does a restatement as another number (``\\boxed{34} = 35``,
  ``\\boxed{34}, which is 35``). ``34 \\approx 34`` states 34; ``34 \\approx 35`` is wrong. An answer
  whose value is not computed (a name, ``x \\approx 34``, which math-verify's suite counts right;
  ``a^2 \\approx 7.39``) or a named rational (``x = 1/3 \\approx 1.3``, right in that suite) is left
  as it is; a named closed form is not (``x = \\sqrt2 \\approx 7`` is wrong). A value may end in Euler's
  ``e`` or a parenthesis as in a digit (before, such an approximation was never read: ``x = e \\approx
  3.5`` and ``\\ln(2) \\approx 7`` were right).

String work on at most the last 500 characters, with bounded quantifiers, each head's remark read
once (:func:`without_bare_remark` is cached): at most quadratic in the markers, safe in the parent process.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from decimal import Decimal
from fractions import Fraction

from dapo.rewards.alternatives import (
    NUMBER_OR_THOUSANDS,
    NUMBER_TOKEN,
    OPENING,
    alternative_is_the_value,
)
from dapo.rewards.answer_lists import answer_items
from dapo.rewards.approximations import (
    APPROXIMATION_OPENING,
    is_rounding_of,
    real_value,
    states_the_value,
)
from dapo.rewards.counts import OR, item_count, stated_count
from dapo.rewards.number_forms import (
    TEXT_WRAPPED,
    VARIABLE_PREFIX,
    only_restates,
    remark_changes_the_number,
    restates,
    states_words,
    value_of,
)
from dapo.rewards.remark_words import BARE_APPROXIMATION_WORDS, THAT_IS
from dapo.rewards.restatements import LATEX_CONSTANT, constant_remark_changes, letters_end_a_value
from dapo.rewards.unit_suffix import ARITHMETIC, SCALE_WORDS
from dapo.rewards.units import without_unit_power

_MAX_TAIL = 500  # how much of an answer's end is read for a closing remark
_MAX_NUMBERS = 16  # numbers a remark on a list may restate
# Markers an answer's own text is read for (without_bare_remark): every head before one is read for its
# own, so a chain costs the square of its length (240 links after "a^2": 0.16 s an answer, 4.6 s a list of 40).
_MAX_MARKERS = 16
# What opens a remark written without brackets after a value: an approximation ("\approx 0.33", ", i.e.
# about 0.33", "≈ 0.33") or a restatement as a number ("= 0.5", ", i.e. 0.5", ", which is 0.5").
# ... of which an answer's own text is read for approximations (_APPROXIMATION_MARKER) and for restatements
# after "i.e.", "that is", "equivalently" (_RESTATEMENT_MARKER): "34, which is 35" and "\\frac12 =
# \\frac{10}{9}" on the Answer line keep their rules (the value after the last copula; math-verify's right side).
_APPROXIMATION_MARKER = re.compile(
    r"(?:(?:" + THAT_IS + r"|which\s+is|so)(?![A-Za-z])[\s,]{0,4})?"
    r"(?:" + BARE_APPROXIMATION_WORDS + ")", re.IGNORECASE)
_BARE_MARKER = re.compile(
    r"(?:" + _APPROXIMATION_MARKER.pattern + ")"
    r"|(?:" + THAT_IS + r"|which\s+is|which\s+equals|equals)(?![A-Za-z])[\s,$]{0,4}[+\-\u2212]?[0-9]"
    r"|=(?!=)", re.IGNORECASE)
# ... and a restatement by "i.e.", "that is" or "equivalently" (:func:`restatement_changes`; not "=" or "which
# is": see above), also in a text wrapper ("34 \\text{, i.e. } \\frac{2}{3}").
_RESTATEMENT_MARKER = re.compile(r"(?:" + THAT_IS + r"|equivalently)(?![A-Za-z])", re.IGNORECASE)
_OWN_MARKER = re.compile(_APPROXIMATION_MARKER.pattern + "|" + _RESTATEMENT_MARKER.pattern, re.IGNORECASE)
_WRAPPED_RESTATEMENT = re.compile(r"\\(?:text|textrm|mbox|mathrm|textnormal)\{([\s,;]{0,4}(?:" + THAT_IS
                                  + r"|equivalently)(?![A-Za-z])[\s,]{0,4})\}", re.IGNORECASE)
# Where such a remark may start in an answer: after a value's end (a digit, a brace, \pi), past a comma.
_ALL_MARKER_STARTS = frozenset("=≈∼\\iatwsrncle")  # ... of _BARE_MARKER
# A parenthesis closing a remark: "\\pi \\approx 3.14 (3 cases)"; not a function's argument, glued to its
# name ("= \\exp(1)", "= f(2)", "\\ln(2)").
_CLOSING_PARENTHESIS = re.compile(r"(?<![A-Za-z])\(([^()]{0,400})\)$")
_MARKER_STARTS = frozenset("≈∼\\iatwsrnce")  # the first character of each marker of _OWN_MARKER, lower-cased
# A value's end: a digit, a brace, a constant (\\pi, \\infty, Euler's e: "x = e \\approx 2.72") or a parenthesis
# ("\\ln(2)"); a number's unit or counted noun too (letters_end_a_value).
_VALUE_END = re.compile(r"(?:[0-9})]|" + LATEX_CONSTANT + r") {0,3}[,;]? {0,3}$")


def list_remark_changes(remark: str, items: list[str]) -> bool:
    """Whether a remark after a list answer (``items``) offers another answer or changes it (module
    rules): a count of the items with a counting noun (``2 solutions``) changes it unless it is
    their number; a remark whose numbers restate the items is none; an approximation or an "or"
    with another number is one; otherwise as after one answer (:func:`remark_changes_the_number`,
    whose answer is left unknown: ``since n is odd`` and ``3 cases`` are remarks, ``35 ways``,
    ``= 35``, ``in thousands`` change it)."""
    remark = TEXT_WRAPPED.sub(r"\1", remark[:_MAX_TAIL])
    count = stated_count(remark)
    if count is not None:
        return count != item_count(items)
    if restates_list(items, remark):
        return False
    if NUMBER_TOKEN.search(remark) and (APPROXIMATION_OPENING.match(remark) or OR.search(remark)):
        return True  # "(about 35)", "(or 35)", "(2 solutions or 3)"
    return remark_changes_the_number(remark)


def restates_list(items: list[str], remark: str) -> bool:
    """Whether every number in ``remark`` is the value of one of ``items`` (rounded to the places it
    gives, after an approximation), every item's value is among them, and no scale word follows:
    ``or 5, 34`` and ``i.e. 34 and 5`` for ``34, 5``; ``\\approx 0.33, 0.5`` for ``\\frac13, \\frac12``."""
    numbers = [number.rstrip(",") for number in NUMBER_OR_THOUSANDS.findall(remark[:_MAX_TAIL])]
    if not numbers or len(numbers) > _MAX_NUMBERS or len(items) > _MAX_NUMBERS:
        return False
    if {word.lower() for word in re.findall(r"[A-Za-z]+", remark[:_MAX_TAIL])} & SCALE_WORDS:
        return False
    values = [value_of(item) for item in items]
    if any(value is None for value in values) or _names_another_value(remark, items, values):
        return False
    approximate = APPROXIMATION_OPENING.match(remark) is not None
    covered: set[int] = set()
    for number in numbers:
        stated = value_of(number)
        found = [index for index, value in enumerate(values) if value is not None and (
            (stated is not None and Fraction(stated) == Fraction(value))
            or (approximate and is_rounding_of(number, value)))]
        if not found:
            return False
        covered.update(found)
    return len(covered) == len(items)


def _names_another_value(remark: str, items: list[str], values: list[Fraction | Decimal | None]) -> bool:
    """Whether a part of ``remark`` (after an "or", "i.e.", "=") is a closed form, not a plain numeral,
    whose computed value is none of the items' ``values``: ``or 1, \\sqrt{2}`` for ``1, 2`` (the 2 inside
    ``\\sqrt{2}`` restates nothing, :mod:`~dapo.rewards.alternatives`). A form not computed is left."""
    opening = OPENING.match(remark[:_MAX_TAIL])
    parts = answer_items(remark[opening.end() if opening else 0 : _MAX_TAIL])[:_MAX_NUMBERS]
    units = " ".join(items)[:_MAX_TAIL]  # "50\\%, 25\\%": a form may restate them in other units
    return any(not NUMBER_OR_THOUSANDS.fullmatch(part.strip()) and all(
        alternative_is_the_value(f"or {part}", units, value) is False for value in values) for part in parts)


def list_tail_changes(items: list[str], tail: str) -> bool:
    """Whether ``tail``, text after a list answer without brackets, approximates it or restates it as
    other numbers (``\\boxed{34, 5} \\approx 35``, ``= 35``): the items' values must all be there."""
    tail = tail[:_MAX_TAIL]
    return _BARE_MARKER.match(tail) is not None and not restates_list(items, tail)


def bare_remark_changes(answer: str, tail: str) -> bool | None:
    """For ``tail``, the text right after ``answer`` (a box's content, a ``$...$`` segment) with its
    leading blank space and commas dropped: True when it is an approximation or a restatement
    without brackets that offers another value (``\\approx 0.5`` or ``i.e. about 0.5`` after
    ``\\frac13``, ``= 35`` or ``which is 35`` after ``34``), False when it restates ``answer``
    (:func:`~dapo.rewards.number_forms.restates`, the rule of a bracketed remark: ``\\approx 0.33``,
    ``= 0.5`` after ``\\frac12``, ``= 1.414`` after ``\\sqrt2``, ``= 2\\sqrt2`` after ``\\sqrt8``). Each
    link of a chain is checked against the answer's value (``\\sqrt2 \\approx 1.414 \\approx 1.41``), and a
    closing parenthesis as a bracketed remark (``\\pi \\approx 3.14 (3 cases)``). An approximation must
    be that rounding (``\\pi \\approx \\frac{22}{7}`` is another value); an ``=`` is checked only when what
    follows it has a value computed here (``= 5!`` is left). None when ``tail`` is no such remark or
    ``answer`` has no computed value (``a^2 \\approx 7.39``, ``x = 35``): the caller's other rules decide."""
    tail = TEXT_WRAPPED.sub(r"\1", tail[:_MAX_TAIL]).rstrip(" .")
    if _BARE_MARKER.match(tail) is None:
        return None
    own = without_bare_remark(answer)  # "\\boxed{34 \\approx 34} \\approx 7": the remark is on 34
    value = value_of(own) if own is not None else None
    if own is None:
        return True
    if value is None:  # "\\infty \\approx 35": a constant with no real value is restated only by itself
        return constant_remark_changes(own, tail)
    closing = _CLOSING_PARENTHESIS.search(tail)
    if closing is not None:  # "\\pi \\approx 3.14 (3 cases)": read as after the answer
        if remark_changes_the_number(closing.group(1), own):
            return True
        tail = tail[: closing.start()].rstrip(" ,")
    starts = [at for at in _markers(tail, _BARE_MARKER, _ALL_MARKER_STARTS) if at > 0]
    for piece in (tail[start:end].rstrip(" ,") for start, end in zip([0, *starts], [*starts, len(tail)])):
        if restates(own, piece) or states_the_value(piece, value):  # "\\approx 34K" is 34000
            continue
        rest = piece[1:].strip().rstrip(".$ ")
        if piece.startswith("=") and value_of(rest) is None and real_value(rest) is None:
            return None  # "= 5!": not checked here
        return True
    return False


def _markers(text: str, pattern: re.Pattern[str], starts: frozenset[str]) -> Iterator[int]:
    """Where ``pattern`` (a marker) matches ``text`` outside brackets, right after a value (a digit, a brace,
    a closing parenthesis, a constant, ``\\pi``, ``\\infty`` or a lone ``e``, or a number's known unit or counted
    noun, ``34 cm``, ``34 ways``, as ``34 \\text{ cm}`` is one, then blank space or a comma), not inside a word:
    ``\\approx`` in ``\\sqrt2 \\approx 7``, not in ``x \\approx 34`` or ``\\sqrt``. One bounded match per
    character: linear."""
    depth = 0
    for at, char in enumerate(text[:_MAX_TAIL]):
        depth += char in "([{"
        depth -= char in ")]}"
        if depth != 0 or char.lower() not in starts or (char.isalpha() and at and text[at - 1].isalpha()):
            continue
        if pattern.match(text, at) is not None and (_VALUE_END.search(text, max(0, at - 12), at) is not None
                                                    or letters_end_a_value(text[:at])):
            yield at


def restatement_changes(answer: str, remark: str) -> bool | None:
    """For ``remark`` (``i.e. \\frac{2}{3}``, ``that is, 35``, ``equivalently \\sqrt{4}``) written without
    brackets after ``answer`` in the answer's own text: judged as in brackets (``34 (i.e. \\frac{2}{3})``).
    A form whose value is computed decides (:func:`~dapo.rewards.alternatives.alternative_is_the_value`):
    True (another value) for ``\\sqrt{2}`` or ``\\frac{69}{2}`` after 2 or 34, False (it restates the
    answer) for ``\\sqrt{4}`` after 2, ``0.5`` after ``\\frac12`` or ``x = \\frac12`` (a decimal rounding a
    fraction to six places or more is its value, as between two answers: ``0.666667`` after
    ``\\frac23``); a number the form rule leaves (after an irrational answer), or one with a unit or words
    and no arithmetic, follows the number rules (:func:`remark_changes_the_number`: ``i.e. 1.414`` after
    ``\\sqrt2`` is its rounding, as ``(= 1.414)`` is; ``that is, 2 cm`` after 34 another number; ``that is,
    34 cm`` and ``i.e. 3 cases`` remarks). A named value restates the answer when it is its value (``that is, x = 34``).
    None, left to the Answer line's rules as before, when ``answer`` has no computed value or the remark
    is none of these (``i.e. 2x``, ``i.e. n = 3``, words, a form after an answer in degrees: ``30^\\circ,
    i.e. \\frac{\\pi}{6}``); True when ``answer`` itself offers two values."""
    own = without_bare_remark(answer)  # "34, i.e. 34, i.e. 35": the second remark is on 34
    if own is None:
        return True
    remark = without_unit_power(remark)  # "34, that is, 34 cm^2": 34 restated, not squared
    name = VARIABLE_PREFIX.match(own)
    own = own[name.end() :] if name is not None else own  # "x = \\frac12": the rational 1/2
    value = value_of(own)
    opening = OPENING.match(remark[:_MAX_TAIL])
    rest = remark[opening.end() : _MAX_TAIL].strip().rstrip(".$ ") if opening is not None else ""
    if value is None:  # "\\infty, that is, 35": a constant with no real value is restated only by itself
        return constant_remark_changes(own, remark)
    if not rest:
        return None
    form = alternative_is_the_value(remark, own, value)  # "\\frac23, i.e. 0.666667", "34, i.e. 34.0": the value
    if form is not None:
        return not form
    if VARIABLE_PREFIX.match(rest) is not None:  # "i.e. n = 3" may be a condition
        return False if only_restates(own, rest) else None
    number = NUMBER_TOKEN.match(rest) is not None and ARITHMETIC.search(rest) is None  # "35", "2 cm", "3 cases"
    return remark_changes_the_number(remark, own) if number and value_of(rest) is not None else None


def without_bare_remark(answer: str) -> str | None:
    """``answer`` without an approximation or a restatement (after "i.e.", "ie", "that is",
    "equivalently") written after its value without brackets (:func:`bare_remark_changes`,
    :func:`restatement_changes`): ``\\sqrt2 \\approx 1.414`` -> ``\\sqrt2``, ``34 \\approx 34`` ->
    ``34``, ``\\frac13, i.e. about 0.33`` -> ``\\frac13``, ``2, i.e. \\sqrt{4}`` -> ``2``; None when it
    offers another value (``\\sqrt2 \\approx 7``, ``\\frac13, i.e. about 0.5``, ``34, i.e. \\frac{2}{3}``,
    ``x = 2; i.e. \\sqrt{2}``, ``34 \\text{, i.e. } 35``). The remark starts at the first such
    marker after a value (a digit, a brace, ``)``, ``\\pi`` or Euler's ``e``, then a comma or semicolon or
    none: ``x = e \\approx 3.5`` is wrong, ``\\ln(2) \\approx 0.69`` right) outside brackets. ``answer``
    itself when there is no such remark, its head has no computed value (``a^2 \\approx 7.39``; a later
    marker is still read), the restatement is not computed (``34, i.e. 2x``) or, for an approximation, the
    head is a name (``x \\approx 34``) or a named rational (``x = 1/3 \\approx 1.3``): both right in
    math-verify's own suite, left to it. A named closed form is checked as a bare one (``x = \\sqrt2
    \\approx 7`` is wrong, as ``\\sqrt2 \\approx 7`` is: the suite has no such row). An ``=`` or
    ``which is 35`` in the answer's own text keeps the Answer line's rules (``\\frac12 = \\frac{10}{9}``
    is read by math-verify; so is ``10 which is 1,000.99``, which it parses as the pair of ``10 w h i c h
    i s 1`` and ``0.99``: wrong for 10 and for 1000.99; with a unit or currency sign glued after it,
    ``1,000.99m²`` or ``1,000.99€``, it reads 1,000.99, right as its own suite has it); after a box or a
    ``$...$`` segment it is a remark (:func:`bare_remark_changes`). At most :data:`_MAX_TAIL` characters and
    :data:`_MAX_MARKERS` markers (``answer`` itself after as many undecided ones), and each head's own
    remark read once (cached: a chain of markers after a value not computed, ``a^2 \\approx 2 \\approx 2
    ...``, asked it of every head again, exponentially in their number)."""
    return answer if len(answer) > _MAX_TAIL else _without_bare_remark(answer)


@functools.lru_cache(maxsize=4096)  # pure; a restatement or approximation asks it of each head before it
def _without_bare_remark(answer: str) -> str | None:
    text = _WRAPPED_RESTATEMENT.sub(r" \1 ", answer)  # "34 \\text{, i.e. } \\frac{2}{3}"
    for read, at in enumerate(_markers(text, _OWN_MARKER, _MARKER_STARTS)):
        if read == _MAX_MARKERS:
            return answer  # "a^2 \approx 2 \approx 2 ...": undecided after as many remarks as no answer holds
        head = text[:at].rstrip(" ,;")
        if _APPROXIMATION_MARKER.match(text, at) is None:  # "34, i.e. \\frac{2}{3}": a restatement
            changes = restatement_changes(head, text[at:])
        elif (name := VARIABLE_PREFIX.match(head)) is not None and not isinstance(value_of(head[name.end() :]), Decimal):
            return answer  # "x = 1/3 \\approx 1.3": a named rational, as math-verify's suite reads it (right)
        else:
            changes = bare_remark_changes(head, text[at:])
        if changes is not None:  # else a value not computed before it ("a^2"): a later marker may follow one
            return None if changes else head
    return answer


def without_list_remark(answer: str) -> str | None:
    """A list answer (``34, 5 (2 solutions)``) without the parenthesis closing it when that is a
    remark in words, an approximation or an "or", not arithmetic or an item (``(3, 4)``); None when
    the remark changes the list (:func:`list_remark_changes`: ``(or 35)``, ``(3 solutions)``);
    ``answer`` itself when there is none, or what is before it is not a list."""
    tail = answer[-_MAX_TAIL:]
    if not tail.endswith(")") or "(" not in tail:
        return answer
    opening = len(answer) - len(tail) + tail.rfind("(")
    inside, head = TEXT_WRAPPED.sub(r"\1", answer[opening + 1 : -1]), answer[:opening].rstrip()
    items = answer_items(head) if head and head[-1] not in ",;" else []
    if len(items) < 2 or ARITHMETIC.search(inside):
        return answer
    if not (states_words(inside) or APPROXIMATION_OPENING.match(inside) or OR.search(inside)):
        return answer
    return None if list_remark_changes(inside, items) else head
