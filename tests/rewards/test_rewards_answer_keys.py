"""The string keys answers are compared and voted by: integers in canonical form (exact at any
length), and maj@k's vote key (LaTeX cosmetics aside, equal forms vote together)."""

from __future__ import annotations

import pytest

from dapo.rewards.equivalence import canonical_integer, quick_verdict, vote_key


def test_huge_integers_compare_exactly_without_int() -> None:
    """int() refuses > 4300 digits; the string comparison does not care."""
    big = "9" * 100_000
    assert quick_verdict(big, big) is True
    assert quick_verdict(big, big[:-1] + "8") is False


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1,234", "1234"), ("+7", "7"), ("-0", "0"), ("007", "7"), ("34.000", "34"),
     ("x = -5", "-5"), ("5 \\text{ cm}", "5"), ("5^\\circ", "5"), ("\uff15", "5"),
     ("5.5", None), ("1e3", None), ("\\frac{1}{2}", None), ("12,34", None), ("0,125", None),
     ("", None)],
)
def test_canonical_integer(text: str, expected: str | None) -> None:
    assert canonical_integer(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("x = 34", "34"), ("34.0", "34"), ("1/3", "\\frac{1}{3}"), ("$\\dfrac{1}{3}$.", "\\frac{1}{3}"),
     ("\\frac{-1}{3}", "-\\frac{1}{3}"), ("-\\frac{-1}{3}", "\\frac{1}{3}"), ("-1/3", "-\\frac{1}{3}"),
     ("\\left( 1,\\, 2 \\right)", "(1,2)"), ("2 \\sqrt{3}", "2\\sqrt{3}"), ("\\frac{a}{b}", "\\frac{a}{b}"),
     ("\\leftarrow", "\\leftarrow"), ("\\$5.50", "5.50"),
     # one-character arguments without braces: the same fraction or root as with them
     ("\\frac12", "\\frac{1}{2}"), ("\\dfrac 1{2}", "\\frac{1}{2}"), ("-\\tfrac{1}2", "-\\frac{1}{2}"),
     ("\\sqrt2", "\\sqrt{2}"), ("2\\sqrt 3", "2\\sqrt{3}"), ("\\frac{\\sqrt3}2", "\\frac{\\sqrt{3}}{2}"),
     ("\\frac123", "\\frac{1}{2}3"), ("\\sqrt[3]{2}", "\\sqrt[3]{2}"),
     ("0.5", "0.5")],  # equal values in other forms keep their own keys
)
def test_vote_key(text: str, expected: str) -> None:
    assert vote_key(text) == expected


def test_a_space_between_digits_parts_two_numbers() -> None:
    """``3 1/2`` is three and a half: neither the same answer as ``31/2`` nor a vote for it."""
    assert quick_verdict("3 1/2", "31/2") is False
    assert quick_verdict("3 1/2", "7/2") is True
    assert quick_verdict("x^2 + 1", "x^2+1") is True
    assert vote_key("3 1/2") != vote_key("31/2")
    assert quick_verdict("\\frac{10 000}{9}", "\\frac{10000}{9}") is True  # a thousands group's space
    assert vote_key("1 000.5") == vote_key("1000.5") and vote_key("10 000/9") == vote_key("10000/9")
