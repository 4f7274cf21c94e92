"""Parts of an answer math-verify did not read, and hedges past the answer's sentence (rows marked
"before:" were scored right before this change; the rest guard what stays right):

1. A symbol math-verify does not know, a range with dots or dashes, a CJK scale numeral, per mille,
   a base other than ten or a compound quantity: it read the number before it
   (:mod:`dapo.rewards.unread`; full-width punctuation, arrows and relations now as LaTeX:
   :mod:`dapo.rewards.unicode_math`).
2. Bare relations and estimate words: ``\\lesssim 34``, ``approx. 34``, ``34 (approximately)`` on the
   Answer line (a box's was already wrong), a bound's words, an unsure remark with another number.
3. A hedge in the sentence or on the line after the answer (:mod:`dapo.rewards.later_hedges`), a slash
   or dash past the box's math, a base subscript after the box.
"""

from __future__ import annotations

import pytest

from dapo.rewards import verify

THINK = "Let me think step by step.\nSo the total is computed.\n"


def answer(text: str) -> str:
    return THINK + "Answer: " + text


def boxed(text: str) -> str:
    return THINK + "Thus the final answer is " + text


# (response, ground truth, correct)
CASES: list[tuple[str, str, bool]] = [
    # --- 1. unread parts ---
    (answer("34–35"), "34", False),  # before: right
    (answer("$34—35$"), "34", False),  # before: right
    (boxed("$\\boxed{34–35}$"), "34", False),  # before: right
    (answer("34～35"), "34", False),  # before: right
    (answer("34 → 35"), "34", False),  # before: right
    (answer("34..35"), "34", False),  # before: right
    (answer("34\\ldots 35"), "34", False),  # before: right
    (answer("34{-}35"), "34", False),  # before: right
    (answer("34\\text{--}35"), "34", False),  # before: right
    (answer("34\\ldots"), "34", False),  # before: right
    (answer("34，35"), "34", False),  # before: right
    (answer("34或35"), "34", False),  # before: right
    (answer("34万"), "34", False),  # before: right
    (answer("34 ‰"), "34", False),  # before: right
    (answer("34_{16}"), "34", False),  # before: right
    (answer("34 (base 8)"), "34", False),  # before: right
    (answer("34 \\text{ h } 35 \\text{ min}"), "34", False),  # before: right
    (boxed("$\\boxed{34\\,\\mathrm{m}\\,35\\,\\mathrm{cm}}$"), "34", False),  # before: right
    (answer("34°35′"), "34", False),  # before: right
    (answer("34 score"), "34", False),  # before: right
    (answer("34 basis points"), "34", False),  # before: right
    # ... what is read as before, or now read right
    (answer("34，35"), "34, 35", True),  # before: wrong (a full-width comma)
    (answer("34⁄35"), "\\frac{34}{35}", True),  # before: wrong (a fraction slash)
    (answer("“34”"), "34", True),  # before: wrong (quotation marks)
    (answer("34_{10}"), "34", True),
    (answer("34 (base 10)"), "34", True),
    (answer("34°"), "34", True),
    (answer("34 ✓"), "34", True),
    (answer("–5"), "-5", True),
    (answer("(-∞, 1) ∪ (2, ∞)"), "(-\\infty,1)\\cup(2,\\infty)", True),
    (answer("3–5"), "3–5", True),  # the ground truth's own range
    (answer("34 \\text{ cm}"), "34", True),
    (answer("2 \\text{ and } 3"), "2, 3", True),
    # --- 2. relations, estimates, unsure remarks ---
    (answer("\\lesssim 34"), "34", False),  # before: right
    (answer("\\succeq 34"), "34", False),  # before: right
    (answer("≲ 34"), "34", False),  # before: right
    (answer("∝ 34"), "34", False),  # before: right
    (answer("approx. 34"), "34", False),  # before: right
    (answer("ca. 34"), "34", False),  # before: right
    (answer("34 (approximately)"), "34", False),  # before: right
    (answer("$34$ (roughly)"), "34", False),  # before: right
    (answer("34 (rounded)"), "34", False),  # before: right
    (boxed("$\\boxed{34}$ (estimate)"), "34", False),  # before: right
    (answer("34 (lower bound)"), "34", False),  # before: right
    (answer("34 (alt. 35)"), "34", False),  # before: right
    (answer("34 (not sure, could be 35)"), "34", False),  # before: right
    (answer("34 (I also got 35)"), "34", False),  # before: right
    (answer("34 (hmm, 35)"), "34", False),  # before: right
    (answer("34 (exactly)"), "34", True),
    (answer("34 (since n is odd)"), "34", True),
    (answer("34 (I also checked n = 34)"), "34", True),
    # --- 3. past the answer's sentence or line ---
    (boxed("$\\boxed{34}$; 35 is also possible."), "34", False),  # before: right
    (boxed("$\\boxed{34}$. Maybe 35."), "34", False),  # before: right
    (boxed("$\\boxed{34}$. Actually, it's 35."), "34", False),  # before: right
    (boxed("$\\boxed{34}$ / $35$."), "34", False),  # before: right
    (boxed("$\\boxed{34}$–35."), "34", False),  # before: right
    (boxed("$\\boxed{34}_8$"), "34", False),  # before: right
    (answer("34\n\nAlternatively, 35."), "34", False),  # before: right
    (boxed("$\\boxed{34}$\n\nOr 35."), "34", False),  # before: right
    (boxed("$\\boxed{34}$. 35 was my first guess."), "34", True),
    (boxed("$\\boxed{34}$. Maybe that is why 2 \\cdot 17 = 34 works."), "34", True),
    (answer("34\n\nWait, let me check: 2 \\cdot 17 = 34, so it holds."), "34", True),
    (answer("34\n\nActually, 34 is the only value."), "34", True),
    (answer("34\n\nActually, check n = 5."), "34", True),
    (answer("34\n\nThat is all.\n\nOr 35."), "34", True),  # a sentence past the next one is not read
    (boxed("$\\boxed{34}_{10}$"), "34", True),
]


@pytest.mark.parametrize("response,gold,expected", CASES)
def test_what_math_verify_did_not_read_and_later_hedges(response: str, gold: str, expected: bool) -> None:
    extractor = "boxed" if response.startswith(THINK + "Thus") else "answer"
    assert verify(response, gold, extractor)[0] is expected
    assert verify(response, gold, "auto")[0] is expected
