"""Sets of reals: inequality disjunctions, inequalities and intervals (dapo.rewards.inequalities)."""

from __future__ import annotations

import time

import pytest

from dapo.rewards import verify
from dapo.rewards.inequalities import RealSet, interval_union, is_inequality_disjunction, real_set


@pytest.mark.parametrize(
    ("answer", "union"),
    [("x<-1 \\text{ or } x>2", "(-\\infty,-1)\\cup(2,\\infty)"),
     ("x < -1 or x > 2", "(-\\infty,-1)\\cup(2,\\infty)"),
     ("x<-1 \\lor x>2", "(-\\infty,-1)\\cup(2,\\infty)"),
     ("x \\le 0 \\text{ or } x \\ge 3", "(-\\infty,0]\\cup[3,\\infty)"),
     ("x<=0 \\vee x>=3", "(-\\infty,0]\\cup[3,\\infty)"),
     ("x > 2 or x < -1", "(-\\infty,-1)\\cup(2,\\infty)"),  # unbounded-below first
     ("-1 > x or 2 < x", "(-\\infty,-1)\\cup(2,\\infty)"),  # the variable on the right
     ("-1 < x \\leq 2 \\text{ or } x>5", "(-1,2]\\cup(5,\\infty)"),  # a chain
     ("5 \\ge x > 3 or x \\le 0", "(-\\infty,0]\\cup(3,5]"),
     ("x \\lt \\frac{1}{2} \\vee x \\gt \\sqrt{2}", "(-\\infty,\\frac{1}{2})\\cup(\\sqrt{2},\\infty)"),
     ("t<a or t>b", "(-\\infty,a)\\cup(b,\\infty)")],
)
def test_disjunction_becomes_its_interval_union(answer: str, union: str) -> None:
    assert interval_union(answer) == union


@pytest.mark.parametrize(
    "answer",
    ["x>2",  # one inequality: a set (real_set), but not a disjunction
     "x=3 or x=4", "34 or 35",  # a hedge: "or" offers two values
     "x<1 or y>2",  # two variables
     "x < 2x or x > 3", "x<3 apples or x>5", "x<1,000 or x>2",  # not bounds
     "x > 1 and x < 3 or x > 5", "a<x>b or x<1", "x \\in (1,2) or x>3",
     "x<1 or", "or x<1", "x<1 or x>2 or x=5"],
)
def test_not_a_disjunction(answer: str) -> None:
    assert interval_union(answer) is None
    assert not is_inequality_disjunction(answer)


def test_long_answers_are_not_parsed() -> None:
    started = time.perf_counter()
    assert interval_union("x<1 or " * 20_000 + "x>2") is None
    assert interval_union("x<1 or x>2" + " " * 2000) is None
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("x > 2", RealSet("inequality", "(2,\\infty)", "x")),
     ("2 \\le y", RealSet("inequality", "[2,\\infty)", "y")),
     ("-1 < x \\leq 2", RealSet("inequality", "(-1,2]", "x")),
     ("x<-1 \\text{ or } x>2", RealSet("disjunction", "(-\\infty,-1)\\cup(2,\\infty)", "x")),
     ("(2,\\infty)", RealSet("interval", "(2,\\infty)", None)),
     ("\\left[ -1, \\frac{1}{2} \\right)", RealSet("interval", "\\left[ -1, \\frac{1}{2} \\right)", None)),
     ("(-\\infty, 0] \\cup (3, \\infty)", RealSet("interval", "(-\\infty, 0] \\cup (3, \\infty)", None)),
     ("t \\in (0, 1)", RealSet("interval", "(0, 1)", "t")),
     ("5", None), ("x = 3", None), ("\\{1, 2\\}", None), ("2x > 4", None), ("(1, 2, 3)", None),
     ("(1,2), (3,4)", None), ("f(x) > 0", None), ("x > 2 \\text{ apples}", None), ("(a, b]x", None)],
)
def test_real_set(answer: str, expected: RealSet | None) -> None:
    assert real_set(answer) == expected


U = "(-\\infty,-1)\\cup(2,\\infty)"


@pytest.mark.parametrize(
    ("gold", "answer", "expected"),
    [  # an inequality and the interval it states are one answer, either way round (before: only
       # the interval for an inequality gold; x > 2 for (2,\infty) was wrong)
     ("x > 2", "(2,\\infty)", True), ("(2,\\infty)", "x > 2", True),
     ("x \\geq 2", "[2,\\infty)", True), ("[2,\\infty)", "x \\geq 2", True),
     ("(-1,2]", "-1 < x \\le 2", True), ("x \\in (2, \\infty)", "x > 2", True),
     ("x<-1 \\text{ or } x>2", U, True), (U, "x<-1 or x>2", True),
     ("(2,\\infty)", "y > 2", True),  # a bare interval names no variable
     # another set is wrong: an endpoint, an open end for a closed one
     ("(2,\\infty)", "x \\ge 2", False), ("[2,\\infty)", "x > 2", False), ("(2,\\infty)", "x > 3", False),
     ("(-1,2]", "-1 \\le x \\le 2", False), (U, "x > 2", False),
     # sets stated in two different variables are different answers (before: a disjunction's was ignored)
     ("x > 2", "y \\in (2,\\infty)", False), ("x<-1 \\text{ or } x>2", "y<-1 or y>2", False),
     ("x > 2", "y > 2", False),
     # two inequalities are compared as relations, as before
     ("x < 1", "-x > -1", True)],
)
def test_inequality_and_interval_are_one_answer(gold: str, answer: str, expected: bool) -> None:
    assert verify(f"Work.\nAnswer: ${answer}$", gold)[0] is expected
    assert verify(f"Work. So \\boxed{{{answer}}}.", gold, extractor="boxed")[0] is expected


@pytest.mark.parametrize(
    ("response", "gold", "expected"),
    [  # boxes joined by "or" that together state one union are one answer (before: a hedge)
     ("So \\boxed{x<-1} or \\boxed{x>2}.", U, True),
     ("So $\\boxed{x<-1}$ or $\\boxed{x>2}$", U, True),
     ("So \\boxed{x<-1} \\text{ or } \\boxed{x>2}", "x<-1 \\text{ or } x>2", True),
     ("So \\boxed{x<-1} \\lor \\boxed{x>2}", U, True),
     ("Answer: \\boxed{x<-1} or \\boxed{x>2}", U, True),
     ("So \\boxed{x<-1} or \\boxed{x>3}", U, False),  # another set
     ("So \\boxed{x>2} or \\boxed{x<-1}", "x > 2", False),
     # anything else joined by "or" stays a hedge: numbers, equations, two variables, another answer
     ("So \\boxed{3} or \\boxed{4}", "3", False), ("So \\boxed{3} or \\boxed{4}", "4", False),
     ("So \\boxed{x=3} or \\boxed{x=4}", "3", False), ("So \\boxed{x<-1} or \\boxed{y>2}", U, False),
     ("So \\boxed{5}, then \\boxed{x<-1} or \\boxed{x>2}", U, False),
     ("Answer: $35$ or \\boxed{x<-1} or \\boxed{x>2}", U, False),
     # a hedge around the union stays a hedge (before: right against a disjunction ground truth)
     ("Answer: $35$ or \\boxed{(-\\infty,-1)\\cup(2,\\infty)}", "x<-1 \\text{ or } x>2", False),
     ("So $35$ or \\boxed{(-\\infty,-1)\\cup(2,\\infty)}", "x<-1 \\text{ or } x>2", False),
     # joined by a comma or "and" they may mean both: a list, as before
     ("So \\boxed{x<-1}, \\boxed{x>2}", U, False), ("So \\boxed{x<-1} and \\boxed{x>2}", U, False)],
)
def test_boxes_joined_by_or_state_one_union(response: str, gold: str, expected: bool) -> None:
    assert verify(response, gold, extractor="any")[0] is expected
