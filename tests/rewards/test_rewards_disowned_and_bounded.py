"""An answer the response calls wrong, or bounds, is not its answer (from a red-team probe of the
verifier: each was paid). A bound right before a box (``At least \\boxed{34}``, ``not \\boxed{35}``, as
``at least $34$`` already was), a bound ending the line after the answer (``34 at least``, ``$34$ at
most``, ``\\boxed{34} at least``), a remark or a sentence that calls a numeric answer wrong (``34
(wrong)``, ``\\boxed{34}. This is wrong.``), and a second value after "respectively". A remark that
rules *another* value out keeps the answer (``34 (35 is wrong)`` was wrong for 34). From a differential
review of 441 written final lines, kept right: bound words elsewhere in the sentence or opening a
remark (``(at least one boy)``), the answer to a question about wrongness (``statement \\boxed{2} is
wrong``, ``\\boxed{C}. It is incorrect because``, ``\\boxed{0}. It is impossible.``), and an
approximation before a box (``25\\pi \\approx \\boxed{78.54}``, the rounding a question asks for).
Rows marked "before:" had the other verdict.
-- disowned, boxes (_QUALIFIED_BEFORE, BOUNDED_AFTER), math_segments, extract,
number_forms, offered_values, remark_words (BOUNDING_WORDS).
"""

from __future__ import annotations

import pytest

from dapo.rewards import verify

A = "Let me work through the problem. We count carefully and find the total.\n\n"

CASES: list[tuple[str, str, bool, str]] = [
    # a bound or an approximation before the box
    (A + "At least \\boxed{34}.", "34", False, "any"),  # before: right
    (A + "At most \\boxed{34}.", "34", False, "boxed"),  # before: right
    (A + "There are at least \\boxed{34} ways.", "34", False, "boxed"),  # before: right
    (A + "The answer is not \\boxed{35}.", "35", False, "any"),  # before: right
    (A + "Answer: at least \\boxed{34}", "34", False, "answer"),  # before: right
    # a bound after the answer
    (A + "Answer: 34 at least", "34", False, "answer"),  # before: right
    (A + "Answer: 34 ways, at most", "34", False, "answer"),  # before: right
    (A + "Answer: $34$ at least", "34", False, "answer"),  # before: right
    (A + "The answer is $34$ at most.", "34", False, "any"),  # before: right
    (A + "Answer: \\boxed{34} at least", "34", False, "answer"),  # before: right
    # the answer called wrong
    (A + "Answer: 34 (wrong)", "34", False, "answer"),  # before: right
    (A + "Answer: 35 (extraneous)", "35", False, "answer"),  # before: right
    (A + "Answer: 34 (this is not correct)", "34", False, "answer"),  # before: right
    (A + "Answer: $34$ (probably incorrect)", "34", False, "answer"),  # before: right
    (A + "\\boxed{34} (rejected)", "34", False, "boxed"),  # before: right
    (A + "Answer: 34. This is wrong.", "34", False, "answer"),  # before: right
    (A + "\\boxed{34}. This is wrong.", "34", False, "boxed"),  # before: right
    (A + "\\boxed{35}. That is not correct.", "35", False, "boxed"),  # before: right
    (A + "Answer: $34$. This is not the answer.", "34", False, "answer"),  # before: right
    (A + "The answer is \\boxed{34}, that's wrong", "34", False, "any"),  # before: right
    (A + "Answer: 34 (34 is wrong)", "34", False, "answer"),
    # a second value after "respectively"
    (A + "Answer: 34 (respectively 35)", "34", False, "answer"),  # before: right
    # kept: another value ruled out, bound words elsewhere, the answer judged right
    (A + "Answer: 34 (35 is wrong)", "34", True, "answer"),  # before: wrong
    (A + "Answer: 34 (35 is extraneous)", "34", True, "answer"),  # before: wrong
    (A + "\\boxed{34} (35 is wrong)", "34", True, "any"),  # before: wrong
    (A + "Answer: 34 (not 35)", "34", True, "answer"),
    (A + "Answer: 34 (the root 35 is extraneous)", "34", True, "answer"),
    (A + "So we need at least 3 colors, and the answer is \\boxed{34}.", "34", True, "any"),
    (A + "The number of ways, at least in this case, is \\boxed{34}.", "34", True, "any"),
    (A + "The value is about 3 times more, so \\boxed{34}", "34", True, "any"),
    (A + "The minimum is \\boxed{34}.", "34", True, "any"),
    (A + "The remainder is not zero; it is \\boxed{3}", "3", True, "any"),
    (A + "Thus \\[\\boxed{34}\\]", "34", True, "any"),
    (A + "Answer: $34$ (at least in base ten)", "34", True, "answer"),
    (A + "\\boxed{34} is correct.", "34", True, "any"),
    (A + "\\boxed{34} is not wrong.", "34", True, "any"),
    (A + "\\boxed{34}, which is not a prime", "34", True, "any"),
    (A + "Answer: 34. It is not wrong.", "34", True, "answer"),
    (A + "Answer: $34$ is not the answer to part (b)", "34", True, "answer"),
    (A + "Answer: 34 (correct)", "34", True, "answer"),
    # kept: what names the answer to a question about wrongness, and an approximation before a box (a rounding asked)
    (A + "Hence statement \\boxed{2} is wrong.", "2", True, "any"),
    (A + "Therefore, option \\boxed{C} is incorrect.", "C", True, "any"),
    (A + "The answer is \\boxed{C}. It is incorrect because f is not continuous.", "C", True, "any"),
    (A + "The false proposition is \\boxed{3}, it is wrong.", "3", True, "any"),
    (A + "The probability is \\boxed{0}. It is impossible.", "0", True, "any"),
    (A + "Answer: 0 (impossible)", "0", True, "answer"),
    (A + "Answer: 34 (35 is impossible)", "34", True, "answer"),
    (A + "The area is $25\\pi \\approx \\boxed{78.54}$.", "78.54", True, "any"),
    (A + "Rounded to the nearest hundredth, the answer is approximately \\boxed{3.14}.", "3.14", True, "any"),
    (A + "The least \\boxed{3}", "3", True, "any"),
    # kept: "at least" opening a remark or a clause after the box, not ending the line
    (A + "There are \\boxed{56} selections (at least one boy).", "56", True, "any"),
    (A + "The maximum number of students is \\boxed{6}, at most one per row.", "6", True, "any"),
    (A + "Answer: 34 (not sure)", "34", True, "answer"),  # unsure, one value: still its answer
    (A + "Answer: 3, 5 (respectively)", "3, 5", True, "answer"),
    (A + "Answer: 34 (respectively 34.0)", "34", True, "answer"),
]


@pytest.mark.parametrize(("response", "gold", "expected", "extractor"), CASES)
def test_a_disowned_or_bounded_answer_is_not_the_answer(
        response: str, gold: str, expected: bool, extractor: str) -> None:
    assert verify(response, gold, extractor=extractor)[0] is expected
