"""Counts in a remark after an answer: of the answer's items, or of the derivation's steps.

- **A count of the answer's items** with a counting noun (``(2 solutions)``, ``(i.e. two distinct
  real roots)``, ``(1 solution)``) is a remark when it is their number and offers another answer
  otherwise: ``\\boxed{1, 2} (2 solutions)`` and ``\\boxed{34} (1 solution)`` state their values,
  ``\\boxed{1, 2} (3 solutions)`` and ``\\boxed{34} (2 solutions)`` say that some are missing (or
  answer a "how many" question with the count). ``\\pm 3`` states two values. With an "or"
  (``(2 solutions or 3)``) it is no count: the caller's other rules decide.
- **A count of the derivation's steps** (``(3 cases)``, ``(in 2 steps)``, ``(i.e. 3 subcases)``:
  cases, steps, stages, phases, iterations) says how the answer was found, not what it is.

Bounded regular expressions, anchored at the remark's start: linear, safe in the parent process.
"""

from __future__ import annotations

import re

from dapo.rewards.remark_words import THAT_IS

_SPELLED = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
            "ten": 10, "eleven": 11, "twelve": 12}
# A count of the answer's items: "(2 solutions)", "(i.e. two distinct real roots)", "(3 ordered pairs in all)".
_ITEM_COUNT = re.compile(
    r"\s*(?:(?:" + THAT_IS + r"|namely|so)(?![A-Za-z])[\s,]{0,4})?(?:(?:exactly|only|just|the)\s+)?"
    r"([0-9]{1,3}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\s+"
    r"(?:(?:distinct|different|real|possible|positive|negative|integer|integral|complex|valid|ordered|unordered"
    r"|unique|total|such)\s+){0,3}"
    r"(?:solutions?|values?|roots?|answers?|pairs?|triples?|tuples?|numbers?|integers?|zeros|zeroes|zero|points?"
    r"|elements?|possibilities|possibility|choices?|options?|candidates?|intersections?)(?![A-Za-z])([^0-9]{0,200})$",
    re.IGNORECASE)
# A count of the derivation's steps: a number, then one of these nouns, and no other number or "or".
_DERIVATION_COUNT = re.compile(r"\s*(?:(?:" + THAT_IS + r"|namely)(?![A-Za-z])[\s,]{0,4})?"
                               r"(?:(?:in|from|over|across|after|with)\s+)?[0-9]{1,6}\s+(?:sub)?"
                               r"(?:cases?|steps?|stages?|phases?|iterations?)(?![A-Za-z])[^0-9]{0,200}$",
                               re.IGNORECASE)
# "or", "either", \lor: an alternative, not a count (shared with hedges.py)
OR = re.compile(r"(?<![A-Za-z\\])(?:or|either)(?![A-Za-z])|\\lor(?![A-Za-z])", re.IGNORECASE)
_MAX_CHARS = 500  # a longer remark is no count


def item_count(items: list[str]) -> int:
    """How many values ``items`` state: ``\\pm 3`` states two."""
    return sum(2 if ("\\pm" in item or "±" in item) else 1 for item in items)


def stated_count(remark: str) -> int | None:
    """The number of items ``remark`` says the answer has (``2 solutions`` -> 2, ``i.e. one real
    root`` -> 1), or None when it is no such count (no counting noun, another number after it, or
    an "or": ``2 solutions or 3``)."""
    count = _ITEM_COUNT.match(remark[:_MAX_CHARS])
    if count is None or OR.search(count.group(2)):
        return None
    stated = count.group(1).lower()
    return int(stated) if stated.isdigit() else _SPELLED[stated]


def counts_the_derivation(remark: str) -> bool:
    """Whether ``remark`` counts the derivation's steps (``3 cases``, ``in 2 steps``), with no "or"."""
    remark = remark[:_MAX_CHARS]
    return _DERIVATION_COUNT.match(remark) is not None and OR.search(remark) is None
