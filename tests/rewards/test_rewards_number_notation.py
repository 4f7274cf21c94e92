"""Answers the verifier paid from a red-team probe of number notation (stop 101): a response paid for a
value it does not state, often for two unequal ground truths at once. A number in brackets after a value
restates it or is a second answer, never a factor (``\\frac34 (0.75)`` was read as 9/16, as math-verify
multiplies it, and refused for 3/4). A tuple for a ground truth that names its values (``x=5, y=2``) is
read as the tuple names them, or in the gold's order, never as a set. A decimal (or scientific literal) that
math-verify pays must be the other side's value rounded to its places, never 0 for a value that is not.
Rows marked "before:" had the other verdict.
Unicode fractions are read (``3½`` is 3\\frac{1}{2}), and a number before a unit or percent sign is compared
as the number (``3 1/2 hours``).
-- number_forms (without_closing_remark, _bare_number, _restated_in_brackets), answer_lists (tuple_as_named),
math_verify_call (_decimal_holds, _expanded), unicode_math (_VULGAR_FRACTIONS, _SCRIPT_FRACTION),
equivalence (_number_without_unit, _SIDE_BY_SIDE), number_forms (_TOLERANCE).
"""

from __future__ import annotations

import pytest

from dapo.rewards import verify

A = "Let me work through the problem. We count carefully and find the total.\n\n"

CASES: list[tuple[str, str, bool, str]] = [
    # a number in brackets after a value: the value restated, exactly, rounded or as a percentage
    (A + "\\boxed{\\frac{3}{4} (0.75)}", "3/4", True, "boxed"),  # before: wrong
    (A + "\\boxed{\\frac{3}{4} (0.75)}", "9/16", False, "boxed"),  # before: right (the product)
    (A + "Answer: $\\frac{3}{4}$ (0.75)", "3/4", True, "answer"),  # before: wrong
    (A + "Answer: 0.5 (1/2)", "1/4", False, "answer"),  # before: right
    (A + "Answer: 0.75 (3/4)", "3/4", True, "answer"),
    (A + "Answer: \\frac12 (50\\%)", "1/2", True, "answer"),  # before: wrong
    (A + "Answer: \\frac12 (50\\%)", "1/4", False, "answer"),  # before: right
    (A + "Answer: \\frac13 (0.333)", "1/3", True, "answer"),  # before: wrong
    (A + "Answer: \\sqrt{2} (1.414)", "\\sqrt{2}", True, "answer"),  # before: wrong
    (A + "Answer: 2\\pi (6.28)", "2\\pi", True, "answer"),  # before: wrong
    (A + "Answer: 34 (34.0)", "34", True, "answer"),
    (A + "Answer: 2^{10} (1024)", "1024", True, "answer"),  # a closed form's value
    (A + "Answer: 2^{10} (1000)", "1024", False, "answer"),
    (A + "Answer: \\frac{3}{4} (0.8)", "3/4", True, "answer"),  # rounded half up
    (A + "Answer: \\frac{1}{3} (33.3\\%)", "1/3", True, "answer"),
    (A + "Answer: 2\\frac{1}{2} (2.5)", "\\frac{5}{2}", True, "answer"),  # a mixed number's value
    (A + "Answer: 25 (25\\%)", "25", True, "answer"),  # the unit named
    # ... or another value: a second answer
    (A + "Answer: \\frac{3}{4} (3/5)", "3/4", False, "answer"),  # a fraction near it: no rounding
    (A + "Answer: \\frac{1}{3} (0)", "1/3", False, "answer"),
    (A + "Answer: 2\\pi (6)", "2\\pi", False, "answer"),
    (A + "Answer: \\frac{3}{4} (0.7)", "3/4", False, "answer"),  # at a tie, cut short
    (A + "Answer: \\frac{1}{4} (0.25\\%)", "1/4", False, "answer"),  # the percent sign counts
    (A + "Answer: \\frac{1}{2}(3)", "3/2", False, "answer"),  # before: right
    (A + "Answer: \\frac34 (0.5)", "3/4", False, "answer"),
    (A + "Answer: \\frac13 (0.5)", "1/6", False, "answer"),
    # brackets that are no number alone keep their readings
    (A + "Answer: \\frac12 (x+1)", "\\frac{x+1}{2}", True, "answer"),  # a product
    (A + "Answer: 34 (3 cases)", "34", True, "answer"),  # a remark
    (A + "Answer: 34 (n = 3)", "34", True, "answer"),
    # a tuple for a ground truth that names each value: read as it names them, or in the gold's order
    (A + "Answer: (x, y) = (2, 5)", "x=5, y=2", False, "answer"),  # before: right
    (A + "Answer: (x, y) = (2, 5)", "x=2, y=5", True, "answer"),
    (A + "Answer: (y, x) = (5, 2)", "x=2, y=5", True, "answer"),
    (A + "Answer: (2, 5)", "x=5, y=2", False, "answer"),  # before: right
    (A + "Answer: $\\left(2, 5\\right)$", "x=2, y=5", True, "answer"),
    (A + "\\boxed{(7,5,2)}", "x=2, y=5, z=7", False, "boxed"),  # before: right
    (A + "\\boxed{(2,5,7)}", "x=2, y=5", False, "boxed"),  # three values for two
    (A + "Answer: (x, y) = (3, \\frac12)", "x=\\frac12, y=3", False, "answer"),  # before: right
    (A + "Answer: (x, y) = (\\frac12, 3)", "x=\\frac12, y=3", True, "answer"),
    (A + "Answer: (5, 2)", "(2, 5)", False, "answer"),  # a tuple ground truth: in order, as before
    # a decimal states its value to its places: math-verify rounded both sides to 6, so tiny values were equal
    (A + "Answer: 0.0", "\\frac{1}{6^{10}}", False, "answer"),  # before: right
    (A + "\\boxed{0.000000}", "\\binom{52}{5}^{-1}", False, "boxed"),  # before: right
    (A + "\\boxed{0.000000}", "0", True, "boxed"),
    (A + "Answer: 0.0000003", "10^{-9}", False, "answer"),  # before: right
    (A + "Answer: 0.0000003", "\\frac{1}{3000000}", True, "answer"),
    (A + "Answer: 10^{-9}", "0.0000001", False, "answer"),  # before: right (the ground truth's side)
    (A + "Answer: 10^{-9}", "0.000000001", True, "answer"),
    (A + "Answer: 2e-8", "10^{-7}", False, "answer"),  # before: right
    (A + "Answer: 1.5 \\times 10^{-6}", "0.0000016", False, "answer"),  # before: right
    (A + "Answer: 1.6 \\times 10^{-6}", "\\frac{3}{2000000}", False, "answer"),  # before: right
    (A + "Answer: 1.5 \\times 10^{-6}", "\\frac{3}{2000000}", True, "answer"),
    (A + "Answer: 3.85 \\times 10^{-7}", "\\frac{1}{2598960}", True, "answer"),  # before: wrong
    (A + "Answer: 0.0000000165", "\\frac{1}{6^{10}}", True, "answer"),
    (A + "Answer: 0.00000001654", "\\frac{1}{6^{10}}", True, "answer"),  # 1.65381...e-8 rounded
    (A + "Answer: 0.00000001653", "\\frac{1}{6^{10}}", False, "answer"),  # an answer cut short: not its value
    (A + "Answer: \\sqrt{17}", "4.123105625617661", True, "answer"),  # a ground truth rounded
    (A + "Answer: \\pi", "3.1415926", True, "answer"),  # ... or cut short (3.1415927 rounded)
    (A + "Answer: \\sqrt{2}", "1.4142136", True, "answer"),
    (A + "Answer: 0.0", "\\sin 0", True, "answer"),  # 0 stated for 0
    # Unicode fractions are read (the ½ of 3½ was dropped: paid for 3)
    (A + "Answer: 3½", "3", False, "answer"),  # before: right
    (A + "Answer: 3½", "7/2", True, "answer"),  # before: wrong
    (A + "Answer: 3¹⁄₂", "7/2", True, "answer"),  # before: wrong
    (A + "\\boxed{⅓}", "\\frac13", True, "boxed"),
    (A + "Answer: “34”", "34", True, "answer"),  # quotation marks show the answer
    # a mixed number before a unit or percent sign (math-verify read 3 1/2 hours as (3+1)/2)
    (A + "Answer: 3 1/2 hours", "2", False, "answer"),  # before: right
    (A + "Answer: 3 1/2 hours", "7/2", True, "answer"),  # before: wrong
    (A + "Answer: 3 1/2 hours", "3.5 \\text{ hours}", True, "answer"),  # before: wrong
    (A + "Answer: 12 1/2 %", "12.5", True, "answer"),  # before: wrong
    (A + "Answer: 1/2\\%", "50", False, "answer"),  # before: right (1/(2%))
    (A + "Answer: 50\\%", "1/2", False, "answer"),  # before: right; a percentage is its number
    # two numbers side by side, and a tolerance, are no one value (math-verify added them, or read the tolerance)
    (A + "Answer: 12 34", "46", False, "answer"),  # before: right
    (A + "Answer: 12\\,34", "46", False, "answer"),  # before: right
    (A + "Answer: 3 \\quad 4", "7", False, "answer"),  # before: right
    (A + "Answer: {3}{4}", "7", False, "answer"),  # before: right
    (A + "Answer: 12\\,345", "12345", True, "answer"),  # thousands
    (A + "Answer: 1 000.5", "1000.50", True, "answer"),
    (A + "Answer: 34 (\\pm 1)", "1", False, "answer"),  # before: right
    (A + "Answer: 34 (+/- 1)", "34", False, "answer"),
]


@pytest.mark.parametrize(("response", "gold", "expected", "extractor"), CASES)
def test_number_notation(response: str, gold: str, expected: bool, extractor: str) -> None:
    assert verify(response, gold, extractor)[0] is expected
