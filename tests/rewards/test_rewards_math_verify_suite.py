"""Math-Verify's own test suite, anchored (benchmarks/math_verify_cases.py), through ``verify``.

Guards the figure stated in docs/rewards.md: no false positive, and every case we get wrong is
one of the deliberate policy differences listed here (a new failure is a regression). The cases
are benign, so ``verify`` runs them in-process (math-verify without the worker deadline).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from dapo.rewards import verify

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

# Row index -> why our verdict differs from the expected one on purpose (see docs/rewards.md).
POLICY_DIFFERENCES = {
    5: "a comma is never a decimal point (1000,99)",
    6: "a comma is never a decimal point (gold 1,22)",
    7: "a comma is never a decimal point, and prose around the number",
    17: "a comma is never a decimal point (gold 0,111)",
    35: "an equation between two different rational numbers states no value (\\frac{1}{2} \\$ = \\frac{10}{9})",
    133: "no float tolerance (the case asks math-verify for 2-digit rounding)",
    139: "no float tolerance (2.6667 for 8/3)",
    142: "no answer anchor in the original text: no number is picked out of prose",
    156: "the 'Final Answer:' line is prose with no math and no 'is X'",
    163: "no answer anchor in the original text: no number is picked out of prose",
    # An inequality and its interval are one answer here, but this row's prediction doubles its
    # backslashes ("-2 \\le x \\le 7": a line break and "le"), so it states no inequality to us. Row
    # 187 (same pair, allow_set_relation_comp=False, expected wrong) passes for that reason alone.
    186: "the prediction's \\\\le is not a relation (math-verify's allow_set_relation_comp row)",
    191: "boxes joined only across list separators, not across '++++++'",
    254: "variables are compared strictly (math-verify's strict=False option)",
    # math-verify dropped \mathrm{e}, reading both sides as 1; upright e is Euler's number here
    264: "1 + 1/e is not 1 - 1/e (the row expects them equal)",
}


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_math_verify_suite_anchored() -> None:
    cases = _load("math_verify_cases").CASES
    anchor = _load("bench_verifier_suite").anchor
    assert len(cases) == 269
    wrong, false_positives = set(), []
    for index, (_, gold, pred, expected, _) in enumerate(cases):
        correct, shown = verify(anchor(pred), gold, extractor="auto")
        if correct != expected:
            wrong.add(index)
        if correct and not expected:
            false_positives.append((index, gold[:60], shown))
    assert false_positives == []
    assert wrong - POLICY_DIFFERENCES.keys() == set(), "new failures (regressions)"
    assert len(cases) - len(wrong) >= 255
