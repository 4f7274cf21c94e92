"""Answer extraction: find the model's final answer behind an explicit anchor.

Two anchors, as in the DAPO reference and the MATH convention:
- ``answer``: the text after the last ``Answer:`` (DAPO's prompt asks for a last line
  ``Answer: $Answer``; ``**Answer:**`` and ``Final Answer:`` count too); the answer is the rest of
  that line, or the next non-empty line when the anchor ends its line. A display block opened
  on that line (``$$`` or ``\\[``) runs to its closing delimiter. On the line: a chat-template
  token (``<|im_end|>``) ends it; ``I hope it is correct`` (the Minerva format "The final answer
  is X. I hope it is correct.") ends it; a ``\\boxed{}`` on it wins over everything else; a
  sentence ``... is X`` / ``... are X`` gives X (when X states a number or math, or the words
  before it do not); several ``$...$`` segments are several candidates, unless together they
  state one inequality disjunction (``$x<-1$ or $x>2$``, see :mod:`dapo.rewards.inequalities`).
- ``boxed``: the content of the last brace-balanced ``\\boxed{...}`` (or ``\\fbox{...}``).
  Boxes on the last box's line that are chained to it by list separators (``,`` ``;`` ``and``
  ``or``, or only blank space, ``\\quad`` and math delimiters between them) are the *items*
  of a multi-box answer (``\\boxed{1}, \\boxed{2}``); the verifier joins them into a set only
  when the ground truth is itself a list or set, otherwise different boxes on one line are
  several candidates (a hedge).

There is no anchor-less fallback ("the last number in the text"): a response that never states
an answer is wrong. Every function here is plain string scanning with bounded regex quantifiers,
linear in the input length, so it cannot hang on hostile text (the scorer runs it in the parent
process for that reason).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from dapo.rewards.equivalence import (
    SCALE_WORDS,
    starts_with_scale_word,
    vote_key,
)
from dapo.rewards.inequalities import is_inequality_disjunction
from dapo.rewards.unicode_math import unicode_math_to_latex

# "Answer:", "**Answer:**", "Final answer :", full-width colon; quantifier bounded so a long run
# of spaces or stars cannot make the match backtrack quadratically.
_ANSWER_ANCHOR = re.compile(r"answer[ \t*]{0,8}[:：]", re.IGNORECASE)
# What may precede an anchor that states the answer on its own line (see _opens_its_line).
# A math segment that only wraps words ("$\text{square units}$").
_WORDS_SEGMENT = re.compile(r"\$\s{0,3}\\(?:text|textrm|mathrm|mbox)\{\s{0,3}([A-Za-z][A-Za-z .]{0,40})\}\s{0,3}\$")
_SENTENCE_END = re.compile(r"[.!?。](?:\s|\$)")
_LINE_OPENING = re.compile(r"[\s#*>\-]{0,12}(?:(?:[A-Za-z]{1,12}[ ,]{1,3}){0,3}final[ \t]{1,3})?", re.IGNORECASE)
_BOX_COMMANDS = ("\\boxed", "\\fbox")
# Words that offer several candidates ("34 or 35", "either 3 or 4").
_HEDGE = re.compile(r"(?<![a-z\\])(?:or|either)(?![a-z])|\\lor(?![a-z])", re.IGNORECASE)
# a number or math just before the last box, joined to it by "or": "$35$ or \\boxed{34}"
_ALTERNATIVE_BEFORE = re.compile(r"[0-9$})] {0,3}(?:or|\\lor) {0,3}$", re.IGNORECASE)
_HOPE = re.compile(r"i hope it is correct", re.IGNORECASE)
_CONTINUES_MATH = frozenset("\\0123456789^_({")  # what after a $...$ segment belongs to its answer
# "The largest $n$ is 34": the answer follows the last copula outside math.
_COPULA = re.compile(r"(?<![A-Za-z\\])(?:is|are|equals)(?![A-Za-z])", re.IGNORECASE)
_RELATIVE_WORDS = ("which", "what")
_RELATIVE_CLAUSE = re.compile(r",\s{0,3}(?:which|where|since|because)(?![A-Za-z])", re.IGNORECASE)
# Between two chained boxes: spacing and math delimiters, dropped before looking for a separator.
_GAP_NOISE = re.compile(r"\\(?:quad|qquad|[,;: ()\[\]])|[\s$.]")
_LIST_SEPARATOR = re.compile(r"[,;]|(?<![A-Za-z])(?:and|or)(?![A-Za-z])", re.IGNORECASE)
_GLUED_COMMA = re.compile(r",\\!\s{0,3}")
_MAX_LINE_CHARS = 5000  # an "answer line" longer than this is not a final answer
_MAX_BOXES_PER_LINE = 16  # boxes compared when looking for several candidates on one line
_MAX_GAP_CHARS = 80  # boxes further apart than this are not one multi-box answer
EXTRACTORS = ("answer", "boxed", "any")


@dataclass(frozen=True)
class Extracted:
    """A final-answer candidate: its cleaned text and how many answers the model offered.

    ``items``: the separate answers when several were stated (chained boxes, or several
    ``$...$`` segments on the answer line); empty for a single answer.
    """

    text: str
    candidates: int = 1
    items: tuple[str, ...] = ()

    @property
    def hedged(self) -> bool:
        """True when the final answer offers several candidates ("34 or 35"): scored wrong."""
        return self.candidates > 1 or _HEDGE.search(self.text) is not None

    def in_latex(self) -> Extracted:
        """This answer with its Unicode mathematics as LaTeX (``34²`` -> ``34^{2}``)."""
        return replace(self, text=unicode_math_to_latex(self.text),
                       items=tuple(unicode_math_to_latex(item) for item in self.items))


def resolve_extractor(extractor: str, data_source: str | None) -> str:
    """Map the configured extractor to "answer", "boxed" or "any" for one row.

    ``auto`` rule: a data source whose name contains "dapo" (DAPO-Math-17K and the AIME files
    published with it, data_source "math_dapo") or begins with "aime" uses the ``Answer:`` line its
    prompt asks for, as verl routes both to its math_dapo scorer; any other source takes whichever
    anchor the response states last (``any``).
    """
    if extractor in ("answer", "boxed", "any"):
        return extractor
    if extractor != "auto":
        raise ValueError(f"extractor={extractor!r} is not one of ['answer', 'boxed', 'auto']")
    source = (data_source or "").lower()
    return "answer" if "dapo" in source or source.startswith("aime") else "any"


def extract_answer(text: str, extractor: str) -> Extracted | None:
    """Return the final answer behind the last anchor of the chosen kind, or None if none.

    ``extractor`` is "answer", "boxed" or "any" (the later of the two anchors wins; after a box,
    only an ``Answer:`` that opens its line or sentence counts, see :func:`_opens_its_line`).
    """
    if extractor == "answer":
        return _from_answer_line(text)
    if extractor == "boxed":
        return _from_last_box(text)
    if extractor == "any":
        anchor = _last_answer_anchor(text)
        box_at = _last_box_start(text)
        if anchor is None:
            return _from_last_box(text)
        # A box on the answer line itself ("Answer: \boxed{34}") is unwrapped by the line path;
        # a box on a later line is the answer stated last.
        if box_at >= _answer_line_end(text, anchor):
            return _from_last_box(text)
        # After a box, "answer:" in prose ("To verify the answer: plug n = 3 in") states no
        # answer; an anchor that opens its line ("Final Answer: 35") corrects the box.
        if box_at >= 0 and not _opens_its_line(text, anchor):
            return _from_last_box(text)
        return _from_answer_line(text) or (_from_last_box(text) if box_at >= 0 else None)
    raise ValueError(f"extractor={extractor!r} is not one of {list(EXTRACTORS)}")


def _opens_its_line(text: str, anchor: re.Match[str]) -> bool:
    """Whether the anchor starts its line or sentence, after markup and a few words ending in
    "final" (``**Answer:**``, ``## Final Answer:``, ``... = 10,455. Final Answer:``,
    ``Therefore, the final answer:``); not ``To verify the answer:``."""
    line_start = text.rfind("\n", 0, anchor.start()) + 1
    before = text[max(line_start, anchor.start() - 80) : anchor.start()]
    sentence_ends = list(_SENTENCE_END.finditer(before))
    opening = before[sentence_ends[-1].end() :] if sentence_ends else before
    return (bool(sentence_ends) or anchor.start() - line_start <= 80) and _LINE_OPENING.fullmatch(opening) is not None


def _last_answer_anchor(text: str) -> re.Match[str] | None:
    last = None
    for last in _ANSWER_ANCHOR.finditer(text):  # noqa: B007 - we want the last match
        pass
    return last


def _answer_line_start(text: str, anchor: re.Match[str]) -> int:
    """Where the answer starts: after the anchor, skipping blank space, empty lines and the
    closing ``**`` of a bold ``**Answer:**``."""
    at = anchor.end()
    while at < len(text) and (text[at].isspace() or text[at] == "*"):
        at += 1
    return at


def _answer_line_end(text: str, anchor: re.Match[str]) -> int:
    """End of the answer line; a display block opened on it (``$$``, ``\\[``) runs to its close."""
    start = _answer_line_start(text, anchor)
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    line = text[start:end]
    close = None
    if line.count("$$") % 2 == 1:
        close = "$$"
    elif line.rfind("\\[") > line.rfind("\\]"):
        close = "\\]"
    if close is not None:
        at = text.find(close, end, start + _MAX_LINE_CHARS)
        if at >= 0:
            return at + len(close)
    return end


def _from_answer_line(text: str) -> Extracted | None:
    anchor = _last_answer_anchor(text)
    if anchor is None:
        return None
    start = _answer_line_start(text, anchor)
    line = text[start : _answer_line_end(text, anchor)][:_MAX_LINE_CHARS]
    return _clean_line(line.replace("\n", " "))


def _clean_line(line: str) -> Extracted | None:
    special = line.find("<|")  # a leaked chat-template token ends the answer
    if special >= 0:
        line = line[:special]
    hope = _HOPE.search(line)
    if hope is not None:
        line = line[: hope.start()]
    line = line.replace("**", "").replace("`", "").strip()
    if any(box in line for box in _BOX_COMMANDS):
        boxed = _from_last_box(line)
        if boxed is not None:
            # "$34$ or $\boxed{35}$": a hedge outside the boxes still offers two answers.
            outside = _strip_boxes(line)
            if boxed.candidates == 1 and _HEDGE.search(outside):
                return Extracted(boxed.text, candidates=2, items=boxed.items)
            return boxed
    line = line.replace("$$", "$").replace("\\(", "$").replace("\\)", "$")
    line = _EQUATED_SEGMENTS.sub(" = ", line)  # "$a+b$ = $34$" is one equation, not two answers
    line = _drop_remark_after_math(_after_copula(line.replace("\\[", "$").replace("\\]", "$")))
    segments = _math_segments(line)
    if len(segments) > 1 and is_inequality_disjunction(whole := clean_answer(line)):
        return Extracted(whole)  # "$x<-1$ or $x>2$": one set of reals, not two answers
    # "$34$ $\text{square units}$": words in math delimiters are words after the answer
    if len(segments) > 1 and (as_words := _WORDS_SEGMENT.sub(r" \1 ", line)) != line and _math_segments(as_words):
        line, segments = as_words, _math_segments(as_words)
    if len(segments) > 1:
        items = tuple(clean_answer(s) for s in segments)
        return Extracted(" ; ".join(items), candidates=len(segments), items=items)
    if len(segments) == 1:
        line = _single_segment_answer(line, segments[0])
        if line is None:
            return Extracted(clean_answer(segments[0]), candidates=2)
    answer = clean_answer(line)
    return Extracted(answer) if answer else None


def _after_copula(line: str) -> str:
    """``The largest $n$ is 34`` -> ``34``: the tail after the last copula outside ``$...$``.

    Taken when the tail states a number or math, or when the words before the copula do not
    (``The winner is Evelyn``); ``$x = 5$ is the only solution`` keeps the whole line. A
    relative clause describes the answer and is skipped: ``$x^2$, which is even`` keeps
    ``x^2``; ``34, which is even`` after a copula is cut to ``34``.
    """
    last = None
    dollars = 0
    at = 0
    for match in _COPULA.finditer(line):
        dollars += line.count("$", at, match.start())
        at = match.start()
        relative = line[max(0, at - 8) : at].rstrip().lower().endswith(_RELATIVE_WORDS)
        if dollars % 2 == 0 and not relative:
            last = match
    if last is None:  # "540, which is even": a relative clause without a number describes the answer
        head, *clause = _RELATIVE_CLAUSE.split(line, maxsplit=1)
        return head.strip() if clause and _states_math(head) and not any(c.isdigit() for c in clause[0]) else line
    head, tail = line[: last.start()], line[last.end() :].strip(" :")
    tail = _RELATIVE_CLAUSE.split(tail, maxsplit=1)[0].strip()
    if tail and (_states_math(tail) or not _states_math(head)):
        return tail
    return line


# Two $...$ segments joined by an equals sign: "$a+b$ = $34$".
_EQUATED_SEGMENTS = re.compile(r"(?<!\\)\$ {0,3}= {0,3}\$")
# A parenthesis closing the line right after a $...$ segment: "$540$ (since $n$ is even)".
_REMARK_AFTER_MATH = re.compile(r"(?<=\$) {0,3}\(([^()]{0,400})\)\s*$")


def _drop_remark_after_math(line: str) -> str:
    """``$540$ (since $n$ is even)`` -> ``$540$``: a remark in words after the answer's math, whose
    own math states no number (``$34$ (but $35$ if $n$ is odd)`` offers a second answer) and which
    does not scale it (``(in thousands of $x$)``)."""
    remark = _REMARK_AFTER_MATH.search(line)
    if remark is None or "$" not in remark.group(1):
        return line
    inside = remark.group(1)
    words = "".join(inside.replace("\\$", "").split("$")[0::2])
    if (re.search(r"[A-Za-z]{2}", words) and not _HEDGE.search(words)
            and not any(c.isdigit() for segment in _math_segments(inside) for c in segment)
            and not starts_with_scale_word(inside)):
        return line[: remark.start()]
    return line


def _states_math(text: str) -> bool:
    return "$" in text or "\\" in text or any(char.isdigit() for char in text)


def _single_segment_answer(line: str, segment: str) -> str | None:
    """The answer on a line with one ``$...$``: the segment (``the value $34$ degrees``), or the
    segment and what continues it (``$2$\\sqrt{2}``, ``$34$ thousand``, ``$34$ (mod 10)``: the
    verifier decides whether that is still the number); None when the text around it offers
    another answer (``$34$ or 35``), as for boxes."""
    parts = line.replace("\\$", "").split("$")
    after = "".join(parts[2:]).strip()
    if _HEDGE.search(parts[0] + " " + after):
        return None
    first_word = re.match(r"[A-Za-z]*", after).group(0).lower()  # type: ignore[union-attr]
    if after[:1] in _CONTINUES_MATH or first_word in SCALE_WORDS:
        return f"{segment} {after}"
    return segment


def _math_segments(line: str) -> list[str]:
    """Contents of the ``$...$`` segments of a line (an escaped ``\\$`` is a dollar sign)."""
    parts = line.replace("\\$", "").split("$")
    return [parts[i] for i in range(1, len(parts) - 1, 2)]


def _last_box_start(text: str) -> int:
    return max(text.rfind(box) for box in _BOX_COMMANDS)


def _from_last_box(text: str) -> Extracted | None:
    start = _last_box_start(text)
    if start < 0:
        return None
    content = _box_content(text, start)
    if content is None or not content.strip():
        return None
    answer = clean_answer(content)
    line_start = text.rfind("\n", 0, start) + 1
    boxes = _boxes_in(text[line_start:start])
    # Several boxes with different contents on the final line offer several candidates.
    candidates = 1 + len({vote_key(clean_answer(c)) for _, _, c in boxes} - {vote_key(answer)})  # 34 and 34.0: one
    if _ALTERNATIVE_BEFORE.search(text[line_start:start]):  # "$35$ or \boxed{34}": an answer outside the box
        candidates = max(candidates, 2)
    items = _chained_items(text[line_start:start], boxes, answer)
    return Extracted(answer, candidates=candidates, items=items)


def _chained_items(line: str, boxes: list[tuple[int, int, str]], last: str) -> tuple[str, ...]:
    """The boxes chained to the last one by list separators, in order; () for a lone box."""
    items = [last]
    gap_end = len(line)
    for box_start, box_end, content in reversed(boxes):
        gap = line[box_end:gap_end]
        if len(gap) > _MAX_GAP_CHARS:
            break
        bare = _GAP_NOISE.sub(" ", gap).strip()
        if bare and not _LIST_SEPARATOR.search(bare):
            break
        items.append(clean_answer(content))
        gap_end = box_start
    return tuple(reversed(items)) if len(items) > 1 else ()


def _boxes_in(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of the first few boxes, in order: capped, so nested boxes cannot
    make this quadratic. ``end`` is just past the closing brace."""
    boxes: list[tuple[int, int, str]] = []
    tried = 0  # unbalanced boxes count too: each try scans to the end of the text
    for box in _BOX_COMMANDS:
        at = text.find(box)
        while at >= 0 and tried < _MAX_BOXES_PER_LINE:
            tried += 1
            if (span := _box_span(text, at)) is not None:
                boxes.append((at, span[1], span[0]))
            at = text.find(box, at + len(box))
    boxes.sort()
    # A box nested in another (\boxed{\boxed{1}}) is part of its parent, not a separate answer.
    outer: list[tuple[int, int, str]] = []
    for item in boxes:
        if not outer or item[0] >= outer[-1][1]:
            outer.append(item)
    return outer


def _strip_boxes(line: str) -> str:
    """The line without its (first few) boxes."""
    kept, at = [], 0
    for start, end, _ in _boxes_in(line):
        kept.append(line[at:start])
        at = end
    kept.append(line[at:])
    return " ".join(kept)


def _box_content(text: str, start: int) -> str | None:
    """Content of the box command at ``start`` (:func:`_box_span`)."""
    span = _box_span(text, start)
    return span[0] if span is not None else None


def _box_span(text: str, start: int) -> tuple[str, int] | None:
    """(content, end just past it) of the box command at ``start``: brace-balanced (``\\boxed{34}``,
    and ``\\boxed {34}``, the same box to TeX, which skips the spaces), or one token (``\\boxed 5``);
    None where no answer is stated (nothing after it, or a box that never closes)."""
    at = start + (6 if text.startswith("\\boxed", start) else 5)
    brace = at
    while brace < len(text) and text[brace] == " ":
        brace += 1
    if brace < len(text) and text[brace] == "{":
        depth = 0
        for i in range(brace, len(text)):
            char = text[i]
            if char == "{" and text[i - 1] != "\\":
                depth += 1
            elif char == "}" and text[i - 1] != "\\":
                depth -= 1
                if depth == 0:
                    return text[brace + 1 : i], i + 1
        return None  # unbalanced: the box never closes, so no answer was stated
    token = text[brace:].split(maxsplit=1)
    if brace == at or not token:  # \boxedx is another command; nothing after the spaces
        return None
    return token[0].rstrip("$"), brace + len(token[0])


def clean_answer(answer: str) -> str:
    """Strip presentation around an answer: ``$``, bold, ``\\text{}`` wrapper, trailing period."""
    answer = answer.replace("\\$", "").replace("$", "").replace("**", "").strip()
    answer = _GLUED_COMMA.sub(",", answer)  # 11,\! 111 is one number; "11, 111" is a list
    answer = answer.replace("\\displaystyle", "").replace("\\!", "").strip()
    while answer.endswith((".", "。", "\\.", ",")) and not answer.endswith("..."):
        answer = answer[:-1].rstrip()
    if answer.startswith("\\text{") and answer.endswith("}") and answer.count("{") == 1:
        answer = answer[6:-1].strip()
    return answer


def bound_response(response: str, max_chars: int) -> str:
    """Keep the tail: the final answer is at the end, and parsing cost must stay bounded."""
    return response if len(response) <= max_chars else response[-max_chars:]
