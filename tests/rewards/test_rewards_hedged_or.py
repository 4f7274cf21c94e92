"""An "or" after a boxed answer: a hedge when it offers another value, a remark when it restates the value; a
box in a reason is no answer (rows marked "before:" had the other verdict before this change; the rest guard
what stays).

1. A hedging adverb between "or" and the next value (``\\boxed{34} or maybe 35``, ``\\boxed{34}, or perhaps 35``,
   ``\\boxed{34} cm or maybe 35``) was not read, so the box alone was the answer: right for 34, a hedge a policy
   learns to write. "or maybe/perhaps/possibly/probably/likely/..." now opens an alternative as "or" does. "or
   rather 35" corrects the box to another value after it was stated: two values, wrong for both; "or
   equivalently 34.0" (and any "or" whose value is the box's) restates it: right.
2. On the Answer line every "or" outside the box was a hedge, even one that only restates the box's value
   (``Answer: \\boxed{2} or \\sqrt{4}``, ``Answer: \\boxed{5} cm, or 50 mm``: wrong, while the boxed extractor
   judged them right). The remark that opens right after the box is now judged as the boxed extractor judges
   it (:func:`~dapo.rewards.boxes.changed_after`); any other "or" on the line is still a hedge.
3. A box in a reason clause after the Answer line's value (``Answer: 34, since \\boxed{n = 35}``) took priority,
   so the reason's equation was the answer (right for 35). The reason is dropped, box and all
   (:mod:`~dapo.rewards.reasons`): the line states 34.
-- remark_words, boxes, answer_line_boxes, extract.
"""

from __future__ import annotations

import time

import pytest

from dapo.rewards import verify
from dapo.rewards.verifier import prepare

A = "Let me think step by step.\nSo the total is computed.\n"

# (response, ground truth, correct, extractor)
CASES: list[tuple[str, str, bool, str]] = [
    # --- 1. an adverb after "or" still offers the value after it ---
    (A + "So \\boxed{34} or maybe 35", "34", False, "boxed"),  # before: right
    (A + "So \\boxed{34}, or perhaps 35", "34", False, "boxed"),  # before: right
    (A + "So \\boxed{34} cm or maybe 35", "34", False, "boxed"),  # before: right
    (A + "So \\boxed{34} or possibly 35", "34", False, "boxed"),  # before: right
    (A + "So \\boxed{34} or probably 35", "34", False, "boxed"),  # before: right
    (A + "So \\boxed{34}, or, perhaps, 35", "34", False, "boxed"),  # before: right
    (A + "So \\boxed{34} or maybe even 35", "34", False, "boxed"),  # before: right
    (A + "So \\boxed{34} or perhaps $x = 35$", "34", False, "boxed"),  # before: right
    (A + "So \\boxed{2} or maybe \\sqrt{2}", "2", False, "boxed"),  # before: right
    (A + "So \\boxed{34} (or maybe 35)", "34", False, "boxed"),  # before: right
    (A + "So \\boxed{34} or maybe 35", "34", False, "any"),  # before: right
    (A + "So \\boxed{34} or maybe 35", "35", False, "boxed"),
    (A + "So \\boxed{34} or else 35", "34", False, "boxed"),
    (A + "So \\boxed{34} or rather 35", "34", False, "boxed"),  # a correction after the box: two values
    (A + "So \\boxed{34} or rather 35", "35", False, "boxed"),
    (A + "Answer: \\boxed{34} or maybe 35", "34", False, "answer"),
    (A + "Answer: \\boxed{34} or rather 35", "35", False, "answer"),
    (A + "Answer: 34 or maybe 35", "34", False, "answer"),
    (A + "Answer: $34$ or possibly $35$", "34", False, "answer"),
    (A + "Answer: 34 or rather 35", "35", False, "answer"),
    (A + "Answer: 34 or maybe 35", "34", False, "any"),
    # ... the same value after it restates it
    (A + "So \\boxed{34} or equivalently 34.0", "34", True, "boxed"),
    (A + "So \\boxed{34} or perhaps 34.0", "34", True, "boxed"),
    (A + "So \\boxed{2} or maybe \\sqrt{4}", "2", True, "boxed"),
    (A + "So \\boxed{34} or rather 34.0", "34", True, "boxed"),
    (A + "Answer: 34 or equivalently 34.0", "34", True, "answer"),
    # --- 2. on the Answer line, the remark after the box is judged as after a box ---
    (A + "Answer: \\boxed{\\frac13}, or about 0.33", "\\frac13", True, "answer"),  # before: wrong
    (A + "Answer: \\boxed{2} or \\sqrt{4}", "2", True, "answer"),  # before: wrong
    (A + "Answer: \\boxed{5} cm, or 50 mm", "5", True, "answer"),  # before: wrong
    (A + "Answer: \\boxed{34} or equivalently 34.0", "34", True, "answer"),  # before: wrong
    (A + "Answer: \\boxed{34} (or 34.0)", "34", True, "answer"),  # before: wrong
    (A + "Answer: $\\boxed{2}$ or $\\sqrt{4}$", "2", True, "answer"),  # before: wrong
    (A + "Answer: \\boxed{2} \\text{ or } \\sqrt{4}", "2", True, "answer"),  # before: wrong
    (A + "Answer: \\boxed{2} or \\sqrt{4}", "2", True, "any"),  # before: wrong
    (A + "**Final Answer:** \\boxed{5} cm, or 50 mm", "5", True, "any"),  # before: wrong
    # ... another value, or another "or" on the line, is still a hedge
    (A + "Answer: \\boxed{2} or \\sqrt{2}", "2", False, "answer"),
    (A + "Answer: \\boxed{34} or 35", "34", False, "answer"),
    (A + "Answer: \\boxed{5} cm, or 5 mm", "5", False, "answer"),
    (A + "Answer: \\boxed{\\frac13}, or about 0.5", "\\frac13", False, "answer"),
    (A + "Answer: \\boxed{2} or \\sqrt{4} or 3", "2", False, "answer"),
    (A + "Answer: \\boxed{\\frac13}, or about 0.33, or 35", "\\frac13", False, "answer"),
    (A + "Answer: \\boxed{34} cm, which is the length or 35", "34", False, "answer"),
    (A + "Answer: \\boxed{34}, the count" + " of ways" * 20 + " or 35", "34", False, "answer"),
    (A + "Answer: 35 or \\boxed{34}", "34", False, "answer"),
    (A + "Answer: either \\boxed{34}", "34", False, "answer"),
    (A + "Answer: \\boxed{34} or \\boxed{35}", "34", False, "answer"),
    (A + "Answer: \\boxed{34} or equivalently 34.0, or 35", "34", False, "answer"),
    (A + "Answer: \\boxed{34} (or 34) 35", "34", False, "answer"),
    (A + "Answer: \\boxed{34} (or 34) and 35", "34", False, "answer"),
    # --- 3. a box in a reason after the Answer line's value is no answer ---
    (A + "Answer: 34, since \\boxed{n = 35}", "34", True, "answer"),  # before: wrong
    (A + "Answer: 34, since \\boxed{n = 35}", "35", False, "answer"),  # before: right
    (A + "Answer: 34, since \\boxed{n = 35}", "34", True, "any"),  # before: wrong
    (A + "Answer: 34, since \\boxed{n = 35}", "35", False, "any"),  # before: right
    (A + "Answer: 34 (since \\boxed{n = 35})", "35", False, "answer"),  # before: right
    (A + "Answer: $34$ because $\\boxed{35}$ is odd", "35", False, "answer"),  # before: right
    (A + "Answer: \\boxed{34}, since \\boxed{n = 35}", "34", True, "answer"),  # before: wrong
    (A + "Answer: \\boxed{34}, since \\boxed{n = 35}", "35", False, "answer"),
    (A + "Answer: 34 (since \\boxed{n = 35}) or 36", "34", False, "answer"),
    (A + "Answer: 34, since \\boxed{n = 35}, or 36", "35", False, "answer"),
    (A + "Answer: 34, since \\boxed{n = 35}, or 36", "34", False, "answer"),
    # ... a box that is not in a reason after a value stays the answer
    (A + "Answer: since n is odd, \\boxed{35}", "35", True, "answer"),
    (A + "Answer: \\boxed{34}, since n = 35", "34", True, "answer"),
    (A + "Answer: \\boxed{34 \\text{ since } n = 35}", "34", True, "answer"),
    (A + "Answer: the answer, since it is odd, is \\boxed{35}", "35", True, "answer"),
    (A + "Answer: n = 5, since n is odd, so \\boxed{35}", "35", True, "answer"),  # the reason concludes: the box
    (A + "Answer: n = 5 because n is odd; hence the count is \\boxed{35}", "35", True, "answer"),
    (A + "Answer: \\boxed{34} or so", "34", False, "answer"),  # no value after the "or": a hedge
]


@pytest.mark.parametrize("response,gold,correct,extractor", CASES)
def test_verdicts(response: str, gold: str, correct: bool, extractor: str) -> None:
    assert verify(response, gold, extractor)[0] is correct


@pytest.mark.parametrize(
    "response",
    ["Answer: \\boxed{34}" + " or maybe" * 3000 + " 35", "\\boxed{34}" + " or, perhaps," * 3000,
     "Answer: 34" + ", since \\boxed{n = 35}" * 2000, "Answer: " + "\\boxed{1} or " * 3000 + "\\sqrt{4}"],
)
def test_stays_fast_on_hostile_text(response: str) -> None:
    for extractor in ("answer", "boxed", "any"):
        start = time.perf_counter()
        prepare(response, "34", extractor)  # the parent-process part: string work only
        assert time.perf_counter() - start < 0.5, extractor
