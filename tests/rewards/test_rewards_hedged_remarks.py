"""Hedges a policy could learn to be paid for (from a mutation audit of the verifier and a differential
review of the rule against 250 written final lines): a value a remark offers as the answer instead,
past its opening (dapo/rewards/offered_values.py), another case's value, or a question mark between
two values, is two answers, wrong for both; remarks whose numbers describe, check or reject stay right."""

from __future__ import annotations

import pytest

from dapo.rewards.verifier import verify

TWO_ANSWERS = [
    ("Answer: 34 (but it might be 35)", "34"),
    ("Answer: 34 (I think, could be 35)", "34"),
    ("Answer: 34 (not certain; 35 is possible)", "34"),
    ("Answer: 34 (the other candidate was 35)", "34"),
    ("Answer: 34 (my other answer is 35)", "34"),
    ("Answer: 34 (backup answer 35)", "34"),
    ("Answer: 34 (I am unsure, 35 is also plausible)", "34"),
    ("Answer: 34 (if n is even; 35 if n is odd)", "34"),
    ("Answer: 34 (for even n; 35 for odd n)", "34"),
    ("Answer: 10 (if we count order; 5 otherwise)", "10"),
    ("Answer: 1, 2 (but maybe also 3)", "1, 2"),
    ("Answer: 34? 35", "35"),
    ("Answer: 34? 35?", "35"),
    ("Answer: 34 ? 35", "34"),
    ("Answer: $34$? $35$", "35"),
    ("Answer: 34 (3 cases; it might be 35)", "34"),
    ("Answer: 34 (probably since 3 + 4 = 7, or maybe 35)", "34"),
    ("Answer: 34 (the answer may be 35)", "34"),  # from a differential review: hedges the first rule let through
    ("Answer: 34 (not 100% sure, 35 is also plausible)", "34"),
    ("Answer: 34 (if order matters, 68)", "34"),
    ("Answer: 34 (if order does not matter; otherwise 68)", "34"),
    ("Answer: 34 (if not, then 35)", "34"),
    ("Answer: 34 (unless the empty set counts, in which case 35)", "34"),
    ("Answer: 34 (though I also got 35 with another method)", "34"),
    ("Answer: 34 (a second method gave 35)", "34"),
    ("Answer: 34 (a close second is 35)", "34"),
    ("Answer: 34 (I guess 35 is also defensible)", "34"),
    ("Answer: 34, 35 (if n is odd, 36)", "34, 35"),
    ("Answer: 34 (I'd also accept 35)", "34"),  # from a second review
    ("Answer: 6 (the answer may instead be 7)", "6"),
    ("Answer: 6 (other possible answer 7)", "6"),
    ("Answer: 34 (an equally valid answer is 35)", "34"),
    ("Answer: 12 (my guess is 13 though)", "12"),
    ("Answer: 34 (on a second try I got 35)", "34"),
    ("Answer: 34 (I suspect 35 is correct)", "34"),
    ("Answer: 34 (some might say 35)", "34"),
    ("Answer: 34 (depending on interpretation, 35)", "34"),
    ("Answer: 6 (without repetition; with it, 9)", "6"),
    ("Answer: 34 (my other answer is x = 35)", "34"),
]

ONE_ANSWER = [
    ("Answer: 34 (I think)", "34"),
    ("Answer: 34 (probably)", "34"),
    ("Answer: 34 (maybe 34.0)", "34"),  # the same value
    ("Answer: \\frac{1}{2} (possibly 0.5)", "\\frac{1}{2}"),
    ("Answer: 34 (other than 0)", "34"),
    ("Answer: 34 (it could not be 35)", "34"),
    ("Answer: 34 (the other cases give nothing)", "34"),
    ("Answer: 34 (for n = 5)", "34"),
    ("Answer: 34 (since 2 + 32 = 34)", "34"),
    ("Answer: 34 (if n is even; 34 if n is odd)", "34"),
    ("Answer: 34 (for n = 5, probably 34)", "34"),  # the hedged value is the answer's
    ("Answer: 34 (if n > 2; 34 if n = 2 as well)", "34"),  # so is the other case's
    ("Answer: 34?", "34"),
    ("Answer: How many ways? 34", "34"),  # a question, then the value
    ("Answer: 3 + 4 = ? 7", "7"),
    ("Answer: 1, 2 (the other roots are complex)", "1, 2"),
    ("Answer: 3 (the other root, -2, is extraneous)", "3"),  # another value, rejected
    ("Answer: 3 (the other solution x = -2 is rejected)", "3"),
    ("Answer: 3 (the other root -2 does not satisfy x > 0)", "3"),
    ("Answer: 3 (we discard the other root, -2)", "3"),
    ("Answer: 12 (probably the intended answer, since 3 \\times 4 = 12)", "12"),  # arithmetic
    ("Answer: 5 (another way: 2 + 3 = 5)", "5"),
    ("Answer: 34 (likely the answer since n = 3)", "34"),  # a condition's value
    ("Answer: 34 (this is likely correct; 2 cases were checked)", "34"),  # a count of the derivation's steps
    ("Answer: 6 (possibly in 3 steps)", "6"),
    ("Answer: 6 (perhaps surprisingly, 3! = 6)", "6"),
    ("Answer: 7 (the other 3 options fail)", "7"),
    ("Answer: 3 (other answers like 4 are wrong)", "3"),
    ("Answer: 30 (degrees, probably; the other angle is 60)", "30"),  # another clause's number
    ("Answer: 14 (the other 13 are duplicates)", "14"),
    ("Answer: 9 (it might seem like 3 at first, but squaring gives 9)", "9"),  # and remarks it made wrong
    ("Answer: 34 (a likely mistake is 35)", "34"),
    ("Answer: 34 (the other answer choice, 35, is a distractor)", "34"),
    ("Answer: 6 (the other candidate 2 is too small to satisfy the inequality)", "6"),
    ("Answer: 24 (my guess from part 1 was 12, this is part 2)", "24"),
    ("Answer: 5 (possibly from 2 of the 3 coins)", "5"),
    ("Answer: 11 (year 11 of the plan, probably 2031)", "11"),
    ("Answer: 32 (maybe in 2 more years)", "32"),
    ("Answer: 32 (could take 2 hours)", "32"),
    ("Answer: 34 (there might be 2 ways to see this)", "34"),
    ("Answer: 34 (the backup generator runs 3 hours)", "34"),
    ("Answer: 34, 35 (probably both, since 2 values satisfy)", "34, 35"),
    ("Answer: 34 (my other answer was 35, but it fails the check)", "34"),  # offered, then rejected
    ("Answer: 32 (x might be 2, giving 2^5 = 32)", "32"),  # a modal about another quantity of the problem
    ("Answer: 11 (John may be 5, so Mary is 11)", "11"),
    ("Answer: 24 (this might be 4!, i.e. 24)", "24"),
    ("Answer: 16 (the first term could be 1; then a_5 = 16)", "16"),
    ("Answer: 12 (the larger; the other value is 4)", "12"),
    ("Answer: 5 (she first had 8, then gave away 3)", "5"),
    ("Answer: 9 (Ben also had 4, so together 9)", "9"),
    ("Answer: 18 (if in cm; 0.18 in m)", "18"),  # a decimal point is no end of the value
    ("Answer: 6 (I got 2 solutions, summed)", "6"),
    ("Answer: 3 (the other answer, 5, gives a contradiction)", "3"),
]


@pytest.mark.parametrize("response, ground_truth", TWO_ANSWERS)
def test_a_hedge_with_a_second_value_is_wrong(response: str, ground_truth: str) -> None:
    assert verify(response, ground_truth)[0] is False


@pytest.mark.parametrize("response, ground_truth", ONE_ANSWER)
def test_a_remark_with_no_second_value_stays_right(response: str, ground_truth: str) -> None:
    assert verify(response, ground_truth)[0] is True
