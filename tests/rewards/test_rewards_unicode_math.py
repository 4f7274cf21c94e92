"""Unicode mathematics as the LaTeX math-verify reads (the verdicts: test_rewards_equivalence_table)."""

from __future__ import annotations

import pytest

from dapo.rewards.unicode_math import unicode_math_to_latex


@pytest.mark.parametrize(("written", "latex"), [
    ("34·2", "34\\cdot 2"),
    ("34×10³", "34\\times 10^{3}"),
    ("10⁻⁶", "10^{-6}"),
    ("(x+1)²", "(x+1)^{2}"),
    ("2√3", "2\\sqrt{3}"),
    ("√(x+1)", "\\sqrt{x+1}"),
    ("∛8", "\\sqrt[3]{8}"),
    ("x₁ ≤ π", "x_{1} \\leq  \\pi "),  # a space after each command: \\pi2 would be another name
    ("1,000.99m²", "1,000.99m²"),  # after a letter: a unit, left alone
    ("34", "34"),  # ASCII: as it is
])
def test_unicode_mathematics_becomes_latex(written: str, latex: str) -> None:
    assert unicode_math_to_latex(written) == latex
