"""Parts of an answer math-verify did not read, and hedges past the answer's sentence (rows marked
"before:" were scored right before this change; the rest guard what stays right):

1. A symbol math-verify does not know before another number, a range with dots or dashes, per mille
   or a compound quantity: it read the number before it (:mod:`dapo.rewards.unread`; full-width
   punctuation, arrows and relations now as LaTeX: :mod:`dapo.rewards.unicode_math`). What adds no
   second value (a base subscript, a CJK unit, prose after a dash) is left as before.
2. Bare relations and estimate words: ``\\lesssim 34``, ``approx. 34``, ``34 (approximately)`` on the
   Answer line (a box's was already wrong), an unsure remark with another number.
3. A hedge in the sentence or on the line after the answer (:mod:`dapo.rewards.later_hedges`), a slash
   or dash past the box's math.
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
    (answer("34，35"), "34", False),  # before: right
    (answer("34或35"), "34", False),  # before: right
    (answer("34 ‰"), "34", False),  # before: right
    (answer("34 \\text{ h } 35 \\text{ min}"), "34", False),  # before: right
    (boxed("$\\boxed{34\\,\\mathrm{m}\\,35\\,\\mathrm{cm}}$"), "34", False),  # before: right
    (answer("34°35′"), "34", False),  # before: right
    # ... what is read as before, or now read right
    (answer("34，35"), "34, 35", True),  # before: wrong (a full-width comma)
    (answer("34⁄35"), "\\frac{34}{35}", True),  # before: wrong (a fraction slash)
    (answer("“34”"), "34", True),  # before: wrong (quotation marks)
    (answer("34°"), "34", True),
    (answer("34 ✓"), "34", True),
    (answer("–5"), "-5", True),
    (answer("(-∞, 1) ∪ (2, ∞)"), "(-\\infty,1)\\cup(2,\\infty)", True),
    (answer("3–5"), "3–5", True),  # the ground truth's own range
    (answer("34 \\text{ cm}"), "34", True),
    (answer("2 \\text{ and } 3"), "2, 3", True),
    # ... and what adds no second value, or is prose: left as math-verify reads it
    (boxed("$\\boxed{1204_9}$"), "1204", True),  # a base-b answer's digits are its ground truth
    (answer("34 (base 8)"), "34", True),
    (answer("34千米"), "34", True),  # a unit (km), not a scale
    (answer("34万元"), "34", True),  # when the question asks in 万元
    (answer("34 score"), "34", True),
    (answer("142857..."), "142857", True),
    (answer("34 — the number of ways"), "34", True),
    (answer("34 — 34 ways in total"), "34", True),
    (answer("34。所以共有34种。"), "34", True),
    (answer("x ≡ 34 (mod 100)"), "34", True),
    (answer("∠ABC = 34°"), "34", True),
    (answer("ℝ∖\\{0\\}"), "\\mathbb{R}\\setminus\\{0\\}", True),
    (answer("34∕35"), "\\frac{34}{35}", True),
    (answer("£34"), "34", True),  # before: wrong (currency signs read as \pounds, \euro, \yen)
    (answer("€34"), "34", True),  # before: wrong
    (boxed("$\\boxed{¥34}$"), "34", True),  # before: wrong
    (answer("£34"), "35", False),
    # --- 2. relations, estimates, unsure remarks ---
    (answer("\\lesssim 34"), "34", False),  # before: right
    (answer("\\succeq 34"), "34", False),  # before: right
    (answer("≲ 34"), "34", False),  # before: right
    (answer("∝ 34"), "34", False),  # before: right
    (answer("approx. 34"), "34", False),  # before: right
    (answer("ca. 34"), "34", False),  # before: right
    (answer("34 (approximately)"), "34", False),  # before: right
    (answer("$34$ (roughly)"), "34", False),  # before: right
    (boxed("$\\boxed{34}$ (estimate)"), "34", False),  # before: right
    (answer("34 (alt. 35)"), "34", False),  # before: right
    (answer("34 (not sure, could be 35)"), "34", False),  # before: right
    (answer("34 (I also got 35)"), "34", False),  # before: right
    (answer("34 (hmm, 35)"), "34", False),  # before: right
    (answer("34 (exactly)"), "34", True),
    (answer("34 (since n is odd)"), "34", True),
    (answer("3.14 (rounded)"), "3.14", True),
    (answer("34 (upper bound)"), "34", True),
    (answer("CA = 34"), "34", True),  # a side, not "ca." (circa)
    (boxed("$\\boxed{CA=34}$"), "34", True),
    (answer("34 (I also checked n = 34)"), "34", True),
    # --- 3. past the answer's sentence or line ---
    (boxed("$\\boxed{34}$; 35 is also possible."), "34", False),  # before: right
    (boxed("$\\boxed{34}$. Maybe 35."), "34", False),  # before: right
    (boxed("$\\boxed{34}$. Actually, it's 35."), "34", False),  # before: right
    (boxed("$\\boxed{34}$ / $35$."), "34", False),  # before: right
    (boxed("$\\boxed{34}$–35."), "34", False),  # before: right
    (answer("34\n\nAlternatively, 35."), "34", False),  # before: right
    (boxed("$\\boxed{34}$. It could also be 35."), "34", False),  # before: right
    (boxed("$\\boxed{34}$. However, 35 is also possible."), "34", False),  # before: right
    (boxed("$\\boxed{34}$. Maybe the answer is 35 instead."), "34", False),  # before: right
    (boxed("$\\boxed{34}$ (或 35)"), "34", False),  # before: right
    (boxed("$\\boxed{34}$。也可能是 35。"), "34", False),  # before: right (no space after 。)
    (answer("34\n\n或者 35。"), "34", False),  # before: right
    (boxed("$\\boxed{34}$。所以答案是34。"), "34", True),
    (boxed("$\\boxed{2\\sqrt{3}}$. Or approximately 3.46."), "2\\sqrt{3}", True),
    (boxed("$\\boxed{34}$, or we get 35."), "34", False),  # before: right
    (boxed("$\\boxed{34}$. Wait, I get 35."), "34", False),  # before: right
    (answer("34\n\nOr you would obtain 35."), "34", False),  # before: right
    (boxed("$\\boxed{34}$. Or we get 34.0 written as a decimal."), "34", True),
    (boxed("$\\boxed{34}$. But we have 2 \\cdot 17 = 34."), "34", True),
    (boxed("$\\boxed{34}$. But then we have 12 left over."), "34", True),
    (boxed("$\\boxed{34}$\n\nWait, check step 3."), "34", True),
    (boxed("$\\boxed{34}$. Alternatively, by Lemma 2."), "34", True),
    (boxed("$\\boxed{34}$. Perhaps from AMC 2019."), "34", True),
    (boxed("$\\boxed{34}$ — 34 ways in total."), "34", True),
    # ... a sentence that rules a value out is a check, not a hedge
    (boxed("The side length is \\boxed{3}. -3 is not a valid solution since lengths are positive."), "3", True),
    (answer("3\n\n-3 is not valid, since a length is positive."), "3", True),
    (boxed("So $x = \\boxed{3}$.\n\nBut 0 is not possible because we divide by x."), "3", True),
    (boxed("The answer is \\boxed{34}. 35 is too large."), "34", True),
    (boxed("The answer is \\boxed{34}. However, 35 is incorrect."), "34", True),
    (boxed("The answer is \\boxed{34}. Also, 2 works too as a check."), "34", True),
    (boxed("The answer is \\boxed{34}. 35 works too."), "34", False),  # before: right
    (boxed("$\\boxed{34}$ [1]"), "34", True),  # a reference, not a remark
    (boxed("$\\boxed{34}$\n\nOr 35."), "34", False),  # before: right
    (boxed("$\\boxed{34}$. 35 was my first guess."), "34", True),
    (boxed("$\\boxed{34}$. Maybe that is why 2 \\cdot 17 = 34 works."), "34", True),
    (answer("34\n\nWait, let me check: 2 \\cdot 17 = 34, so it holds."), "34", True),
    (answer("34\n\nActually, 34 is the only value."), "34", True),
    (answer("34\n\nActually, check n = 5."), "34", True),
    (answer("34\n\nThat is all.\n\nOr 35."), "34", False),  # before: right (any sentence within 300 characters)
    (answer("34\n\n" + "That is all. " * 30 + "Or 35."), "34", True),  # past them: not read
]


@pytest.mark.parametrize("response,gold,expected", CASES)
def test_what_math_verify_did_not_read_and_later_hedges(response: str, gold: str, expected: bool) -> None:
    extractor = "boxed" if response.startswith(THINK + "Thus") else "answer"
    assert verify(response, gold, extractor)[0] is expected
    assert verify(response, gold, "auto")[0] is expected
