"""An answer the response itself calls wrong, and a value it rules out beside its answer.

A response that states its answer and says in the same breath that it is wrong has not committed to
it: ``Answer: 34 (wrong)``, ``$34$ (this is not correct)``, ``\\boxed{34}. This is wrong.``, and
``\\boxed{34}`` then ``Wait, that's wrong.`` (the sentence right after it, unless taken back) are wrong for
34, as a grader marks them (paid, a policy learns to disown its answers at no cost). A remark that rules
*another* value out keeps the answer: ``34 (35 is wrong)``, ``34 (35 is extraneous)`` state 34, as ``34
(not 35)`` does. What names the answer to a question about wrongness or impossibility disowns nothing:
``\\boxed{C} is incorrect`` (which statement is incorrect?), ``\\boxed{0}. It is impossible.``, nor does
uncertainty alone (``34 (not sure)``: one value, stated unsure). From a red-team probe and differential
reviews of 441, 336, 313 and 299 written final lines.
"""

from __future__ import annotations

import re

# What calls a value wrong: "wrong", "not correct", "extraneous", "not the answer", "a mistake"; not "impossible"
# or "invalid", which describe what the answer counts ("The probability is \\boxed{0}. It is impossible.")
_WRONG = (r"(?:not\s{1,3}(?:correct|right|the\s{1,3}answer)|wrong|incorrect|extraneous|rejected|excluded|discarded"
          r"|ruled\s{1,3}out|a\s{1,3}mistake)")
_IT_IS = r"(?:this|it|that)(?:\s{1,3}(?:is|was)|'s)"
_SURELY = r"(?:\s{1,3}(?:probably|likely|definitely|clearly|actually))?"
# A remark that is only that judgement: "(wrong)", "(this is wrong)", "(probably incorrect)"
_REMARK_DISOWNS = re.compile(r"\s{0,3}(?:" + _IT_IS + _SURELY + r"\s{1,3}|(?:probably|likely|maybe|possibly)\s{1,3})?"
                             + _WRONG + r"[\s.!]*$", re.IGNORECASE)
# ... or, after the answer without brackets, a sentence judging it: ". This is wrong.", ", that's not correct"
# (ending its clause: "is not the answer to part (b)" judges another question). Not "\\boxed{C} is incorrect": the
# answer to "which statement is incorrect?"
_AFTER_DISOWNS = re.compile(r"[\s$]{0,4}(?:\\text\{\s{0,3})?(?:[.,;:!]\s{0,3})?" + _IT_IS + _SURELY
                            + r"\s{1,3}" + _WRONG + r"(?=\s{0,3}(?:[.!;,)}]|$|because|since|as(?![A-Za-z])))",
                            re.IGNORECASE)
# ... unless the answer's own line is about what is wrong: "The false proposition is \\boxed{3}, it is wrong."
_ABOUT_WRONGNESS = re.compile(r"(?<![A-Za-z])(?:false|wrong|incorrect|untrue|invalid|impossible"
                              r"|not\s{1,3}(?:true|correct))(?![A-Za-z])", re.IGNORECASE)
# A remark that rules another value out: "(35 is wrong)", "($35$ is extraneous)", "(2 colors is impossible)", "(x = -3
# rejected)", "(the root $-2$ is extraneous)"; or says to: "(reject $x = -3$)", "(discarding 35)"
_VALUE = (r"\$?\s{0,2}(?:[A-Za-z]\s{0,2}=\s{0,2})?\$?\s{0,2}"  # "$35$", "x = -3", "$x = 2$"
          r"(?P<value>[+\-\u2212]?[0-9][0-9,]*(?:\.[0-9]+)?(?:/[0-9]+)?)\s{0,2}\$?")
_REJECTS_A_VALUE = re.compile(r"\s{0,3}(?:but\s{1,3})?"
                              r"(?:the\s{1,3}(?:other\s{1,3})?(?:root|solution|value|case)[\s,]{1,3})?" + _VALUE
                              + r"(?:\s{1,3}[A-Za-z]{2,20})?,?\s{1,3}(?:(?:is|are|was|were)" + _SURELY + r"\s{1,3})?"
                              r"(?:" + _WRONG + r"|impossible|invalid|not\s{1,3}(?:valid|possible|allowed))[\s.!]*$",
                              re.IGNORECASE)
_REJECT_A_VALUE = re.compile(r"\s{0,3}(?:we\s{1,3})?(?:reject(?:ing|ed)?|discard(?:ing|ed)?|exclud(?:e|ing|ed))"
                             r"\s{1,3}" + _VALUE + r"[\s.!]*$", re.IGNORECASE)


def remark_disowns(remark: str) -> bool:
    """Whether ``remark``, in brackets after an answer, only calls it wrong (``wrong``, ``this is not
    correct``, ``extraneous``)."""
    return _REMARK_DISOWNS.match(remark[:200]) is not None


# ... or the sentence right after the answer (past its line or its full stop), when it is only that judgement: "Wait,
# that's wrong.", "Hmm, this is not correct.", "Oops, I made a mistake." Only that sentence: a later one is about
# what the sentences between name ("Someone might answer 24. That's wrong.", "The other root x = -2 makes the
# logarithm undefined. It is rejected."); and not one that goes on after a comma or colon ("It is incorrect,
# however, to include the endpoint", "I made a mistake, but corrected it above", "This is wrong: the problem
# statement says ...": about something else as often as about the answer).
_SENTENCE_DISOWNS = re.compile(r"[\s*$(]{0,8}(?:(?:wait|hmm+|oops|no|actually|hold\s{1,3}on|but|however)"
                               r"(?:[\s,.!:]|—|–|-){1,4}){0,3}"
                               r"(?:" + _IT_IS + _SURELY + r"\s{1,3}" + _WRONG + r"|i\s{1,3}made\s{1,3}a\s{1,3}mistake"
                               r"|(?:my|the|this)\s{1,3}answer\s{1,3}(?:is|was)" + _SURELY + r"\s{1,3}" + _WRONG
                               + r")(?=\s{0,3}(?:[.!]|$))", re.IGNORECASE)
# ... unless what follows takes it back: "No, it's right: 34 checks out.", "Let me recompute ... 3 + 4 + 5 = 12.
# Correct.", "12 is indeed the answer", "the value stands", "Actually no, everything is consistent.", "Never mind, I
# confused it with another problem."
_TAKEN_BACK = re.compile(r"(?:(?<![A-Za-z])(?:is|was)|'s)\s{1,3}(?:right|correct|fine)(?![A-Za-z])"
                         r"|(?<![A-Za-z])(?:checks\s{1,3}out|indeed|yes|good|correct\s{0,3}[.!]|remains|stands|holds"
                         r"|stays|unchanged|the\s{1,3}same|consistent|never\s{1,3}mind|corrected|fixed"
                         r"|(?:doesn't|does\s{1,3}not|won't|will\s{1,3}not)\s{1,3}(?:affect|change|matter))(?![A-Za-z])",
                         re.IGNORECASE)


READ_AFTER_DISOWNING = 240  # what is read after a disowning for a take-back (or the answer restated)


def disowning_end(sentence: str) -> int | None:
    """Where ``sentence``, the one right after an answer, ends when it is only a judgement calling the answer
    wrong (``Wait, that's wrong.``) and the next READ_AFTER_DISOWNING characters do not take that back (``No,
    it's right.``; the caller checks that they do not state the answer's value again); else None."""
    disowning = _SENTENCE_DISOWNS.match(sentence[:200])
    if disowning is None or _TAKEN_BACK.search(sentence, disowning.end(), disowning.end() + READ_AFTER_DISOWNING):
        return None
    return disowning.end()


def as_sentence(after: str) -> str:
    """``after``, the text right after an answer, from its next sentence: past the answer's closing math
    (``$``, ``\\]``), punctuation and blank lines, a curly apostrophe read as a straight one."""
    return after[:READ_AFTER_DISOWNING + 200].lstrip(" \t\n.;:!?,$*\\])").replace("\u2019", "'")


def speaks_of_wrongness(line: str) -> bool:
    """Whether ``line``, an answer's own before it, is about what is wrong (``The false proposition is``): its
    answer may be called wrong and still be the answer."""
    return _ABOUT_WRONGNESS.search(line[-200:]) is not None


def disowned_after(after: str, before: str) -> bool:
    """Whether ``after``, the text right after a number (a box's, a ``$...$``'s, an Answer line's; the callers
    read a number only: ``\\boxed{C}. It is incorrect because ...`` answers which option is), calls it wrong
    (``. This is incorrect.``, ``, that's wrong``, ``\\text{ this is not correct}``, ``. Oops, I made a
    mistake.``), unless ``before``, the line before it, speaks of wrongness itself (``The false proposition is
    \\boxed{3}, it is wrong.``)."""
    # on the answer's own line a disowning sentence must end it (". Oops, I made a mistake."); what follows the
    # line is read by later_hedges.disowned_later, which also looks for the answer said again
    sentence = as_sentence(after)
    end = disowning_end(sentence)
    disowns = _AFTER_DISOWNS.match(after[:200]) is not None or (end is not None and not sentence[end:].strip(" .!"))
    return disowns and not speaks_of_wrongness(before)


def rejected_value(remark: str) -> str | None:
    """The value ``remark`` rules out, as written (``35 is wrong``, ``the root -2 is extraneous``, ``reject x =
    -3`` -> ``35``, ``-2``, ``-3``), or None."""
    found = _REJECTS_A_VALUE.match(remark[:200]) or _REJECT_A_VALUE.match(remark[:200])
    return found.group("value") if found is not None else None


# A sentence closing an Answer line after its value: "2. The root -3 is extraneous", "2; -3 is rejected"
_CLOSING_SENTENCE = re.compile(r"(?P<head>[^;]{0,300}?[0-9}$])\s{0,3}[.;]\s{1,3}(?P<sentence>[^.;]{1,200}?)[\s.!]*")


def without_rejected_value(answer: str) -> str | None:
    """``answer`` without a sentence closing it that only rules another value out (``2. The root -3 is
    extraneous`` -> ``2``, ``$x = 2$; $x = -3$ is rejected`` -> ``$x = 2$``: math-verify read the rejected
    root); None where the value ruled out is the answer's own (``2. 2 is wrong``); ``answer`` itself otherwise."""
    found = _CLOSING_SENTENCE.fullmatch(answer[:600])
    rejected = rejected_value(found.group("sentence")) if found is not None else None
    if found is None or rejected is None:
        return answer
    own = re.findall(r"[+\-\u2212]?[0-9][0-9,]*(?:\.[0-9]+)?", found.group("head"))
    return None if own and own[-1].lstrip("+") == rejected.lstrip("+") else found.group("head")
