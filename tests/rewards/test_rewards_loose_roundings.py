"""Verdict fixes of the built-in verifier (rows marked "before:" had the other verdict before this change;
the rest guard what stays).

1. A loose rounding must show that it is one (:mod:`~dapo.rewards.loose_roundings`): after ``=``, "i.e.",
   "that is" or "which is", a decimal restates an irrational answer only with a decimal point and two
   significant digits (``\\sqrt2, i.e. 1.414``, ``\\pi, i.e. 3.14``), or when it is the value exactly
   (``\\sqrt4, i.e. 2``). ``\\pi, that is, 3`` was accepted for ``\\pi`` (3 as pi rounded to the units).
2. A count of items then the items after "i.e." or "namely" (``2 solutions, i.e. 3 and 5``) states the
   items, as "that is" did on the Answer line (:func:`~dapo.rewards.restatements.items_after_count`).
3. A reason after a value (``34 ways, since n is even``, ``34 (because n is 35)``) is a remark: its copula
   is the reason's, not the answer's (:mod:`~dapo.rewards.extract`).
4. A restatement in other units of the same quantity (``5 cm, i.e. 50 mm``) restates the value, exactly
   converted; another quantity (``5 cm, i.e. 5 mm``) is a second value (:func:`~dapo.rewards.units.other_units_change`),
   after an "or" too (``5 cm, or 5 mm`` was right for 5), with the unit after a box (``\\boxed{5} cm, i.e. 5 mm`` was
   right) and across two ``$...$`` segments (``$5$ cm, i.e. $50$ mm`` was a hedge: :func:`~dapo.rewards.units.join_quantities`).
5. An explicit approximation of an irrational answer (``\\pi (about 3)``) restates it, never states the rounding.
-- loose_roundings, restatements, extract, units, number_forms, verifier.
"""

from __future__ import annotations

import time
from fractions import Fraction

import pytest

from dapo.rewards import verify
from dapo.rewards.answer_lists import answer_items
from dapo.rewards.counts import item_count
from dapo.rewards.loose_roundings import shows_a_rounding
from dapo.rewards.restatements import items_after_count
from dapo.rewards.units import other_units_change, quantity
from dapo.rewards.verifier import prepare

A = "Let me think step by step.\nSo the total is computed.\n"
FORMS = ("Answer: {}", "So \\boxed{{{}}}", "Answer: ${}$")  # the Answer line, a box, a $...$ segment

# (answer text, ground truth, correct), each checked in the three FORMS
CASES: list[tuple[str, str, bool]] = [
    # --- 1. a loose rounding shows decimals and two significant digits ---
    ("\\pi, that is, 3", "\\pi", False),  # before: right
    ("\\pi, i.e. 3", "\\pi", False),  # before: right
    ("\\pi (that is, 3)", "\\pi", False),  # before: right
    ("\\pi (= 3)", "\\pi", False),  # before: right
    ("\\pi (i.e. 3)", "\\pi", False),  # before: right
    ("\\pi, equivalently 3", "\\pi", False),  # before: right
    ("\\sqrt{2}, i.e. 1", "\\sqrt{2}", False),  # before: right
    ("\\sqrt2 (= 1)", "\\sqrt2", False),  # before: right
    ("e, that is, 3", "e", False),  # before: right
    ("e^{10}, i.e. 22026", "e^{10}", False),  # before: right (an integer after "i.e." states an integer)
    ("\\frac{\\sqrt2}{100}, i.e. 0.01", "\\frac{\\sqrt2}{100}", False),  # before: right (one significant digit)
    ("\\pi, i.e. 3.0", "\\pi", False),
    ("\\frac{1}{3}, i.e. 0", "\\frac{1}{3}", False),
    ("\\pi = 3", "\\pi", False),
    ("\\sqrt2, i.e. 1.414", "\\sqrt2", True),
    ("\\sqrt2 (= 1.4)", "\\sqrt2", True),
    ("\\pi, i.e. 3.14", "\\pi", True),
    ("\\pi \\approx 3.14", "\\pi", True),
    ("e, that is, 2.72", "e", True),
    ("e^{10}, i.e. 22026.47", "e^{10}", True),
    ("\\frac{\\sqrt2}{100}, i.e. 0.014", "\\frac{\\sqrt2}{100}", True),
    ("2\\pi, that is, 6.28", "2\\pi", True),
    ("2\\pi (= 6.28)", "2\\pi", True),
    ("\\sqrt{4}, i.e. 2", "\\sqrt{4}", True),  # the value exactly, no rounding
    ("\\sqrt4 (= 2)", "2", True),
    ("\\sqrt4 (= 2.0)", "2", True),
    # --- 2. a count, then as many items after "i.e." / "namely" ---
    ("2 solutions, i.e. 3 and 5", "3, 5", True),  # before: wrong
    ("2 solutions, that is, 3 and 5", "3, 5", True),  # before: wrong in a box or $...$ (right on the Answer line)
    ("2 roots (i.e. 3 and 5)", "3, 5", True),  # before: wrong
    ("2 solutions, namely 3 and 5", "3, 5", True),  # before: wrong
    ("2 solutions, i.e. x = 3 and x = 5", "3, 5", True),  # before: wrong
    ("1 solution, i.e. 3", "3", True),
    ("2 solutions, i.e. 3", "3", False),
    ("3 solutions, i.e. 3 and 5", "3, 5", False),
    ("2 solutions, i.e. 3 and 5", "2", False),
    ("2 solutions, i.e. 3 and 5", "3", False),
    ("34 ways, i.e. 35", "35", False),
    # --- 4. another unit, the same quantity ---
    ("5 cm, i.e. 50 mm", "5", True),  # before: wrong
    ("5 cm (i.e. 50 mm)", "5", True),  # before: wrong
    ("5 cm, that is, 50 mm", "5", True),  # before: wrong
    ("2 h (= 120 min)", "2", True),  # before: wrong
    ("1 kg (i.e. 1000 g)", "1", True),  # before: wrong
    ("5 in, that is, 12.7 cm", "5", True),  # before: wrong
    ("5 cm, i.e. 50 mm", "50", False),
    ("5 cm, i.e. 5 mm", "5", False),  # before: right (every number was 5)
    ("5 cm (i.e. 5 mm)", "5", False),  # before: right
    ("1 mi, i.e. 1.6 km", "1", False),  # a rounded conversion: another value
    ("5 cm, i.e. 50", "5", False),
    ("34 cm, that is, 34 cm", "34", True),
]

# Answer-line only (3. a reason after a comma; a box holds the answer alone)
LINE_CASES: list[tuple[str, str, bool]] = [
    ("34 ways, since n is even", "34", True),  # before: wrong (its "is" was read as the answer's copula)
    ("34, since n is even", "34", True),  # before: wrong
    ("34, because n is even", "34", True),  # before: wrong
    ("\\frac{1}{3}, since n is even", "\\frac13", True),  # before: wrong
    ("The answer is 34, since n is even", "34", True),
    ("x is 34, since n is even", "34", True),
    ("34 ways, since n is even", "35", False),
    ("34, since n is 35", "35", False),  # before: right (35 read after the reason's copula)
    ("34, since n is 35", "34", True),  # before: wrong (a reason stating another number kept the line whole; reasons.py)
    ("5, since x is 5", "5", True),  # one whose every number is the answer's is a remark
    ("34 ways, since n is 34", "34", True),
    ("34 (since n is 35)", "35", False),  # before: right (its "is" read as the answer's copula)
    ("34 (because n is 35)", "34", True),  # before: wrong
    ("34 (since n is even)", "34", True),
    ("the answer, since it is 35", "35", True),  # after words with no value, read as before
]

# 4. (continued) the unit written outside a box or a $...$ segment, and an "or": (response, gold, correct, extractor)
UNIT_FORM_CASES: list[tuple[str, str, bool, str]] = [
    (A + "Answer: \\boxed{5} cm, i.e. 5 mm", "5", False, "answer"),  # before: right (read against 5, no unit)
    (A + "So \\boxed{5} cm, i.e. 5 mm", "5", False, "boxed"),  # before: right
    (A + "So \\boxed{5} cm (i.e. 5 mm)", "5", False, "any"),  # before: right
    (A + "So \\boxed{5 \\text{ cm}}, i.e. 5 mm", "5", False, "boxed"),  # before: right
    (A + "So \\boxed{5} cm, or 5 mm", "5", False, "boxed"),  # before: right
    (A + "Answer: \\boxed{5} cm, i.e. 50 mm", "5", True, "answer"),  # before: wrong
    (A + "So \\boxed{5} cm, i.e. 50 mm", "5", True, "boxed"),  # before: wrong
    (A + "So \\boxed{5} cm (i.e. 50 mm)", "5", True, "any"),  # before: wrong
    (A + "So \\boxed{5 \\text{ cm}}, i.e. 50 mm", "5", True, "boxed"),  # before: wrong
    (A + "So \\boxed{5} cm, or 50 mm", "5", True, "boxed"),  # before: wrong
    (A + "So \\boxed{5} cm, i.e. 50 mm", "50", False, "boxed"),
    (A + "Answer: 5 cm, or 5 mm", "5", False, "answer"),  # before: right (every number was 5)
    (A + "Answer: 5 cm (or 5 mm)", "5", False, "answer"),  # before: right
    (A + "Answer: 5 cm, or 50 mm", "5", True, "answer"),  # before: wrong (a hedge)
    (A + "Answer: 5 cm (or 50 mm)", "5", True, "answer"),  # before: wrong
    (A + "Answer: 5 cm, or equivalently 50 mm", "5", True, "answer"),  # before: wrong
    (A + "Answer: 5 cm, or 50 mm", "50", False, "answer"),
    (A + "Answer: 5 cm, or 5 s", "5", False, "answer"),  # before: right
    (A + "Answer: 5 cm, or 34", "5", False, "answer"),
    (A + "Answer: $5$ cm, i.e. $50$ mm", "5", True, "answer"),  # before: wrong (two segments, a hedge)
    (A + "Answer: $5$ cm, that is, $50$ mm", "5", True, "answer"),  # before: wrong
    (A + "Answer: $5$ cm (i.e. $50$ mm)", "5", True, "answer"),  # before: wrong
    (A + "Answer: $5$ cm, or $50$ mm", "5", True, "answer"),  # before: wrong
    (A + "Answer: $5 \\text{ cm}$, or $50 \\text{ mm}$", "5", True, "answer"),  # before: wrong
    (A + "Answer: $5 cm$, or $50 mm$", "5", True, "answer"),  # before: wrong
    (A + "Answer: the side is $5$ cm, i.e. $50$ mm", "5", True, "answer"),  # before: wrong
    (A + "Answer: $5$ cm, i.e. 5 mm", "5", False, "answer"),  # before: right (read against the bare 5)
    (A + "Answer: $5$ cm (i.e. 5 mm)", "5", False, "answer"),  # before: right
    (A + "Answer: $5$ cm, or 5 s", "5", False, "answer"),  # before: right
    (A + "Answer: $5$ cm, i.e. 50 mm", "5", True, "answer"),  # before: wrong
    (A + "Answer: $2$ h, or $120$ min", "2", True, "answer"),  # before: wrong
    (A + "Answer: $5$ cm, i.e. $5$ mm", "5", False, "answer"),
    (A + "Answer: $5$ cm (i.e. $5$ mm)", "5", False, "answer"),
    (A + "Answer: $5$ cm, or $5$ mm", "5", False, "answer"),
    (A + "Answer: $5$ cm, i.e. $50$ mm", "50", False, "answer"),
    (A + "Answer: $5$ cm, i.e. $50$", "5", False, "answer"),  # no unit after the second: not converted
    (A + "Answer: $5$ cm, or $34$ cm", "5", False, "answer"),
    (A + "Answer: $34$, or $35$", "34", False, "answer"),
]

# 5. An irrational answer and a rounding in a remark (loose roundings and approximations): an explicit
# approximation is a rounding to the places it gives (``\\pi (about 3)`` restates pi), never the answer itself
# (wrong for 3); a closed form after a number approximates it by another value.
APPROXIMATION_CASES: list[tuple[str, str, bool, str]] = [
    (A + "Answer: \\pi (about 3)", "3", False, "answer"),
    (A + "Answer: \\pi (about 3)", "\\pi", True, "answer"),
    (A + "Answer: \\boxed{\\pi} (about 3)", "3", False, "answer"),
    (A + "So \\boxed{\\pi} (about 3)", "3", False, "boxed"),
    (A + "So \\boxed{\\pi} (about 3)", "\\pi", True, "boxed"),
    (A + "Answer: 3 (about \\pi)", "3", False, "answer"),
    (A + "Answer: 3 (about \\pi)", "\\pi", False, "answer"),
    (A + "Answer: e (roughly 2.7)", "2.7", False, "answer"),
    (A + "Answer: e (roughly 2.7)", "e", True, "answer"),
    (A + "Answer: e (roughly 2.8)", "e", False, "answer"),
    (A + "Answer: \\pi (about 3.15)", "\\pi", False, "answer"),
    (A + "Answer: \\pi (= 3)", "3", False, "answer"),
]


@pytest.mark.parametrize("answer,gold,correct", CASES)
@pytest.mark.parametrize("form", FORMS)
def test_verdicts(form: str, answer: str, gold: str, correct: bool) -> None:
    extractor = "boxed" if "boxed" in form else "answer"
    assert verify(A + form.format(answer), gold, extractor)[0] is correct


@pytest.mark.parametrize("answer,gold,correct", LINE_CASES)
def test_reason_after_a_comma(answer: str, gold: str, correct: bool) -> None:
    assert verify(A + "Answer: " + answer, gold, "answer")[0] is correct


@pytest.mark.parametrize("response,gold,correct,extractor", UNIT_FORM_CASES + APPROXIMATION_CASES)
def test_unit_and_approximation_forms(response: str, gold: str, correct: bool, extractor: str) -> None:
    assert verify(response, gold, extractor)[0] is correct


@pytest.mark.parametrize(
    "number,expected",
    [("1.414", True), ("3.1", True), ("0.14", True), ("3.0", True), ("1,414.2", True), ("-1.4", True), ("3", False),
     ("22026", False), ("0.01", False), ("0.3", False), ("-3", False), ("1", False)],
)
def test_shows_a_rounding(number: str, expected: bool) -> None:
    assert shows_a_rounding(number) is expected


def _items_in(text: str) -> int:
    return item_count(answer_items(text))


@pytest.mark.parametrize(
    "answer,expected",
    [("2 solutions, i.e. 3 and 5", "3 and 5"), ("2 roots (that is, 1 and 2)", "1 and 2"), ("2 pairs, namely (1,2), (3,4)", "(1,2), (3,4)"),
     ("1 solution, ie 3", "3"), ("2 solutions, i.e. 3", None), ("3 solutions, i.e. 3 and 5", None), ("34 ways, i.e. 35", None),
     ("x, i.e. 3", None), ("2 roots (that is, 1 and 2", None), ("3 and 5", None)],
)
def test_items_after_count(answer: str, expected: str | None) -> None:
    assert items_after_count(answer, _items_in) == expected


@pytest.mark.parametrize(
    "remark,answer,expected",
    [("i.e. 50 mm", "5 cm", False), ("= 120 min", "2 h", False), ("that is, 12.7 cm", "5 in", False),
     ("i.e. 500 mm^2", "5 cm^2", False), ("i.e. 50 \\text{ mm}", "5 \\text{ cm}", False), ("i.e. 5 mm", "5 cm", True),
     ("i.e. 1.6 km", "1 mi", True), ("i.e. 5 s", "5 cm", True), ("i.e. 50", "5 cm", None), ("i.e. 50 mm", "5", None),
     ("or 50 mm", "5 cm", False), ("or 5 mm", "5 cm", True), ("(or 50 mm)", "5 cm", False), ("(i.e. 5 mm)", "5 cm", True),
     (", or equivalently 50 mm", "5 cm", False), ("or about 50 mm", "5 cm", None), ("i.e. 30 days", "1 month", None), ("i.e. 50 apples", "5 cm", None)],
)
def test_other_units_change(remark: str, answer: str, expected: bool | None) -> None:
    assert other_units_change(remark, answer) is expected


@pytest.mark.parametrize(
    "text,expected",
    [("50 mm", ("length^1", Fraction(1, 20))), ("2 h", ("time^1", Fraction(7200))), ("1 lb", ("mass^1", Fraction("453.59237"))),
     ("3 cm^2", ("length^2", Fraction(3, 10000))), ("5", None), ("5 apples", None), ("30^\\circ", None)],
)
def test_quantity(text: str, expected: tuple[str, Fraction] | None) -> None:
    assert quantity(text) == expected


@pytest.mark.parametrize(
    "response",
    ["Answer: 2 solutions, i.e. " + "3 and " * 3000 + "5", "Answer: " + "2 solutions, i.e. " * 2000 + "3",
     "Answer: 34" + ", since n is even" * 2000, "Answer: 5 cm" + ", i.e. 50 mm" * 2000,
     "Answer: \\pi" + ", i.e. 3" * 3000, "\\boxed{2 solutions (that is, " + "(" * 3000 + "}"],
)
def test_stays_fast_on_hostile_text(response: str) -> None:
    for extractor in ("answer", "boxed", "any"):
        start = time.perf_counter()
        prepare(response, "3, 5", extractor)  # the parent-process part: string work only
        assert time.perf_counter() - start < 0.5, extractor
