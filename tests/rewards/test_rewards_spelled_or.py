"""An "or" after a box that offers a number in words is a hedge, as one before digits is:
``\\boxed{3}, or four`` and ``\\boxed{34} (or thirty-five)`` were right for 3 and 34 (a policy could
hedge in words and be paid for it; the Answer line already judged them wrong). The answer's own
value in words restates it (``\\boxed{34}, or thirty-four``); an "or" between words with no number
stays a remark (``(n odd or even)``), and a condition's "or" the condition's (``(since n is one or
two)``). And any other value offered in words after the answer is read as in digits
(``\\boxed{34}. Maybe thirty-five.``, ``\\boxed{34}; thirty-five``, ``Answer: 34 (maybe thirty-five)``),
but "one" and "zero" alone (``the one with n odd``). Rows marked "before:" had the other verdict.
-- remark_words (NUMBER_WORDS, spelled_numbers_as_digits), boxes, number_forms, extract, verifier.
"""

from __future__ import annotations

import pytest

from dapo.rewards import verify
from dapo.rewards.remark_words import spelled_value

A = "Let me count the cases.\nEach case is checked.\n"

CASES: list[tuple[str, str, bool, str]] = [
    (A + "So \\boxed{3}, or four.", "3", False, "any"),  # before: right
    (A + "So \\boxed{34}, or thirty-five", "34", False, "boxed"),  # before: right
    (A + "So \\boxed{34} (or thirty five)", "34", False, "any"),  # before: right
    (A + "So \\boxed{34} (or maybe thirty-five)", "34", False, "any"),  # before: right
    (A + "So \\boxed{3} (or four)", "3", False, "boxed"),  # before: right
    (A + "So \\boxed{34} (or one more)", "34", False, "any"),  # before: right
    (A + "So \\boxed{34} (or twice that)", "34", False, "any"),  # before: right
    (A + "Answer: 3 (or four)", "3", False, "answer"),
    (A + "So \\boxed{34}. Maybe thirty-five.", "34", False, "any"),  # before: right
    (A + "So \\boxed{34}; thirty-five", "34", False, "any"),  # before: right
    (A + "So \\boxed{34}, though it might be thirty-five", "34", False, "boxed"),  # before: right
    (A + "So \\boxed{34} (could be thirty-five)", "34", False, "any"),  # before: right
    (A + "Answer: 34. Maybe thirty-five.", "34", False, "answer"),  # before: right
    (A + "Answer: 34 (maybe thirty-five)", "34", False, "answer"),  # before: right
    (A + "Answer: 34\nMaybe thirty-five.", "34", False, "answer"),
    # kept: the value in words, words with no number, a condition, "one" alone
    (A + "So \\boxed{34}. Maybe thirty-four.", "34", True, "any"),
    (A + "Answer: 34, that is, thirty-four", "34", True, "answer"),
    (A + "So \\boxed{34} (the one with n odd)", "34", True, "any"),
    (A + "Answer: 34 (three cases)", "34", True, "answer"),
    (A + "So \\boxed{34}, from the two cases", "34", True, "any"),
    (A + "So \\boxed{34}, or thirty-four", "34", True, "any"),
    (A + "So \\boxed{3} (or three)", "3", True, "boxed"),
    (A + "So \\boxed{34} (n odd or even)", "34", True, "any"),
    (A + "So \\boxed{34} (either way)", "34", True, "any"),
    (A + "So \\boxed{3} (since n is one or two)", "3", True, "any"),
]


@pytest.mark.parametrize(("response", "gold", "correct", "extractor"), CASES)
def test_verdict(response: str, gold: str, correct: bool, extractor: str) -> None:
    assert verify(response, gold, extractor)[0] is correct


@pytest.mark.parametrize(("words", "value"), [("four", 4), ("Thirty-Five", 35), ("ninety nine", 99), ("zero", 0),
                                              ("twenty", 20), ("half", None), ("a hundred", None),
                                              ("twenty twelve", None), ("thirty-four five", None)])
def test_spelled_value(words: str, value: int | None) -> None:
    assert spelled_value(words) == value


def test_numbers_in_words_are_read_as_digits_but_one_and_zero_alone() -> None:
    from dapo.rewards.remark_words import spelled_numbers_as_digits

    assert spelled_numbers_as_digits("Maybe thirty-five, or Twenty one.") == "Maybe 35, or 21."
    assert spelled_numbers_as_digits("the one with zero, one-to-one, someone, fourteenth") == (
        "the one with zero, one-to-one, someone, fourteenth")
