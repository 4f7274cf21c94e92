"""Values a remark after an answer offers as the answer instead, past its opening words.

The remark rules of :mod:`~dapo.rewards.number_forms` read a remark's opening (``(or 35)``,
``(maybe 35)``, ``(I also got 35)``); a policy paid for a second value later in it learns to write
one there. Each pattern here offers a value *as an answer*, in the phrasings models write:

- a modal before it: ``(but it might be 35)``, ``(though it may well be 35)``, ``(I think, could be 35)``;
- a hedging adverb right before it, the value ending its clause: ``(I'm not sure, possibly 35)``,
  ``(but maybe also 3)``; not ``(possibly from 2 of the 3 coins)``, ``(maybe in 2 more years)``;
- another answer named so: ``(my other answer is 35)``, ``(backup answer 35)``, ``(the other candidate was
  35)``, ``(a second method gave 35)``, ``(I also got 35 with another method)``;
- the value called possible: ``(not certain; 35 is possible)``, ``(35 is also plausible)``;
- another case's value: ``(if n is even; 35 if n is odd)``, ``(if order matters, 68)``, ``(otherwise 68)``,
  ``(if not, then 35)``, ``(in which case 35)``.

A value ends its clause (a bracket, a punctuation mark, the end, or a word that hedges on: ``though``,
``too``, ``or``, ``if``), so that a number of a description is none: ``(there might be 2 ways to see
this)``, ``(could take 2 hours)``, ``(probably at 3 pm)``. A remark that rejects a value offers none
(``(the other root, -2, is extraneous)``). Whether an offered value is the answer's own (``(maybe 34.0)``)
is the caller's to decide. Bounded regular expressions on at most 400 characters: safe in the parent.
"""

from __future__ import annotations

import re

_VALUE = r"\$?\s{0,2}(?P<value>[+\-\u2212]?[0-9][0-9,]*(?:\.[0-9]+)?(?:/[0-9]+)?)\s{0,2}\$?"
_NAMED = r"(?:[A-Za-z](?:_\{?[0-9A-Za-z]{1,3}\}?)?\s{0,2}=\s{0,2})?"  # "x = 35": an answer named as the question names it
_HEDGING_ON = r"though|instead|too|also|as\s+well|or|if|when|for"  # words after a value that hedge on


def _ends(words: str) -> str:
    """What may follow an offered value: a bracket, a punctuation mark, the end, or one of ``words``."""
    return r"(?=\s{0,3}(?:[),;.!?]|$|(?:" + words + r")(?![A-Za-z])))"


_ENDS = _ends(_HEDGING_ON)
_ENDS_OR_SAYS_HOW = _ends(_HEDGING_ON + "|with|using|by")  # "(I also got 35 with another method)"
_OFFERS = [re.compile(pattern, re.IGNORECASE) for pattern in (
    r"(?<![A-Za-z])(?:might|could|may)(?:\s{1,3}(?:well|also|even|actually|just))?\s{1,3}be\s{1,3}" + _NAMED + _VALUE + _ENDS,
    r"(?<![A-Za-z])(?:maybe|possibly|perhaps)(?:\s{1,3}(?:also|even|just))?[\s,]{1,3}" + _VALUE + _ENDS,
    r"(?<![A-Za-z])(?:other|another|second|backup|alternative)\s{1,3}(?:answer|candidate|guess|possibility|option|value|result)"
    r"(?:\s{1,3}(?:is|was|would\s+be|could\s+be|might\s+be)|\s{0,3}[:=])?\s{1,3}" + _NAMED + _VALUE + _ENDS,
    r"(?<![A-Za-z])(?:second|another|other|different)\s{1,3}(?:method|approach|way|attempt|calculation)\s{1,3}"
    r"(?:gives|gave|yields|yielded|got)\s{1,3}" + _VALUE + _ENDS,
    r"(?<![A-Za-z])(?:also|first|originally|initially)\s{1,3}(?:got|found|had)\s{1,3}" + _VALUE + _ENDS_OR_SAYS_HOW,
    r"(?<![A-Za-z])close\s{1,3}second(?:\s{1,3}(?:is|was)|\s{0,3}:)\s{1,3}" + _VALUE + _ENDS,
    r"(?:^|[(,;:]|\s(?:but|and|though|guess|think))\s{0,3}" + _VALUE + r"\s{1,3}(?:is|seems|would\s+be)\s{1,3}(?:also\s{1,3}|equally\s{1,3})?"
    r"(?:possible|plausible|defensible|likely)(?![A-Za-z])",
    r"[;,]\s{0,3}" + _VALUE + r"\s{1,3}(?:if|for|when|otherwise)(?![A-Za-z])",
    r"(?<![A-Za-z])(?:otherwise|else|in\s+which\s+case)[\s,]{1,3}(?:it(?:'s|\s+is)\s{1,3})?" + _VALUE + _ENDS,
    r"^\s{0,3}(?:if|when|unless)(?![A-Za-z])[^;,()]{1,80}[,;:]\s{0,3}(?:then\s{1,3})?(?:it(?:'s|\s+is)\s{1,3})?"
    + _VALUE + _ENDS,
)]
# ... but a remark that rejects the value offers nothing: "(the other root, -2, is extraneous)"
_REJECTS = re.compile(r"(?<![A-Za-z])(?:reject|extraneous|invalid|discard|exclud|ruled?\s{1,3}out|not\s{1,3}(?:valid|allowed|"
                      r"possible|a\s{1,3}solution)|(?:does\s{1,3}not|doesn'?t|cannot|can'?t)\s{1,3}(?:satisfy|work|be)|fail"
                      r"|impossible|wrong|incorrect|contradict|distractor|mistake)", re.IGNORECASE)


def offered_values(remark: str) -> list[str]:
    """The values ``remark`` offers as the answer instead (module rules), as written; empty for
    one that offers none or rejects what it names."""
    remark = remark[:400]
    if _REJECTS.search(remark):
        return []
    return [found.group("value") for pattern in _OFFERS for found in pattern.finditer(remark)]
