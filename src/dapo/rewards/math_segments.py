"""An answer line's ``$...$`` math segments: which of them, and what around them, is the answer.

:mod:`dapo.rewards.extract` reads the ``Answer:`` line; where it holds math segments it asks here
for the answer of a lone segment (:func:`single_segment_answer`: its sign, what continues its math,
a remark that restates or changes it), the items of several (:func:`segment_items`,
:func:`segments_qualified`), and drops a remark in words after the math
(:func:`drop_remark_after_math`).
"""

from __future__ import annotations

import re

from dapo.rewards.alternatives import alternative_is_the_value
from dapo.rewards.answer_lists import answer_items
from dapo.rewards.answer_text import (
    HEDGE,
    clean_answer,
    dollar_parts,
    math_segments,
    outside_math,
    sign_before,
    signed,
)
from dapo.rewards.boxes import BOUNDED_AFTER, changed_after, offers_another_before
from dapo.rewards.disowned import disowned_after
from dapo.rewards.hedges import bare_remark_changes, list_tail_changes, restates_list
from dapo.rewards.number_forms import (
    remark_changes_the_number,
    restates,
    starts_with_scale_word,
    value_of,
)
from dapo.rewards.remark_math import remark_about_the_answer
from dapo.rewards.remark_words import BOUNDING_WORDS
from dapo.rewards.restatements import after_its_noun
from dapo.rewards.unit_suffix import SCALE_WORDS
from dapo.rewards.units import unit_remark_changes

# Words just before a number that negate or bound it, so it is not the answer (remark_words.BOUNDING_WORDS).
QUALIFIER = re.compile(r"(?<![A-Za-z])(?:" + BOUNDING_WORDS + r")[\s$]{0,4}$", re.IGNORECASE)
_CONTINUES_MATH = frozenset("\\0123456789^_({")  # what after a $...$ segment belongs to its answer
# Two $...$ segments joined by an equals sign: "$a+b$ = $34$".
EQUATED_SEGMENTS = re.compile(r"(?<!\\)\$ {0,3}= {0,3}\$")
# What follows a lone $...$ segment when it is one parenthesis: "$\\frac13$ (or about 0.33)".
_WHOLE_REMARK = re.compile(r"\(([^()]{0,400})\)")
# A parenthesis closing the line right after a $...$ segment: "$540$ (since $n$ is even)".
_REMARK_AFTER_MATH = re.compile(r"(?<=\$) {0,3}\(([^()]{0,400})\)\s*$")


def drop_remark_after_math(line: str) -> str:
    """``$540$ (since $n$ is even)`` -> ``$540$``: a remark in words after the answer's math, whose
    own math states no number (``$34$ (but $35$ if $n$ is odd)`` offers a second answer) and which
    does not scale it (``(in thousands of $x$)``); a condition, an "or", a "not" or a value ruled out whose math
    is no second answer, read as without the ``$`` (``$34$ (when $n = 2$)``, ``$2$ ($-3$ is extraneous)``; ``$34$
    (if $n$ is odd; $35$ otherwise)`` offers one: :func:`~dapo.rewards.remark_math.remark_about_the_answer`); or an
    alternative or restatement whose computed value is the answer's (``$2$ (or $\\sqrt{4}$)``; ``$2$ (which is
    $\\pi$)`` is kept: two answers, :mod:`~dapo.rewards.alternatives`)."""
    remark = _REMARK_AFTER_MATH.search(line)
    if remark is None or "$" not in remark.group(1):
        return line
    inside = remark.group(1)
    segment = (math_segments(line[: remark.start()]) or [""])[-1]  # "$2$ (or $\\sqrt{4}$)": a form computed decides
    same = alternative_is_the_value(inside.replace("$", " "), segment, value_of(segment)) if segment else None
    if same is not None:
        return line[: remark.start()] if same else line
    words = outside_math(inside)
    if (re.search(r"[A-Za-z]{2}", words) and not HEDGE.search(words)
            and not any(c.isdigit() for segment in math_segments(inside) for c in segment)
            and not starts_with_scale_word(inside)):
        return line[: remark.start()]
    if segment and remark_about_the_answer(inside) and not remark_changes_the_number(inside.replace("$", ""), segment):
        return line[: remark.start()]  # "$34$ (when $n = 2$)", "$2$ ($-3$ is extraneous)": read as without the "$"
    return line


def single_segment_answer(line: str, segment: str) -> str | None:
    """The answer on a line with one ``$...$``: the segment (``the value $34$ degrees``), with a
    sign written before it (``-$34$``), or the segment and what continues it (``$2$\\sqrt{2}``,
    ``$34$ thousand``, ``$34$ (mod 10)``, a glued ``$34$K`` read as ``34K``: the verifier decides
    whether that is still the number); None when the text around it offers another answer
    (``$34$ or 35``, ``$34$ (or 35)``), as for boxes, or the words before it negate or bound it
    (``not $34$``, ``at least $34$``). A closing remark that only restates the segment's value, its
    "or" included, offers none, in brackets or not, as after a box (``$\\frac13$ (or about 0.33)``,
    ``$\\frac13$, or about 0.33``, ``$34$ (or 34.0)``); an alternative or restatement whose computed value
    is another offers one (``$2$ alternatively \\sqrt{2}``, :mod:`~dapo.rewards.alternatives`). A unit or
    counted noun before such a remark is the value's (``$34$ ways, that is, 35`` offers 35:
    :func:`~dapo.rewards.restatements.after_its_noun`; ``$5$ cm, i.e. 5 mm`` another quantity: :func:`~dapo.rewards.units.unit_remark_changes`)."""
    parts = dollar_parts(line)
    after = after_its_noun("".join(parts[2:])).strip()
    segment = signed(segment.strip(), sign_before(parts[0]))
    remark = _WHOLE_REMARK.fullmatch(after)
    tail = remark.group(1) if remark is not None else after.lstrip(" \t.,;")
    items = answer_items(segment)
    converted = unit_remark_changes("".join(parts[2:]), segment) if len(items) == 1 else None  # "$5$ cm, i.e. 50 mm"
    restated = converted is False or restates(segment, tail) or (len(items) > 1 and restates_list(items, tail))
    bare = converted or (None if remark is not None or restated else bare_remark_changes(segment, tail))  # "\approx 0.5"
    if bare is None and not restated and tail and len(items) == 1:  # "$2$ alternatively \sqrt{2}"
        bare = alternative_is_the_value(tail, segment, value_of(segment)) is False or None
    if len(items) > 1 and remark is None and not restated and list_tail_changes(items, tail):
        bare = True  # "$5, 34$ \approx 34": the list's values are 5 and 34
    if (HEDGE.search(parts[0] + " " + ("" if restated else after)) or QUALIFIER.search(parts[0][-40:]) or bare
            or BOUNDED_AFTER.match(after) or (disowned_after(after, parts[0]) and value_of(segment) is not None)):
        return None
    if bare is False:  # "$\frac13$, i.e. about 0.33", "$\sqrt2$ = 1.414": its value, rounded
        return segment
    first_word = re.match(r"[A-Za-z]*", after).group(0).lower()  # type: ignore[union-attr]
    if first_word == "k" and parts[2][:1] in "Kk":  # "$34$K" reads 34K; "$34$ K" is kelvin
        return f"{segment}{after}"
    if after[:1] in _CONTINUES_MATH or first_word in SCALE_WORDS:
        return f"{segment} {after}"
    return segment


def segment_items(line: str) -> tuple[str, ...]:
    """The answers of a line with several ``$...$`` segments, each with what continues it as a lone
    segment's does (:func:`single_segment_answer`): a K glued after it or a scale word (``$34$K,
    $5$K`` states 34K and 5K; ``$34$ thousand, $5$ thousand`` is not 34 and 5)."""
    parts = dollar_parts(line)
    items = []
    for index in range(1, len(parts) - 1, 2):
        item, after = clean_answer(parts[index]), parts[index + 1]
        word = re.match(r"\s{0,3}([A-Za-z]+)", after)
        if word is not None and word.group(1) in ("K", "k") and word.start(1) == 0:
            item += after[0]  # "$34$K"; "$300$ K" is kelvin
        elif word is not None and word.group(1).lower() in SCALE_WORDS:
            item += f" {word.group(1)}"
        items.append(item)
    return tuple(items)


def segments_qualified(line: str, items: tuple[str, ...]) -> bool:
    """Whether the text around a line's several ``$...$`` segments (a list: ``items``) offers another
    answer or continues the last one's math, as after a box (:func:`~dapo.rewards.boxes.changed_after`):
    ``$34$, $5$ (or 35)``, ``$34$, $5$, or 35``, ``35 or $34$, $5$``; not ``$1$, $2$ (2 solutions)``."""
    parts = dollar_parts(line)
    if len(parts) % 2 == 0:  # an unclosed "$": no text after the last segment
        return False
    tail = parts[-1][1:] if parts[-1][:1] in ("K", "k") and items[-1][-1:] in ("K", "k") else parts[-1]
    return offers_another_before(parts[0]) or changed_after(tail, items[-1], list(items))
