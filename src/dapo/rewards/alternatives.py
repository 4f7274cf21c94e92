"""An alternative or a restatement written in math after an answer: its value computed and compared.

Rules (each a false positive before: a hedge with another value was accepted):

- **An alternative in a closed form states the answer only when it has the answer's value.** A
  remark that offers an alternative (``or``, ``or equivalently``, ``otherwise``, ``alternatively``,
  ``\\lor``, ``\\vee``; ``and``, ``but``, ``also`` with an unnamed form) or restates the answer (``=``,
  ``i.e.``, ``that is``, ``which is``) in a closed form, optionally named (``or x = \\sqrt{2}``) or
  closed by a condition without a number (``or \\sqrt{2} if n is odd``), restates it when the form's
  value is the answer's (``\\boxed{2} (or \\sqrt{4})``, ``(or \\frac{4}{2})``; ``\\boxed{\\sqrt2} (or
  2^{1/2})``) and offers
  another value otherwise (``\\boxed{2} (or \\sqrt{2})``, ``(or 2\\sqrt{2})``, ``\\boxed{2}, or e^2``:
  wrong). Before, the remark's digits were compared one by one with the answer, so the 2 inside
  ``\\sqrt{2}`` "restated" 2: a hedge a policy learns to write. The form's value is computed by
  :func:`~dapo.rewards.approximations.real_value` (the answer's by the caller) and compared exactly
  where both are rational, else to :data:`~dapo.rewards.approximations._SLACK` (far below any rounding a remark may give). A bare
  ``\\log`` is read both ways, base 10 and e: another value only when neither reading is the answer
  (``(or \\log 7)`` after 2 is; ``(or \\log 100)`` is left). What the evaluator does not compute (a
  letter, ``2x``, a unit, words after the form), and after a restatement (not an alternative) a named
  numeral (``(i.e. n = 3)`` may state a condition) and a decimal after an irrational answer (``(=
  1.414)`` after ``\\sqrt2``: a rounding, :func:`~dapo.rewards.loose_roundings.rounds_loosely`) are left
  to the caller's rules, as before; so is anything after an answer in degrees or percent,
  which a form may restate in other units (``30^\\circ (= \\frac{\\pi}{6})``). A plain fraction or
  number is compared as a form is: ``\\boxed{34} (= \\frac{2}{3})``, ``\\boxed{\\pi} (= \\frac{22}{7})``,
  ``\\boxed{34}, otherwise 35`` and ``\\boxed{\\sqrt2} (\\lor 1.414)`` offer another value.
- **A K glued to a restated number counts thousands**, as in an approximation: ``\\boxed{34000} = 34K``
  and ``(= 34K)`` restate 34000, ``\\boxed{34} = 34K`` offers 34000 (:data:`NUMBER_OR_THOUSANDS`, read by
  :func:`~dapo.rewards.number_forms.only_restates`; before, any K made the remark another number).

Bounded input (:data:`~dapo.rewards.approximations.MAX_CHARS`), bounded regular expressions and at
most two evaluations: linear, safe in the parent process.
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

from dapo.rewards.approximations import (
    MAX_CHARS,
    approximates_with_a_form,
    equals_value,
    real_value,
)
from dapo.rewards.exact_numbers import states_fraction
from dapo.rewards.remark_words import CONDITION_WORDS, NAME, OR_ADVERBS, RESTATING_WORDS

# A number a remark or an "or" may restate: 34, 1,000, 0.5, -2, 1/2, \frac{1}{2}, \frac12.
NUMBER_TOKEN = re.compile(r"[+\-\u2212]?(?:\\[dt]?frac(?:\{[+-]?[0-9]{1,50}\}|[0-9])(?:\{[0-9]{1,50}\}|[0-9])(?![0-9])"
                          r"|[0-9][0-9,]{0,60}(?:\.[0-9]{1,50})?(?:/[0-9]{1,50})?)")
# ... with a K glued to it: "34K" is 34000 (a capital K set apart by a space is kelvin, "34Km" a unit).
NUMBER_OR_THOUSANDS = re.compile(NUMBER_TOKEN.pattern + r"(?:[Kk](?![A-Za-z]))?")
# What opens an alternative ("or", "or equivalently", "otherwise", "\\lor"), a second value ("and", "but":
# unnamed only, "and n = 3" may be a condition) or a restatement ("=", "i.e.").
OPENING = re.compile(
    r"\s*(?:(?P<alternative>(?:or|\\lor|\\vee|\\text\{\s{0,3}or\s{0,3}\})(?![A-Za-z])"
    r"(?:[\s,]{1,3}(?:" + OR_ADVERBS + r")(?![A-Za-z]))?|(?:otherwise|alternatively)(?![A-Za-z]))"
    r"|(?P<conjunction>and|but|also)(?![A-Za-z])"
    r"|(?:" + RESTATING_WORDS + r")(?![A-Za-z])|=(?!=))[\s,$]{0,8}",
    re.IGNORECASE)
# A condition closing the form, with no number in it: "or \\sqrt{2} if n is odd" offers \\sqrt{2}.
_CONDITION = re.compile(r"[\s,]+(?:" + CONDITION_WORDS + r"|whenever|unless|provided|assuming)"
                        r"(?![A-Za-z])[^0-9]*$", re.IGNORECASE)
# A name the alternative is given as: "x = ", "a_{1} = ", "\\theta = ".
_NAME = re.compile(NAME + r"\s{0,4}=(?!=)\s{0,4}")
_DELIMITERS = re.compile(r"\\[()\[\]]")  # \( \) \[ \]: math delimiters
_BARE_LOG = re.compile(r"\\log(?![A-Za-z_])")  # \log without a base: 10 or e
# An answer in degrees or percent: a form after it may restate it in other units (radians, a fraction).
_OTHER_UNITS = re.compile(r"\\circ|°|\\degree|degree|%", re.IGNORECASE)


def computed_form(remark: str, answer: str, value: Fraction | Decimal | None) -> bool | None:
    """Whether ``remark``'s closed form, computed, is ``answer``'s ``value``: an approximation by a
    form (:func:`~dapo.rewards.approximations.approximates_with_a_form`, ``\\approx \\frac{22}{7}``) or
    an alternative or restatement in one (:func:`alternative_is_the_value`, ``or \\sqrt{2}``). True:
    it restates the answer; False: another value; None: no such form, or not computed."""
    form = approximates_with_a_form(remark, value)
    return form if form is not None else alternative_is_the_value(remark, answer, value)


def alternative_is_the_value(remark: str, answer: str, value: Fraction | Decimal | None) -> bool | None:
    """For ``remark`` opening with an alternative or a restatement in a closed form (module rules):
    True when the form's value is ``value`` (``or \\sqrt{4}`` after 2), False when it is another
    (``or \\sqrt{2}`` after 2, ``or \\log 7``: neither reading is 2), None when ``remark`` is no such
    form, the form or ``value`` is not computed, it restates with a named numeral or a decimal after an
    irrational ``value``, or ``answer`` (which ``value`` is the value of) is in degrees or percent."""
    opening = OPENING.match(remark[:MAX_CHARS])
    if value is None or opening is None or _OTHER_UNITS.search(answer[:MAX_CHARS]):
        return None
    form = _DELIMITERS.sub(" ", remark[opening.end() : MAX_CHARS]).strip().rstrip(".$ ")
    form = _CONDITION.sub("", form)  # "or \\sqrt{2} if n is odd"
    name = _NAME.match(form)
    form = form[name.end() :].strip() if name is not None else form  # "or x = \\sqrt{2}"
    if name is not None and opening.group("conjunction") is not None:
        return None  # "and n = 3", "and x = \\sqrt{2}": a condition, or a second variable's value
    if not form or (opening.group("alternative") is None and NUMBER_TOKEN.fullmatch(form) and (name is not None or (
            isinstance(value, Decimal) and "frac" not in form and "/" not in form))):
        return None  # "i.e. n = 3" (a condition?), "= 1.414" after \\sqrt2 (a rounding): the number rules'
    if _BARE_LOG.search(form) is None:
        return _has_the_value(form, value)
    readings = [_has_the_value(_BARE_LOG.sub(base, form), value) for base in (r"\\log_{10}", r"\\ln")]
    return False if readings == [False, False] else None  # "\\log 100" for 2 (base 10) or 4.6 (base e)?


def _has_the_value(form: str, value: Fraction | Decimal) -> bool | None:
    """Whether ``form``'s computed value is ``value``: exactly when both are rational (or a decimal of six
    places or more that rounds it), else to :data:`~dapo.rewards.approximations._SLACK` relative; None
    when the form is not computed."""
    stated = real_value(form)
    if stated is None:
        return None
    exact = states_fraction(form, value) if isinstance(value, Fraction) else None
    if exact is not None:  # "(= 0.666667)" after \\frac23: its rounding to six places, as between two answers
        return exact
    return equals_value(stated, value)
