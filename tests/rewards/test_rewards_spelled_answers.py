"""A whole answer in words is its number (``Answer: two`` was wrong for 2; so was a ground truth "two"
for ``Answer: 2``), with its counted noun or scale word (``two apples``, ``one hundred``), above a hundred
too (``one hundred and twenty-five``, ``two thousand three hundred four``: unread before); text that is
more than one number in words is left as it was (``two or three``, ``the second``, ``a hundred``). And a
lower-case m set off from a number that restates the box is metres, as on the Answer line (``\\boxed{34},
i.e. 34 m`` was wrong for 34: the m was read as "million"); a glued ``34M`` still scales.
Rows marked "before:" had the other verdict. -- remark_words (spelled_answer_as_digits), verifier,
number_forms (only_restates).
"""

from __future__ import annotations

import pytest

from dapo.rewards import verify
from dapo.rewards.remark_words import spelled_answer_as_digits

A = "Let me count the cases.\nEach case is checked.\n"

CASES: list[tuple[str, str, bool, str]] = [
    (A + "Answer: two", "2", True, "answer"),  # before: wrong
    (A + "Answer: Two.", "2", True, "answer"),  # before: wrong
    (A + "Answer: thirty-five", "35", True, "answer"),  # before: wrong
    (A + "Answer: twenty one", "21", True, "answer"),  # before: wrong
    (A + "Answer: two apples", "2", True, "answer"),  # before: wrong
    (A + "Answer: one", "1", True, "answer"),  # before: wrong
    (A + "Answer: zero", "0", True, "answer"),  # before: wrong
    (A + "Answer: one hundred", "100", True, "answer"),  # before: wrong
    (A + "Answer: two thousand", "2000", True, "answer"),  # before: wrong
    (A + "So \\boxed{two}", "2", True, "boxed"),  # before: wrong
    (A + "Answer: \\text{twelve}", "12", True, "answer"),  # before: wrong
    (A + "Answer: 2", "two", True, "answer"),  # before: wrong
    (A + "Answer: two", "two", True, "answer"),
    (A + "Answer: three", "2", False, "answer"),
    (A + "Answer: two thousand", "2", False, "answer"),
    (A + "Answer: two or three", "2", False, "answer"),
    (A + "Answer: the second", "2", False, "answer"),
    (A + "Answer: one hundred twenty", "120", True, "answer"),  # before: wrong
    (A + "Answer: one hundred and twenty-five apples.", "125", True, "answer"),  # before: wrong
    (A + "Answer: two thousand three hundred four", "2304", True, "answer"),  # before: wrong
    (A + "Answer: eleven hundred", "1100", True, "answer"),
    (A + "Answer: 120", "one hundred twenty", True, "answer"),  # before: wrong
    (A + "Answer: one hundred twenty", "102", False, "answer"),
    (A + "Answer: two and three", "5", False, "answer"),
    (A + "Answer: two and three", "2", False, "answer"),
    (A + "So \\boxed{34}, i.e. 34 m", "34", True, "any"),  # before: wrong
    (A + "So \\boxed{34} (34 m)", "34", True, "any"),  # before: wrong
    (A + "Answer: 34 (34 m)", "34", True, "answer"),  # before: wrong
    (A + "So \\boxed{34}, i.e. 35 m", "34", False, "any"),
    (A + "So \\boxed{34}, i.e. 34M", "34", False, "any"),
    (A + "So \\boxed{34}, i.e. 34m", "34", False, "any"),
    (A + "So \\boxed{34}, i.e. 34 M", "34", False, "any"),
]


@pytest.mark.parametrize(("response", "gold", "correct", "extractor"), CASES)
def test_verdict(response: str, gold: str, correct: bool, extractor: str) -> None:
    assert verify(response, gold, extractor)[0] is correct


LONGEST = "nine hundred ninety-nine billion nine hundred ninety-nine million nine hundred ninety-nine thousand nine " \
    "hundred ninety-nine apples"


@pytest.mark.parametrize(("answer", "expected"), [
    ("two", "2"), (" Thirty-Five ways. ", "35 ways"), ("one", "1"), ("ninety nine", "99"),
    ("one hundred", "100"), ("Five million.", "5000000"), ("two or three", "two or three"),
    ("a hundred", "a hundred"), ("twenty twelve", "twenty twelve"), ("x = two", "x = two"), ("2", "2"),
    ("two red apples", "two red apples"), ("", ""),
    ("one hundred and twenty-five", "125"), ("Three thousand and five dollars.", "3005 dollars"),
    ("nine hundred ninety-nine thousand", "999000"), ("one million two hundred thousand", "1200000"),
    ("two and three", "two and three"), ("two three", "two three"), ("hundred", "hundred"),
    ("one thousand two thousand", "one thousand two thousand"), ("one hundred five hundred", "one hundred five hundred"),
    ("twenty zero", "twenty zero"), ("zero hundred", "zero hundred"), ("one hundred zero", "one hundred zero"), ("one hundred and", "one hundred and"),
    ("five-year", "five-year"), ("thirty one ten", "thirty one ten"), ("one twenty", "one twenty"),
    ("twenty one-hundred", "2100"), ("two one-sided", "two one-sided"), ("two x", "two x"),
    (LONGEST, LONGEST),  # (over 120 characters: not read, however it ends)
    ("nine hundred ninety-nine billion nine hundred ninety-nine million apples", "999999000000 apples")])
def test_spelled_answer_as_digits(answer: str, expected: str) -> None:
    assert spelled_answer_as_digits(answer) == expected
