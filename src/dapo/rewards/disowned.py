"""An answer the response itself calls wrong, and a value it rules out beside its answer.

A response that states its answer and says in the same breath that it is wrong has not committed to
it: ``Answer: 34 (wrong)``, ``$34$ (this is not correct)``, ``\\boxed{34} is incorrect.``,
``\\boxed{34}. This is wrong.`` are wrong for 34, as a grader marks them (paid, a policy learns to
disown its answers at no cost). A remark that rules *another* value out keeps the answer:
``34 (35 is wrong)``, ``34 (35 is extraneous)`` state 34, as ``34 (not 35)`` does. Uncertainty alone
disowns nothing (``34 (not sure)``: one value, stated unsure).
"""

from __future__ import annotations

import re

from dapo.rewards.remark_words import REJECTING_WORDS

# What calls a value wrong: "wrong", "not correct", "extraneous", "not the answer", "a mistake"
_WRONG = (r"(?:not\s{1,3}(?:correct|right|valid|the\s{1,3}answer)|" + REJECTING_WORDS
          + r"|discarded|ruled\s{1,3}out|a\s{1,3}mistake)")
_IT_IS = r"(?:this|it|that)(?:\s{1,3}(?:is|was)|'s)"
_SURELY = r"(?:\s{1,3}(?:probably|likely|definitely|clearly|actually))?"
# A remark that is only that judgement: "(wrong)", "(this is wrong)", "(probably incorrect)"
_REMARK_DISOWNS = re.compile(r"\s{0,3}(?:" + _IT_IS + _SURELY + r"\s{1,3}|(?:probably|likely|maybe|possibly)\s{1,3})?"
                             + _WRONG + r"[\s.!]*$", re.IGNORECASE)
# ... or, after the answer without brackets, the judgement of it: "is wrong", ". This is wrong.", "\\text{ is wrong}"
# (ending its clause: "is not the answer to part (b)" judges another question)
_AFTER_DISOWNS = re.compile(r"[\s$]{0,4}(?:\\text\{\s{0,3})?(?:(?:[.,;:!]\s{0,3})?" + _IT_IS + r"|is|was)" + _SURELY
                            + r"\s{1,3}" + _WRONG + r"(?=\s{0,3}(?:[.!;,)}]|$|because|since|as(?![A-Za-z])))",
                            re.IGNORECASE)
# A remark that rules another value out: "(35 is wrong)", "($35$ is extraneous)"
_REJECTS_A_VALUE = re.compile(r"\s{0,3}\$?\s{0,2}(?P<value>[+\-\u2212]?[0-9][0-9,]*(?:\.[0-9]+)?(?:/[0-9]+)?)\s{0,2}\$?"
                              r"\s{1,3}(?:is|was)" + _SURELY + r"\s{1,3}" + _WRONG + r"[\s.!]*$", re.IGNORECASE)


def remark_disowns(remark: str) -> bool:
    """Whether ``remark``, in brackets after an answer, only calls it wrong (``wrong``, ``this is not
    correct``, ``extraneous``)."""
    return _REMARK_DISOWNS.match(remark[:200]) is not None


def disowned_after(after: str) -> bool:
    """Whether ``after``, the text right after an answer (a box, a ``$...$``, a number), calls it wrong
    (``is wrong``, ``. This is incorrect.``, ``\\text{ is not correct}``)."""
    return _AFTER_DISOWNS.match(after[:200]) is not None


def rejected_value(remark: str) -> str | None:
    """The value ``remark`` rules out, as written (``35 is wrong`` -> ``35``), or None."""
    found = _REJECTS_A_VALUE.match(remark[:200])
    return found.group("value") if found is not None else None
