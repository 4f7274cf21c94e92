"""Answers with a part math-verify would not read, so that it compares only the value before it.

math-verify stops reading at the first thing it does not know and keeps what it read: for a ground
truth ``34`` it accepted ``34–35`` (a range), ``34→35``, ``34～35`` and ``34 h 35 min``. Each states
another value besides the one read, so each is wrong here, unless the ground truth has that part too:

- a *symbol math-verify does not know* (Unicode punctuation, dashes, arrows, other mathematical or
  miscellaneous symbols left after :mod:`~dapo.rewards.unicode_math` made LaTeX of those it could)
  between the value and another number: ``34–35``, ``34 ‒ 35``, ``34～35``. Before words it is prose
  (``34 — the number of ways``, ``34。所以共有34种``), and a trailing mark (``34 ✓``) is nothing: both
  are left as before, and so are currency signs, ``°``, primes and ``∼``; so is a *question mark*
  between two values, a hedge (``34? 35``; math-verify read the last), where ``34?`` alone is left;
- per mille and per ten thousand: ``34‰`` is 0.034;
- a *range* written with dots or dashes between two numbers: ``34..35``, ``34...35``, ``34\\ldots 35``,
  ``34--35``, ``34{-}35``, ``34\\text{--}35``;
- a *compound quantity*, a number after a unit's number: ``34 \\text{ h } 35 \\text{ min}``,
  ``34\\,\\mathrm{m}\\,35\\,\\mathrm{cm}``, ``34°35′`` (math-verify read the first).

What adds no second value is left as math-verify reads it, though a grader might frown: a base
subscript (``1204_9`` for ``1204``: a base-b answer's digits are its ground truth), a CJK unit or
scale word (``34千米``, ``34万元`` when the question asks in 万元), ``34 score``, ``142857...``.

String scanning of bounded length: linear, safe in the parent process.
"""

from __future__ import annotations

import re
import unicodedata

_MAX_CHARS = 1000
# Unicode categories math-verify reads none of: dashes, other punctuation, math, modifier and other
# symbols (not currency, Sc: "£34" is another question; not letters, marks, numbers or spaces).
_UNKNOWN_CATEGORIES = frozenset(("Pd", "Po", "Sm", "Sk", "So"))
# Degrees, minutes and seconds of arc (or feet and inches); "∼", which the approximation rules read
_KNOWN_SYMBOLS = frozenset("°′″‴∼")
_PER_MILLE = re.compile("[‰‱]")
_DASH_TEXT = r"\\(?:text|textrm|mbox|hbox|mathrm)\{\s{0,3}-{1,3}\s{0,3}\}"
_ELLIPSIS = r"\.{2,3}|\\(?:ldots|cdots|dots)(?![A-Za-z])"
_RANGE = re.compile(r"[0-9]\s{0,3}(?:" + _ELLIPSIS + r"|-{2,3}|\{\s{0,3}-{1,3}\s{0,3}\}|" + _DASH_TEXT
                    + r")\s{0,3}[+-]?[0-9]")
_SPACE = r"(?:\s|\\[,;: ])*"
_COMPOUND = re.compile(r"[0-9]" + _SPACE + r"(?:\\(?:text|textrm|mathrm|mbox)\{\s{0,3}(?!(?:and|or)\b)[A-Za-z]{1,12}\.?\s{0,3}\}"
                       r"|°|\^\s{0,3}\{?\s{0,3}\\circ\s{0,3}\}?)" + _SPACE + r"[0-9]")
# What makes the text after a symbol another number: a digit, after a sign, a bracket or "$".
_NUMBER_AFTER = re.compile(r"\s{0,3}[$(\[{]?\s{0,3}([+\-]?[0-9][0-9.,]*)")
_LAST_NUMBER = re.compile(r"([0-9][0-9.,]*)[^0-9]*$")
# A question mark hedges after a value only: "34? 35", "$34$? 35"; not "How many ways? 7"
_VALUE_BEFORE = re.compile(r"[0-9][$})\]\s]{0,4}$")


def unread_part(answer: str, ground_truth: str) -> bool:
    """Whether ``answer`` has a part, absent from ``ground_truth``, that math-verify would not read
    and that changes its value or adds another (module rules)."""
    if len(answer) > _MAX_CHARS:
        return False  # the caller's length rule decides these
    return _unknown_symbol(answer, ground_truth) or any(
        pattern.search(answer) is not None and pattern.search(ground_truth) is None
        for pattern in (_PER_MILLE, _RANGE, _COMPOUND))


def _unknown_symbol(answer: str, ground_truth: str) -> bool:
    """A symbol of :data:`_UNKNOWN_CATEGORIES`, or a question mark right after a value, not in the ground
    truth, with a number after it other than the one before it (``34 — 34 ways`` restates it)."""
    if answer.isascii() and "?" not in answer:  # (the scan below skips every other ASCII character, at C speed)
        return False
    for index, char in enumerate(answer):
        if ((char.isascii() and char != "?") or char in _KNOWN_SYMBOLS or char in ground_truth
                or unicodedata.category(char) not in _UNKNOWN_CATEGORIES):
            continue
        if char == "?" and _VALUE_BEFORE.search(answer, 0, index) is None:
            continue
        after = _NUMBER_AFTER.match(answer, index + 1)
        before = _LAST_NUMBER.search(answer, 0, index)
        if after is not None and (before is None or before.group(1) != after.group(1).rstrip(".,")):
            return True
    return False
