"""The verifier's verdict on the hand-written tables of verdict_cases.py and verdict_cases_later.py
(what counts as correct). Run in-process through ``verify``; every case is benign, so none needs
the worker deadline.
"""

from __future__ import annotations

import pytest
from tests.rewards.verdict_cases import CASES
from tests.rewards.verdict_cases_later import LATER_CASES

from dapo.rewards import verify


@pytest.mark.parametrize(("response", "ground_truth", "expected", "extractor"), CASES + LATER_CASES)
def test_verdict(response: str, ground_truth: str, expected: bool, extractor: str) -> None:
    correct, pred = verify(response, ground_truth, extractor=extractor)
    assert correct is expected, f"pred={pred!r}"


def test_table_is_large_and_balanced() -> None:
    cases = CASES + LATER_CASES
    assert len(cases) >= 80
    assert sum(expected for *_, expected, _ in cases) >= 30
    assert sum(not expected for *_, expected, _ in cases) >= 30
