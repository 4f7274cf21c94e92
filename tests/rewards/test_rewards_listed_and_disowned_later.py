"""Three answers the verifier paid (from a probe of stop 99's list of what it still pays): values listed
after a box (``\\boxed{34}, 35, or 36``: ``\\boxed{34}, 35`` and ``\\boxed{34} or 35`` already hedged; a
value's rounding restates it, ``\\boxed{\\sqrt{2}}, 1.414``), the sentence right after the answer opening by
calling it wrong (``\\boxed{34}`` then ``Wait, that's wrong.``: ``. This is wrong.`` on its line already
disowned it), and a remark that bounds the answer by a value (``34 (at most 35)``: ``(at most)`` alone already
bounded it). Kept right: a count after the box that goes on in words; a sentence that rules another value out
or says what was wrong and goes on; a later sentence calling something wrong (only the one right after the
answer is read), one that goes on after a comma or colon (``It is incorrect, however, to ...``), and a
disowning taken back or followed by the answer's value again; a bound remark on something else (``(at most 2
per row)``), the range a count runs over (``(up to 1000)``) or the bound the answer reaches; a sentence that
disowns the answer to a question about what is wrong; a letter answer. Rows marked "before:" had the other
verdict.
-- boxes (_VALUE_AFTER), later_hedges (disowned_later), disowned (disowning_end, as_sentence), number_forms (_BOUNDS_IT).
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
    (A + "The area is \\boxed{2\\pi}, 6.28, or 6.283", "2\\pi", True, "boxed"),  # roundings restate it
    (A + "The value is \\boxed{\\sqrt{2}}, 1.414", "\\sqrt{2}", True, "boxed"),  # before: wrong
    (A + "\\boxed{34}, 17 pairs.", "34", True, "boxed"),
    (A + "\\boxed{34}, with 2 left over.", "34", True, "boxed"),
    # a sentence after the answer that calls it wrong
    (A + "\\boxed{34}\n\nWait, that's wrong.", "34", False, "any"),  # before: right
    (A + "\\boxed{34}\n\nWait, that is not right.", "34", False, "boxed"),  # before: right
    (A + "\\boxed{34}. Hmm, this is incorrect.", "34", False, "boxed"),  # before: right
    (A + "\\boxed{34}\n\nHmm, my answer is probably wrong.", "34", False, "boxed"),  # before: right
    (A + "Answer: 34\nWait, that's wrong.", "34", False, "answer"),  # before: right
    (A + "Answer: 34. Oops, I made a mistake.", "34", False, "answer"),  # before: right
    (A + "The final answer is $\\boxed{37}$.\n\nHmm, my answer is wrong. Let me redo it.", "37", False, "boxed"),  # before: right
    (A + "Answer: 37\n\nWait \u2014 that's wrong. It should be 36.", "37", False, "answer"),  # before: right
    (A + "Answer: 12\n\n(Wait, that's wrong.)", "12", False, "answer"),  # before: right
    (A + "\\boxed{8}\n\nBut that is not the answer.", "8", False, "boxed"),  # before: right
    (A + "**Final Answer**\n\\[\n\\boxed{12}\n\\]\n\nWait, that\u2019s wrong.", "12", False, "boxed"),  # before: right
    (A + "\\boxed{34}\n\nThis is wrong because we double counted; the true count is in the box.", "34", True,
     "boxed"),
    (A + "\\boxed{34}\n\nIf we used 35 instead, that would be wrong.", "34", True, "boxed"),
    (A + "\\boxed{34}\n\nNote: 35 is wrong.", "34", True, "boxed"),
    # ... only the sentence right after the answer: a later one is about what the sentences between name (from a
    # differential review: each was wrong under a rule that read every sentence); and one taken back
    (A + "The answer is \\boxed{12}.\n\nSomeone might answer 24. That's wrong.", "12", True, "boxed"),
    (A + "\\boxed{34}\n\nLet me double-check the count. Hmm, that is not right.", "34", True, "boxed"),
    (A + "\\boxed{3}\n\nThe other root x = -2 makes the logarithm undefined. It is rejected.", "3", True, "boxed"),
    (A + "Answer: 3\n\nx = -2 also solved the quadratic. But it is extraneous.", "3", True, "answer"),
    (A + "\\boxed{34}\n\nIn my first attempt I got 36. That was wrong.", "34", True, "boxed"),
    (A + "\\boxed{34}\n\nNote: a naive count gives 40; that's wrong, because it counts rotations twice.", "34", True,
     "boxed"),
    (A + "\\boxed{34}\n\nWait, that's wrong. No, it's right: 34 checks out.", "34", True, "boxed"),
    (A + "Answer: 37\n\nI made a mistake, sorry: 37 is right but step 3 had a typo.", "37", True, "answer"),
    (A + "\\boxed{12}\n\nHmm, that's wrong. No wait, it's right, as checked.", "12", True, "boxed"),
    (A + "\\boxed{12}\n\nWait, that's incorrect. Never mind, I confused it with another problem.", "12", True, "boxed"),
    (A + "The final answer is $\\boxed{12}$. Wait, that's wrong. Let me recheck. 3*4 = 12. Confirmed.", "12", True,
     "any"),
    # ... and one that goes on after a comma or colon: as often about something else (a third review)
    (A + "Answer: 12\n\nIt is incorrect, however, to include the endpoint x = 2.", "12", True, "answer"),
    (A + "\\boxed{12}\n\nI made a mistake, but corrected it above.", "12", True, "boxed"),
    (A + "\\boxed{12}\n\nThis is wrong: the problem says 'at least two', but it means 'exactly two'.", "12", True,
     "boxed"),
    (A + "\\boxed{12}\n\nWait, this is not correct. Let me re-verify the last step. Correct.", "12", True, "boxed"),
    (A + "Answer: 12\n\nI made a mistake, but it doesn't affect the final answer.", "12", True, "answer"),
    (A + "\\boxed{12}\n\nWait, that's wrong. Let me recount: 3 + 4 + 5 = 12. So 12.", "12", True, "boxed"),
    (A + "Which statement is false? Statement 3 fails.\n\n\\boxed{3}\n\nIt is incorrect, since f jumps at 0.", "3",
     True, "boxed"),
    (A + "Statement 3 is the false one.\n\nAnswer: 3\n\nIt is incorrect, since the converse fails.", "3", True,
     "answer"),
    (A + "\\boxed{34}\n\nI made a mistake in step 2 earlier, but it is fixed now.", "34", True, "boxed"),
    (A + "The false statement is \\boxed{3}. That is wrong.", "3", True, "boxed"),
    (A + "\\boxed{C}\n\nWait, that's wrong.", "C", True, "boxed"),  # a letter: which option is wrong?
    # a remark bounding the answer by a value
    (A + "Answer: 34 (at most 35)", "34", False, "answer"),  # before: right
    (A + "Answer: 34 (no more than $35$)", "34", False, "answer"),
    (A + "There are \\boxed{168} primes (up to 1000).", "168", True, "boxed"),  # the range a count runs over
    (A + "Answer: 25 (up to 100)", "25", True, "answer"),
    (A + "\\boxed{35} (at most 35)", "35", True, "boxed"),  # the bound it reaches
    (A + "Answer: 34 ways (at most 35)", "34", False, "answer"),  # before: right
    (A + "\\boxed{34} (no more than 35)", "34", False, "boxed"),  # before: right
    (A + "\\boxed{34} (at most $35$)", "34", False, "boxed"),  # before: right
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
