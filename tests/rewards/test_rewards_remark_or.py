"""Verdicts found by mutation testing the hedge and answer-text rules (hedges.py, later_hedges.py,
answer_line_boxes.py, answer_lists.py, answer_text.py): rows marked "before:" had the other verdict
before this change.

1. After a box, an "or" inside a remark offered another value unseen: ``\\boxed{34} (the first or 35)``
   and ``(or its negative)`` were right for 34, as was ``\\boxed{\\pi} or \\tau`` for pi; the Answer
   line, and a list answer, judged them wrong. An "or" in a remark that states a condition (``since n is
   1 or 3``, ``either n = 3 or n = 4``) is still the condition's.
2. An en dash before a command is a minus sign as before a digit: ``–\\frac{1}{2}``.
-- number_forms, boxes, answer_text, remark_words.
"""

from __future__ import annotations

import pytest

from dapo.rewards import verify
from dapo.rewards.answer_text import clean_answer
from dapo.rewards.breaker import Breaker

A = "Let me think step by step.\nSo the total is computed.\n"

CASES: list[tuple[str, str, bool, str]] = [
    # before: right (an "or" after a box offering another value: in a remark, a transform, a Greek letter)
    (A + "So \\boxed{34} (the first or 35)", "34", False, "any"),
    (A + "So \\boxed{34} (or its negative)", "34", False, "any"),
    (A + "So \\boxed{34} (or the reciprocal)", "34", False, "boxed"),
    (A + "So \\boxed{\\pi} or \\tau.", "\\pi", False, "boxed"),
    (A + "Answer: \\boxed{\\pi} or \\tau", "\\pi", False, "answer"),
    (A + "So \\boxed{\\alpha} or \\beta", "\\alpha", False, "boxed"),
    (A + "Answer: –\\frac{1}{2}", "-\\frac{1}{2}", True, "answer"),  # before: wrong (an en dash before a command)
    # kept: a condition's "or", a restatement, a closed form computed_form leaves
    (A + "So \\boxed{34} (the first or 34)", "34", True, "any"),
    (A + "So \\boxed{\\pi} or \\pi.", "\\pi", True, "boxed"),
    (A + "So \\boxed{34} (since n is 1 or 3)", "34", True, "any"),
    (A + "So \\boxed{34} (for n = 1 or 3)", "34", True, "any"),
    (A + "So \\boxed{34} (either n = 3 or n = 4)", "34", True, "boxed"),
    (A + "So \\boxed{34} (n odd or even)", "34", True, "any"),
    (A + "So \\boxed{\\frac13} (the first or about 0.33)", "\\frac13", True, "boxed"),
    (A + "So \\boxed{2} (or \\log 100)", "2", True, "boxed"),
    (A + "Answer: 3–5", "-2", False, "answer"),
    # each pins one rule no other case did (a mutation of it passed the suite)
    (A + "So \\boxed{1, 2} (1 solution)", "1, 2", False, "any"),
    (A + "So \\boxed{34, 5} (either way)", "34, 5", True, "any"),
    (A + "So \\boxed{34, 5} (34, 5 million)", "34, 5", False, "any"),
    (A + "So \\boxed{\\frac13, \\frac12} (i.e. 0.33, 0.5)", "\\frac13, \\frac12", False, "any"),
    (A + "So \\boxed{34, 5} = 34, 5", "34, 5", True, "any"),
    (A + "So \\boxed{\\pi} \\approx 3.14 (or 35)", "\\pi", False, "boxed"),
    (A + "Answer: 34, i.e. 34 m/s", "34", True, "answer"),
    (A + "So \\boxed{34}. " + "We double-check every step of the computation above. " * 3 + "Maybe 35.", "34", False, "any"),
    (A + "So \\boxed{\\sqrt{6}}\n\nOr maybe 2.", "\\sqrt{6}", False, "any"),
    (A + "So \\boxed{34}\nWe checked it\nMaybe 35", "34", False, "any"),
    (A + "Answer: \\boxed{2} \\lor \\sqrt{4}", "2", True, "answer"),
    (A + "Answer: \\boxed{\\infty} or \\infty", "\\infty", True, "answer"),
    (A + "Answer: 34, since \\boxed{35 is odd}", "34", True, "answer"),
    (A + "Answer: n = 5, since n is odd, so \\boxed{n = 35}", "35", True, "answer"),
    (A + "Answer: \\boxed{34}, or the opposite", "34", False, "answer"),
    (A + "Answer: y=4, x=3, x=3", "x=3, y=4", False, "answer"),
    (A + "Answer: x=3, 5", "x=3, y=4", False, "answer"),
    (A + "Answer: 3, 4, 5", "x=3, y=4", False, "answer"),
    (A + "So the roots are 1, - \\boxed{3}", "-3", True, "any"),
    (A + "Answer: \\text{4} and \\text{5}", "4, 5", True, "answer"),
    (A + "So -\\boxed{-x+1}", "x-1", True, "any"),
]


@pytest.mark.parametrize("response,gold,correct,extractor", CASES)
def test_hedge_and_answer_text_verdicts(response: str, gold: str, correct: bool, extractor: str) -> None:
    assert verify(response, gold, extractor)[0] is correct


def test_a_trip_of_as_many_deaths_as_timeouts_skips_its_tasks_as_timeouts() -> None:
    """Skipped tasks fail as most of the streak did; a tie is a hang (the cheaper to wait out), not a crash."""
    breaker = Breaker([0] * 6, list(range(6)), num_workers=2)
    for task, kind in enumerate(["died", "timeout", "died", "timeout"]):
        breaker.record(task, kind)
    assert breaker.tripped[0] == (4, 4, 2) and breaker.skipped_outcome(5) == ("timeout", "skipped")


def test_cleaning_an_answer_keeps_an_ellipsis_and_drops_a_closing_comma() -> None:
    """A sequence's "..." is part of it (the pattern goes on); a comma after the answer is punctuation."""
    assert clean_answer("1, 2, 4, ...") == "1, 2, 4, ..."
    assert clean_answer("34,") == clean_answer("34.") == "34"
