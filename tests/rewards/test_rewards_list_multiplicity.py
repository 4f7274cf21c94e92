"""A list ground truth that repeats an item (roots with their multiplicity) is a multiset: the
answer must repeat it as often; one that repeats none is a set, whose items an answer may repeat."""

from __future__ import annotations

import pytest

from dapo.rewards.verifier import verify


@pytest.mark.parametrize("answer, ground_truth, right", [
    ("1, 2", "1, 1, 2", False),  # a double root left out
    ("1, 2, 2", "1, 1, 2", False),  # the other root doubled
    ("2, 1, 1", "1, 1, 2", True),  # in any order
    ("1, 1, 2", "1, 1, 2", True),
    ("1, 1, 2", "1, 2", True),  # a set: a repeat adds no other value
    ("1, 3", "1, 2", False),
])
def test_integer_lists_compare_with_the_ground_truth_s_multiplicity(answer: str, ground_truth: str, right: bool) -> None:
    assert verify(f"Answer: {answer}", ground_truth)[0] is right
