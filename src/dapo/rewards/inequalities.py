"""Sets of reals: ``x<-1 or x>2``, ``x > 2`` and ``(2,\\infty)`` state sets, compared as sets.

Rule: an answer is an *inequality disjunction* when it is two or more inequalities in one and
the same single-letter variable joined by "or" (``or``, ``\\text{ or }``, ``\\lor``, ``\\vee``),
each one-sided (``x < a``, ``x \\ge a``, ``a > x``) or a chain whose two relations point the
same way (``a < x \\le b``, ``b > x \\ge a``). Its "or" does not offer two candidates (as in
``x=3 or x=4``): it is the union of the sets its inequalities describe, one answer. The verifier
compares it as that union of intervals, each endpoint closed exactly where its relation admits
equality: ``x<-1 \\text{ or } x>2`` -> ``(-\\infty,-1)\\cup(2,\\infty)``,
``x \\le 0 \\lor x \\ge 3`` -> ``(-\\infty,0]\\cup[3,\\infty)``. A ground truth written as a
disjunction is rewritten the same way, so either form matches the other.

:func:`real_set` also reads a single inequality (``x > 2``, ``-1 < x \\le 2``) and an interval
or union of intervals, bare or as ``x \\in (2,\\infty)``: the verifier compares an inequality
with an interval as the sets they state, in either direction (math-verify alone accepts the
interval for an inequality ground truth but not the inequality for an interval one). Two single
inequalities are left to math-verify's relation comparison (``-x > -1`` is ``x < 1``). A ground
truth ``(3, 5)`` (:func:`is_open_pair`) may be a point: it is not read as an interval, so ``3<x<5``
is not compared with it as a set (math-verify decides: wrong); ``x \\in (3,5)``, ``(3,5]`` or
``(3,\\infty)`` are intervals.

Not disjunctions (left to the hedge and list rules): equations (``x=3 or x=4``),
inequalities in different variables or joined by "and" or a comma (``x>0, x<5`` may mean both),
and bounds that are words or hold the variable, a relation or a comma (``x < 3 apples``,
``x < 2x``, ``x < 1,000``). String scanning only, linear time; answers longer than
:data:`~dapo.rewards.math_verify_call.MAX_MATH_CHARS` are never rewritten.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from dapo.rewards.math_verify_call import MAX_MATH_CHARS

# "or" between two inequalities: a word, the word in \text{}, or logic's \lor / \vee.
_OR = re.compile(r"\\(?:text|textrm|textnormal|mathrm|mbox)\{ {0,3}or {0,3}\}"
                 r"|\\(?:lor|vee)(?![A-Za-z])|(?<![A-Za-z\\])or(?![A-Za-z])", re.IGNORECASE)
# Spacing, sizing and math delimiters: dropped before parsing.
_NOISE = re.compile(r"\\(?:quad|qquad|left|right|displaystyle)(?![A-Za-z])|\\[,;:! ]|[~$]")
# Every spelling of a relation, mapped to one character: <, >, ≤, ≥.
_RELATION_SPELLINGS = (
    (re.compile(r"\\(?:leqslant|leq|le)(?![A-Za-z])|<="), "≤"),
    (re.compile(r"\\(?:geqslant|geq|ge)(?![A-Za-z])|>="), "≥"),
    (re.compile(r"\\lt(?![A-Za-z])"), "<"),
    (re.compile(r"\\gt(?![A-Za-z])"), ">"),
)
_RELATION = re.compile(r"([<>≤≥])")
_FLIPPED = {"<": ">", ">": "<", "≤": "≥", "≥": "≤"}
_VARIABLE = re.compile(r"[A-Za-z]")
# "x \in S": the variable, and the set it is in; a union of intervals splits at its cups.
_MEMBERSHIP = re.compile(r"\s{0,3}([A-Za-z])\s{0,3}\\in(?![A-Za-z])(.{1,1000})", re.DOTALL)
_CUP = re.compile(r"\\cup(?![A-Za-z])|∪")
# A bound is math: no word (two letters outside a command name), no equation, list or set sign.
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
_NOT_A_BOUND = re.compile(r"[=,;:]|\\(?:neq?|in|notin|approx|text[a-z]*|mbox|cup|cap)(?![A-Za-z])")


@dataclass(frozen=True)
class Interval:
    """An interval of reals; a missing endpoint is infinite (and so open)."""

    lower: str | None = None
    upper: str | None = None
    lower_closed: bool = False
    upper_closed: bool = False

    def latex(self) -> str:
        lower = "-\\infty" if self.lower is None else self.lower
        upper = "\\infty" if self.upper is None else self.upper
        return f"{'[' if self.lower_closed else '('}{lower},{upper}{']' if self.upper_closed else ')'}"


def interval_union(answer: str) -> str | None:
    """The interval union an inequality disjunction states (``x<-1 or x>2`` ->
    ``(-\\infty,-1)\\cup(2,\\infty)``), or None when ``answer`` is not one (see the module rule).

    Unbounded-below intervals come first and unbounded-above ones last, so the usual way of
    writing a union (``(-\\infty,a)\\cup(b,\\infty)``) matches as a string, without math-verify.
    """
    disjunction = _disjunction(answer)
    return disjunction[1] if disjunction is not None else None


@dataclass(frozen=True)
class RealSet:
    """A set of reals an answer states: ``kind`` is "disjunction", "inequality" or "interval";
    ``latex`` the set as intervals (an interval answer as written, without ``x \\in``);
    ``variable`` the letter it is stated in, None for a bare interval."""

    kind: str
    latex: str
    variable: str | None


def real_set(answer: str) -> RealSet | None:
    """The set of reals ``answer`` states: an inequality disjunction (``x<-1 or x>2``), one
    inequality (``x > 2``, ``-1 < x \\le 2``), or an interval or union of intervals, bare or as
    ``x \\in (2,\\infty)``; None for anything else (``5``, ``x = 3``, ``\\{1, 2\\}``, ``2x > 4``)."""
    if len(answer) > MAX_MATH_CHARS or not any(char in answer for char in "<>\\([≤≥"):
        return None  # integers and words: nothing to read, and the integer path stays fast
    disjunction = _disjunction(answer)
    if disjunction is not None:
        return RealSet("disjunction", disjunction[1], disjunction[0])
    inequality = _inequality(_normalise(answer))
    if inequality is not None:
        return RealSet("inequality", inequality[1].latex(), inequality[0])
    membership = _MEMBERSHIP.fullmatch(answer)
    variable, intervals = (membership.group(1), membership.group(2).strip()) if membership else (None, answer.strip())
    parts = _CUP.split(_normalise(intervals))
    if all(_is_interval(part.strip()) for part in parts):
        return RealSet("interval", intervals, variable)
    return None


def is_open_pair(answer: str) -> bool:
    """Whether ``answer`` is ``(a, b)`` with two finite endpoints: an ordered pair (a point) as
    often as an open interval, and nothing in it tells which; a square bracket, an infinite
    endpoint, a union or ``x \\in`` (:func:`real_set`'s variable) make it an interval."""
    text = _normalise(answer).strip()
    return text[:1] == "(" and text[-1:] == ")" and _is_interval(text) and "\\infty" not in text


def is_or(text: str) -> bool:
    """Whether ``text`` is just an "or" (``or``, ``\\text{ or }``, ``\\lor``): the joint of a disjunction."""
    return _OR.fullmatch(text.strip()) is not None


def is_inequality_disjunction(answer: str) -> bool:
    """Whether ``answer`` states one set of reals as inequalities joined by "or" (module rule)."""
    return interval_union(answer) is not None


def _disjunction(answer: str) -> tuple[str, str] | None:
    """(variable, interval union) of an inequality disjunction, or None (module rule)."""
    if len(answer) > MAX_MATH_CHARS or _OR.search(answer) is None:
        return None
    parts = _OR.split(_normalise(answer))
    inequalities = [parsed for part in parts if (parsed := _inequality(part)) is not None]
    if len(parts) < 2 or len(inequalities) != len(parts):
        return None
    variables = {variable for variable, _ in inequalities}
    if len(variables) != 1:  # "x<1 or y>2": a region of the plane
        return None
    intervals = sorted((interval for _, interval in inequalities), key=_unbounded_first)
    return variables.pop(), "\\cup".join(interval.latex() for interval in intervals)


def _is_interval(text: str) -> bool:
    """Whether ``text`` is one interval: a bracket pair around two endpoints (``(2,\\infty)``,
    ``[-1, \\frac12)``), each ``\\infty`` or math that is not a word, a relation or a list."""
    if len(text) < 5 or text[0] not in "([" or text[-1] not in ")]":
        return False
    depth, comma = 0, -1
    for at, char in enumerate(text[1:-1], 1):
        depth += (char in "([{") - (char in ")]}")
        if depth < 0:  # "(1,2), (3,4)": the first bracket closes before the end
            return False
        if char == "," and depth == 0:
            if comma >= 0:  # "(1, 2, 3)": a triple, not an interval
                return False
            comma = at
    if depth != 0 or comma < 0:
        return False
    return all(_is_endpoint(end.strip()) for end in (text[1:comma], text[comma + 1 : -1]))


def _is_endpoint(text: str) -> bool:
    return text.lstrip("+-") == "\\infty" or (
        bool(text) and text.count("{") == text.count("}") and _NOT_A_BOUND.search(text) is None
        and _WORD.search(text) is None and _RELATION.search(text) is None)


def _normalise(answer: str) -> str:
    answer = _NOISE.sub(" ", answer)
    for spelling, relation in _RELATION_SPELLINGS:
        answer = spelling.sub(relation, answer)
    return answer


def _inequality(part: str) -> tuple[str, Interval] | None:
    """(variable, interval) of one inequality: ``x < a``, ``a \\le x`` or ``a < x \\le b``."""
    tokens = [token.strip() for token in _RELATION.split(part)]
    if len(tokens) == 3:
        left, relation, right = tokens
        if _VARIABLE.fullmatch(left) and _is_bound(right, left):
            return left, _one_sided(relation, right)
        if _VARIABLE.fullmatch(right) and _is_bound(left, right):
            return right, _one_sided(_FLIPPED[relation], left)
        return None
    if len(tokens) == 5:
        first_bound, first, variable, second, second_bound = tokens
        if not (_VARIABLE.fullmatch(variable) and _is_bound(first_bound, variable)
                and _is_bound(second_bound, variable)):
            return None
        if first in "<≤" and second in "<≤":  # a < x <= b
            return variable, Interval(first_bound, second_bound, first == "≤", second == "≤")
        if first in ">≥" and second in ">≥":  # b > x >= a
            return variable, Interval(second_bound, first_bound, second == "≥", first == "≥")
    return None  # no relation, a chain that turns back (a < x > b), or more than two relations


def _one_sided(relation: str, bound: str) -> Interval:
    """The interval of ``x <relation> bound``."""
    if relation in "<≤":
        return Interval(upper=bound, upper_closed=relation == "≤")
    return Interval(lower=bound, lower_closed=relation == "≥")


def _is_bound(text: str, variable: str) -> bool:
    """Whether ``text`` can be an endpoint: balanced math that is not a word and does not
    mention the variable (``x < 2x`` is not an interval)."""
    mentions_variable = re.search(rf"(?<![\\A-Za-z]){variable}(?![A-Za-z])", text) is not None
    return (bool(text) and text.count("{") == text.count("}") and not mentions_variable
            and _NOT_A_BOUND.search(text) is None and _WORD.search(text) is None)


def _unbounded_first(interval: Interval) -> int:
    return 0 if interval.lower is None else 2 if interval.upper is None else 1
