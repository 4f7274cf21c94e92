"""A number restated in square or cubic units restates the number: ``\\boxed{34}, that is, 34
cm^2`` is right for 34. Before, the unit's power read as arithmetic (34 squared), another value,
so the restatement was a hedge on every path (in a box's remark, after a box without brackets, on
the Answer line); a plain ``34 cm`` was already a remark. A power of no known unit is still
arithmetic (``34^2``, ``34 x^2``), and a quantity restated in another unit is still converted
(``5 cm^2, i.e. 500 mm^2``). -- units.without_unit_power.

And a function's argument is no bracketed remark: ``\\boxed{e} = \\exp(1)`` restates e (before, its
``(1)`` was read as a remark offering 1, a hedge). -- hedges._CLOSING_PARENTHESIS.
Rows marked "before:" had the other verdict.
"""

from __future__ import annotations

import pytest

from dapo.rewards import verify
from dapo.rewards.units import without_unit_power

A = "Let me think step by step.\nSo the area is computed.\n"

CASES: list[tuple[str, str, bool, str]] = [
    (A + "So \\boxed{34}, that is, 34 cm^2", "34", True, "any"),  # before: wrong
    (A + "So \\boxed{34}, i.e. 34 cm^2.", "34", True, "boxed"),  # before: wrong
    (A + "So \\boxed{34} (that is, 34 cm^2)", "34", True, "any"),  # before: wrong
    (A + "So \\boxed{2} (i.e. 2 cm^3)", "2", True, "boxed"),  # before: wrong
    (A + "So \\boxed{34}, that is, 34 km^{3}", "34", True, "any"),  # before: wrong
    (A + "Answer: 34, that is, 34 cm^2", "34", True, "answer"),  # before: wrong
    # kept: another number, a power of no unit, a conversion
    (A + "So \\boxed{34}, i.e. 35 cm^2", "34", False, "any"),
    (A + "So \\boxed{34} (that is, 35 cm^2)", "34", False, "any"),
    (A + "Answer: 34, that is, 35 cm^2", "34", False, "answer"),
    (A + "So \\boxed{2} (i.e. 8 cm^3)", "2", False, "boxed"),
    (A + "So \\boxed{34}, i.e. 34^2", "34", False, "any"),
    (A + "So \\boxed{34} (i.e. 34 x^2)", "34", False, "any"),
    (A + "So \\boxed{5 cm^2} (i.e. 500 mm^2)", "5", True, "any"),
    (A + "So \\boxed{5 cm^2} (i.e. 50 mm^2)", "5", False, "any"),
    (A + "So \\boxed{5} cm^2, i.e. 500 mm^2", "5", True, "any"),
    (A + "So \\boxed{5} cm^2, i.e. 50 mm^2", "5", False, "any"),
    # a function's argument after "=" (before: wrong), and a remark's parenthesis still read as one
    (A + "So \\boxed{e} = \\exp(1)", "e", True, "any"),  # before: wrong
    (A + "So \\boxed{e^2} = \\exp(2).", "e^2", True, "boxed"),  # before: wrong
    (A + "So \\boxed{e} = \\exp(2)", "e", False, "any"),
    (A + "So \\boxed{2} = \\ln(100)", "2", False, "any"),
    (A + "So \\boxed{\\pi} \\approx 3.14 (3 cases)", "\\pi", True, "any"),
    (A + "So \\boxed{\\pi} \\approx 3.14 (or 35)", "\\pi", False, "any"),
]


@pytest.mark.parametrize(("response", "gold", "correct", "extractor"), CASES)
def test_verdict(response: str, gold: str, correct: bool, extractor: str) -> None:
    assert verify(response, gold, extractor)[0] is correct


@pytest.mark.parametrize(("remark", "dropped"), [
    ("that is, 34 cm^2", "that is, 34 cm"), ("(i.e. 34 m^{2})", "(i.e. 34 m)"), ("i.e. 34 cm^2.", "i.e. 34 cm."),
    ("i.e. 34^2", "i.e. 34^2"), ("i.e. 34 x^2", "i.e. 34 x^2"), ("i.e. 34 cm", "i.e. 34 cm"), ("", "")])
def test_only_a_known_unit_s_power_is_dropped(remark: str, dropped: str) -> None:
    assert without_unit_power(remark) == dropped
