"""Reasons: a clause that says why the answer holds is never the answer.

Rule (:func:`without_reason`): a clause opened by "since" or "because" right after the answer's value or name
is the reason's, and is dropped; the answer is what it follows, whatever the reason states. Its copula ("n is
35"), its equation ("n = 35") and its numbers give no answer:

- after a **name or placeholder** as after a value (``x (since n is 35)``, ``x, since n is 35``, ``The answer is
  x, since n is 35`` state x). Before, the reason was read after a value only, so its copula gave the answer
  (35: right for 35);
- **set off** by a comma, a semicolon, a parenthesis, blank space alone or a text wrapper (``34 since n = 35``,
  ``34 because n is 35``, ``\\boxed{34 \\text{ since } n = 35}``, ``\\boxed{34 \\text{ (since } n = 35)}``). Before, a
  reason without a comma or parenthesis stayed in the answer, and math-verify read its equation (right for 35,
  wrong for 34), or its copula gave the answer;
- **whatever numbers it states** (``34, since n is 35`` and ``$34$ (since $n = 35$)`` state 34): the reason
  explains the value, it offers none. Before, a reason after a comma that stated another number kept the line
  whole (wrong for 34 and for 35).

A reason in brackets ends at its closing parenthesis, and what follows it is still read (``34 (since n is 35) or
36`` is ``34 or 36``, a hedge); one without brackets, or opened inside a text wrapper, runs to the end of its
sentence (a full stop and a capital letter: an Answer line of prose goes on with its next sentence) or of the
answer, so an "or" or "either" in it may offer another answer: one followed by a value (``34, since n is 35, or
36``, ``x, since n = 35 or maybe 36``) makes the reason a hedge (None, wrong for any ground truth), never dropped;
one between words is the reason's (``34, because n is odd or even`` states 34). Words with no value or name before the reason are no
answer it could follow (``the answer, since it is 35`` is read as before, 35), nor is a reason at the start.

String work with bounded regular expressions: at most :data:`_MAX_REASONS` reason words read, each with a bounded
look back and one linear scan for its closing parenthesis. Safe in the parent process.
"""

from __future__ import annotations

import re

from dapo.rewards.restatements import ends_a_value_or_name

REASON_WORD = re.compile(r"(?<![A-Za-z\\])(?:since|because)(?![A-Za-z])", re.IGNORECASE)
# What sets a reason off from the value before it, read back from the reason word: blank space, a comma, a
# semicolon, an opening parenthesis, a text wrapper opening ("34 \text{ since }", "34 \text{ (since }").
_SET_OFF = re.compile(r"(?:\s|[,;(]|\\(?:text|textrm|mathrm|mbox|textnormal)\s{0,3}\{){1,8}$")
# An "or" in a reason that offers a value: "or 36", "or maybe $36$", "or x = 36", "\text{ or } 36", "or \frac{1}{2}"
# (not "odd or even", "either $n$ is odd").
_OFFERS_A_VALUE = re.compile(r"(?:(?<![A-Za-z\\])(?:or|either)(?![A-Za-z])|\\lor(?![A-Za-z]))[\s,}]{0,4}"
                             r"(?:[A-Za-z]{1,12}[\s,=]{1,3}){0,2}[$(+\-\u2212]{0,2}\s{0,2}(?:[0-9]|\\(?!text)[A-Za-z])")
# A sentence's end: ". So the answer is 34" (a capital letter next; not "i.e. 5" or a decimal point).
_SENTENCE_END = re.compile(r"[.!?](?=\s{1,3}[A-Z])")
_LOOK_BACK = 40  # characters before a reason word read for its set-off
_MAX_REASONS = 8  # reason words read in one answer


def without_reason(answer: str) -> str | None:
    """``answer`` without the reason clauses that follow its value or name (module rules): ``x (since n is 35)``
    -> ``x``, ``34 since n = 35`` -> ``34``, ``34 \\text{ since } n = 35`` -> ``34``, ``34 (since n is 35) or 36`` ->
    ``34 or 36``. None when a reason without brackets holds an "or" or "either" before a value (``34, since n is 35,
    or 36``: it may offer another answer). ``answer`` itself when it has no such reason (``the answer, since it is 35``)."""
    text = answer
    searched_from = 0
    for _ in range(_MAX_REASONS):
        word = REASON_WORD.search(text, searched_from)
        if word is None:
            return text
        set_off = _SET_OFF.search(text[max(0, word.start() - _LOOK_BACK) : word.start()])
        head = text[: word.start() - len(set_off.group(0))].rstrip() if set_off is not None else ""
        if set_off is None or not head or not ends_a_value_or_name(head):  # "the answer, since": no value before
            searched_from = word.end()
            continue
        if _opens_a_bracket(set_off.group(0)):
            end = _bracket_end(text, word.end())
            rest = text[end + 1 :].strip() if end is not None else ""
        else:  # to the end of its sentence, where an "or" may offer another answer
            sentence_end = _SENTENCE_END.search(text, word.end())
            end = sentence_end.start() if sentence_end is not None else len(text)
            if _OFFERS_A_VALUE.search(text, word.end(), end):
                return None
            rest = text[end:].strip()
        text = f"{head} {rest}" if rest and rest[0] not in ".!?" else head + rest
        searched_from = len(head)
    return text


def _opens_a_bracket(set_off: str) -> bool:
    """Whether the set-off opens a parenthesis of the answer's own (``34 (since``, ``34 (\\text{since``), not one
    inside a text wrapper (``34 \\text{ (since } n = 35)}``: the wrapper closes before it; the reason runs to the end)."""
    paren, brace = set_off.find("("), set_off.find("{")
    return paren >= 0 and (brace < 0 or paren < brace)


def _bracket_end(text: str, start: int) -> int | None:
    """Where the parenthesis open at ``start`` (one level deep) closes, or None when it never does."""
    depth = 1
    for at in range(start, len(text)):
        if text[at] == "(":
            depth += 1
        elif text[at] == ")":
            depth -= 1
            if depth == 0:
                return at
    return None
