"""A second answer offered after the final one, in a sentence or on a line that follows it.

Only the answer's own line was read for a hedge, and a period ended it (``\\boxed{34}. 35 was my
first guess`` offers nothing), so a policy could state its answer, then hedge past a full stop or a
line break: ``\\boxed{34}. Maybe 35.``, ``\\boxed{34}. Actually, it's 35.``, ``\\boxed{34}; 35 is also
possible.``, ``Answer: 34`` then ``Alternatively, 35.`` on the next line. Each was right for 34; each
offers another value now, so the answer is hedged (wrong) unless that value restates it
(``\\boxed{34}. Or, written out, 34.0``, ``\\boxed{2\\sqrt{3}}. Or approximately 3.46.``). What is read:
every sentence that starts within :data:`_MAX_CHARS` after the answer (the rest of its own too):

- a sentence (or the rest of the answer's, after a comma: ``\\boxed{35}, or it is 34``) that opens with
  a hedge's word (``or`` and its adverbs, ``maybe``, ``perhaps``, ``alternatively``, ``instead``, ...;
  ``actually``, ``wait``, ``hmm``, ``but``, ``however``, ``though``, ``unless``, ``otherwise``, ``else``, ``it``; ``或``,
  ``也可能是``, ``也许``) and ends in a number with nothing between them but words that name nothing
  else (``it's``, ``could also be``, ``the answer is``, ``we get``): ``Wait, check step 3.``, ``Alternatively,
  by Lemma 2.`` and ``Actually, check n = 5.`` are checks, not other answers;
- a sentence that opens with a number said to be possible, correct or an answer too (``35 is also
  possible``, ``However, 35 is also possible``, ``35 works too``); not one that rules it out (``-3 is
  not a valid solution``, ``But 0 is not possible``, ``35 is too large``).

A numeric answer is disowned, not hedged, by the sentence right after it when that only calls it wrong
(``\\boxed{34}`` then ``Wait, that's wrong.``): :func:`disowned_later`.

String scanning of bounded length: linear, safe in the parent process.
"""

from __future__ import annotations

import re

from dapo.rewards.approximations import is_rounding_of, real_value
from dapo.rewards.disowned import (
    READ_AFTER_DISOWNING,
    as_sentence,
    disowning_end,
    speaks_of_wrongness,
)
from dapo.rewards.number_forms import restates, value_of
from dapo.rewards.remark_words import BARE_APPROXIMATION_WORDS, OR_ADVERBS, REJECTING_WORDS

_MAX_CHARS = 300
_NUMBER = r"[+\-\u2212]?[0-9][0-9.,]{0,40}"
# Words between a hedge's opening and its number that name nothing else: "Actually, it's 35.",
# "Or it could also be 35.", "Maybe the answer is 35 instead.", "Or we get 35." ("Wait, check step
# 3." names a step).
_FILLER = (r"(?:[\s,:$]|(?:it'?s|it|is|was|be|could|might|may|would|also|possibly|perhaps|maybe|probably|the"
           r"|we|you|i|get|gets|got|have|has|obtain|obtains"
           r"|(?:final\s+)?answer|as\s+a\s+decimal|in\s+decimal\s+form)(?![A-Za-z])|"
           + BARE_APPROXIMATION_WORDS + ")")
_HEDGE_OPENING = re.compile(
    r"[\s$*(（,，]{0,8}(?:(?:" + OR_ADVERBS + r"|or|actually|wait|hmm+|but|however|though|unless|otherwise|else|it"
    r"|或者?|也?可能是|也许是?)(?![A-Za-z])"
    + _FILLER + r"{0,12}(?P<hedged>" + _NUMBER + r")\$?\s{0,3}(?:instead\s{0,3})?(?:[.;!?)\n。！？；）]|$)"
    r"|(?:(?:however|but|and|also)[\s,]{1,3})?\$?(?P<offered>" + _NUMBER + r")\$?\s{1,3}"
    r"(?:is|are|could|might|may|would|works?)(?![A-Za-z])"
    r"[^.;!?\n0-9]{0,24}?(?<![A-Za-z])(?:possible|correct|valid|right|an?\s{1,3}(?:option|answer|possibility)"
    r"|(?:too|as\s+well)(?=\s{0,3}(?:[.;!?)\n]|$)))(?![A-Za-z]))", re.IGNORECASE)
# ... unless it says the value is not one: "-3 is not a valid solution", "But 0 is not possible", "35 is
# impossible" (ruling out an extraneous root checks the answer; it offers none)
_NEGATION = re.compile(r"(?<![A-Za-z])(?:not|never|no|cannot|can't|isn't|aren't|wasn't|nor|neither|"
                       + REJECTING_WORDS + r")(?![A-Za-z])", re.IGNORECASE)
# Where a sentence after the answer may start: past a full stop, semicolon or the like, or a line break.
_SENTENCE_BREAK = re.compile(r"[.;!?](?=[\s$*])|[。！？；]|\n+")  # (CJK punctuation needs no space after it)


# What hedged_later reads of the text after the answer: a sentence starting near _MAX_CHARS is read to
# its number. Callers pass no more (a slice of the rest of a long response would be copied whole).
HEDGE_WINDOW = _MAX_CHARS + 100


def hedged_later(after: str, answer: str) -> bool:
    """Whether ``after``, the text right after the final ``answer`` (past its box or its line, at most
    HEDGE_WINDOW characters of it), offers another value in a sentence that follows (module rules)."""
    starts = [0, *(brk.end() for brk in _SENTENCE_BREAK.finditer(after, 0, _MAX_CHARS))]
    for start in starts:
        hedge = _HEDGE_OPENING.match(after, start)
        if hedge is not None and not _NEGATION.search(hedge.group(0)):
            value = (hedge.group("hedged") or hedge.group("offered")).rstrip(".,")
            if not restates(answer, value) and not rounds(value, answer):
                return True
    return False


def disowned_later(after: str, answer: str, before: str) -> bool:
    """Whether the sentence right after a numeric ``answer`` (past its box or its line: ``after``) is only a
    judgement calling it wrong: ``\\boxed{34}`` then ``Wait, that's wrong.``, ``Answer: 34`` then ``Hmm, this is
    not correct.`` (:func:`~dapo.rewards.disowned.disowning_end`). Only that sentence: a later "That's wrong."
    is about what the sentences between name (``Someone might answer 24. That's wrong.``). Not when what
    follows takes it back or states the answer's value again (``Wait, that's wrong. Let me recount: ... So
    34.``), nor when ``before``, the answer's line before it, is about what is wrong (``The false statement is
    \\boxed{3}.``)."""
    if value_of(answer) is None or speaks_of_wrongness(before):
        return False
    sentence = as_sentence(after)
    end = disowning_end(sentence)
    if end is None:
        return False
    rest = sentence[end : end + READ_AFTER_DISOWNING]
    return not any(restates(answer, number.group(0).rstrip(".,")) for number in re.finditer(_NUMBER, rest))


def rounds(number: str, answer: str) -> bool:
    """``3.46`` after ``2\\sqrt{3}``: the answer's value rounded to the places the number gives."""
    value = real_value(answer)
    return value is not None and "." in number and is_rounding_of(number, value)
