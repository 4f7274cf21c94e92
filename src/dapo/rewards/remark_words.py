"""The words the verifier's remark patterns share, written once and composed into each pattern.

Pattern fragments (regular-expression source, no groups that capture): the modules that read an
answer's remarks (:mod:`~dapo.rewards.approximations`, :mod:`~dapo.rewards.alternatives`,
:mod:`~dapo.rewards.number_forms`, :mod:`~dapo.rewards.hedges`, :mod:`~dapo.rewards.counts`,
:mod:`~dapo.rewards.boxes`) put their own openings, spacing and bounds around them.
"""

from __future__ import annotations

import re

# The words that say what comes before them again: "i.e.", "ie", "that is", and with them "equivalently",
# "which is", "which equals", "equals".
THAT_IS = r"i\.\s?e\.|ie|that\s+is"
RESTATING_WORDS = THAT_IS + r"|equivalently|which\s+is|which\s+equals|equals"
# The adverbs that may stand between an "or" and the value it offers: restating ones ("or equivalently", "or
# simply"), correcting ones ("or rather", "or else") and hedging ones ("or maybe", "or perhaps", "or possibly").
# None decides anything by itself: the value after it does. The box's own value again restates the answer
# ("\\boxed{34} or equivalently 34.0", "or rather 34.0"); another value is a second answer, whatever the adverb
# ("or maybe 35"; "or rather 35" too: a correction after the answer was stated leaves two values, wrong for both).
OR_ADVERBS = (r"equivalently|rather|even|simply|just|else|maybe|perhaps|possibly|probably|likely|alternatively"
              r"|instead|otherwise|conceivably|potentially")
# A name a value is given: "x", "a_{1}", "\\theta" (before an "=" in each pattern that reads one).
NAME = r"(?:[A-Za-z]|\\[A-Za-z]{2,12})(?:_\{?[A-Za-z0-9]{1,8}\}?)?"
# The words and signs that make what follows an approximation: "about", "\approx", "≈" (the bare
# form, after a value without brackets, :mod:`~dapo.rewards.hedges`; a remark in brackets also
# takes "ca" and "~", which outside them is LaTeX's unbreakable space).
APPROXIMATION_WORDS = (r"(?:about|approximately|approx|roughly|around|nearly|almost|circa{extra})(?![A-Za-z])\.?"
                       r"|close\s+to|\\(?:approx|sim|simeq|thickapprox)(?![A-Za-z])|[≈∼{signs}]")
# ... as they are, with no extra word and no sign ("about", "approx.", "roughly", "\\approx")
BARE_APPROXIMATION_WORDS = APPROXIMATION_WORDS.format(extra="", signs="")

# The words just before a number that negate or bound it, so it is not the answer: "not $34$", "isn't 34",
# "at least $34$", "more than $34$", "no fewer than 34", "up to $34$" (math_segments before a segment, boxes before a
# box, extract before an Answer line's last number), and the words after one that bound it: "34 at least".
BOUNDING_WORDS = (r"not|isn't|aren't|never|no|neither|nor|except|than|least|most|over|under|below|above|beyond"
                  r"|exceeds?|exceeding|up\s{1,3}to")
BOUNDING_WORDS_AFTER = r"at\s{1,3}(?:least|most)"

# The words that open a condition or a reason, whose values are the condition's, not the answer's: "(when n = 2)",
# "(since n is 35)", "or \\sqrt{2} if n is odd" (each reader adds its own: number_forms "as", "unless"; remark_math
# "using", "with"; alternatives "provided").
CONDITION_WORDS = r"since|because|when|if|for|where"

# The words that rule a value out, not offer it: "-3 is not valid, it is extraneous", "the other root is rejected"
# (:mod:`~dapo.rewards.later_hedges` after the answer, :mod:`~dapo.rewards.offered_values` in its remark).
REJECTING_WORDS = r"impossible|invalid|incorrect|wrong|extraneous|excluded?|rejected?"

# The Greek letters as LaTeX commands, each a value or a name of its own: "\\boxed{\\pi} or \\tau" offers another.
GREEK_LETTERS = (r"alpha|beta|gamma|delta|epsilon|varepsilon|zeta|eta|theta|vartheta|iota|kappa|lambda|mu|nu|xi|rho"
                 r"|sigma|tau|upsilon|phi|varphi|chi|psi|omega|Gamma|Delta|Theta|Lambda|Xi|Sigma|Phi|Psi|Omega")

# A number in words: "four", "thirty-five", "a hundred", "half", "twice", "a dozen" (after an "or" it offers a
# value: "\\boxed{3}, or four" hedges as "or 4" does).
_UNITS = ("zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen"
          "|seventeen|eighteen|nineteen")
_TENS = "twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety"
NUMBER_WORDS = (r"(?:" + _TENS + r")(?:[\s-]{1,2}(?:" + _UNITS + r"))?|" + _UNITS
                + r"|hundred|thousand|million|billion|half|twice|double|triple|dozen")
_UNIT_VALUES = {word: value for value, word in enumerate(_UNITS.split("|"))}
_TEN_VALUES = {word: 10 * (index + 2) for index, word in enumerate(_TENS.split("|"))}


def spelled_value(words: str) -> int | None:
    """The value of a number in words below a hundred (``four``, ``thirty-five``, ``thirty five``), or None
    (``a hundred``, ``half``: no value computed here); :func:`spelled_whole_value` reads it."""
    value = spelled_whole_value(_number_words(words))
    return value if value is not None and value < 100 else None


# A number in words below a hundred, standing alone (not inside a word or a hyphenated compound: "one-to-one")
_SPELLED_NUMBER = re.compile(r"(?<![A-Za-z\\-])(?:(?:" + _TENS + r")(?:[\s-]{1,2}(?:" + _UNITS + r"))?|" + _UNITS
                             + r")(?![A-Za-z-])", re.IGNORECASE)
# ... and a run of them with hundreds and scales, which may be one whole number ("one hundred and twenty")
_WHOLE_WORD = _TENS + "|" + _UNITS + "|hundred|thousand|million|billion"
_SPELLED_RUN = re.compile(r"(?<![A-Za-z\\-])(?:" + _WHOLE_WORD + r")(?:(?:[\s-]{1,2}|\s{1,2}and\s{1,2})"
                          r"(?:" + _WHOLE_WORD + r")(?![A-Za-z])){0,12}(?![A-Za-z-])", re.IGNORECASE)


def spelled_numbers_as_digits(text: str) -> str:
    """``text`` with its numbers in words written in digits (``maybe thirty-five`` -> ``maybe 35``, ``or one
    hundred thousand`` -> ``or 100000``), so that the rules that read a value after an answer read them too (a
    policy hedging in words was paid: ``\\boxed{34}. Maybe thirty-five.``). A run of words that is no one number
    has its numbers below a hundred written so (``two and three`` -> ``2 and 3``); one alone in brackets restates
    what they follow (``34 (thirty-four)`` -> ``34 (= 34)``, not a product). Not "one" or "zero" alone,
    mostly no value ("the next one", "no one", "zero remainder")."""
    def below_a_hundred(match: re.Match[str]) -> str:
        value = spelled_value(match.group(0))
        return match.group(0) if value is None or match.group(0).lower() in ("one", "zero") else str(value)

    def digits(match: re.Match[str]) -> str:
        value = spelled_whole_value(_number_words(match.group(0)))
        if value is None or match.group(0).lower() in ("one", "zero"):
            return _SPELLED_NUMBER.sub(below_a_hundred, match.group(0))
        alone = text[match.start() - 1 : match.start()] == "(" and text[match.end() : match.end() + 1] == ")"
        return f"= {value}" if alone else str(value)  # "34 (thirty-four)" restates 34; "34 (34)" is a product

    return _SPELLED_RUN.sub(digits, text)


_SCALES = {"thousand": 1000, "million": 10**6, "billion": 10**9}


def spelled_whole_value(words: list[str]) -> int | None:
    """The value of a whole number in lower-case words, one per item (``one hundred and twenty five``,
    ``two thousand three hundred``, ``eleven hundred``, ``zero``), or None where they are not one number
    (``two three``, ``two and three``, ``a hundred``, ``hundred``, ``one thousand two thousand``)."""
    total, group, last, scale_above = 0, 0, "start", float("inf")
    for word in words:
        unit, tens = _UNIT_VALUES.get(word), _TEN_VALUES.get(word)
        if word == "and" and last in ("hundred", "scale"):  # "one hundred and five"; not "two and three"
            last = "and"
        elif unit is not None and (last in ("start", "hundred", "scale", "and") or (last == "tens" and 0 < unit < 10)):
            group, last = group + unit, "unit"
        elif tens is not None and last in ("start", "hundred", "scale", "and"):
            group, last = group + tens, "tens"
        elif word == "hundred" and last in ("unit", "tens") and 0 < group < 100:
            group, last = group * 100, "hundred"
        elif word in _SCALES and last in ("unit", "tens", "hundred") and group > 0 and _SCALES[word] < scale_above:
            total, group, last, scale_above = total + group * _SCALES[word], 0, "scale", _SCALES[word]
        else:
            return None
    if last in ("start", "and") or ("zero" in words and len(words) > 1):
        return None
    return total + group


def _number_words(text: str) -> list[str]:
    return re.split(r"[\s-]+", text.lower().strip())


def spelled_answer_as_digits(answer: str) -> str:
    """``answer`` in digits when the whole of it is a number in words, maybe with its counted noun (``two`` ->
    ``2``, ``Thirty-five ways.`` -> ``35 ways``, ``one hundred and twenty`` -> ``120``, ``two thousand`` ->
    ``2000``; "one" and "zero" too: the answer holds nothing else), so that ``Answer: two`` is 2; ``answer``
    itself otherwise (``two or three``, ``the second``, ``a hundred``, ``two red apples``)."""
    text = answer.strip()
    text = text[:-1].rstrip() if text.endswith(".") else text
    if not text or len(text) > 120 or re.fullmatch(r"[A-Za-z\s-]+", text) is None:
        return answer
    if (value := spelled_whole_value(_number_words(text))) is not None:
        return str(value)
    head, _, noun = text.rpartition(" ")
    if not head or not 2 <= len(noun) <= 30 or "-" in noun or spelled_whole_value([noun.lower()]) is not None \
            or noun.lower() in ("and", "hundred", *_SCALES):
        return answer
    value = spelled_whole_value(_number_words(head))
    return answer if value is None else f"{value} {noun}"
