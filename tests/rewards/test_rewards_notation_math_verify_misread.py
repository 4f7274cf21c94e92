"""Answers math-verify misread, from a red-team probe of non-numeric forms (stop 101): upright constants it
dropped (``3+2\\mathrm{i}`` read as 5), ``\\colon`` and ``\\lg`` it dropped, set-builder sets it read as one
bound, an interval's ends paid for the interval (and the other way round), and a line named by another axis
(``x = 2`` for ``y=2``: the values alone were compared). Rows marked "before:" had the other verdict.
-- math_verify_call (_as_math_verify_reads), verifier (_as_sets_of_reals, _values_alone, _names_another_axis).
"""

from __future__ import annotations

import pytest

from dapo.rewards import verify

A = "Let me work through the problem. We count carefully and find the total.\n\n"

CASES: list[tuple[str, str, bool, str]] = [
    # upright constants are Euler's number and the imaginary unit
    (A + "\\boxed{5}", "3+2\\mathrm{i}", False, "boxed"),  # before: right
    (A + "\\boxed{3+2i}", "3+2\\mathrm{i}", True, "boxed"),
    (A + "\\boxed{2}", "2\\mathrm{e}^{2}", False, "boxed"),  # before: right
    (A + "\\boxed{\\sqrt{3}\\mathrm{i}}", "\\sqrt3", False, "boxed"),  # before: right
    (A + "\\boxed{\\mathrm{e}}", "e", True, "boxed"),
    # \colon is a ratio's colon; \lg is the logarithm to base 10
    (A + "\\boxed{2\\colon 3}", "3", False, "boxed"),  # before: right
    (A + "\\boxed{2\\colon 3}", "2:3", True, "boxed"),  # before: wrong
    (A + "\\boxed{2}", "\\lg 2", False, "boxed"),  # before: right
    (A + "\\boxed{\\lg 100}", "2", True, "boxed"),
    # a set of reals in set-builder notation is its condition
    (A + "\\boxed{1}", "\\{x \\mid 1<x<3\\}", False, "boxed"),  # before: right
    (A + "\\boxed{\\{x \\mid x \\le 2\\}}", "\\{x \\mid x\\geq 2\\}", False, "boxed"),  # before: right
    (A + "\\boxed{\\{x \\mid 1\\le x\\le3\\}}", "\\{x\\mid 1<x<3\\}", False, "boxed"),  # before: right
    (A + "\\boxed{\\{x \\mid x \\ge 2\\}}", "\\{x \\mid x\\geq 2\\}", True, "boxed"),
    (A + "\\boxed{(1,3)}", "\\{x \\mid 1<x<3\\}", True, "boxed"),
    # an interval's ends are not the interval
    (A + "\\boxed{1, 3}", "1<x<3", False, "boxed"),  # before: right
    (A + "\\boxed{x=1, x=3}", "1<x<3", False, "boxed"),  # before: right
    (A + "\\boxed{x\\in(1,3)}", "1, 3", False, "boxed"),  # before: right
    (A + "\\boxed{x\\in(1,3)}", "1<x<3", True, "boxed"),
    (A + "\\boxed{(1,3)}", "1, 3", True, "boxed"),  # a pair, or an interval: read as the gold's list
    (A + "\\boxed{x<-1, x>2}", "x<-1 \\text{ or } x>2", True, "boxed"),
    # a line is named by its axis
    (A + "\\boxed{x = 2}", "y=2", False, "boxed"),  # before: right
    (A + "Answer: $y = 3$", "x=3", False, "answer"),  # before: right
    (A + "\\boxed{x = 2}", "x=2", True, "boxed"),
    (A + "\\boxed{X = 2}", "x=2", True, "boxed"),
    (A + "\\boxed{n = 2}", "k=2", True, "boxed"),  # another letter for a count: its value
    (A + "Answer: y=4, x=3", "x=3, y=4", True, "answer"),  # a list's names, item by item
    (A + "\\boxed{y = x}", "x = y", True, "boxed"),  # a line solved for the other letter
    (A + "\\boxed{x = 4 - y}", "y = 4 - x", True, "boxed"),
    (A + "\\boxed{1\\colon 3\\colon 2}", "1:2:3", False, "boxed"),  # another order (misread_forms)
]


@pytest.mark.parametrize(("response", "gold", "expected", "extractor"), CASES)
def test_math_verify_misreadings(response: str, gold: str, expected: bool, extractor: str) -> None:
    assert verify(response, gold, extractor)[0] is expected
