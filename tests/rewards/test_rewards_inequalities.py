"""Inequality disjunctions as the interval unions they state (dapo.rewards.inequalities)."""

from __future__ import annotations

import time

import pytest

from dapo.rewards.inequalities import interval_union, is_inequality_disjunction


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
    ["x>2",  # one inequality: not an interval (math-verify's default policy)
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
