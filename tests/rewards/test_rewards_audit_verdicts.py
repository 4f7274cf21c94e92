"""Verdicts the verifier's sub-modules decide and no other test pinned (a mutation audit found each
rule could break unseen): units, counts, exact decimals, mixed numbers, spelled-out remarks."""

from __future__ import annotations

import pytest

from dapo.rewards.verifier import verify

CASES = [
    # counts and restatements (number_forms)
    ("2", "2 (two solutions)", True),
    ("123456 (i.e. 123,456)", "123456", True),
    ("250000 (or 250K)", "250000", True),
    ("1 solution, that is, 3 and 5", "3, 5", False),  # one solution named, two given
    # units and suffixes
    ("$212^\\circ$", "212 degrees Fahrenheit", True),
    ("\\frac{1}{2} cm, i.e. 5 mm", "\\frac{1}{2} \\text{ cm}", True),
    ("2 hr", "2 \\text{ minutes}", False),
    ("3 dozen", "3", False),
    ("34 negative", "34", False),
    ("34(n=3)", "34", False),  # glued to the number: a product, not a remark
    ("34(cm)", "34", True),
    ("34 m/s", "34 \\text{ km/h}", False),  # a rate of two known units, compared as units are
    ("34 m/s", "34 \\text{ km}", False),
    ("34 meters per second", "34 \\text{ m/s}", True),
    ("34 \\text{ m/s}^2", "34 \\text{ m/s}", False),
    ("34 mph", "34 \\text{ km/h}", True),  # an unknown unit: left to the number rules
    # exact decimals, repeating decimals, mixed numbers
    ("0.33333", "\\frac{1}{3}", False),  # five places: a rounding, not the fraction
    ("0.333333", "\\frac{1}{3}", True),
    ("-0.\\overline{3}", "\\frac{1}{3}", False),
    ("\\frac{1}{0}", "1", False),
    ("2 3/2", "\\frac{7}{2}", False),  # no mixed number: its fraction is not proper
    ("3 1/2", "\\frac{7}{2}", True),
    ("0.007813", "\\frac{1}{128}", True),  # 0.0078125 rounded half up
    # alternatives and names
    ("2 (also \\sqrt{4})", "2", True),
    ("i", "I", False),  # the imaginary unit is no Roman numeral
]


@pytest.mark.parametrize("answer, ground_truth, right", CASES)
def test_verdict(answer: str, ground_truth: str, right: bool) -> None:
    assert verify(f"Answer: {answer}", ground_truth)[0] is right
