"""Math in a remark after an answer is the remark's (dapo.rewards.remark_math). An Answer line's plain
value before a remark with ``$...$`` math had the remark's math read as the answer: ``Answer: 34 (when
$n = 2$)`` was wrong for 34, ``Answer: 25 ($n = 5$ gives the max)`` right for 5. Now the plain value is
the answer; a condition, an "or"/"not" or a rejection is read as a remark; math restating the value keeps
it (``34 ($2 \\cdot 17$)``); another value is a second answer, wrong for both. A remark whose math offers
another answer still does (``(but $35$ if n is odd)``, ``(for $n = 5$, or $35$ for $n = 6$)``, the last
paid after a box too). A value ruled out beside the answer keeps it (``$2$ ($-3$ is extraneous)``, ``(reject
$x = -3$)``, ``(2 colors is impossible)``, ``2. The root -3 is extraneous.``: math-verify read -3); a
closing "respectively" is no part of a list; arithmetic in a condition is no product (``\\frac12 (when n+1
is even)``). Rows marked "before:" had the other verdict.
-- remark_math, extract, math_segments (drop_remark_after_math), offered_values, disowned (rejected_value,
without_rejected_value), answer_text (clean_answer), number_forms (without_closing_remark).
"""

from __future__ import annotations

import pytest

from dapo.rewards import verify

A = "Let me work through the problem. We count carefully and find the total.\n\n"

CASES: list[tuple[str, str, bool, str]] = [
    (A + "Answer: 34 (when $n=2$)", "34", True, "answer"),  # before: wrong
    (A + "Answer: 12 cm (using $r = 3$)", "12", True, "answer"),  # before: wrong
    (A + "Answer: 34 (the root $-2$ is rejected)", "34", True, "answer"),  # before: wrong
    (A + "Answer: 34 (not $35$)", "34", True, "answer"),  # before: wrong
    (A + "Answer: \\(34\\) (when \\(n = 2\\))", "34", True, "answer"),  # before: wrong
    (A + "Answer: $34$ (when $n = 2$)", "34", True, "answer"),  # before: wrong
    (A + "Answer: $34$ (using $r = 3$)", "34", True, "answer"),  # before: wrong
    (A + "Answer: $x = 2$ (reject $x = -3$)", "2", True, "answer"),  # before: wrong
    (A + "Answer: $2$ ($-3$ is extraneous)", "2", True, "answer"),  # before: wrong
    (A + "Answer: $34$ ($35$ rejected)", "34", True, "answer"),  # before: wrong
    (A + "So \\boxed{3} (2 colors is impossible)", "3", True, "any"),  # before: wrong
    (A + "Answer: 34 (35 rejected)", "34", True, "answer"),  # before: wrong
    (A + "Answer: 34 (x = 35 is wrong)", "34", True, "answer"),
    (A + "Answer: 3 and 4, respectively", "3, 4", True, "answer"),  # before: wrong
    (A + "So \\boxed{3 \\text{ and } 4 \\text{, respectively}}", "3, 4", True, "any"),
    (A + "Answer: \\frac12 (when n+1 is even)", "\\frac{1}{2}", True, "answer"),  # before: wrong (a product)
    (A + "Answer: 12 (for n = 3+1)", "12", True, "answer"),  # before: wrong
    (A + "Answer: 2. The root -3 is extraneous.", "2", True, "answer"),  # before: wrong (-3 read)
    (A + "Answer: 2. The other root, -3, is rejected.", "2", True, "answer"),  # before: wrong
    (A + "Answer: $x = 2$. The root $x = -3$ is extraneous.", "2", True, "answer"),  # before: wrong
    (A + "Answer: x = 2; x = -3 is rejected", "2", True, "answer"),  # before: wrong
    (A + "Answer: 2.5. The root -3 is extraneous.", "2.5", True, "answer"),  # before: wrong
    (A + "Answer: 34 (about $34.0$)", "34", True, "answer"),
    (A + "Answer: 2 (or $\\sqrt{4}$)", "2", True, "answer"),  # before: wrong
    # another answer, in the remark's math or not
    (A + "Answer: 35 (when $n = 34$)", "34", False, "answer"),  # before: right
    (A + "Answer: 35 (using $34$ steps)", "34", False, "answer"),  # before: right
    (A + "Answer: $35$ (when $n = 34$)", "34", False, "answer"),
    (A + "Answer: 34 (but $35$ if n is odd)", "34", False, "answer"),
    (A + "Answer: 34 (or $35$)", "34", False, "answer"),
    (A + "Answer: 34 ($\\approx 35$)", "34", False, "answer"),
    (A + "Answer: 2 (or $\\sqrt{2}$)", "2", False, "answer"),
    (A + "Answer: $2$ ($-3$ is also valid)", "2", False, "answer"),
    (A + "Answer: 2. The root -3 is extraneous.", "-3", False, "answer"),
    (A + "Answer: 2. 2 is wrong.", "2", False, "answer"),  # before: right (the answer itself ruled out)
    (A + "Answer: 2. Note that 3 also works.", "2", False, "answer"),
    (A + "Answer: 34 (34 colors is wrong)", "34", False, "answer"),
    # a remark of math alone, or words not a condition, a rejection, an "or" or a "not": its math read as math
    (A + "Answer: 34 ($\\frac{68}{2}$)", "34", True, "answer"),
    (A + "Answer: 120 ($5! = 120$)", "120", True, "answer"),
    (A + "Answer: 13 (hypotenuse, $\\sqrt{5^2 + 12^2}$)", "13", True, "answer"),
    (A + "Answer: 34 ($2 \\cdot 17$)", "34", True, "answer"),
    (A + "Answer: 7 ($a = 3$, $b = 4$, so $a + b = 7$)", "7", True, "answer"),
    (A + "Answer: 120 ($5!$ ways)", "120", True, "answer"),  # not computed here: math-verify reads it, as before
    (A + "Answer: 1.41 ($\\sqrt{2}$)", "\\sqrt{2}", True, "answer"),  # the decimal of the value named, as before
    (A + "Answer: 34 (the $n$-th term)", "34", True, "answer"),  # before: wrong
    (A + "Answer: 34 (the case $n = 0$ is excluded)", "34", True, "answer"),  # before: wrong
    (A + "Answer: 25 ($n = 5$ gives the max)", "5", False, "answer"),  # before: right (the remark's value read)
    # a parameter's value in the remark's math is a second value too (it was right for 34 before stop 99): wrong
    # for both, as "25 ($n = 5$ gives the max)" is; chosen, a remark in math cannot be told from an answer there
    (A + "Answer: 34 ($n = 17$)", "34", False, "answer"),  # before: right
    (A + "Answer: 34 ($n = 17$)", "17", False, "answer"),
    (A + "Answer: 3 (minimum at $x = 1$)", "1", False, "answer"),  # before: right
    (A + "Answer: 12 (from $a + b = 7$)", "7", False, "answer"),  # before: right
    (A + "Answer: The largest is 12 ($n = 5$ gives it)", "5", False, "answer"),  # before: right
    (A + "Answer: $x = 5$ (if $a = 3$ we get $x = 6$)", "5", False, "answer"),
    (A + "Answer: 5 (the roots are $2$ and $3$)", "2, 3", False, "answer"),  # before: right
    (A + "Answer: 5 (i.e., $x = 6$)", "5", False, "answer"),
    (A + "Answer: 5 (i.e., $x = 6$)", "6", False, "answer"),  # before: right
    (A + "Answer: 34 (wrong: should be $35$)", "34", False, "answer"),
    (A + "Answer: 34 ($n = 35$ also works)", "34", False, "answer"),
    (A + "Answer: 2 (reject $x = 2$)", "2", False, "answer"),
    (A + "Answer: $2$ ($x=2$ is invalid; the answer is $x = -3$)", "2", False, "answer"),
    (A + "Answer: $34$ (when $n = 2$; for $n = 3$ it is $35$)", "34", False, "answer"),
    (A + "Answer: $x = 5$ (if $a = 2$; $x = 6$ if $a = 3$)", "5", False, "answer"),
    (A + "Answer: 34 (with zero included it is 35)", "34", False, "answer"),  # before: right
    (A + "So \\boxed{2} ($x = 2$ is extraneous)", "2", False, "boxed"),  # before: right
    (A + "So \\boxed{2} ($x = -3$ is extraneous)", "2", True, "boxed"),
    (A + "Answer: \\frac12 (x+1)", "\\frac{1}{2}", False, "answer"),  # a product
    (A + "Answer: 34 (if n+1 is odd; 35 otherwise)", "34", False, "answer"),
    (A + "Answer: $34$ (if $n$ is odd; $35$ otherwise)", "34", False, "answer"),
    (A + "Answer: $34$ (for $n = 5$, or $35$ for $n = 6$)", "34", False, "answer"),
    (A + "So \\boxed{34} (for n = 5, or 35 for n = 6)", "34", False, "any"),  # before: right
    (A + "So \\boxed{34} (for n = 5, but 35 for n = 6)", "34", False, "any"),  # before: right
    (A + "So \\boxed{34} (for n = 5, and 2 for n = 6, so 34 in total)", "34", True, "any"),
]


@pytest.mark.parametrize(("response", "gold", "expected", "extractor"), CASES)
def test_math_in_a_remark_is_the_remark_s(response: str, gold: str, expected: bool, extractor: str) -> None:
    assert verify(response, gold, extractor=extractor)[0] is expected
