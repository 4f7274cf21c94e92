"""Answers paid for a value they do not state, from a red-team probe of extraction and hedges (stop 102):
labelled values read in the order written against a ground truth that names its tuple, a hedge after a box
inside another group, another choice letter after a box or in the answer, a value per case of a cases
environment, and invisible direction marks between two numbers. Rows marked "before:" had the other verdict.
-- answer_lists (named_tuple_as_list), boxes (_CLOSING_GROUPS, _CHOICE_AFTER), equivalence (_BRACKETED_CHOICE),
verifier (_states_several_values' cases, _INVISIBLE_CHARS).
"""

from __future__ import annotations

import pytest

from dapo.rewards import verify
from dapo.rewards.answer_lists import named_tuple_as_list

A = "Let me work through the problem. We count carefully and find the total.\n\n"
CASES_ENV = "\\boxed{\\begin{cases} 3 & \\text{if } n \\text{ is even} \\\\ 4 & \\text{if } n \\text{ is odd}\\end{cases}}"

CASES: list[tuple[str, str, bool, str]] = [
    # a ground truth that names its tuple is compared name by name
    (A + "\\boxed{y=3, x=4}", "(x, y) = (3, 4)", False, "boxed"),  # before: right (and right for x=4, y=3)
    (A + "\\boxed{y=3, x=4}", "x=4, y=3", True, "boxed"),
    (A + "\\boxed{y=4, x=3}", "(x, y) = (3, 4)", True, "boxed"),
    (A + "\\boxed{x=3, y=4}", "(x, y) = (3, 4)", True, "boxed"),
    (A + "\\boxed{(3, 4)}", "(x, y) = (3, 4)", True, "boxed"),  # in the gold's order
    (A + "\\boxed{(4, 3)}", "(x, y) = (3, 4)", False, "boxed"),
    (A + "\\boxed{(y,x) = (4, 3)}", "(x, y) = (3, 4)", True, "boxed"),  # before: wrong
    (A + "\\boxed{(x,y) = (4, 3)}", "(x, y) = (3, 4)", False, "boxed"),
    (A + "\\boxed{y=\\frac12, x=3}", "(x,y)=(3,\\frac12)", True, "boxed"),
    (A + "\\boxed{y=3, x=\\frac12}", "(x,y)=(3,\\frac12)", False, "boxed"),  # before: right
    # a hedge after a box that sits in another group
    (A + "\\boxed{\\boxed{3}} or 4", "3", False, "boxed"),  # before: right
    (A + "\\textbf{\\boxed{3}} or 4", "3", False, "boxed"),  # before: right
    (A + "\\left(\\boxed{3}\\right) or 4", "3", False, "any"),  # before: right
    (A + "Answer: \\textbf{\\boxed{3}} or 4", "3", False, "answer"),  # before: right
    (A + "\\boxed{\\frac{\\boxed{3}}{4}}", "3", False, "boxed"),  # before: right (a box inside a fraction)
    (A + "\\boxed{\\boxed{3}}", "3", True, "boxed"),
    (A + "\\textbf{\\boxed{3}}.", "3", True, "boxed"),
    (A + "\\textbf{\\boxed{3}} (three)", "3", True, "boxed"),
    # another choice letter
    (A + "\\boxed{B} or C", "B", False, "boxed"),  # before: right
    (A + "\\boxed{B} (or C)", "B", False, "boxed"),  # before: right
    (A + "\\boxed{(B)} or (C)", "B", False, "boxed"),  # before: right
    (A + "\\boxed{B}, maybe (C)", "B", False, "boxed"),  # before: right
    (A + "\\boxed{B}/C", "B", False, "boxed"),  # before: right
    (A + "$\\boxed{B} \\text{ or } C$", "B", False, "boxed"),  # before: right
    (A + "\\boxed{(B)(C)}", "B", False, "boxed"),  # before: right
    (A + "Answer: (B), (C)", "B", False, "answer"),  # before: right
    (A + "\\boxed{\\textbf{(B)}\\ 12,\\ \\textbf{(C)}\\ 13}", "B", False, "boxed"),  # before: right
    (A + "\\boxed{B}. A check confirms it.", "B", True, "boxed"),  # a sentence opening with a letter
    (A + "\\boxed{B} (C is wrong)", "B", True, "boxed"),
    (A + "\\boxed{B}. (A) is wrong.", "B", True, "boxed"),
    # ... a remark on another letter, or the same letter again, offers none (the review of f3cbab5)
    (A + "\\boxed{B} (A) fails.", "B", True, "boxed"),
    (A + "\\boxed{B}; (A) and (C) fail.", "B", True, "boxed"),
    (A + "\\boxed{B}, (C) is a trap.", "B", True, "boxed"),
    (A + "\\boxed{B}, simply B.", "B", True, "boxed"),
    (A + "\\boxed{B}, equivalently (B).", "B", True, "boxed"),
    (A + "\\boxed{B} (C).", "B", False, "boxed"),
    (A + "\\boxed{B}, maybe C is right too.", "B", False, "boxed"),
    # ... a letter joined to it by "and", a comma or "&" at the line's end (stop 104)
    (A + "\\boxed{B} and C.", "B", False, "boxed"),  # before: right
    (A + "\\boxed{B}, C", "B", False, "boxed"),  # before: right
    (A + "\\boxed{B} \\& C", "B", False, "boxed"),  # before: right
    (A + "$\\boxed{B}$ and $(C)$.", "B", False, "boxed"),  # before: right
    (A + "Answer: \\boxed{B} and C", "B", False, "answer"),  # before: right
    (A + "\\boxed{B} and C are wrong.", "B", True, "boxed"),
    (A + "\\boxed{B}, C double counts.", "B", True, "boxed"),
    (A + "\\boxed{B} and B", "B", True, "boxed"),
    (A + "\\boxed{(B)} (C) or (D)", "B", False, "boxed"),
    (A + "Answer: \\textbf{(C)}\\ P(A)", "C", True, "answer"),  # a function's argument, no choice
    (A + "Answer: \\textbf{(C)}\\ f(B) = 2", "C", True, "answer"),
    (A + "\\boxed{\\textbf{(C)}\\ P(E) = \\frac12}", "C", True, "boxed"),
    (A + "\\boxed{(C) 12}", "C", True, "boxed"),
    (A + "\\boxed{x} or y", "x", True, "boxed"),  # not a choice: left as before
    # a value per case, for one value
    (A + CASES_ENV, "4", False, "boxed"),  # before: right (the last case)
    (A + CASES_ENV, "3", False, "boxed"),
    (A + CASES_ENV.replace("cases", "dcases"), "4", False, "boxed"),  # before: right
    (A + CASES_ENV, CASES_ENV[7:-1], True, "boxed"),  # a piecewise ground truth
    (A + "\\boxed{\\begin{cases} 3 \\end{cases}}", "3", True, "boxed"),  # one case
    (A + "\\boxed{\\begin{cases} 3 & n \\text{ even} \\\\ 3 & n \\text{ odd} \\end{cases}}", "3", True, "boxed"),  # one value
    (A + "\\boxed{\\left\\{\\begin{array}{ll} 3 & n \\text{ even} \\\\ 4 & n \\text{ odd}\\end{array}\\right.}", "4", False, "boxed"),
    (A + "\\boxed{\\left\\{\\begin{array}{ll} 3 & n \\text{ even} \\\\ 3 & n \\text{ odd}\\end{array}\\right.}", "3", True, "boxed"),
    # direction marks and other invisible characters show nothing
    (A + "Answer: \u200f3 4", "4", False, "answer"),  # before: right
    (A + "Answer: 3 \u200e4", "3", False, "answer"),  # before: right
    (A + "Answer: 3 \u180e4", "4", False, "answer"),  # before: right
    (A + "Answer: 3\u00ad4", "34", True, "answer"),  # a soft hyphen inside a number
    (A + "Answer: 3\u20624", "34", True, "answer"),
]


@pytest.mark.parametrize(("response", "gold", "expected", "extractor"), CASES)
def test_red_team_extraction(response: str, gold: str, expected: bool, extractor: str) -> None:
    assert verify(response, gold, extractor)[0] is expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("(x, y) = (3, 4)", "x=3, y=4"), ("(a,b,c)=(1, \\frac12, 3)", "a=1, b=\\frac12, c=3"), ("(3, 4)", "(3, 4)"),
     ("(x, y) = (3, 4, 5)", "(x, y) = (3, 4, 5)"), ("(x, x) = (3, 4)", "(x, x) = (3, 4)"), ("x = 3", "x = 3")],
)
def test_named_tuple_as_list(answer: str, expected: str) -> None:
    assert named_tuple_as_list(answer) == expected
