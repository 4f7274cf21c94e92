"""Three answers the verifier paid (from a probe of stop 99's list of what it still pays): values listed
after a box (``\\boxed{34}, 35, or 36``: ``\\boxed{34}, 35`` and ``\\boxed{34} or 35`` already hedged), a
sentence after the answer that opens by calling it wrong (``\\boxed{34}`` then ``Wait, that's wrong.``: ``.
This is wrong.`` on its line already disowned it), and a remark that bounds the answer by a value (``34 (at
most 35)``: ``(at most)`` alone already bounded it). Kept right: a count after the box that goes on in words,
a sentence that rules another value out or says what was wrong and goes on, a bound remark on something
else (``(at most 2 per row)``), a sentence that disowns the answer to a question about what is wrong, and
a letter answer. Rows marked "before:" had the other verdict.
-- boxes (_VALUE_AFTER), later_hedges (disowned_later), disowned (sentence_disowns), number_forms (_BOUNDS_IT).
"""

from __future__ import annotations

import time

import pytest

from dapo.rewards import verify
from dapo.rewards.boxes import changed_after

A = "Let me work through the problem. We count carefully and find the total.\n\n"

CASES: list[tuple[str, str, bool, str]] = [
    # values listed after the box
    (A + "\\boxed{34}, 35, or 36.", "34", False, "any"),  # before: right
    (A + "The answer is \\boxed{34}, 35 or 36.", "34", False, "boxed"),  # before: right
    (A + "\\boxed{34}; 35 and 36", "34", False, "boxed"),  # before: right
    (A + "\\boxed{34}, 34, or 35", "34", False, "boxed"),  # before: right (the first restates, the second not)
    (A + "\\boxed{34}, 34.0, or 34", "34", True, "boxed"),  # each restates it
    (A + "\\boxed{34}, 17 pairs.", "34", True, "boxed"),
    (A + "\\boxed{34}, with 2 left over.", "34", True, "boxed"),
    # a sentence after the answer that calls it wrong
    (A + "\\boxed{34}\n\nWait, that's wrong.", "34", False, "any"),  # before: right
    (A + "\\boxed{34}\n\nWait, that is not right.", "34", False, "boxed"),  # before: right
    (A + "\\boxed{34}. Hmm, this is incorrect.", "34", False, "boxed"),  # before: right
    (A + "\\boxed{34}\n\nHmm, my answer is probably wrong.", "34", False, "boxed"),  # before: right
    (A + "Answer: 34\nWait, that's wrong.", "34", False, "answer"),  # before: right
    (A + "Answer: 34. Oops, I made a mistake.", "34", False, "answer"),  # before: right
    (A + "\\boxed{34}\n\nLet me double-check the count. Hmm, that is not right.", "34", False, "boxed"),  # before: right
    (A + "\\boxed{34}\n\nThis is wrong because we double counted; the true count is in the box.", "34", True,
     "boxed"),
    (A + "\\boxed{34}\n\nIf we used 35 instead, that would be wrong.", "34", True, "boxed"),
    (A + "\\boxed{34}\n\nNote: 35 is wrong.", "34", True, "boxed"),
    (A + "\\boxed{34}\n\nI made a mistake in step 2 earlier, but it is fixed now.", "34", True, "boxed"),
    (A + "The false statement is \\boxed{3}. That is wrong.", "3", True, "boxed"),
    (A + "\\boxed{C}\n\nWait, that's wrong.", "C", True, "boxed"),  # a letter: which option is wrong?
    # a remark bounding the answer by a value
    (A + "Answer: 34 (at most 35)", "34", False, "answer"),  # before: right
    (A + "Answer: 34 (no more than $35$)", "34", False, "answer"),
    (A + "Answer: 34 (up to 40)", "34", False, "answer"),  # before: right
    (A + "Answer: 34 ways (at most 35)", "34", False, "answer"),  # before: right
    (A + "\\boxed{34} (no more than 35)", "34", False, "boxed"),  # before: right
    (A + "\\boxed{34} (at most $35$)", "34", False, "boxed"),  # before: right
    (A + "\\boxed{34} (up to 35).", "34", False, "any"),  # before: right
    (A + "Answer: 34 (at most 2 per row)", "34", True, "answer"),
    (A + "Answer: 34 (at least one of each color)", "34", True, "answer"),
    (A + "Answer: 34 (up to rotation)", "34", True, "answer"),
]


@pytest.mark.parametrize(("response", "gold", "expected", "extractor"), CASES)
def test_listed_disowned_or_bounded_answers(response: str, gold: str, expected: bool, extractor: str) -> None:
    assert verify(response, gold, extractor=extractor)[0] is expected


def test_values_glued_by_commas_after_a_box_are_read_in_linear_time() -> None:
    """A failed match over many values glued by commas must not try every split of them (it would hang)."""
    hostile = ", " + "3," * 45 + " x"
    started = time.perf_counter()
    assert changed_after(hostile, "34") is False
    assert time.perf_counter() - started < 1.0  # linear: ~1 ms; a backtracking pattern takes minutes
