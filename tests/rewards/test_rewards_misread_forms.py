"""Forms paid for another value, from the red teams' lists (stop 101) and this stop's probes: a ratio of
three parts read as a/b/c, a double factorial read as (n!)!, a mixed number before a factor multiplied out,
two fractions equated, numbers listed with words for one value, "&" between numbers with LaTeX's spaces,
"\\vert" between numbers, and TeX's "\\choose" without braces.
Rows marked "before:" had the other verdict.
-- misread_forms (as_meant), incomplete (_equates_two_numbers), verifier (_states_several_values),
equivalence (_JOINED_NUMBERS).
"""

from __future__ import annotations

import pytest

from dapo.rewards import verify
from dapo.rewards.misread_forms import as_meant, ratio_as_tuple, ratios_as_tuples

A = "Let me work through the problem. We count carefully and find the total.\n\n"

CASES: list[tuple[str, str, bool, str]] = [
    # a ratio of three parts or more: its order counts, its scale does not
    (A + "\\boxed{1:3:2}", "1:2:3", False, "boxed"),  # before: right (1/3/2 = 1/2/3)
    (A + "\\boxed{1:2:3:4}", "1:2:4:3", False, "boxed"),  # before: right
    (A + "\\boxed{1:2:3}", "\\frac{1}{6}", False, "boxed"),  # before: right
    (A + "\\boxed{\\frac{1}{6}}", "1:2:3", False, "boxed"),  # before: right
    (A + "\\boxed{0:5:1}", "0:1:2", False, "boxed"),  # before: right (0 both)
    (A + "\\boxed{2:4:6}", "1:2:3", True, "boxed"),  # before: wrong
    (A + "\\boxed{1\\colon 2\\colon 3}", "1:2:3", True, "boxed"),  # before: wrong
    (A + "\\boxed{\\frac12 : 1 : \\frac32}", "1:2:3", True, "boxed"),
    (A + "\\boxed{2:2\\sqrt{2}:6}", "1:\\sqrt2:3", True, "boxed"),
    (A + "\\boxed{1:3:\\sqrt{2}}", "1:\\sqrt2:3", False, "boxed"),  # before: right
    (A + "\\boxed{0:2:4}", "0:1:2", True, "boxed"),
    (A + "\\boxed{a:b:c = 1:2:3}", "1:2:3", True, "boxed"),
    (A + "\\boxed{1 : 2 : 3}", "1:2:3", True, "boxed"),
    (A + "\\boxed{3, 2, 1}", "1:2:3", False, "boxed"),
    (A + "\\boxed{a_1 : a_2 : a_3 = 1:2:3}", "1:2:3", True, "boxed"),  # a name with digits (the review)
    (A + "\\boxed{(1:2:3)}", "1:2:3", True, "boxed"),
    (A + "\\boxed{1:2:3 \\text{ (by mass)}}", "1:2:3", True, "boxed"),
    (A + "\\boxed{1:2:3 = 2:4:6}", "1:2:3", True, "boxed"),
    (A + "\\boxed{1:2:3}", "a_1:a_2:a_3 = 1:2:3", True, "boxed"),
    (A + "\\boxed{2:4:6}", "(1,2,3)", False, "boxed"),  # a ratio is no point (as before)
    (A + "\\boxed{(1,2,3)}", "2:4:6", False, "boxed"),
    (A + "\\boxed{2:4}", "1:2", True, "boxed"),  # a ratio of two: the fraction, as before
    (A + "\\boxed{2:1}", "1:2", False, "boxed"),
    # a double factorial
    (A + "\\boxed{3!!}", "720", False, "boxed"),  # before: right ((3!)!)
    (A + "\\boxed{5!!}", "15", True, "boxed"),  # before: wrong
    (A + "\\boxed{3!}", "6", True, "boxed"),
    # a mixed number before a factor
    (A + "\\boxed{2\\frac{1}{2}\\pi}", "\\pi", False, "boxed"),  # before: right (2 * 1/2 * pi)
    (A + "\\boxed{2\\frac{1}{2}\\pi}", "\\frac{5\\pi}{2}", True, "boxed"),  # before: wrong
    (A + "\\boxed{3\\frac{1}{4}x}", "\\frac{13x}{4}", True, "boxed"),
    (A + "\\boxed{2 \\cdot \\frac{1}{2}\\pi}", "\\pi", True, "boxed"),  # a product, written as one
    (A + "\\boxed{x^2\\frac{1}{2}}", "\\frac{x^2}{2}", True, "boxed"),  # after a power: a product
    (A + "\\boxed{\\sqrt 2\\frac12\\pi}", "\\frac{\\sqrt{2}\\pi}{2}", True, "boxed"),  # a root's argument
    (A + "\\boxed{2\\frac{1}{2}}", "\\frac52", True, "boxed"),
    # two rational numbers equated state no one value
    (A + "\\boxed{\\frac12 = \\frac23}", "2/3", False, "boxed"),  # before: right
    (A + "\\boxed{\\frac{1}{2} = \\frac{2}{3}}", "\\frac{2}{3}", False, "boxed"),  # before: right
    (A + "\\boxed{\\frac{2}{3} = \\frac{4}{6}}", "2/3", True, "boxed"),
    (A + "\\boxed{0.5 = \\frac23}", "2/3", False, "boxed"),
    # numbers listed with words, for one value
    (A + "\\boxed{3\\text{ red}, 4\\text{ blue}}", "3", False, "boxed"),  # before: right
    (A + "\\boxed{3 \\text{ cm}, 4 \\text{ cm}}", "3", False, "boxed"),  # before: right
    (A + "Answer: 3 \\text{ red}, 4 \\text{ blue}", "3", False, "answer"),  # before: right
    (A + "\\boxed{3\\text{ red}, 4\\text{ blue}}", "3, 4", True, "boxed"),
    (A + "\\boxed{3 \\text{ cm}, 3 \\text{ cm}}", "3", True, "boxed"),  # one value, twice (as "3, 3")
    (A + "\\boxed{\\frac{1}{2}, 0.5}", "\\frac12", True, "boxed"),  # one value in two forms
    (A + "\\boxed{\\frac{\\sqrt2}{2}, \\frac{1}{\\sqrt2}}", "\\frac{\\sqrt2}{2}", True, "boxed"),
    (A + "\\boxed{2, 3}", "x \\in \\{2, 3\\}", True, "boxed"),  # a set in the gold
    (A + "\\boxed{2, 3}", "x = \\{2, 3\\}", True, "boxed"),
    (A + "\\boxed{3 \\text{ red}, 3x}", "3", False, "boxed"),  # a value not computed
    (A + "\\boxed{\\frac12 \\text{ kg}, \\frac13 \\text{ kg}}", "\\frac12", False, "boxed"),
    (A + "\\boxed{-2021, 2021}", "\\pm 2021", True, "boxed"),  # math-verify's suite
    (A + "\\boxed{1, 2}", "(1, 2)", True, "boxed"),  # a point's coordinates: left to math-verify
    (A + "Answer: 1,000.99m²", "1000.99", True, "answer"),  # one number (math-verify's suite)
    # "&" between numbers, with LaTeX's spaces
    (A + "\\boxed{34\\ \\&\\ 35}", "35", False, "boxed"),  # before: right
    (A + "\\boxed{34\\;\\&\\;35}", "35", False, "boxed"),
    (A + "\\boxed{34 \\quad \\& \\quad 35}", "35", False, "boxed"),  # before: right
    (A + "\\boxed{2\\ \\|\\ 3}", "3", False, "boxed"),  # before: right
    (A + "\\boxed{3 \\vert 4}", "4", False, "boxed"),  # before: right
    (A + "\\boxed{\\vert -3 \\vert}", "3", True, "boxed"),  # an absolute value
    # TeX's binomial coefficient, unbraced in a box
    (A + "\\boxed{10 \\choose 3}", "120", True, "boxed"),  # before: wrong
    (A + "\\boxed{10 \\choose 3}", "3", False, "boxed"),  # before: right
    (A + "\\boxed{{10 \\choose 3}}", "120", True, "boxed"),
]


@pytest.mark.parametrize(("response", "gold", "expected", "extractor"), CASES)
def test_misread_forms(response: str, gold: str, expected: bool, extractor: str) -> None:
    assert verify(response, gold, extractor)[0] is expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("1:2", "1:2"), ("5!!", "15"), ("10!!", "3840"), ("5!!!", "5!!!"), ("2\\frac{1}{2}\\pi", "\\frac{5}{2}\\pi"),
     ("2\\frac{3}{2}\\pi", "2\\frac{3}{2}\\pi"), ("10 \\choose 3", "\\binom{10}{3}"), ("{n\\choose k}", "\\binom{n}{k}"),
     ("2 + 10 \\choose 3", "2 + 10 \\choose 3"), ("x^2\\frac{1}{2}\\pi", "x^2\\frac{1}{2}\\pi"), ("2\\frac{1}{2}", "2\\frac{1}{2}")],
)
def test_as_meant(answer: str, expected: str) -> None:
    assert as_meant(answer) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("1:2:3", "\\left(\\frac{1}{1}, \\frac{2}{1}, \\frac{3}{1}\\right)"),
     ("0 : 2 : 4", "\\left(\\frac{0}{2}, \\frac{2}{2}, \\frac{4}{2}\\right)"),
     ("a:b:c = 1:2:3", "\\left(\\frac{1}{1}, \\frac{2}{1}, \\frac{3}{1}\\right)"),
     ("\\left(1:2:3\\right) \\text{ by mass}", "\\left(\\frac{1}{1}, \\frac{2}{1}, \\frac{3}{1}\\right)"),
     ("1:2", None), ("0:0:0", None), ("\\{x : x > 0\\}", None), ("3:30:x=2", None), ("f(1:2:3)", None), ("(1,2,3)", None)],
)
def test_ratio_as_tuple(answer: str, expected: str | None) -> None:
    assert ratio_as_tuple(answer) == expected


def test_ratios_pair_only_with_ratios() -> None:
    assert ratios_as_tuples("1:3:2", "1:2:3") == (ratio_as_tuple("1:3:2"), ratio_as_tuple("1:2:3"))
    assert ratios_as_tuples("1:2:3", "\\frac16") is None  # a ratio against a number: two answers
    assert ratios_as_tuples("0.5", "1:2:3") is None
    assert ratios_as_tuples("(1,2,3)", "1:2:3") == ("(1,2,3)", "1:2:3")  # against a tuple: as before
