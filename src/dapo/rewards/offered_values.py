"""Values a remark after an answer offers as the answer instead, past its opening words.

The remark rules of :mod:`~dapo.rewards.number_forms` read a remark's opening (``(or 35)``,
``(maybe 35)``, ``(I also got 35)``); a policy paid for a second value later in it learns to write
one there. Each pattern here offers a value *as an answer*, in the phrasings models write:

- a modal whose subject is the answer (none, "it", "the answer"): ``(but it might be 35)``, ``(the answer
  may instead be 7)``, ``(I think, could be 35)``; not another quantity's, ``(x might be 2, giving 32)``,
  ``(John may be 5, so Mary is 11)``; and ``(some might say 35)``, ``(I'd also accept 35)``;
- a hedging adverb right before it: ``(I'm not sure, possibly 35)``, ``(but maybe also 3)``;
- another answer named so: ``(my other answer is 35)``, ``(an equally valid answer is 35)``, ``(my guess
  is 13)``, ``(a second method gave 35)``, ``(on a second try I got 35)``, ``(a close second is 35)``,
  ``(respectively 35)``;
- the value called possible or right: ``(not certain; 35 is possible)``, ``(I suspect 35 is correct)``;
- another case's value: ``(if n is even; 35 if n is odd)``, ``(for n = 5, or 35 for n = 6)``, ``(if order
  matters, 68)``, ``(otherwise 68)``, ``(if not, then 35)``, ``(in which case 35)``, ``(depending on
  interpretation, 35)``, ``(with zero included it is 35)``, ``(when n = 2; for n = 3 it is 35)``, ``(if a = 2;
  x = 6 if a = 3)``.

A value ends its clause (a bracket, a punctuation mark, the end, or a word that hedges on: ``though``,
``too``, ``or``, ``if``), so that a number of a description is none: ``(there might be 2 ways to see
this)``, ``(possibly from 2 of the 3 coins)``, ``(maybe in 2 more years)``. A remark that rejects a value
offers none (``(the other root, -2, is extraneous)``). Whether an offered value is the answer's own
(``(maybe 34.0)``) is the caller's to decide. Two differential reviews against written final lines
(250 and 338) found these phrasings; bounded regular expressions on at most 400 characters.
"""

from __future__ import annotations

import re

from dapo.rewards.remark_words import REJECTING_WORDS

_VALUE = r"\$?\s{0,2}(?P<value>[+\-\u2212]?[0-9][0-9,]*(?:\.[0-9]+)?(?:/[0-9]+)?)\s{0,2}\$?"
_NAMED = r"(?:[A-Za-z](?:_\{?[0-9A-Za-z]{1,3}\}?)?\s{0,2}=\s{0,2})?"  # "x = 35": an answer named as the question names it
_HEDGING_ON = r"though|instead|too|also|as\s+well|or|if|when|for"  # words after a value that hedge on


def _ends(words: str) -> str:
    """What may follow an offered value: a bracket, a punctuation mark, the end, or one of ``words``."""
    # (not "!": "4!" is a factorial; not a point or comma before a digit: the value read on, "0.18", "1,000")
    return r"(?=\s{0,3}(?:[);?]|[.,](?![0-9])|$|(?:" + words + r")(?![A-Za-z])))"


_ENDS = _ends(_HEDGING_ON)
_ENDS_OR_SAYS_HOW = _ends(_HEDGING_ON + "|with|using|by")  # "(I also got 35 with another method)"
# What a modal's subject may be for the value to be the answer's: nothing ("(could be 35)"), "it", "the answer";
# not another quantity of the problem ("(x might be 2, ...)", "(John may be 5, ...)", "(this might be 4!)")
_ANSWER_SUBJECT = r"(?:^|[(,;:]|(?<![A-Za-z])(?:but|though|although|and|or|so|it|answer|result|value|think|guess))\s{0,3}"
_ANOTHER = r"(?:other|another|second|backup|alternative|equally\s{1,3}valid|acceptable)"
_OFFERS = [re.compile(pattern, re.IGNORECASE) for pattern in (
    _ANSWER_SUBJECT + r"(?:might|could|may|would)(?:\s{1,3}(?:well|also|even|actually|just|instead))?\s{1,3}be\s{1,3}"
    + _NAMED + _VALUE + _ENDS,
    r"(?<![A-Za-z])(?:might|could|may|would|I'?d)(?:\s{1,3}also)?\s{1,3}(?:say|answer|accept|argue)\s{1,3}" + _VALUE + _ENDS,
    r"(?<![A-Za-z])(?:maybe|possibly|perhaps)(?:\s{1,3}(?:also|even|just))?[\s,]{1,3}" + _VALUE + _ENDS,
    r"(?<![A-Za-z])" + _ANOTHER + r"\s{1,3}(?:possible\s{1,3}|valid\s{1,3})?(?:answer|candidate|guess|possibility|option)"
    r"(?:\s{1,3}(?:is|was|would\s+be|could\s+be|might\s+be)|\s{0,3}[:=])?\s{1,3}" + _NAMED + _VALUE + _ENDS,
    r"(?<![A-Za-z])my\s{1,3}guess\s{1,3}(?:is|was|would\s+be)\s{1,3}" + _VALUE + _ENDS,
    r"(?<![A-Za-z])(?:second|another|other|different)\s{1,3}(?:method|approach|way|attempt|calculation)\s{1,3}"
    r"(?:gives|gave|yields|yielded|got)\s{1,3}" + _VALUE + _ENDS,
    r"(?<![A-Za-z])I\s{1,3}(?:also\s{1,3}|first\s{1,3}|originally\s{1,3}|initially\s{1,3}|then\s{1,3})?(?:got|found|had)\s{1,3}"
    + _VALUE + _ENDS_OR_SAYS_HOW,
    r"(?<![A-Za-z])respectively[\s,:]{1,3}" + _VALUE + _ENDS,
    r"(?<![A-Za-z])close\s{1,3}second(?:\s{1,3}(?:is|was)|\s{0,3}:)\s{1,3}" + _VALUE + _ENDS,
    r"(?:^|[(,;:]|\s(?:but|and|though|guess|think|suspect))\s{0,3}" + _VALUE + r"\s{1,3}(?:is|seems|would\s+be)\s{1,3}"
    r"(?:also\s{1,3}|equally\s{1,3})?(?:possible|plausible|defensible|likely|correct|right)(?![A-Za-z])",
    r"[;,]\s{0,3}(?:(?:or|but)\s{1,3})?" + _NAMED + _VALUE + r"\s{1,3}(?:if|for|when|otherwise)(?![A-Za-z])",
    r"(?:^|;)\s{0,3}(?:if|when|for|with|without|assuming|counting|including|excluding)(?![A-Za-z])[^;,()]{1,80}?\s"
    r"(?:it(?:'s|\s+is)|it\s+would\s+be|the\s+answer\s+is|we\s+get|(?:that\s+)?gives|becomes)\s{1,3}"
    + _NAMED + _VALUE + _ENDS,
    r"(?<![A-Za-z])(?:otherwise|else|in\s+which\s+case)[\s,]{1,3}(?:it(?:'s|\s+is)\s{1,3})?" + _VALUE + _ENDS,
    r"(?:^|;)\s{0,3}(?:if|when|unless|with|without|assuming|depending)(?![A-Za-z])[^;,()]{1,80}[,;:]\s{0,3}(?:then\s{1,3})?"
    r"(?:it(?:'s|\s+is)\s{1,3})?" + _VALUE + _ENDS,
)]
# ... but a remark that rejects the value offers nothing: "(the other root, -2, is extraneous)"
_REJECTS = re.compile(r"(?<![A-Za-z])(?:" + REJECTING_WORDS + r"|reject|exclud|discard|ruled?\s{1,3}out|not\s{1,3}(?:valid|"
                      r"allowed|possible|a\s{1,3}solution)|(?:does\s{1,3}not|doesn'?t|cannot|can'?t)\s{1,3}(?:satisfy|work|be)"
                      r"|fail|contradict|distractor|mistake)", re.IGNORECASE)


def offered_values(remark: str) -> list[str]:
    """The values ``remark`` offers as the answer instead (module rules), as written; empty for
    one that offers none or rejects what it names."""
    remark = remark[:400]
    if _REJECTS.search(remark):
        return []
    return [found.group("value") for pattern in _OFFERS for found in pattern.finditer(remark)]
