"""Answers with a part math-verify would not read, so that it compares only the value before it.

math-verify stops reading at the first thing it does not know and keeps what it read: for a ground
truth ``34`` it accepted ``34–35`` (a range), ``34→35``, ``34～35`` and ``34万`` (340,000). Each states
another value, or more than one, so each is wrong here, unless the ground truth has that part too:

- a *symbol math-verify does not know* (Unicode punctuation, dashes, arrows, other mathematical or
  miscellaneous symbols left after :mod:`~dapo.rewards.unicode_math` made LaTeX of those it could)
  with a letter or a digit after it: ``34–35``, ``34 ‒ 35``, ``34～35``. A trailing mark (``34 ✓``) is
  left as before, and so are letters (CJK text too), currency signs, ``°``, primes and ``∼``.
- per mille and per ten thousand: ``34‰`` is 0.034;
- a *CJK numeral that scales* the number before it: ``34万`` (×10⁴), ``34千``, ``34亿`` (×10⁸);
- a *range* written with dots or dashes between two numbers: ``34..35``, ``34...35``, ``34\\ldots 35``,
  ``34--35``, ``34{-}35``, ``34\\text{--}35``; and an integer that goes on, ``34\\ldots``, ``34...``
  (a decimal's ``0.333\\ldots`` is left to the number rules);
- a *compound quantity*, a number after a unit's number: ``34 \\text{ h } 35 \\text{ min}``,
  ``34\\,\\mathrm{m}\\,35\\,\\mathrm{cm}``, ``34°35′`` (math-verify read the first);
- a *base* other than ten: ``34_{16}``, ``34_8`` (34 in base 16 is 52), ``34 (base 8)``; ``34_{10}`` is 34.

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
_CJK_SCALE = re.compile(r"[0-9]\s{0,3}[十百千万萬亿億兆]")
_DASH_TEXT = r"\\(?:text|textrm|mbox|hbox|mathrm)\{\s{0,3}-{1,3}\s{0,3}\}"
_ELLIPSIS = r"\.{2,3}|\\(?:ldots|cdots|dots)(?![A-Za-z])"
_RANGE = re.compile(r"[0-9]\s{0,3}(?:" + _ELLIPSIS + r"|-{2,3}|\{\s{0,3}-{1,3}\s{0,3}\}|" + _DASH_TEXT
                    + r")\s{0,3}[+-]?[0-9]")
_INTEGER_GOES_ON = re.compile(r"(?<![0-9.])[0-9]{1,50}\.?\s{0,3}(?:" + _ELLIPSIS + r")\s{0,3}$")
_SPACE = r"(?:\s|\\[,;: ])*"
_COMPOUND = re.compile(r"[0-9]" + _SPACE + r"(?:\\(?:text|textrm|mathrm|mbox)\{\s{0,3}(?!(?:and|or)\b)[A-Za-z]{1,12}\.?\s{0,3}\}"
                       r"|°|\^\s{0,3}\{?\s{0,3}\\circ\s{0,3}\}?)" + _SPACE + r"[0-9]")
_BASE_SUBSCRIPT = re.compile(r"[0-9]\s{0,3}_\s{0,3}(?:\{\s{0,3}([^{}]{1,12}?)\s{0,3}\}|([0-9A-Za-z]))")
_BASE_WORD = re.compile(r"\bbase[\s-]{0,3}\{?\s{0,3}([0-9]{1,4})", re.IGNORECASE)
_TEN = re.compile(r"10|ten|\\text\{\s{0,3}ten\s{0,3}\}", re.IGNORECASE)


def unread_part(answer: str, ground_truth: str) -> bool:
    """Whether ``answer`` has a part, absent from ``ground_truth``, that math-verify would not read
    and that changes its value or adds another (module rules)."""
    if len(answer) > _MAX_CHARS:
        return False  # the caller's length rule decides these
    return (_unknown_symbol(answer, ground_truth)
            or any(pattern.search(answer) is not None and pattern.search(ground_truth) is None
                   for pattern in (_PER_MILLE, _CJK_SCALE, _RANGE, _INTEGER_GOES_ON, _COMPOUND))
            or (_other_base(answer) and not _other_base(ground_truth)))


def _unknown_symbol(answer: str, ground_truth: str) -> bool:
    """A symbol of :data:`_UNKNOWN_CATEGORIES`, not in the ground truth, with a letter or digit after it."""
    for index, char in enumerate(answer):
        if (not char.isascii() and char not in _KNOWN_SYMBOLS and char not in ground_truth
                and unicodedata.category(char) in _UNKNOWN_CATEGORIES
                and any(later.isalnum() for later in answer[index + 1 :])):
            return True
    return False


def _other_base(text: str) -> bool:
    """``34_{16}``, ``34_8``, ``34 (base 8)``: a number written in a base other than ten."""
    for match in _BASE_SUBSCRIPT.finditer(text):
        base = (match.group(1) or match.group(2)).strip()
        if not _TEN.fullmatch(base):
            return True
    return any(match.group(1) != "10" for match in _BASE_WORD.finditer(text))
