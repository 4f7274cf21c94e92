"""Text after the last box that makes it no longer the whole answer (rows marked "before:" were
scored right before this change; the rest guard what stays right):

1. A second value alone after the box with no "or" (``\\boxed{34}; 35``, ``\\boxed{34}, maybe 35``,
   ``\\boxed{34} 35``) was dropped, so the box alone was the answer. It is another candidate now, unless it
   restates the box's value (``\\boxed{34}, 34.0``). A value that goes on is a justification, read as before
   (``\\boxed{34}, 34 = 2 \\cdot 17``), and a period ends the sentence: ``\\boxed{34}. 35 was my first guess``
   is no second answer.
2. An estimate's words with no value (``\\boxed{34} or so``, ``give or take``, ``(more or less)``) and a bracketed
   approximation word (``\\boxed{34} (approximately)``, ``(roughly)``) hedged the box only without brackets
   (``\\boxed{34}, roughly`` was already wrong).
3. After a bracketed remark that restates the box (``(34 ways)``), the rest of the line was not read:
   ``\\boxed{34} (34 ways) 35`` and ``... or 35`` were right for 34.
4. A remark in square brackets (``\\boxed{34} [or 35]``), a LaTeX line break before a second value
   (``\\boxed{34} \\\\ 35``, ``\\\\[2pt]``) and a remark past the box's closing math delimiter
   (``\\[\\boxed{34}\\] (or 35)``, ``\\(\\boxed{34}\\) \\approx 35``) were not read.
-- boxes.changed_after.
"""

from __future__ import annotations

import pytest

from dapo.rewards import verify

A = "Let me think step by step.\nSo the total is computed.\n"

# (response, ground truth, correct)
CASES: list[tuple[str, str, bool]] = [
    # --- 1. a second value with no "or" ---
    (A + "So \\boxed{34}; 35", "34", False),  # before: right
    (A + "So \\boxed{34}, 35", "34", False),  # before: right
    (A + "So \\boxed{34} 35", "34", False),  # before: right
    (A + "So \\boxed{34}; maybe 35", "34", False),  # before: right
    (A + "So \\boxed{34}, perhaps $x = 35$", "34", False),  # before: right
    (A + "So \\boxed{34}; 35", "35", False),
    (A + "So \\boxed{\\frac12}; 0.7", "\\frac12", False),  # before: right
    (A + "So \\boxed{1, 2}; 3", "1, 2", False),  # before: right
    # ... a restatement of the box's value, or a new sentence, is not one
    (A + "So \\boxed{34}, 34.0", "34", True),
    (A + "So \\boxed{\\frac12}, 0.5", "\\frac12", True),
    (A + "So \\boxed{34}. 35 was my first guess.", "34", True),
    (A + "So \\boxed{34}35", "34", False),  # glued: one number, 3435 (as before)
    (A + "So \\boxed{34} is the answer.", "34", True),
    (A + "So \\boxed{34} cm", "34", True),
    (A + "So \\boxed{34} ways, so 34 in all.", "34", True),
    (A + "So \\boxed{34}, 34 = 2 \\cdot 17", "34", True),  # a justification after the value, not a second one
    (A + "So \\boxed{34}; 2 \\cdot 17 = 34", "34", True),
    (A + "So \\boxed{34}; 34 ways to pick 2 of 9", "34", True),
    (A + "So \\boxed{12}, 12:00", "12", True),
    (A + "So \\boxed{34}, 35.", "34", False),  # before: right
    # --- 2. an estimate ---
    (A + "So \\boxed{34} or so", "34", False),  # before: right
    (A + "So \\boxed{34}, give or take", "34", False),  # before: right
    (A + "So \\boxed{34} (more or less)", "34", False),  # before: right
    (A + "So \\boxed{34} (approximately)", "34", False),  # before: right
    (A + "So \\boxed{34} (roughly)", "34", False),  # before: right
    (A + "So \\boxed{34} (approx.)", "34", False),  # before: right
    (A + "So \\boxed{34}, roughly", "34", False),
    (A + "So \\boxed{34} (exactly)", "34", True),
    (A + "So \\boxed{34} (about 34)", "34", True),
    (A + "So \\boxed{30^\\circ} (= \\frac{\\pi}{6})", "30^\\circ", True),
    # --- 3. past a restating remark ---
    (A + "So \\boxed{34} (34 ways) 35", "34", False),  # before: right
    (A + "So \\boxed{34} (34 ways) or 35", "34", False),  # before: right
    (A + "So \\boxed{34} (34 ways) (35 ways)", "34", False),  # before: right
    (A + "So \\boxed{34} (34 ways).", "34", True),
    (A + "So \\boxed{34} (34 ways) (since n is even).", "34", True),
    # --- 4. square brackets, line breaks, a closing math delimiter ---
    (A + "So \\boxed{34} [or 35]", "34", False),  # before: right
    (A + "So \\boxed{34} [maybe 35]", "34", False),  # before: right
    (A + "So \\boxed{34} \\\\ 35", "34", False),  # before: right
    (A + "So $$\\boxed{34} \\\\[2pt] 35$$", "34", False),  # before: right
    (A + "So \\boxed{34}\\\\35", "34", False),  # before: right
    (A + "\\[\\boxed{34}\\] (or 35)", "34", False),  # before: right
    (A + "\\(\\boxed{34}\\) (about 35)", "34", False),  # before: right
    (A + "\\[\\boxed{34}\\] \\approx 35", "34", False),  # before: right
    (A + "\\[\\boxed{34}\\] [or 35]", "34", False),  # before: right
    (A + "So \\boxed{34} [34 ways]", "34", True),
    (A + "So \\boxed{34} [since n is odd]", "34", True),
    (A + "So \\boxed{34} \\\\", "34", True),
    (A + "So \\boxed{34} \\\\ \\text{which is the number of ways.}", "34", True),
    (A + "\\[\\boxed{34}\\] (34 ways)", "34", True),
    (A + "\\[\\boxed{34}\\]", "34", True),
]


@pytest.mark.parametrize("extractor", ["boxed", "auto"])
@pytest.mark.parametrize("response,gold,expected", CASES)
def test_text_after_the_last_box(response: str, gold: str, expected: bool, extractor: str) -> None:
    assert verify(response, gold, extractor)[0] is expected


def test_the_answer_line_reads_the_box_the_same_way() -> None:
    assert verify(A + "Answer: \\boxed{34}; 35", "34", "answer")[0] is False
    assert verify(A + "Answer: \\boxed{34} or so", "34", "answer")[0] is False
    assert verify(A + "Answer: \\boxed{34} (34 ways)", "34", "answer")[0] is True
