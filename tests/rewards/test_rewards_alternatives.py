"""An alternative or restatement in math after an answer, an approximation after ``e`` or ``)``,
and a glued K in a restatement (rows marked "before:" had the other verdict before this change;
the rest guard what stays).

1. An alternative or restatement in a closed form is compared by its computed value, not digit by
   digit: ``\\boxed{2} (or \\sqrt{2})`` offered another value and was accepted because of the 2
   inside ``\\sqrt{2}``; ``(or \\sqrt{4})`` and ``\\boxed{\\sqrt2} (or 2^{1/2})`` restate it --
   alternatives, number_forms, boxes, extract.
2. An approximation without brackets after an answer ending in Euler's ``e`` or ``)`` is checked:
   ``x = e \\approx 3.5`` is wrong -- hedges.
3. A K glued to a restated number counts thousands: ``\\boxed{34000} = 34K`` is right, ``\\boxed{34}
   = 34K`` wrong -- number_forms (only_restates), alternatives (NUMBER_OR_THOUSANDS).
4. A restatement without brackets after "i.e.", "ie", "that is", "equivalently" in the answer's own
   text is judged as in brackets: ``Answer: 34, i.e. \\frac{2}{3}`` and ``2, i.e. \\sqrt{2}`` offered
   another value and were accepted (math-verify read one of the two); ``2, i.e. \\sqrt{4}`` restates
   it; a chain of such remarks after a value not computed is read in polynomial time (it was
   exponential) -- hedges (restatement_changes), extract (", that is" no copula), number_forms. After a
   name (bare or in math) ", that is" gives its value, as "is" does, and the comma after it goes:
   ``x, that is, \\frac{2}{3}`` and ``$x$, that is, 34`` were wrong -- extract (_after_copula).
5. A numeral equated to another number with a unit is wrong (``34 = 2 \\text{ cm}``; the unit made
   it a name, and no rational) -- incomplete, units (number_and_unit).
6. "that is" is read by one rule in each of its forms (a comma, a semicolon, a parenthesis or nothing
   before "that"): after a value, a unit's included, it restates it; after a name or words it is a
   copula. ``34 (that is, 35)`` was right for 35 (", 35)" read after "is"), ``34 cm, that is, 35`` and
   ``34; that is, 35`` too; ``x (that is, \\frac{2}{3})`` and ``The answer is, \\frac{2}{3}`` were
   wrong (the comma or parenthesis read as the answer's) -- extract (_restating_that), hedges
   (a unit ends a value), number_forms (a bracketed remark after a unit).
"""

from __future__ import annotations

import time
from decimal import Decimal
from fractions import Fraction

import pytest

from dapo.rewards import verify
from dapo.rewards.alternatives import alternative_is_the_value
from dapo.rewards.hedges import restatement_changes, without_bare_remark
from dapo.rewards.incomplete import states_no_value
from dapo.rewards.number_forms import only_restates, restates, value_of
from dapo.rewards.verifier import prepare

A = "Let me think step by step.\nSo the total is computed.\n"
_SQRT2 = value_of("\\sqrt2")  # as the verifier computes it (120 digits)

CASES: list[tuple[str, str, bool, str]] = [
    # --- 1. an alternative in a closed form: its value, not its digits ---
    (A + "So \\boxed{2} (or \\sqrt{2})", "2", False, "boxed"),  # before: right
    (A + "So \\boxed{2} (or \\sqrt{2})", "2", False, "any"),  # before: right
    (A + "So \\boxed{2} (or 2\\sqrt{2})", "2", False, "boxed"),  # before: right
    (A + "So \\boxed{2} (or \\frac{2}{3})", "2", False, "boxed"),
    (A + "So \\boxed{2}, or \\sqrt{2}", "2", False, "boxed"),  # before: right
    (A + "So \\boxed{2} or \\sqrt 2", "2", False, "boxed"),  # before: right
    (A + "So \\boxed{2} (or 2^2)", "2", False, "boxed"),  # before: right
    (A + "So \\boxed{2} (or 2\\pi)", "2", False, "boxed"),  # before: right
    (A + "So \\boxed{2} (or x = \\sqrt{2})", "2", False, "boxed"),  # before: right
    (A + "So \\boxed{2} (= \\sqrt{2})", "2", False, "boxed"),  # before: right
    (A + "So \\boxed{2} (or e^2)", "2", False, "boxed"),  # before: right
    (A + "So \\boxed{2} (or \\ln 5)", "2", False, "boxed"),  # before: right
    (A + "So \\boxed{2}, or e^2", "2", False, "boxed"),  # before: right (no digit after the "or")
    (A + "So \\boxed{2} (or \\exp(2))", "2", False, "boxed"),  # before: right (brackets inside)
    (A + "So \\boxed{2} (or \\log 7)", "2", False, "boxed"),  # before: right (0.85 or 1.95: neither is 2)
    (A + "So \\boxed{34} (= \\frac{2}{3})", "34", False, "boxed"),  # before: right
    (A + "So \\boxed{34} (which is \\frac{69}{2})", "34", False, "boxed"),  # before: right
    (A + "So \\boxed{\\pi} (= \\frac{22}{7})", "\\pi", False, "boxed"),  # before: right
    (A + "So \\boxed{34}, otherwise 35", "34", False, "boxed"),  # before: right
    (A + "So \\boxed{\\sqrt2} (\\lor 1.414)", "\\sqrt2", False, "boxed"),  # before: right
    (A + "So \\boxed{2} (or \\sqrt{2} if n is odd)", "2", False, "boxed"),  # before: right
    (A + "So \\boxed{2} (and \\sqrt{2})", "2", False, "boxed"),  # before: right
    (A + "So \\boxed{1, 2} (or 1, \\sqrt{2})", "1, 2", False, "boxed"),  # before: right
    (A + "So \\boxed{1, 2} (or 2, 1)", "1, 2", True, "boxed"),
    (A + "So \\boxed{2} (or \\sqrt{4} if simplified)", "2", True, "boxed"),  # before: wrong
    (A + "Answer: 2 (or \\sqrt 2)", "2", False, "answer"),
    (A + "Answer: 2 (or \\sqrt{2})", "2", False, "answer"),
    (A + "Answer: 2, or \\sqrt{2}", "2", False, "answer"),  # before: right
    (A + "Answer: $2$ alternatively \\sqrt{2}", "2", False, "answer"),  # before: right
    (A + "Answer: $2$ (which is $\\pi$)", "2", False, "answer"),  # before: right (a relative clause)
    (A + "So \\boxed{2} (or \\frac{4}{2})", "2", True, "boxed"),
    (A + "So \\boxed{2} (or \\sqrt{4})", "2", True, "boxed"),
    # a decimal of six places or more that rounds a fraction is its value, as between two answers
    (A + "So \\boxed{\\frac23} (= 0.666667)", "\\frac{2}{3}", True, "boxed"),  # before: wrong
    (A + "Answer: \\frac23 (i.e. 0.666667)", "\\frac{2}{3}", True, "answer"),  # before: wrong (bare: right)
    (A + "So \\boxed{\\frac23} (= 0.666666)", "\\frac{2}{3}", False, "boxed"),  # not its rounding
    (A + "So \\boxed{\\frac23} (= 0.67)", "\\frac{2}{3}", False, "boxed"),  # too few places
    (A + "So \\boxed{2} (or 2.0)", "2", True, "boxed"),
    (A + "So \\boxed{2} (or two)", "2", True, "boxed"),
    (A + "So \\boxed{2} (or \\ln e^2)", "2", True, "boxed"),
    (A + "So \\boxed{4} (or 2^2)", "4", True, "boxed"),  # before: wrong
    (A + "So \\boxed{\\frac12} (or 0.5)", "\\frac12", True, "boxed"),
    (A + "So \\boxed{\\sqrt2} (or 2^{1/2})", "\\sqrt2", True, "boxed"),  # before: wrong
    (A + "So \\boxed{\\sqrt2} (or \\sqrt{2})", "\\sqrt2", True, "boxed"),
    (A + "So \\boxed{\\sqrt2} (or \\frac{2}{\\sqrt2})", "\\sqrt2", True, "boxed"),
    (A + "Answer: 2 (or \\sqrt{4})", "2", True, "answer"),  # before: wrong (a hedge)
    (A + "Answer: $2$ (or $\\sqrt{4}$)", "2", True, "answer"),  # before: wrong (two segments)
    (A + "Answer: \\sqrt2 (or \\sqrt{2})", "\\sqrt2", True, "answer"),  # before: wrong (a hedge)
    # ... left as before where nothing is computed: a letter, a bare \log that may be the value, a
    # condition after "i.e.", a rounding written with "=", an answer in degrees
    (A + "So \\boxed{2} (or x^2)", "2", True, "boxed"),
    (A + "So \\boxed{2} (or 2x)", "2", True, "boxed"),
    (A + "So \\boxed{2} (or \\log 100)", "2", True, "boxed"),  # base 10: 2
    (A + "So \\boxed{34} (i.e. n = 3)", "34", True, "boxed"),
    (A + "So \\boxed{34} (and n = 3)", "34", True, "boxed"),
    (A + "So \\boxed{\\sqrt2} (= 1.414)", "\\sqrt2", True, "boxed"),
    (A + "So \\boxed{\\pi} = 3.14", "\\pi", True, "boxed"),
    (A + "So \\boxed{30^\\circ} (= \\frac{\\pi}{6})", "30^\\circ", True, "boxed"),
    (A + "So \\boxed{34} (or 35)", "34", False, "boxed"),
    # --- 2. an approximation after an answer ending in e or ) ---
    (A + "Answer: x = e \\approx 3.5", "e", False, "answer"),  # before: right
    (A + "Answer: e \\approx 3.5", "e", False, "answer"),  # before: right
    (A + "So \\boxed{x = e \\approx 3.5}", "e", False, "boxed"),  # before: right
    (A + "Answer: 2e \\approx 6", "2e", False, "answer"),  # before: right
    (A + "Answer: \\ln(2) \\approx 7", "\\ln 2", False, "answer"),  # before: right
    (A + "Answer: (1+\\sqrt2) \\approx 2.5", "1+\\sqrt2", False, "answer"),  # before: right
    (A + "Answer: x = e \\approx 2.72", "e", True, "answer"),
    (A + "Answer: e \\sim 2.72", "e", True, "answer"),  # before: wrong
    (A + "Answer: \\ln(2) \\sim 0.69", "\\ln 2", True, "answer"),  # before: wrong
    (A + "Answer: (1+\\sqrt2) \\approx 2.41", "1+\\sqrt2", True, "answer"),
    (A + "Answer: x \\approx 34", "34", True, "answer"),  # a name: math-verify's suite
    (A + "Answer: f(2) \\approx 34", "34", False, "answer"),  # not computed: left as it was (wrong)
    # --- 3. a K glued to a restated number: thousands ---
    (A + "So \\boxed{34000} = 34K", "34000", True, "boxed"),  # before: wrong
    (A + "So \\boxed{34000} (= 34K)", "34000", True, "boxed"),  # before: wrong
    (A + "So \\boxed{34000} (34K)", "34000", True, "boxed"),  # before: wrong
    (A + "So \\boxed{34000} (or 34k)", "34000", True, "boxed"),  # before: wrong
    (A + "So \\boxed{2500} = 2.5K", "2500", True, "boxed"),  # before: wrong
    (A + "Answer: $34000$ = 34K", "34000", True, "answer"),  # before: wrong
    (A + "So \\boxed{34} = 34K", "34", False, "boxed"),
    (A + "So \\boxed{34} (= 34K)", "34", False, "boxed"),
    (A + "So \\boxed{34000} = 35K", "34000", False, "boxed"),
    (A + "So \\boxed{34000} (= 34 K)", "34000", False, "boxed"),  # spaced: kelvin, 34
    # --- 4. a restatement without brackets in the answer's own text: as in brackets ---
    (A + "Answer: 34, i.e. \\frac{2}{3}", "34", False, "answer"),  # before: right
    (A + "Answer: 2, i.e. \\sqrt{2}", "2", False, "answer"),  # before: right
    (A + "Answer: 2; i.e. \\sqrt{2}", "2", False, "answer"),  # before: right
    (A + "Answer: x = 2, i.e. \\sqrt{2}", "2", False, "answer"),  # before: right
    (A + "Answer: 34 i.e. \\frac{2}{3}", "34", False, "answer"),  # before: right
    (A + "Answer: 34, i.e., \\frac{2}{3}", "34", False, "answer"),  # before: right
    (A + "Answer: 34, i.e. \\frac{69}{2}", "34", False, "answer"),  # before: right
    (A + "Answer: 34 \\text{, i.e. } \\frac{2}{3}", "34", False, "answer"),  # before: right
    (A + "Answer: 34, that is, \\frac{2}{3}", "\\frac23", False, "answer"),
    (A + "Answer: 34, that is, 35", "35", False, "answer"),  # before: right (read after "is")
    (A + "Answer: 2, equivalently \\sqrt{2}", "2", False, "answer"),
    (A + "Answer: \\sqrt2, equivalently 35", "\\sqrt2", False, "answer"),
    (A + "Answer: x = \\frac12, equivalently 34", "\\frac12", False, "answer"),
    (A + "Answer: \\sqrt2 (equivalently 35)", "\\sqrt2", False, "answer"),  # before: right
    (A + "Answer: 34, i.e. 35", "34", False, "answer"),
    (A + "Answer: 2, i.e. \\sqrt{4}", "2", True, "answer"),
    (A + "Answer: 2, that is, \\sqrt{4}", "2", True, "answer"),  # before: wrong (read after "is")
    (A + "Answer: \\frac12, i.e. 0.5", "1/2", True, "answer"),
    (A + "Answer: x = \\frac12, i.e. 0.5", "\\frac12", True, "answer"),
    (A + "Answer: 34, i.e. 34", "34", True, "answer"),
    (A + "Answer: \\frac23, i.e. 0.666667", "\\frac23", True, "answer"),  # six places: its value, as an answer
    (A + "Answer: \\sqrt2, i.e. 1.414", "\\sqrt2", True, "answer"),  # before: wrong (a rounding, as "(= 1.414)")
    (A + "Answer: 34, equivalently x = 34", "34", True, "answer"),  # before: wrong
    (A + "Answer: 34, that is, 34 \\text{ cm}", "34", True, "answer"),
    (A + "Answer: 34, i.e. 3 cases", "34", True, "answer"),  # before: wrong (a count of cases, as "(i.e. 3 cases)")
    # ... after a name, "that is" gives its value, a copula without its comma (a value's "$" or digit: a name's)
    (A + "Answer: x, that is, 34", "34", True, "answer"),
    (A + "Answer: x, that is, 35", "34", False, "answer"),
    (A + "Answer: x, that is, \\frac{2}{3}", "\\frac23", True, "answer"),  # before: wrong (", \\frac{2}{3}" read)
    (A + "Answer: x, that is, 34K", "34000", True, "answer"),  # before: wrong (the same)
    (A + "Answer: $x$, that is, 34", "34", True, "answer"),  # before: wrong ("$" read as a value's end: x)
    (A + "Answer: $x$, that is, 35", "34", False, "answer"),
    (A + "Answer: $a_1$, that is, 34", "34", True, "answer"),  # before: wrong
    (A + "Answer: a_{1}, that is, 34", "34", True, "answer"),  # before: wrong ("}" read as a value's end)
    (A + "Answer: $\\theta$, that is, 34", "34", True, "answer"),  # before: wrong
    (A + "Answer: a_1, that is, 35", "34", False, "answer"),
    (A + "Answer: $34$, that is, 35", "34", False, "answer"),  # a value: its remark
    (A + "Answer: $x = 5$, that is, 34", "34", False, "answer"),
    (A + "Answer: $e$, that is, 2.718", "e", True, "answer"),  # Euler's e, a value: its rounding
    # ... left as before: a form not computed, "=" and "which is" (the Answer line's rules), brackets
    (A + "Answer: 34, i.e. 2x", "34", False, "answer"),
    (A + "Answer: 34 (i.e. \\frac{2}{3})", "34", False, "answer"),
    (A + "Answer: 2, which is \\sqrt{2}", "2", False, "answer"),
    (A + "Answer: 2 = \\sqrt{2}", "2", False, "answer"),
    (A + "Answer: 2 = \\sqrt{4}", "2", True, "answer"),
    (A + "Answer: \\frac12 = \\frac{10}{9}", "\\frac{10}{9}", False, "answer"),  # two values (before: right)
    (A + "Answer: 10 which is 1,000.99", "1000.99", False, "answer"),  # math-verify: a pair, neither value
    (A + "Answer: 10 which is 1,000.99", "10", False, "answer"),
    (A + "Answer: so the number is 10 which is 1,000.99m²", "1000.99", True, "answer"),  # its suite: 1,000.99
    # --- 5. a numeral equated to another number with a unit ---
    (A + "Answer: 34 = 2 \\text{ cm}", "34", False, "answer"),  # before: right
    (A + "Answer: 34 = 2 cm", "34", False, "answer"),  # before: right
    (A + "Answer: 34 \\text{ cm} = 2 \\text{ cm}", "34", False, "answer"),  # before: right
    (A + "Answer: 34 = 34 \\text{ cm}", "34", True, "answer"),
    (A + "Answer: x = 34 \\text{ cm}", "34", True, "answer"),
    (A + "Answer: 34 \\text{ cm}", "34", True, "answer"),
    (A + "Answer: 34 \\text{ cm} = 340 \\text{ mm}", "34", True, "answer"),  # two units: a conversion, left
    (A + "Answer: 0.5 = 50\\%", "50\\%", True, "answer"),  # percent: another scale, left
]


@pytest.mark.parametrize("response,gold,expected,extractor", CASES)
def test_alternatives_and_restatements(response: str, gold: str, expected: bool, extractor: str) -> None:
    assert verify(response, gold, extractor)[0] is expected


@pytest.mark.parametrize(
    "remark,answer,value,expected",
    [("or \\sqrt{2}", "2", Fraction(2), False), ("or \\sqrt{4}", "2", Fraction(2), True),
     ("or \\frac{4}{2}", "2", Fraction(2), True), ("= \\sqrt 2", "2", Fraction(2), False),
     ("or equivalently x = 2^{1/2}", "\\sqrt2", _SQRT2, True), ("\\lor e", "2", Fraction(2), False),
     ("or \\log 7", "2", Fraction(2), False), ("or \\log 100", "2", Fraction(2), None),
     ("or x^2", "2", Fraction(2), None), ("or 2x", "2", Fraction(2), None), ("or two", "2", Fraction(2), None),
     ("i.e. n = 3", "34", Fraction(34), None), ("or n = 3", "34", Fraction(34), False),
     ("= 1.414", "\\sqrt2", _SQRT2, None), ("or 1.414", "\\sqrt2", _SQRT2, False),
     ("= \\frac{\\pi}{6}", "30^\\circ", Fraction(30), None), ("or \\frac{1}{2}", "50\\%", Fraction(50), None),
     ("and \\sqrt{2}", "2", Fraction(2), False), ("since \\sqrt{2} > 1", "2", Fraction(2), None),
     ("or \\sqrt{2}", "x", None, None), ("or \\frac{1}{3}\\cdot 3", "1", Fraction(1), True),
     ("or $\\sqrt{4}$.", "2", Fraction(2), True), ("or \\(\\sqrt{2}\\)", "2", Fraction(2), False),
     ("or \\sqrt{2} if n is odd", "2", Fraction(2), False), ("or \\sqrt{2} if n > 1", "2", Fraction(2), None),
     ("or 2 for n = 1", "2", Fraction(2), None), ("and x = \\sqrt{2}", "2", Fraction(2), None),
     ("but 3", "2", Fraction(2), False)],
)
def test_alternative_is_the_value(remark: str, answer: str, value: Fraction | Decimal | None,
                                  expected: bool | None) -> None:
    assert alternative_is_the_value(remark, answer, value) is expected


@pytest.mark.parametrize(
    "answer,text,expected",
    [("34000", "34K", True), ("34000", "= 34k", True), ("34", "34K", False), ("2500", "2.5K", True),
     ("34000", "34 K", False), ("34", "34 ways", True), ("34", "34 thousand", False), ("34", "34Km", True)],
)
def test_only_restates_reads_a_glued_k_as_thousands(answer: str, text: str, expected: bool) -> None:
    assert only_restates(answer, text) is expected


@pytest.mark.parametrize(
    "answer,remark,expected",
    [("2", "or \\sqrt{2}", False), ("2", "or \\sqrt{4}", True), ("\\sqrt2", "or 2^{1/2}", True),
     ("2", "\\approx \\sqrt2", False), ("\\frac12", "or 0.5", True), ("34000", "= 34K", True)],
)
def test_restates_by_value(answer: str, remark: str, expected: bool) -> None:
    assert restates(answer, remark) is expected


@pytest.mark.parametrize(
    "answer,expected",
    [("x = e \\approx 3.5", None), ("x = e \\approx 2.72", "x = e"), ("e\\approx 2.718", "e"),
     ("\\ln(2) \\approx 7", None), ("(1+\\sqrt2) \\approx 2.41", "(1+\\sqrt2)"),
     ("f(2) \\approx 34", "f(2) \\approx 34"),
     ("the value \\approx 3", "the value \\approx 3"), ("x \\approx 34", "x \\approx 34")],
)
def test_an_approximation_after_e_or_a_parenthesis(answer: str, expected: str | None) -> None:
    assert without_bare_remark(answer) == expected


@pytest.mark.parametrize(
    "answer,remark,expected",
    [("34", "i.e. \\frac{2}{3}", True), ("2", "i.e. \\sqrt{4}", False), ("x = \\frac12", "i.e. 0.5", False),
     ("x = 2", "i.e. \\sqrt{2}", True), ("\\sqrt2", "i.e. 1.414", False), ("\\sqrt2", "equivalently 35", True),
     ("34", "that is, 2 cm", True), ("34", "that is, 34 cm", False), ("34", "equivalently x = 34", False),
     ("\\frac23", "i.e. 0.666667", False), ("\\frac23", "i.e. 0.67", True), ("34", "i.e. 3 cases", False),
     ("34", "i.e. 2x", None), ("34", "i.e. n = 3", None), ("34", "i.e. thirty-four", None), ("a^2", "i.e. \\sqrt{2}", None),
     ("30^\\circ", "i.e. \\frac{\\pi}{6}", None), ("\\sqrt2 \\approx 7", "i.e. \\sqrt{2}", True)],
)
def test_restatement_changes(answer: str, remark: str, expected: bool | None) -> None:
    assert restatement_changes(answer, remark) is expected


@pytest.mark.parametrize(
    "answer,expected",
    [("34, i.e. \\frac{2}{3}", None), ("2; i.e. \\sqrt{2}", None), ("34 \\text{, i.e. } 35", None),
     ("2, i.e. \\sqrt{4}", "2"), ("x = 2 ie \\sqrt{4}", "x = 2"), ("34, i.e. 34, i.e. 35", None),
     ("34, i.e. 2x", "34, i.e. 2x"), ("34, which is \\sqrt{2}", "34, which is \\sqrt{2}"), ("2 = \\sqrt{2}", "2 = \\sqrt{2}")],
)
def test_without_bare_remark_reads_a_restatement(answer: str, expected: str | None) -> None:
    assert without_bare_remark(answer) == expected


@pytest.mark.parametrize(
    "answer,gold,expected",
    [("34 = 2 \\text{ cm}", "34", True), ("2 \\text{ cm} = 34", "34", True), ("34 = 2cm", "2", True),
     ("34 \\text{ cm} = 35 \\text{ cm}", "35", True), ("34 = 34 \\text{ cm}", "34", False),
     ("x = 34 \\text{ cm}", "34", False), ("34 \\text{ cm} = 340 \\text{ mm}", "34", False), ("0.5 = 50\\%", "50", False),
     ("\\frac{1}{2} \\text{ cm} = 0.5", "0.5", False), ("34 = 2 \\text{ cm}", "x = 34", False)],
)
def test_a_numeral_equated_to_a_number_with_a_unit(answer: str, gold: str, expected: bool) -> None:
    assert states_no_value(answer, gold) is expected


# Two values stated by "that is": wrong for either one, in each form (the comma form already was).
_TWO_VALUES = ["Answer: 34 (that is, 35)", "Answer: 34, that is, 35", "Answer: 34 that is 35", "Answer: 34; that is, 35",
               "Answer: $34$ (that is, 35)", "Answer: 34 \\text{ cm}, that is, 35", "Answer: 34 \\text{ cm} (that is, 35)",
               "Answer: 34 cm, that is, 35", "Answer: 34 cm (that is, 35)", "Answer: 34 cm, i.e. 35"]


@pytest.mark.parametrize("response", _TWO_VALUES)
@pytest.mark.parametrize("gold", ["34", "35"])
def test_that_is_with_another_value_is_a_hedge_for_both(response: str, gold: str) -> None:
    assert verify(A + response, gold, "answer")[0] is False


@pytest.mark.parametrize(
    "response,gold,pred",
    [("Answer: 34 (that is, 34)", "34", "34"), ("Answer: 34, that is, 34", "34", "34"),
     ("Answer: 1/2, that is, 0.5", "\\frac{1}{2}", "1/2"), ("Answer: 1/2 (that is, 0.5)", "\\frac{1}{2}", "1/2"),
     ("Answer: \\frac{1}{2}, that is, 0.5", "\\frac{1}{2}", "\\frac{1}{2}"),
     ("Answer: \\frac{1}{2} (that is, 0.5)", "\\frac{1}{2}", "\\frac{1}{2}"),
     ("Answer: 34 \\text{ cm}, that is, 34", "34", "34 \\text{ cm}"),
     ("Answer: 34 \\text{ cm} (that is, 34)", "34", "34 \\text{ cm}"),
     ("Answer: 34 cm, that is, 34", "34", "34 cm"), ("Answer: 34 cm (that is, 34)", "34", "34 cm")],
)
def test_that_is_restating_the_same_value_is_the_answer(response: str, gold: str, pred: str) -> None:
    """The bracketed and unit forms read as the comma form: the restatement goes, the value stays."""
    assert verify(A + response, gold, "answer") == (True, pred)


@pytest.mark.parametrize(
    "response,gold,pred",
    [("Answer: x, that is, 34", "34", "34"), ("Answer: x (that is, 34)", "34", "34"),
     ("Answer: $a_1$ (that is, \\frac{2}{3})", "\\frac23", "\\frac{2}{3}"), ("Answer: x; that is, 34", "34", "34"),
     ("Answer: the number of ways (that is, 35)", "35", "35")],
)
def test_that_is_after_a_name_gives_its_value(response: str, gold: str, pred: str) -> None:
    """After a name "that is" is a copula as "is" is, in every form (its comma or brackets go)."""
    assert verify(A + response, gold, "answer") == (True, pred)


@pytest.mark.parametrize(
    "response",
    ["Answer: a^2" + " \\approx 2" * 45, "Answer: a^2" + ", i.e. 2" * 60, "Answer: a^2" + " i.e. (2)" * 50,
     "\\boxed{2} (or " + "\\sqrt{" * 3000 + "2" + "}" * 3000 + ")", "\\boxed{2} (or " + "(" * 50_000 + ")",
     "\\boxed{2}, or " + "\\log " * 20_000 + "7", "Answer: $2$ (or $" + "2^{" * 5000 + "}" * 5000 + "$)",
     "Answer: x = e" + " \\approx 2.72" * 5000, "\\boxed{34000} = " + "34K" * 30_000,
     "Answer: $2$ alternatively " + "\\exp(" * 10_000 + "1" + ")" * 10_000,
     "Answer: " + "34 cm that is " * 400, "Answer: " + "x (that is, " * 500 + "34" + ")" * 500,
     "Answer: 34" + " cm" * 2000 + " (that is, 35)", "Answer: " + "is, " * 2000],
)
def test_alternatives_stay_fast_on_hostile_text(response: str) -> None:
    for extractor in ("answer", "boxed", "any"):
        start = time.perf_counter()
        prepare(response, "2", extractor)  # the parent-process part: string work only
        assert time.perf_counter() - start < 0.5, extractor
