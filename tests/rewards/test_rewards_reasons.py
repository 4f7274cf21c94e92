"""A reason clause after the answer is never the answer (rows marked "before:" had the other verdict
before this change; the rest guard what stays).

1. After a name or placeholder (``x (since n is 35)``, ``x, since n is 35``, ``The answer is x, since n is
   35``) the reason's copula gave 35 as the answer: right for 35. A reason is now read after a name as after a
   value (:mod:`~dapo.rewards.reasons`).
2. A reason's equation was read by math-verify when the reason stayed in the answer (``x (since n = 35)``,
   ``34 since n = 35``, ``\\boxed{34 \\text{ since } n = 35}``: right for 35, wrong for 34); a reason written
   without a comma was not read at all (``34 because n is 35`` gave 35). The reason is dropped: the answer is
   what it follows, whatever numbers the reason states (``34, since n is 35`` is right for 34; before, the line
   was kept whole, wrong for 34).
3. A hedge stays a hedge: an "or" before a value in a reason without brackets, or after its parenthesis, offers
   another answer; a reason without brackets ends with its sentence (an Answer line of prose goes on).
4. A box that holds a value and ends a reason on the Answer line is the line's boxed answer: ``Answer: n = 5
   since n is odd and the count is \\boxed{35}`` read ``n = 5`` (wrong for 35), because every box in a reason was
   the reason's. A box that holds a relation (``\\boxed{n = 35}``) or that the reason goes on to describe
   (``\\boxed{35} is odd``) is still the reason's (:mod:`~dapo.rewards.answer_line_boxes`). A bare value
   before the reason is a second answer unless the box restates it (``Answer: 34 since \\boxed{35}``: wrong).
5. What :func:`~dapo.rewards.reasons.without_reason` leaves in place (a reason after math that ends in words, or
   past its cap on reasons read) is still no answer: ``extract._after_copula`` keeps its own reason rule for it.
-- reasons, answer_line_boxes, extract, boxes.
"""

from __future__ import annotations

import time

import pytest

from dapo.rewards import verify
from dapo.rewards.answer_line_boxes import without_boxed_reason
from dapo.rewards.reasons import without_reason
from dapo.rewards.verifier import prepare

A = "Let me think step by step.\nSo the total is computed.\n"

# (response, ground truth, correct, extractor)
CASES: list[tuple[str, str, bool, str]] = [
    # --- 1. after a name or placeholder ---
    (A + "Answer: x (since n is 35)", "35", False, "answer"),  # before: right (its "is" read as the answer's)
    (A + "Answer: n (since n is 35)", "35", False, "answer"),  # before: right
    (A + "Answer: x (because n is 35)", "35", False, "answer"),  # before: right
    (A + "Answer: x, since n is 35", "35", False, "answer"),  # before: right
    (A + "Answer: \\theta, since n is 35", "35", False, "answer"),
    (A + "Answer: The answer is x, since n is 35", "35", False, "answer"),  # before: right
    (A + "Answer: x, since it is 35", "35", False, "answer"),  # before: right ("it" is the reason's subject)
    (A + "Answer: x (since n is 35)", "x", True, "answer"),  # before: wrong (the answer was "35)")
    (A + "Answer: a_1 (since n is 35)", "35", False, "answer"),
    (A + "Answer: $x$ (since n is 35)", "35", False, "answer"),
    (A + "Answer: $x$, since $n = 35$", "35", False, "answer"),
    (A + "Answer: \\boxed{x} (since n is 35)", "35", False, "answer"),
    (A + "So \\boxed{x} (since n is 35)", "35", False, "boxed"),
    (A + "So \\boxed{x}, since n is 35", "35", False, "any"),
    (A + "Answer: the answer, since it is 35", "35", True, "answer"),  # after words with no value: read as before
    # --- 2. the reason's equation or number is never the answer ---
    (A + "Answer: x (since n = 35)", "35", False, "answer"),  # before: right (math-verify read n = 35)
    (A + "Answer: 34 since n = 35", "35", False, "answer"),  # before: right
    (A + "Answer: x = 34 since n = 35", "35", False, "answer"),  # before: right
    (A + "Answer: 34 because n is 35", "35", False, "answer"),  # before: right (its "is" read as the answer's)
    (A + "Answer: 34 since n = 35", "34", True, "answer"),  # before: wrong
    (A + "Answer: 34 because n is 35", "34", True, "answer"),  # before: wrong
    (A + "Answer: 34 since n is even", "34", True, "answer"),  # before: wrong
    (A + "Answer: 34, since n is 35", "34", True, "answer"),  # before: wrong (the line was kept whole)
    (A + "Answer: 34, since n = 35", "34", True, "answer"),  # before: wrong
    (A + "Answer: $34$ since $n = 35$", "34", True, "answer"),  # before: wrong (two segments, a hedge)
    (A + "Answer: $34$ (since $n = 35$)", "34", True, "answer"),  # before: wrong
    (A + "Answer: 34, since n is 35", "35", False, "answer"),
    (A + "Answer: 34 (since n is 35)", "35", False, "answer"),
    (A + "Answer: 34 (since n is 35)", "34", True, "answer"),
    (A + "Answer: x is 34, since n is 35", "34", True, "answer"),
    (A + "Answer: x is 34, since n is 35", "35", False, "answer"),
    (A + "Answer: 5, since x is 5", "5", True, "answer"),
    # ... in a box: the box holds the answer, the reason is a remark on it
    (A + "Answer: \\boxed{34 \\text{ since } n = 35}", "35", False, "answer"),  # before: right
    (A + "Answer: \\boxed{34 \\text{ since } n = 35}", "34", True, "answer"),  # before: wrong
    (A + "So \\boxed{34 \\text{ since } n = 35}", "35", False, "boxed"),  # before: right
    (A + "So \\boxed{34 \\text{ since } n = 35}", "34", True, "boxed"),  # before: wrong
    (A + "So \\boxed{34 \\text{ since } n = 35}", "34", True, "any"),  # before: wrong
    (A + "So \\boxed{34 \\text{, since } n = 35}", "35", False, "boxed"),  # before: right
    (A + "So \\boxed{34 \\text{, since } n = 35}", "34", True, "boxed"),  # before: wrong
    (A + "So \\boxed{34 \\text{ (since } n = 35)}", "35", False, "boxed"),  # before: right
    (A + "So \\boxed{34 \\text{ (since } n = 35)}", "34", True, "boxed"),  # before: wrong
    (A + "So \\boxed{34 \\text{ because } n = 35}", "34", True, "boxed"),  # before: wrong
    (A + "So \\boxed{34 \\text{ since } n \\text{ is } 35}", "34", True, "boxed"),  # before: wrong
    (A + "So \\boxed{34 \\text{ since } n \\text{ is } 35}", "35", False, "boxed"),
    (A + "So \\boxed{x \\text{ since } n = 35}", "35", False, "boxed"),  # before: right
    (A + "So \\boxed{34 (\\text{since } n = 35)}", "34", True, "boxed"),
    (A + "So \\boxed{34 \\text{ since n is even}}", "34", True, "boxed"),
    # --- 3. a hedge stays a hedge ---
    (A + "Answer: 34 (since n is 35) or 36", "34", False, "answer"),
    (A + "Answer: 34 (since n is 35) or 36", "36", False, "answer"),
    (A + "Answer: 34, since n is 35, or 36", "34", False, "answer"),
    (A + "Answer: 34, since n is 35, or 36", "36", False, "answer"),
    (A + "Answer: x, since n = 35 or 36", "36", False, "answer"),
    (A + "Answer: 34, since n = 35 or maybe x = 36", "34", False, "answer"),
    (A + "Answer: 34, because n is odd or even", "34", True, "answer"),  # an "or" between words is the reason's
    (A + "Answer: 34 (since n = 35 or 36)", "34", True, "answer"),  # before: wrong (a bracket ends the reason)
    (A + "So \\boxed{34 \\text{ since } n = 35 \\text{ or } 36}", "36", False, "boxed"),
    (A + "So \\boxed{34 \\text{ since } n = 35 \\text{ or } 36}", "34", False, "boxed"),
    # --- 4. a box that holds a value and ends a reason is the Answer line's boxed answer ---
    (A + "Answer: n = 5 since n is odd and the count is \\boxed{35}", "35", True, "answer"),  # before: wrong (n = 5)
    (A + "Answer: n = 5 since n is odd and the count is \\boxed{35}", "5", False, "answer"),  # before: right
    (A + "Answer: n = 5 since n is odd and the count is \\boxed{35}", "35", True, "any"),  # before: wrong
    (A + "Answer: n = 5 because n is odd and the count is \\boxed{35}.", "35", True, "answer"),  # before: wrong
    (A + "Answer: n = 5 because n is odd and the count is \\boxed{35}.", "5", False, "answer"),  # before: right
    (A + "Answer: n = 5, since n is odd and the count is $\\boxed{35}$ ways", "35", True, "answer"),  # before: wrong
    # ... but a bare value before the reason is a second one (as two boxes are, below), unless the box restates it
    (A + "Answer: 34 since \\boxed{35}", "35", False, "answer"),  # before: right (the box read alone)
    (A + "Answer: 34 since \\boxed{35}", "34", False, "answer"),
    (A + "Answer: 35, since n is odd, so \\boxed{34}", "34", False, "answer"),  # before: right
    (A + "Answer: 34, since \\boxed{34}", "34", True, "answer"),
    (A + "Answer: $\\frac12$, since \\boxed{0.5}", "1/2", True, "answer"),
    (A + "Answer: x, since \\boxed{34}", "34", True, "answer"),  # a name, not a value
    (A + "Answer: 2, since \\boxed{\\sqrt{4}}", "2", True, "answer"),  # the same value, computed
    (A + "Answer: 4, since \\boxed{2^2}", "4", True, "answer"),
    (A + "Answer: 1000 since it is \\boxed{10^3}", "1000", True, "answer"),
    (A + "Answer: 2 cases, since the count is \\boxed{35}", "35", True, "answer"),  # a counted step
    # ... a box that holds a relation, or that the reason goes on to describe, is still the reason's
    (A + "Answer: n = 5 since n is odd and the count is \\boxed{n = 35}", "35", False, "answer"),
    (A + "Answer: n = 5 since n is odd and the count is \\boxed{n = 35}", "5", True, "answer"),
    (A + "Answer: 34 because n is odd and \\boxed{m = 35}", "34", True, "answer"),
    (A + "Answer: 34 because \\boxed{35} is odd", "34", True, "answer"),
    (A + "Answer: 34 because \\boxed{35} is odd", "35", False, "answer"),
    (A + "Answer: 34, since \\boxed{35} = 5 \\cdot 7", "35", False, "answer"),
    # ... two boxes state two values (a hedge, as the boxed extractor reads them); an "or" after the box hedges
    (A + "Answer: \\boxed{34}, since \\boxed{35}", "34", False, "answer"),  # before: right
    (A + "Answer: \\boxed{34}, since \\boxed{35}", "35", False, "answer"),
    (A + "Answer: n = 5 since n is odd and the count is \\boxed{35}, or 36", "35", False, "answer"),
    # --- 5. a reason without_reason leaves in place: _after_copula does not read its copula as the answer ---
    (A + "Answer: the number of $n$ values, since n is 35", "35", False, "answer"),  # words after the math
    (A + "Answer: 34 ways and more, since n is 35", "35", False, "answer"),
    (A + "Answer: 5" + " (since a)" * 8 + ", since x is 6", "6", False, "answer"),  # past without_reason's cap
    (A + "Answer: 5" + " (since a)" * 8 + ", since x is 5", "5", True, "answer"),  # ... a reason restating it
]


@pytest.mark.parametrize("response,gold,correct,extractor", CASES)
def test_verdicts(response: str, gold: str, correct: bool, extractor: str) -> None:
    assert verify(response, gold, extractor)[0] is correct


@pytest.mark.parametrize(
    "answer,expected",
    [("x (since n is 35)", "x"), ("x, since n is 35", "x"), ("34 since n = 35", "34"), ("34 because n is 35", "34"),
     ("$34$ (since $n = 35$)", "$34$"), ("34 \\text{ since } n = 35", "34"), ("34 \\text{, since } n = 35", "34"),
     ("34 \\text{ (since } n = 35)", "34"), ("34 (\\text{since } n = 35)", "34"), ("34 ways, since n is even", "34 ways"),
     ("\\theta (because n is 35)", "\\theta"), ("a_{1}, since n is 35", "a_{1}"),
     ("34 (since n is 35) or 36", "34 or 36"),  # the parenthesis closes: what follows it stays
     ("34, since n is 35, or 36", None), ("34 since n = 35 \\text{ or } 36", None),  # an "or" and a value: a hedge
     ("34, since n = 35 or x = 36", None), ("34, because n is odd or even", "34"), ("34, since either $n$ is odd", "34"),
     ("34, since n is even. So 34", "34. So 34"),  # a reason ends with its sentence
     ("the answer, since it is 35", "the answer, since it is 35"),  # words, no value or name: not a reason after one
     ("since n is 35, 34", "since n is 35, 34"), ("\\text{No, because } n = 35", "\\text{No, because } n = 35"),
     ("34since n", "34since n"), ("34", "34"), ("x = 34", "x = 34")],
)
def test_without_reason(answer: str, expected: str | None) -> None:
    assert without_reason(answer) == expected


@pytest.mark.parametrize(
    "line,expected",
    [("n = 5 since n is odd and the count is \\boxed{35}", "n = 5 since n is odd and the count is \\boxed{35}"),
     ("n = 5 because the count is \\boxed{35} \\text{ ways}.", "n = 5 because the count is \\boxed{35} \\text{ ways}."),
     ("34, since \\boxed{n = 35}", "34"), ("34 since \\boxed{35} is odd", "34"), ("34 (since \\boxed{n \\ge 35})", "34"),
     ("\\boxed{34}, since \\boxed{35}", "\\boxed{34}, since \\boxed{35}")],
)
def test_without_boxed_reason(line: str, expected: str) -> None:
    assert without_boxed_reason(line) == expected


@pytest.mark.parametrize(
    "response",
    ["Answer: x" + " since n is 35" * 3000, "Answer: 34" + " (since" * 3000, "\\boxed{34" + " \\text{ since }" * 2000 + "}",
     "Answer: " + "x, because " * 3000 + "35"],
)
def test_stays_fast_on_hostile_text(response: str) -> None:
    for extractor in ("answer", "boxed", "any"):
        start = time.perf_counter()
        prepare(response, "35", extractor)  # the parent-process part: string work only
        assert time.perf_counter() - start < 0.5, extractor
