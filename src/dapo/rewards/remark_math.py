"""Math in a remark after an answer: whose it is.

An Answer line's value written without ``$`` and a remark holding ``$...$`` math: the one ``$...$`` on the
line was read as the answer, so ``Answer: 25 ($n = 5$ gives the max)`` was right for 5 and wrong for 25,
``Answer: 3 (minimum at $x = 1$)`` right for 1. The value before the remark is the answer; the remark is
read as one (:func:`plain_value_with_math_remark`):

- a condition, a method, an "or", a "not" or a value ruled out (:func:`remark_about_the_answer`): its math as
  text, the remark rules deciding (``34 (when $n = 2$)``, ``2 (or $\\sqrt{4}$)``, ``2 ($-3$ is extraneous)``
  keep the value; ``34 (but $35$ if n is odd)`` offers another);
- math whose last value is the value (:func:`~dapo.rewards.approximations.real_value`; ``34 ($\\frac{68}{2}$)``,
  ``34 ($2 \\cdot 17$)``, ``7 ($a = 3$, $b = 4$, so $a + b = 7$)``), or words whose math holds no number (``34 (the
  $n$-th term)``): the value alone; math not computed here (``120 ($5!$ ways)``) or whose value the decimal
  rounds (``1.41 ($\\sqrt{2}$)``): read as before, by math-verify;
- any other value offers a second one (``5 (i.e. $x = 6$)``, ``25 ($n = 5$ gives the max)``, ``3 (minimum at $x =
  1$)``): two candidates, wrong for both (from two differential reviews of 441 and 551 written final lines).
"""

from __future__ import annotations

import re

from dapo.rewards.answer_text import dollar_parts, outside_math
from dapo.rewards.approximations import is_rounding_of, real_value
from dapo.rewards.disowned import rejected_value
from dapo.rewards.remark_words import CONDITION_WORDS

# A remark that opens with a condition or a method: "(when $n = 2$)", "(using $r = 3$)"
_CONDITION = re.compile(r"\s*(?:" + CONDITION_WORDS + r"|given|using|with|assuming)(?![A-Za-z])", re.IGNORECASE)
# ... or with an "or" or a "not", whose value remark_changes_the_number compares: "(or $\\sqrt{4}$)", "(not $35$)"
_OR_NOT = re.compile(r"\s*(?:or|not)(?![A-Za-z])", re.IGNORECASE)
# A value written without "$" and a remark in brackets closing the line: "34 (when $n = 2$)", "12 cm (using $r=3$)"
_PLAIN_VALUE_REMARK = re.compile(r"(?P<head>[^$()]{0,200}[0-9][^$()]{0,40}?)\s{0,3}\((?P<remark>[^()]{0,400})\)[\s.]*")
_COPULA = re.compile(r"(?<![A-Za-z])(?:is|are|equals)(?![A-Za-z])|=", re.IGNORECASE)


def remark_about_the_answer(remark: str) -> bool:
    """Whether ``remark``, whose math is in ``$...$``, is read as a remark in words with its math as text: one
    that opens with a condition or a method (``when $n = 2$``, ``using $r = 3$``), with an "or" or a "not" (``or
    $\\sqrt{4}$``, ``not $35$``: its value compared) or that only rules a value out (``$-3$ is extraneous``,
    ``reject $x = -3$``: :func:`~dapo.rewards.disowned.rejected_value`)."""
    words = outside_math(remark)
    return (_CONDITION.match(words) is not None or _OR_NOT.match(words) is not None
            or rejected_value(remark) is not None)


def plain_value_with_math_remark(line: str) -> str | None:
    """``line`` as read when it is a value without ``$`` and a remark with ``$...$`` closing it (module rules):
    the value and the remark as text (``34 (when n = 2)``), the value alone (``34``), or None where the remark
    offers a second value; ``line`` itself for any other line."""
    found = _PLAIN_VALUE_REMARK.fullmatch(line)
    if found is None or "$" not in found.group("remark"):
        return line
    head, remark = found.group("head").rstrip(), found.group("remark")
    text = remark.replace("$", "")
    if remark_about_the_answer(remark):
        return f"{head} ({text})"
    math = dollar_parts(remark)[1::2]
    if re.search(r"[A-Za-z]{3}", outside_math(remark)) and not any(char.isdigit() for char in "".join(math)):
        return head  # "34 (the $n$-th term)"
    stated = _COPULA.split(head)[-1].strip()  # "The largest is 12" states 12
    value, remark_value = real_value(stated), real_value(_COPULA.split(math[-1])[-1]) if math else None
    if value is None or remark_value is None:
        return line  # not computed here ("120 ($5!$ ways)"): math-verify reads the math, as before
    if value == remark_value:
        return head  # "34 ($2 \\cdot 17$)", "7 ($a = 3$, $b = 4$, so $a + b = 7$)"
    if is_rounding_of(stated, remark_value):
        return line  # "1.41 ($\\sqrt{2}$)": the decimal of the exact value it names, read as before
    return None
