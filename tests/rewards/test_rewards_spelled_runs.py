"""A number in words past a hundred is read whole (``one hundred thousand``, ``one hundred and
twenty``, ``two thousand``), as one below it is: ``Answer: 100000 (or one hundred thousand)`` and
``Answer: \\boxed{34}, or thirty-four`` restate their answers (both were wrong), and a value in words
alone in brackets restates the answer it follows (``34 (thirty-four)``; in digits, ``34 (34)``, it is a
product). Words that are no one number keep their numbers below a hundred (``two and three``), and
another value in words is still a second answer (``100000 (or one hundred)``, ``\\boxed{2000}. Maybe
two thousand and one.``). Rows marked "before:" had the other verdict.
-- remark_words (spelled_numbers_as_digits), answer_line_boxes, number_forms, boxes.
"""

from __future__ import annotations

import pytest

from dapo.rewards import verify
from dapo.rewards.remark_words import spelled_numbers_as_digits

A = "Let me count the cases.\nEach case is checked.\n"

CASES: list[tuple[str, str, bool, str]] = [
    (A + "Answer: 100000 (or one hundred thousand)", "100000", True, "answer"),  # before: wrong
    (A + "Answer: 2000 (or two thousand)", "2000", True, "answer"),  # before: wrong
    (A + "So \\boxed{120}, or one hundred and twenty", "120", True, "boxed"),  # before: wrong
    (A + "Answer: \\boxed{34}, or thirty-four", "34", True, "answer"),  # before: wrong
    (A + "Answer: \\boxed{120}, or one hundred and twenty", "120", True, "answer"),  # before: wrong
    (A + "Answer: 34 (thirty-four)", "34", True, "answer"),  # before: wrong
    (A + "Answer: 1000 (one thousand)", "1000", True, "answer"),
    (A + "Answer: 100 (one hundred)", "100", True, "answer"),
    # another value in words: a second answer
    (A + "Answer: 100000 (or one hundred)", "100000", False, "answer"),
    (A + "So \\boxed{120}, or one hundred and twenty one", "120", False, "boxed"),
    (A + "Answer: \\boxed{34}, or thirty-five", "34", False, "answer"),
    (A + "Answer: 2000 (or two and three thousand)", "2000", False, "answer"),
    (A + "So \\boxed{2000}. Maybe two thousand and one.", "2000", False, "any"),
    (A + "Answer: 34 (thirty-five)", "34", False, "answer"),
    (A + "Answer: 100 (two hundred)", "100", False, "answer"),
    (A + "Answer: \\boxed{3}, or four", "3", False, "answer"),
]


@pytest.mark.parametrize(("response", "gold", "expected", "extractor"), CASES)
def test_a_number_in_words_is_read_whole(response: str, gold: str, expected: bool, extractor: str) -> None:
    assert verify(response, gold, extractor=extractor)[0] is expected


@pytest.mark.parametrize(("text", "digits"), [
    ("or one hundred thousand", "or 100000"),
    ("one hundred and twenty one", "121"),
    ("thirty five thousand and two", "35002"),
    ("seven million", "7000000"),
    ("maybe thirty-five", "maybe 35"),
    ("two and three", "2 and 3"),  # no one number: each below a hundred
    ("twenty twenty", "20 20"),
    ("34 (thirty-four)", "34 (= 34)"),  # alone in brackets: a restatement, not a product
    ("the next one", "the next one"),  # "one" and "zero" alone: mostly no value
    ("a hundred", "a hundred"),
    ("hundred", "hundred"),
    ("one-to-one", "one-to-one"),
    ("tenth", "tenth"),
])
def test_numbers_in_words_are_written_in_digits(text: str, digits: str) -> None:
    assert spelled_numbers_as_digits(text) == digits
