"""Restatements: where a stated value ends, and whether what follows it restates it.

A remark after an answer (``34, that is, 35``, ``34 (or about 34)``, ``\\boxed{34} \\approx 35``) is judged
against the value before it, so every rule that reads one must first see that a value ends there. Its
end is a digit, a brace, ``\\pi`` or Euler's ``e`` (each caller's own pattern), and, read here for all of
them (:func:`letters_end_a_value`):

- **a LaTeX constant is a value, not a name** (:data:`LATEX_CONSTANT`: ``\\pi``, ``\\infty``, ``\\emptyset``,
  ``\\varnothing``, a lone ``e``). ``\\infty, that is, 35`` states two values; before, ``\\infty`` was read
  as a name like ``\\theta`` and "that is" as its copula, so the answer was 35. A constant with no real
  value (``\\infty``, ``-\\infty``, ``\\emptyset``) is restated only by itself (``\\infty, that is,
  \\infty``; ``\\emptyset`` and ``\\varnothing`` are one set): a number or another constant after it is a
  second value (:func:`constant_remark_changes`).
- **a number's unit or counted noun ends its value** (``34 cm``, ``34 m``, ``34 ways``, ``34 red apples``,
  ``3 in``: at most three words after the number, each one the number rules drop as a unit, see
  :func:`~dapo.rewards.unit_suffix.is_unit`: no scale word, no word of an expression, no lone letter but an
  SI symbol). ``34 ways, that is, 35`` and ``34 m, that is, 35`` state two values; before, "that is"
  after the noun (or the lone letter ``m``, read as a name) was a copula, and the answer was 35. Words
  with no number before them are not a value (``the number of ways, that is, 35`` gives 35).

After a box or a ``$...$`` segment the unit or noun is dropped before its remark is read
(:func:`after_its_noun`: ``\\boxed{34} ways, or 35`` offers 35, as ``\\boxed{34}, or 35`` does). Two
``$...$`` segments joined by a restatement are one value and its remark (:func:`one_value_segments`:
``$34$, that is, $34$`` states 34, ``$\\infty$, that is, $35$`` two values; before, the two segments were
two candidates, a hedge, and ``$\\infty$`` a name whose value ``$\\infty$`` was); so are two quantities, one restated
in another unit (``$5$ cm, i.e. $50$ mm``, ``$5$ cm, or $50$ mm``: :func:`~dapo.rewards.units.join_quantities`).

"that is" is read by :func:`restating_that`: after a value it restates it (the verifier judges the
remark), after a name or words it is a copula (``x, that is, 34`` gives 34); after a count of items
(:func:`counted_items`) the Answer line reads it as a copula when as many items follow (``2 pairs, that is,
(1,2) and (3,4)``), as a count in brackets is read (:mod:`~dapo.rewards.counts`).
A count followed by as many items after "i.e.", "that is" or "namely" states the items wherever the answer is
written, on the Answer line, in a box or a ``$...$`` segment (:func:`items_after_count`: ``2 solutions, i.e. 3 and
5`` is the list 3, 5; before, the count stayed in the answer, which was wrong).

Bounded regular expressions, on at most the last 80 characters before a remark or (the segments'
substitution) once over the line: linear, safe in the parent process.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from dapo.rewards.alternatives import NUMBER_TOKEN, OPENING
from dapo.rewards.approximations import APPROXIMATION_OPENING
from dapo.rewards.counts import stated_count
from dapo.rewards.remark_words import NAME, THAT_IS
from dapo.rewards.unit_suffix import is_unit
from dapo.rewards.units import join_quantities, unit_of

# The LaTeX constants that are values, not names: "\pi", "\infty", "\emptyset", "\varnothing", a lone "e".
LATEX_CONSTANT = r"(?:\\(?:pi|infty|emptyset|varnothing)|(?<![A-Za-z\\])e)(?![A-Za-z_])"
_ENDS_IN_CONSTANT = re.compile(LATEX_CONSTANT + r"[\s$]{0,4}$")
# A number and at most three words after it, ending the text: "34 ways", "$34$ red apples", "3 in" (the words
# checked by is_unit) ...
_NUMBER_AND_WORDS = re.compile(r"[+\-\u2212]?[0-9][0-9,.]{0,40}[\s$]{0,4}([A-Za-z]{1,20}(?:\s{1,3}[A-Za-z]{1,20}){0,2})[\s$]{0,4}$")
# ... unless a word before the number makes the words what it counts: "the number of 3 digit numbers".
_COUNTS_WHAT_FOLLOWS = re.compile(r"(?<![A-Za-z])(?:of|for|with|by|per|from|among|between|than|into)[\s$]{0,4}$",
                                  re.IGNORECASE)
# A constant with no real value, with its sign: "\infty", "-\infty", "\emptyset" (and "\varnothing", the same set).
_VALUELESS_CONSTANT = re.compile(r"([+\-\u2212]?)\s{0,3}\\(infty|emptyset|varnothing)(?![A-Za-z])")
_SAME_CONSTANT = {"varnothing": "emptyset"}
_MAX_CHARS = 80  # how much of the text before a remark is read for the value's end

# "that is" before a copula's "is", after a comma, semicolon, opening parenthesis or blank space ...
THAT = re.compile(r"([,;(]?)\s{0,3}(?<![A-Za-z])that\s{0,3}$", re.IGNORECASE)
# ... after a name, bare or in math ("x", "$a_1$", "a_{1}", "$\\theta$": no value's "$" or brace; a constant
# is a value, not a name) ...
_NAME_BEFORE = re.compile(r"(?<![A-Za-z0-9\\_^{}])\$?\s{0,3}(?!" + LATEX_CONSTANT + ")" + NAME + r"\s{0,3}\$?\s{0,3}$")
# ... or a value: a digit, a closing brace or parenthesis, "$" or a constant ("34", "\\frac{1}{2}", "$34$", "\\infty").
_VALUE_BEFORE = re.compile(r"(?:[0-9})$]|" + LATEX_CONSTANT + r")\s{0,3}$")

# A text wrapper around a unit or noun after a value ("\\text{ ways}"), or one plain word ("ways", "cm").
_NOUN_WORD = re.compile(r"[\s$]{0,4}(?:\\(?:text|textrm|mathrm|mbox|textnormal)\{([A-Za-z ]{1,40})\}|([A-Za-z]{1,20}))")
# What opens a remark on the value: a comma, semicolon or parenthesis, "=", an approximation, "or", "i.e.", "that is".
_REMARK_OPENS = re.compile(r"[\s$]{0,4}(?:[,;(=≈]|\\approx(?![A-Za-z])|(?:or|i\.\s?e\.|ie|that\s+is|equivalently"
                           r"|which)(?![A-Za-z]))", re.IGNORECASE)
_MAX_NOUN_WORDS = 3
# A count of items, then the items after "i.e.", "that is" or "namely" ("2 solutions, i.e. 3 and 5", "2 roots (that
# is, 1 and 2)"): the count (group 1), an opening parenthesis if any (group 2), the items (group 3).
_COUNT_THEN_ITEMS = re.compile(r"(.{1,80}?)\s{0,3}(?:[,;:]\s{0,3}|(\()\s{0,3})(?:" + THAT_IS + r"|namely)(?![A-Za-z])"
                               r"[\s,:]{0,4}(\S.{0,400})", re.IGNORECASE)
# Two $...$ segments joined by a restatement ("$34$, that is, $34$", "$\\infty$ i.e. $\\infty$"): one value and
# its remark, judged as without the dollars (after a name, "that is" was read as a copula before this).
RESTATED_SEGMENTS = re.compile(r"(?<!\\)\$(\s{0,3}[,;]?\s{0,3}(?:" + THAT_IS + r"|equivalently)(?![A-Za-z])[\s,]{0,4})\$",
                               re.IGNORECASE)

# A line that states one ``$...$`` segment again and again, joined as a list is: "$34$ and $34$", "$34$, $34$"
REPEATED_SEGMENT = re.compile(r"\s{0,3}\$([^$]{1,400})\$(?:\s{0,3}(?:[,;]\s{0,3})?(?:(?:and|or)\s{1,3})?\$\1\$){1,15}"
                              r"\s{0,3}\.?\s{0,3}", re.IGNORECASE)


def one_value_segments(line: str) -> str:
    """``line`` with two ``$...$`` segments that state one value and its restatement joined into one segment:
    ``$34$, that is, $34$`` (:data:`RESTATED_SEGMENTS`) and a quantity restated in another unit, ``$5$ cm, i.e. $50$
    mm`` (:func:`~dapo.rewards.units.join_quantities`). The remark is then judged as in one segment; before, the two
    segments were two candidates, a hedge. A line that is one segment said again as a list (``$34$ and $34$``,
    :data:`REPEATED_SEGMENT`) is that segment."""
    if (repeated := REPEATED_SEGMENT.fullmatch(line)) is not None:
        return f"${repeated.group(1)}$"
    return join_quantities(RESTATED_SEGMENTS.sub(r"\1", line))


def letters_end_a_value(text: str) -> bool:
    """Whether ``text``, what an answer states before a remark, ends in a value written in letters (module
    rules): a LaTeX constant (``\\infty``, ``$\\pi$``), a number's known unit (``34 cm``, ``34 m``, ``3 in``)
    or a number's counted noun (``34 ways``, ``there are 34 red apples``); not a name (``x``, ``\\theta``),
    words alone (``the number of ways``), nor a noun that a word before the number or another number
    describes (``the number of 3 digit numbers``, ``3 apples and 4 oranges``: no one value ends there)."""
    text = text[-_MAX_CHARS:].rstrip(" ,;")
    if _ENDS_IN_CONSTANT.search(text) is not None or unit_of(text) is not None:
        return True
    counted = _NUMBER_AND_WORDS.search(text)
    if counted is None or not all(is_unit(word) for word in counted.group(1).split()):
        return False
    lead = text[: counted.start()]
    return not any(char.isdigit() for char in lead) and _COUNTS_WHAT_FOLLOWS.search(lead) is None


def counted_items(text: str) -> int | None:
    """How many items ``text`` ends by counting them with a counting noun (``2 pairs``, ``there is $1$
    solution``: :func:`~dapo.rewards.counts.stated_count`), or None (``34 ways``, ``34 cm``, ``x``)."""
    counted = _NUMBER_AND_WORDS.search(text[-_MAX_CHARS:].rstrip(" ,;"))
    return stated_count(counted.group(0).replace("$", " ")) if counted is not None else None


def after_its_noun(after: str) -> str:
    """``after``, the text after a box or a ``$...$`` segment, without the unit or counted noun that opens
    it when a remark follows that (``ways, that is, 35`` -> ``, that is, 35``, ``\\text{ cm} (or 35)`` ->
    `` (or 35)``): the remark is on the value, as without the noun. ``after`` itself otherwise (``ways``,
    ``when n = 35``, ``thousand``: a scale word is no unit)."""
    at = 0
    for _ in range(_MAX_NOUN_WORDS):
        word = _NOUN_WORD.match(after, at)
        if word is None:
            return after
        words = (word.group(1) or word.group(2)).split()
        if not words or not all(is_unit(name) for name in words):
            return after
        at = word.end()
        if _REMARK_OPENS.match(after, at) is not None:
            return after[at:]
    return after


def ends_a_value_or_name(text: str) -> bool:
    """Whether ``text`` ends where a stated answer may end before a remark on it: a value (a digit, a brace, a
    closing parenthesis or ``$``, a constant: ``34``, ``\\frac{1}{2}``, ``$x$``, ``\\pi``; a number's unit or counted
    noun: ``34 cm``, ``34 ways``, :func:`letters_end_a_value`) or a name (``x``, ``a_1``, ``\\theta``); not words
    (``the answer``, ``\\text{No``), which state no answer a remark could follow."""
    text = text[-_MAX_CHARS:]
    return (_VALUE_BEFORE.search(text) is not None or _NAME_BEFORE.search(text) is not None
            or letters_end_a_value(text))


def constant_remark_changes(answer: str, remark: str) -> bool | None:
    """For ``remark`` after ``answer``: when ``answer`` is a constant with no real value (``\\infty``,
    ``-\\infty``, ``\\emptyset``) and ``remark`` opens with a restatement, an alternative or an
    approximation (``that is,``, ``or``, ``=``, ``\\approx``): True when what follows states another value
    (a number, ``-\\infty`` after ``\\infty``), False when it is the same constant (``\\varnothing`` after
    ``\\emptyset``); None otherwise, for the caller's rules (``\\infty (since n grows)``, ``\\pi``: computed)."""
    own = _valueless_constant(answer)
    opening = OPENING.match(remark[:_MAX_CHARS]) or APPROXIMATION_OPENING.match(remark[:_MAX_CHARS])
    if own is None or opening is None:
        return None
    rest = remark[opening.end() : opening.end() + _MAX_CHARS].strip().rstrip(".$ ")
    stated = _valueless_constant(rest)
    if stated is not None:
        return stated != own
    return True if NUMBER_TOKEN.match(rest) is not None else None


def _valueless_constant(text: str) -> str | None:
    """``text`` as a canonical constant with no real value (``-infty``, ``emptyset``), or None."""
    found = _VALUELESS_CONSTANT.fullmatch(text.strip().strip("$").strip())
    if found is None:
        return None
    name = _SAME_CONSTANT.get(found.group(2), found.group(2))
    return ("-" if found.group(1) in ("-", "\u2212") else "") + name


def restating_that(line: str, at: int, items_in: Callable[[str], int] | None = None) -> bool | None:
    """For the copula at ``at``: None when it is not the "is" of "that is", else whether it restates a
    value (as "i.e." does) rather than give a name's value (as "is" does). One rule for every form (a
    comma, a semicolon, a parenthesis or nothing before "that"): after a value, a constant, unit or counted
    noun included (:func:`letters_end_a_value`), it is a remark the verifier judges
    (:func:`~dapo.rewards.hedges.restatement_changes`, the bracket rules): ``34, that is, 35``, ``34 (that
    is, 35)``, ``34 cm that is 35``, ``34 ways, that is, 35``, ``\\infty, that is, 35`` offer two values,
    ``\\frac12 (that is, 0.5)`` one. After a name (``x, that is, 34``, ``$a_1$ (that is, 34)``) or words
    (``the number of ways, that is, 35``) it is a copula, the "x, that is," case being no exception. So it is
    after a count of items (:func:`counted_items`) followed by as many, by ``items_in`` (how many values a
    text states as a list), as a count in brackets is read (:mod:`~dapo.rewards.counts`): ``2 pairs, that
    is, (1,2) and (3,4)`` and ``1 solution, that is, 3`` state the items, ``2 solutions, that is, 3`` two values."""
    that = THAT.search(line, max(0, at - 24), at)
    if that is None:
        return None
    before = line[max(0, that.start() - _MAX_CHARS) : that.start()]
    if letters_end_a_value(before):  # "34 m": a unit, not the name m
        count = counted_items(before) if items_in is not None else None
        return count is None or items_in is None or count != items_in(_after_that(line, at, that.group(1) == "("))
    if _NAME_BEFORE.search(before) is not None:
        return False
    return _VALUE_BEFORE.search(before) is not None


def _after_that(line: str, at: int, bracketed: bool) -> str:
    """What "that is" (its "is" at ``at``) introduces, without the parenthesis that closes it when it opened one."""
    tail = line[at + 2 : at + 502].strip(" ,:")
    return tail[:-1] if bracketed and tail.endswith(")") and tail.count(")") > tail.count("(") else tail


def items_after_count(answer: str, items_in: Callable[[str], int]) -> str | None:
    """The items ``answer`` names after counting them, when it is a count of items with a counting noun
    (:func:`counted_items`) followed, after "i.e.", "that is" or "namely", by as many items (``items_in``: how
    many values a text states as a list): ``2 solutions, i.e. 3 and 5`` -> ``3 and 5``, ``2 roots (that is, 1
    and 2)`` -> ``1 and 2``, as ``2 pairs, that is, (1,2) and (3,4)`` is read on the Answer line
    (:func:`restating_that`) and a count in brackets after a list is (:mod:`~dapo.rewards.counts`). None
    otherwise: another number of items (``2 solutions, i.e. 3``, ``3 solutions, i.e. 3 and 5``: a count and
    values that disagree, judged as written), or no count (``34 ways, i.e. 35``, ``x, i.e. 3``)."""
    found = _COUNT_THEN_ITEMS.fullmatch(answer.strip()) if len(answer) <= 500 else None
    if found is None:
        return None
    items = found.group(3).strip().rstrip(".")
    if found.group(2) is not None:  # "2 roots (that is, 1 and 2)": the parenthesis closes after the items
        if not items.endswith(")") or items.count(")") <= items.count("("):
            return None
        items = items[:-1].rstrip()
    count = counted_items(found.group(1))
    return items if count is not None and count == items_in(items) else None
