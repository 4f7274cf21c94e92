"""Restatements after a value written in letters (rows marked "before:" had the other verdict before
this change; the rest guard what stays).

1. A counted noun after a number ends its value, as a known unit does: ``34 ways, that is, 35`` states 34
   and 35 (wrong for both; before, "that is" after the noun was read as a copula and 35 was accepted), and
   so does ``34 m, that is, 35`` (the SI symbol m was read as a name). Words with no number before them
   (``the number of ways, that is, 35``), or a noun that another word or number describes (``the number of
   3 digit numbers``, ``3 apples and 4 oranges``), still give the value after "that is"; so does a count
   of items followed by as many items (``2 pairs, that is, (1,2) and (3,4)``).
2. A LaTeX constant is a value, not a name: ``\\infty, that is, 35`` and ``\\infty (that is, 35)`` were
   accepted for 35. A constant with no real value (``\\infty``, ``-\\infty``, ``\\emptyset``) is restated
   only by itself (``\\infty, that is, \\infty``; ``\\emptyset`` and ``\\varnothing`` are one set).
3. ``3 in, that is, 34``: "in" after a number is read as inches, as the number rules read ``3 in`` (it is
   3), so the line states 3 and then 34: wrong for either (the verdict before, kept); ``3 in, that is,
   3`` states 3.
4. An "or" restating a value after its unit or counted noun is a remark, as after a digit: ``34 cm, or
   about 34`` was wrong for 34.
5. The same rules after a box or a ``$...$`` segment: ``\\boxed{34} ways, or 35`` and ``$34$ cm (that is,
   35)`` were accepted for 34; ``$34$, that is, $34$`` (two segments) was a hedge.
-- restatements, extract, hedges, number_forms, boxes.
"""

from __future__ import annotations

import time

import pytest

from dapo.rewards import verify
from dapo.rewards.number_forms import without_closing_remark
from dapo.rewards.restatements import (
    after_its_noun,
    constant_remark_changes,
    counted_items,
    letters_end_a_value,
)
from dapo.rewards.verifier import prepare

A = "Let me think step by step.\nSo the total is computed.\n"

# (response, ground truth, correct, extractor)
CASES: list[tuple[str, str, bool, str]] = [
    # --- 1. a counted noun ends the value: two values are a hedge, for either one ---
    (A + "Answer: 34 ways, that is, 35", "35", False, "answer"),  # before: right
    (A + "Answer: 34 ways, that is, 35", "34", False, "answer"),
    (A + "Answer: 34 ways (that is, 35)", "35", False, "answer"),  # before: right
    (A + "Answer: 34 ways, i.e. 35", "35", False, "answer"),  # before: right (math-verify read 35)
    (A + "Answer: 34 apples, that is, 35", "35", False, "answer"),  # before: right
    (A + "Answer: there are 34 ways, that is, 35", "35", False, "answer"),  # before: right
    (A + "Answer: 34 m, that is, 35", "35", False, "answer"),  # before: right (m read as a name)
    (A + "Answer: 34 km, i.e. 35", "35", False, "answer"),
    (A + "Answer: 34 km, that is, 35", "34", False, "answer"),
    (A + "Answer: x = 34, that is, 35", "35", False, "answer"),
    (A + "Answer: x = 34, that is, 35", "34", False, "answer"),
    (A + "Answer: 34 ways \\approx 35", "34", False, "answer"),
    # ... the same value restated: its answer
    (A + "Answer: 34 ways, that is, 34", "34", True, "answer"),
    (A + "Answer: 34 apples, that is, 34", "34", True, "answer"),
    (A + "Answer: there are 34 ways, that is, 34", "34", True, "answer"),
    (A + "Answer: 34 km, i.e. 34", "34", True, "answer"),
    (A + "Answer: x = 34, that is, 34", "34", True, "answer"),
    (A + "Answer: 34 ways (since n is even)", "34", True, "answer"),  # before: wrong (the remark was kept)
    # ... after a name or words "that is" still gives the value
    (A + "Answer: the number of ways, that is, 35", "35", True, "answer"),
    (A + "Answer: the number of ways (that is, 35)", "35", True, "answer"),
    (A + "Answer: the number of 3 digit numbers, that is, 35", "35", True, "answer"),
    (A + "Answer: 3 apples and 4 oranges, that is, 7", "7", True, "answer"),
    (A + "Answer: x, that is, 34", "34", True, "answer"),
    (A + "Answer: \\theta, that is, 35", "35", True, "answer"),
    (A + "Answer: 34 thousand, that is, 34000", "34000", True, "answer"),  # a scale word is no unit
    # ... and after a count of items, "that is" names them when they are as many (as "(2 solutions)" is read)
    (A + "Answer: 2 pairs, that is, (1,2) and (3,4)", "(1,2), (3,4)", True, "answer"),
    (A + "Answer: 2 solutions, that is, x = 3 and x = 5", "3, 5", True, "answer"),
    (A + "Answer: 2 solutions (that is, 3 and 5)", "3, 5", True, "answer"),
    (A + "Answer: 1 solution, that is, 3", "3", True, "answer"),
    (A + "Answer: 2 solutions, that is, 3", "3", False, "answer"),  # before: right (a count, then one of them)
    (A + "Answer: 3 solutions, that is, 3 and 5", "3, 5", False, "answer"),  # before: right
    # --- 2. a LaTeX constant is a value ---
    (A + "Answer: \\infty, that is, 35", "35", False, "answer"),  # before: right
    (A + "Answer: \\infty (that is, 35)", "35", False, "answer"),  # before: right
    (A + "Answer: $\\infty$, that is, 35", "35", False, "answer"),  # before: right
    (A + "Answer: \\infty, that is, 35", "\\infty", False, "answer"),
    (A + "Answer: \\infty, i.e. 35", "35", False, "answer"),  # before: right (math-verify read 35)
    (A + "Answer: \\infty \\approx 35", "35", False, "answer"),  # before: right
    (A + "Answer: \\infty \\approx 35", "\\infty", False, "answer"),  # before: right
    (A + "Answer: -\\infty, that is, 35", "35", False, "answer"),  # before: right
    (A + "Answer: \\infty, that is, -\\infty", "-\\infty", False, "answer"),  # before: right
    (A + "Answer: \\infty, that is, -\\infty", "\\infty", False, "answer"),
    (A + "Answer: \\emptyset, that is, 35", "35", False, "answer"),  # before: right
    (A + "Answer: \\emptyset (that is, 35)", "\\emptyset", False, "answer"),
    (A + "Answer: \\varnothing, that is, 0", "0", False, "answer"),  # before: right
    (A + "So \\boxed{\\infty}, that is, 35", "\\infty", False, "any"),  # before: right
    (A + "Answer: \\pi, that is, 3", "3", False, "answer"),
    (A + "Answer: \\pi (that is, 3)", "3", False, "answer"),
    # ... restated by itself, or with a remark in words: the constant
    (A + "Answer: \\infty, that is, \\infty", "\\infty", True, "answer"),
    (A + "Answer: \\infty (that is, \\infty)", "\\infty", True, "answer"),
    (A + "Answer: $\\infty$, that is, $\\infty$", "\\infty", True, "answer"),
    (A + "Answer: -\\infty, that is, -\\infty", "-\\infty", True, "answer"),
    (A + "Answer: \\emptyset, that is, \\emptyset", "\\emptyset", True, "answer"),
    (A + "Answer: \\emptyset, that is, \\varnothing", "\\emptyset", True, "answer"),  # before: wrong
    (A + "Answer: \\infty (since n grows)", "\\infty", True, "answer"),  # before: wrong (the remark was kept)
    (A + "Answer: \\emptyset (no solutions)", "\\emptyset", True, "answer"),  # before: wrong
    (A + "Answer: \\infty", "\\infty", True, "answer"),
    (A + "Answer: \\pi, that is, \\pi", "\\pi", True, "answer"),
    (A + "Answer: \\pi (about 3.14)", "\\pi", True, "answer"),
    # "3" after pi shows no rounding (loose_roundings.shows_a_rounding): a second value, as "\\pi (= 3)" is
    (A + "Answer: \\pi, that is, 3", "\\pi", False, "answer"),  # before: right
    # --- 3. "in" after a number is inches: "3 in" is 3, and "that is, 34" a second value ---
    (A + "Answer: 3 in, that is, 34", "3", False, "answer"),
    (A + "Answer: 3 in, that is, 34", "34", False, "answer"),
    (A + "Answer: 3 in (that is, 34)", "34", False, "answer"),
    (A + "Answer: 3 in, that is, 3", "3", True, "answer"),
    (A + "Answer: 3 in", "3", True, "answer"),
    # --- 4. an "or" restating the value after its unit or counted noun ---
    (A + "Answer: 34 cm, or about 34", "34", True, "answer"),  # before: wrong
    (A + "Answer: 34 cm or about 34", "34", True, "answer"),  # before: wrong
    (A + "Answer: 34 ways, or about 34", "34", True, "answer"),  # before: wrong
    (A + "Answer: 34 m, or about 34", "34", True, "answer"),  # before: wrong
    (A + "Answer: 34 cm, or 34", "34", True, "answer"),  # before: wrong
    (A + "Answer: 34 cm (or about 34)", "34", True, "answer"),
    (A + "Answer: 34 cm, or about 35", "34", False, "answer"),
    (A + "Answer: 34 cm, or about 35", "35", False, "answer"),
    (A + "Answer: 34 cm, or 35", "35", False, "answer"),
    (A + "Answer: 34 ways or 35", "34", False, "answer"),
    (A + "Answer: x, or 34", "34", False, "answer"),
    # --- 5. after a box or a $...$ segment ---
    (A + "So \\boxed{34} ways, or 35", "34", False, "any"),  # before: right
    (A + "So \\boxed{34} ways, that is, 35", "34", False, "any"),  # before: right
    (A + "So \\boxed{34} cm, that is, 35", "34", False, "any"),  # before: right
    (A + "So \\boxed{34} cm (that is, 35)", "34", False, "boxed"),  # before: right
    (A + "So \\boxed{34} ways \\approx 35", "34", False, "any"),  # before: right
    (A + "So \\boxed{34} cm, or about 35", "34", False, "any"),  # before: right
    (A + "Answer: $34$ ways, that is, 35", "35", False, "answer"),  # before: right
    (A + "Answer: $34$ ways, that is, 35", "34", False, "answer"),
    (A + "Answer: $34$ cm (that is, 35)", "34", False, "answer"),  # before: right
    (A + "Answer: $34$ ways, i.e. 35", "34", False, "answer"),  # before: right
    (A + "Answer: $34$ ways \\approx 35", "34", False, "answer"),  # before: right
    (A + "Answer: $34$, that is, $35$", "34", False, "answer"),
    (A + "So \\boxed{34} ways, that is, 34", "34", True, "any"),
    (A + "So \\boxed{34} cm, or about 34", "34", True, "any"),
    (A + "So \\boxed{34} ways", "34", True, "any"),
    (A + "Answer: $34$ ways, that is, 34", "34", True, "answer"),
    (A + "Answer: $34$ cm, or about 34", "34", True, "answer"),
    (A + "Answer: $34$, that is, $34$", "34", True, "answer"),  # before: wrong (two segments: a hedge)
    (A + "Answer: $\\frac12$, that is, $0.5$", "\\frac12", True, "answer"),  # before: wrong
    (A + "Answer: $x$, that is, $34$", "34", True, "answer"),
]


@pytest.mark.parametrize("response,gold,correct,extractor", CASES)
def test_restatement_verdicts(response: str, gold: str, correct: bool, extractor: str) -> None:
    assert verify(response, gold, extractor)[0] is correct


@pytest.mark.parametrize(
    "response,gold,pred",
    [("Answer: 34 ways, that is, 34", "34", "34 ways"), ("Answer: 34 cm, or about 34", "34", "34 cm"),
     ("Answer: \\infty, that is, \\infty", "\\infty", "\\infty"), ("Answer: \\infty (that is, \\infty)", "\\infty", "\\infty"),
     ("Answer: \\emptyset, that is, \\varnothing", "\\emptyset", "\\emptyset"), ("Answer: 3 in, that is, 3", "3", "3 in")],
)
def test_the_restatement_goes_and_the_value_stays(response: str, gold: str, pred: str) -> None:
    assert verify(A + response, gold, "answer") == (True, pred)


@pytest.mark.parametrize(
    "text,expected",
    [("34 ways", True), ("$34$ red apples", True), ("there are 34 ways", True), ("34 cm", True), ("34 m", True),
     ("3 in", True), ("\\infty", True), ("-\\infty", True), ("$\\emptyset$", True), ("\\varnothing", True),
     ("\\pi", True), ("x = e", True), ("34", False), ("x", False), ("\\theta", False), ("the number of ways", False),
     ("the number of 3 digit numbers", False), ("3 apples and 4 oranges", False), ("34 thousand", False),
     ("2 pi", False), ("2 x", False), ("\\alpha", False)],
)
def test_letters_end_a_value(text: str, expected: bool) -> None:
    assert letters_end_a_value(text) is expected


@pytest.mark.parametrize(
    "answer,remark,expected",
    [("\\infty", "that is, 35", True), ("\\infty", "that is, \\infty", False), ("\\infty", "that is, -\\infty", True),
     ("-\\infty", "i.e. -\\infty", False), ("\\emptyset", "or \\varnothing", False), ("\\emptyset", "= 0", True),
     ("$\\infty$", "\\approx 35", True), ("\\infty", "since n grows", None), ("\\infty", "that is, x", None),
     ("\\pi", "that is, 3", None), ("34", "that is, 35", None)],
)
def test_constant_remark_changes(answer: str, remark: str, expected: bool | None) -> None:
    assert constant_remark_changes(answer, remark) is expected


@pytest.mark.parametrize(
    "after,expected",
    [(" ways, that is, 35", ", that is, 35"), ("$ \\text{ ways}$ (or 35)", "$ (or 35)"), (" cm \\approx 35", " \\approx 35"),
     (" red apples, or 35", ", or 35"), (" ways", " ways"), (" when n = 35", " when n = 35"),
     (" thousand, or 35", " thousand, or 35"), (" K, or 35", " K, or 35")],
)
def test_after_its_noun(after: str, expected: str) -> None:
    assert after_its_noun(after) == expected


@pytest.mark.parametrize(
    "text,expected",
    [("2 pairs", 2), ("there is $1$ solution", 1), ("2 distinct real roots", 2), ("34 ways", None), ("34 cm", None),
     ("x", None), ("the number of solutions", None)],
)
def test_counted_items(text: str, expected: int | None) -> None:
    assert counted_items(text) == expected


@pytest.mark.parametrize(
    "answer,expected",
    [("\\infty (that is, 35)", None), ("\\infty (that is, \\infty)", "\\infty"), ("\\infty (since n grows)", "\\infty"),
     ("\\emptyset (or \\varnothing)", "\\emptyset"), ("\\infty (or 35)", None), ("\\pi (that is, 3.14)", "\\pi"),
     ("34 ways (that is, 35)", None), ("34 ways (that is, 34)", "34 ways"), ("34 cm, or about 34", "34 cm"),
     ("34 ways, or about 35", "34 ways, or about 35"), ("x, or 34", "x, or 34"), ("\\theta (mod 7)", "\\theta (mod 7)")],
)
def test_without_closing_remark_after_letters(answer: str, expected: str | None) -> None:
    assert without_closing_remark(answer) == expected


@pytest.mark.parametrize(
    "response",
    ["Answer: " + "34 ways that is " * 400, "\\boxed{34}" + " ways" * 2000 + ", or 35",
     "Answer: $34$" + " ways" * 2000 + " (that is, 35)", "Answer: \\infty" + ", that is, \\infty" * 500,
     "Answer: " + "a or " * 2000 + "34", "Answer: 34 " + "ways " * 3000 + "or about 34",
     "Answer: " + "$34$, that is, " * 800 + "$34$", "Answer: " + "\\infty (that is, " * 500 + "35" + ")" * 500,
     "Answer: " + "3 apples and " * 500 + "4 oranges, that is, 7", "Answer: 1" + " m" * 3000 + ", that is, 35",
     "\\boxed{34}" + "\\text{ ways}" * 1000 + " \\approx 35"],
)
def test_restatements_stay_fast_on_hostile_text(response: str) -> None:
    for extractor in ("answer", "boxed", "any"):
        start = time.perf_counter()
        prepare(response, "2", extractor)  # the parent-process part: string work only
        assert time.perf_counter() - start < 0.5, extractor
