"""Answers that do not state a value, though math-verify reads one out of them.

math-verify drops what it cannot use and compares what is left, so it accepts for a ground truth
``34``: ``34 +`` (a dangling operator: it reads ``34``), ``\\approx 34`` and ``\\ge 34`` (a relation
with nothing on its left: it reads the right side), and ``x^2=34`` (an equation: it compares the
right side). Each is a different answer, or none, so each is wrong here:

- a *dangling operator*: the answer ends in ``+ - * / = ^ _ \\times \\cdot \\div \\pm`` or a relation
  (the expression was never finished). Not a sign in a power or index (``0^+``, ``a_-``), and not
  when the ground truth ends in one too (a grade ``B+``).
- a *bare relation*: the answer opens with ``<``, ``>``, ``\\le``, ``\\ge``, ``\\neq``, ``\\approx``,
  ``\\sim``, ``\\lesssim``, ``\\ll``, ``\\succeq``, ``\\propto``, ``\\in`` and their kin, their Unicode signs or
  an estimate's word (``approx. 34``, ``ca. 34``); it bounds or approximates a value (``\\approx 34`` is "about 34",
  not 34). Not a vector ``<1, 2>``, and not when the ground truth opens with a relation too.
  Math-verify accepts ``\\approx 34``; we do not, as for ``\\ge 34``. ``x \\approx 34`` (a name
  on the left) is kept as math-verify reads it: its own test suite counts ``x\\approx11`` right.
- an *equation on an expression of one variable*: the left side of the first ``=`` is made of one
  letter, numbers and arithmetic (``x^2``, ``2x``, ``-x``, ``x+1``, ``\\sqrt{x}``) but is not the
  letter alone, and the ground truth has no ``=``: ``x^2=34`` says x is ``\\sqrt{34}``, not 34. A
  bare name (``x = 34``, ``a_1 = 34``), a function value (``f(2) = 34``) or an expression in
  several letters (``m+n = 34``, ``a+b=34``: the quantity asked for, by AIME's habit) states the
  value on its right, as before.
- an *equation between two rational numbers* (``34 = 35``, ``0.5 = 0.6``, a fraction converted to a
  decimal: ``\\frac12 = 0.6``, ``1/2 = 0.6``, ``0.\\overline{3} = 0.3``, or two fractions: ``\\frac12 =
  \\frac23``): it states no one value (math-verify compares its right side, so ``34 = 35`` was right for
  35 and ``\\frac12 = 0.6`` for 0.6). The sides are the same number as two answers would be
  (:func:`~dapo.rewards.exact_numbers.rational_verdict`): ``34 = 34.0``, ``\\frac12 = 0.5`` and ``\\frac24 =
  \\frac12`` state it, ``\\frac13 = 0.333333`` too (six places), ``\\frac13 = 0.33`` does not. Expressions
  are left to math-verify, which reads the right side. (Math-verify's own suite counts ``\\frac12 \\$ =
  \\frac{10}{9}`` right for ``10/9``, the currency sign dropped before these rules; wrong here.) A unit of
  length, time, mass or money (:func:`~dapo.rewards.units.number_and_unit`) on one side, or the same on
  both, is dropped: ``34 = 2 \\text{ cm}`` is wrong (before, the unit made the right side a name, read
  ``2 \\text{ cm} = 34``, and no rational: math-verify read 34), ``34 = 34 \\text{ cm}`` states 34; two
  different units are a conversion (``34 \\text{ cm} = 340 \\text{ mm}``) and a percent or degree sign
  another scale (``0.5 = 50\\%``): left as before. Not when the ground truth has an ``=`` too.

An equation written the other way round, a value on the left and what it names on the right
(``34 = x``, ``34 = a_1``, ``34 = m+n``), is read name first (:func:`name_first`: ``x = 34``) before
these rules, so both ways round are judged alike: ``34 = x`` states 34, while ``34 = 35x`` and
``34 = x^2`` are ``35x = 34`` and ``x^2 = 34``, equations on an expression of one letter (wrong).

String scanning of bounded length: linear, safe in the parent process.
"""

from __future__ import annotations

import re

from dapo.rewards.exact_numbers import rational_verdict
from dapo.rewards.remark_words import BARE_APPROXIMATION_WORDS
from dapo.rewards.units import number_and_unit

# LaTeX spacing and math delimiters: dropped before reading the two ends.
_SPACING = re.compile(r"\\[,;:! ]|\\q?quad(?![A-Za-z])|[$~\s]")
_DANGLING = re.compile(r"(?<![\^_{])(?:[+\-*/=^_<>≤≥≠≈±∓×÷·]"
                       r"|\\(?:times|cdot|div|pm|mp|le|leq|ge|geq|lt|gt|neq?|approx|sim|simeq|leqslant|geqslant)"
                       r"(?![A-Za-z]))$")
_OPENING_RELATION = re.compile(r"(?:[<>≤≥≠≈∼]|\\(?:le|leq|ge|geq|lt|gt|neq?|approx|sim|simeq|thickapprox"
                               r"|leqslant|geqslant|lesssim|gtrsim|ll|gg|prec|succ|preceq|succeq|propto|in|cong)(?![A-Za-z])"
                               r"|" + BARE_APPROXIMATION_WORDS + r"|(?-i:ca\.))", re.IGNORECASE)
# What the left side of an equation on one variable may hold besides the letter.
_ARITHMETIC_COMMANDS = re.compile(r"\\(?:cdot|times|d?frac|sqrt|left|right)(?![A-Za-z])")
_EXPRESSION = re.compile(r"[A-Za-z0-9+\-*/^{}().]{1,60}")
_MAX_CHARS = 1000
# Units whose number is another scale of the value (50% is 0.5, 30° is π/6): an equation may convert to them.
_OTHER_SCALES = frozenset(("%", "deg", "degC", "degF", "rad"))
# A LaTeX command name (\frac, \sqrt, \pi): not a letter of the answer.
_COMMAND = re.compile(r"\\[A-Za-z]+")
# A lone Greek letter, optionally subscripted: a name, as a Latin letter is.
_GREEK_NAME = re.compile(r"\\(?:alpha|beta|gamma|delta|epsilon|varepsilon|zeta|eta|theta|vartheta|lambda|mu|nu|xi"
                         r"|rho|sigma|tau|phi|varphi|chi|psi|omega)(?:_\{?[A-Za-z0-9]{1,8}\}?)?")


def name_first(answer: str) -> str:
    """``34 = x`` -> ``x = 34``: one equation whose left side is a value (no letter outside LaTeX
    commands: ``34``, ``\\frac{1}{3}``, ``2\\sqrt{3}``) and whose right side names something (it has
    a letter, or is a lone Greek letter) is turned round, so that the rules here and the number
    rules, which read ``x = 34`` as 34, judge it as written name first. Anything else is returned
    as it is (``34 = 35``, ``x = 34``, ``a = b``, relations such as ``34 <= x``)."""
    if len(answer) > _MAX_CHARS or answer.count("=") != 1:
        return answer
    left, right = (side.strip() for side in answer.split("="))
    bare_left, bare_right = _SPACING.sub("", left), _SPACING.sub("", right)
    if not bare_left or not bare_right or bare_left.endswith(("<", ">", "!", "\\", ":")):
        return answer
    if _OPENING_RELATION.search(bare_left) or _OPENING_RELATION.search(bare_right):
        return answer
    names_something = re.search(r"[A-Za-z]", _COMMAND.sub("", bare_right)) or _GREEK_NAME.fullmatch(bare_right)
    if re.search(r"[A-Za-z]", _COMMAND.sub("", bare_left)) or not names_something:
        return answer
    return f"{right} = {left}"


def states_no_value(answer: str, ground_truth: str) -> bool:
    """Whether ``answer`` does not state a value that could be ``ground_truth`` (module rules)."""
    if len(answer) > _MAX_CHARS:
        return False  # the caller's length rule decides these
    text, gold = _SPACING.sub("", answer), _SPACING.sub("", ground_truth)
    return (_dangling_operator(text, gold) or _bare_relation(text, gold)
            or ("=" not in gold and (_equates_an_expression(text) or _equates_two_numbers(text))))


def _dangling_operator(text: str, gold: str) -> bool:
    return not _is_vector(text) and bool(_DANGLING.search(text)) and not _DANGLING.search(gold)


def _bare_relation(text: str, gold: str) -> bool:
    return not _is_vector(text) and bool(_OPENING_RELATION.match(text)) and not _OPENING_RELATION.match(gold)


def _is_vector(text: str) -> bool:
    """``<1, 2>``: angle brackets, not two relations."""
    return text.startswith("<") and text.endswith(">")


def _equates_two_numbers(text: str) -> bool:
    """``34 = 35``, ``\\frac12 = 0.6``, ``\\frac12 = \\frac23``, ``34 = 2 \\text{ cm}``: one equation between two
    rational numbers that are not the same answer (module rules), a unit of length, time, mass or money on
    one side or the same on both dropped (two different units are a conversion: left)."""
    if text.count("=") != 1:
        return False
    (left, left_unit), (right, right_unit) = (number_and_unit(side) for side in text.split("="))
    units = {left_unit, right_unit} - {None}
    if units & _OTHER_SCALES or len(units) > 1:
        return False  # "0.5 = 50\\%", "1 \\text{ km} = 1000 \\text{ m}": the same value in other units
    # two fractions too ("\\frac12 = \\frac23"; math-verify's suite counts "\\frac12 \\$ = \\frac{10}{9}" right for 10/9)
    return rational_verdict(left, right) is False


def _equates_an_expression(text: str) -> bool:
    """Whether the left side of the first ``=`` is an expression of one letter, not the letter."""
    left = text.split("=", 1)[0] if "=" in text else None
    if not left or left.endswith(("<", ">", "!", "\\")):  # "<=", "!=": a relation, not an equation
        return False
    bare = _ARITHMETIC_COMMANDS.sub("", left)
    if not _EXPRESSION.fullmatch(bare) or re.search(r"[A-Za-z]\(", bare):  # f(2): a function's value
        return False
    if bare.count("(") != bare.count(")") or bare.count("{") != bare.count("}"):
        return False  # "34 (n = 3)": the equation is in a remark, not the answer
    letters = set(re.findall(r"[A-Za-z]", bare))
    return len(letters) == 1 and left.strip("{}()") not in letters  # "{x}", "(x)": the letter alone
