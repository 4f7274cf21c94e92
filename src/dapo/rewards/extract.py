"""Answer extraction: find the model's final answer behind an explicit anchor.

Two anchors, as in the DAPO reference and the MATH convention:
- ``answer``: the text after the last ``Answer:`` (DAPO's prompt asks for a last line
  ``Answer: $Answer``); the answer is the rest of that line, or the next non-empty line when
  the anchor ends its line.
- ``boxed``: the content of the last brace-balanced ``\\boxed{...}`` (or ``\\fbox{...}``).

There is no anchor-less fallback ("the last number in the text"): a response that never states
an answer is wrong. Every function here is plain string scanning with bounded regex quantifiers,
linear in the input length, so it cannot hang on hostile text (the scorer runs it in the parent
process for that reason).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# "Answer:", "**Answer:**", "Final answer :", full-width colon; quantifier bounded so a long run
# of spaces or stars cannot make the match backtrack quadratically.
_ANSWER_ANCHOR = re.compile(r"answer[ \t*]{0,8}[:：]", re.IGNORECASE)
_BOX_COMMANDS = ("\\boxed", "\\fbox")
# Words that offer several candidates ("34 or 35", "either 3 or 4").
_HEDGE = re.compile(r"(?<![a-z\\])(?:or|either)(?![a-z])|\\lor(?![a-z])", re.IGNORECASE)
_MAX_LINE_CHARS = 5000  # an "answer line" longer than this is not a final answer
_MAX_BOXES_PER_LINE = 16  # boxes compared when looking for several candidates on one line
EXTRACTORS = ("answer", "boxed", "any")


@dataclass(frozen=True)
class Extracted:
    """A final-answer candidate: its cleaned text and how many answers the model offered."""

    text: str
    candidates: int = 1

    @property
    def hedged(self) -> bool:
        """True when the final answer offers several candidates ("34 or 35"): scored wrong."""
        return self.candidates > 1 or _HEDGE.search(self.text) is not None


def resolve_extractor(extractor: str, data_source: str | None) -> str:
    """Map the configured extractor to "answer", "boxed" or "any" for one row.

    ``auto`` rule: a data source whose name contains "dapo" (DAPO-Math-17K and the AIME files
    published with it, data_source "math_dapo") uses the ``Answer:`` line its prompt asks for;
    any other source takes whichever anchor the response states last (``any``).
    """
    if extractor in ("answer", "boxed", "any"):
        return extractor
    if extractor != "auto":
        raise ValueError(f"extractor={extractor!r} is not one of ['answer', 'boxed', 'auto']")
    if data_source is not None and "dapo" in data_source.lower():
        return "answer"
    return "any"


def extract_answer(text: str, extractor: str) -> Extracted | None:
    """Return the final answer behind the last anchor of the chosen kind, or None if none.

    ``extractor`` is "answer", "boxed" or "any" (the later of the two anchors wins).
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
        if box_at < _answer_line_end(text, anchor):
            return _from_answer_line(text)
        return _from_last_box(text)
    raise ValueError(f"extractor={extractor!r} is not one of {list(EXTRACTORS)}")


def _last_answer_anchor(text: str) -> re.Match[str] | None:
    last = None
    for last in _ANSWER_ANCHOR.finditer(text):  # noqa: B007 - we want the last match
        pass
    return last


def _answer_line_start(text: str, anchor: re.Match[str]) -> int:
    """Where the answer starts: after the anchor, skipping blank space and empty lines."""
    at = anchor.end()
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _answer_line_end(text: str, anchor: re.Match[str]) -> int:
    end = text.find("\n", _answer_line_start(text, anchor))
    return len(text) if end < 0 else end


def _from_answer_line(text: str) -> Extracted | None:
    anchor = _last_answer_anchor(text)
    if anchor is None:
        return None
    start = _answer_line_start(text, anchor)
    line = text[start : _answer_line_end(text, anchor)][:_MAX_LINE_CHARS]
    return _clean_line(line)


def _clean_line(line: str) -> Extracted | None:
    line = line.replace("**", "").replace("`", "").strip()
    line = line.replace("$$", "$").replace("\\(", "$").replace("\\)", "$")
    line = line.replace("\\[", "$").replace("\\]", "$")
    segments = _math_segments(line)
    if len(segments) > 1:
        return Extracted(" ; ".join(clean_answer(s) for s in segments), candidates=len(segments))
    if len(segments) == 1:
        line = segments[0]
    if any(box in line for box in _BOX_COMMANDS):
        boxed = _from_last_box(line)
        if boxed is not None:
            return boxed
    answer = clean_answer(line)
    return Extracted(answer) if answer else None


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
    if content is None:
        return None
    # Several boxes with different contents on the final line offer several candidates.
    line_start = text.rfind("\n", 0, start) + 1
    earlier = _box_contents_in(text[line_start:start])
    candidates = 1 + sum(1 for other in earlier if clean_answer(other) != clean_answer(content))
    return Extracted(clean_answer(content), candidates=candidates) if content.strip() else None


def _box_contents_in(text: str) -> list[str]:
    """The first few boxes' contents: capped, so nested boxes cannot make this quadratic."""
    contents: list[str | None] = []
    for box in _BOX_COMMANDS:
        at = text.find(box)
        while at >= 0 and len(contents) < _MAX_BOXES_PER_LINE:
            contents.append(_box_content(text, at))
            at = text.find(box, at + len(box))
    return [content for content in contents if content is not None]


def _box_content(text: str, start: int) -> str | None:
    """Content of the box command at ``start``: brace-balanced, or one token (``\\boxed 5``)."""
    at = start + (6 if text.startswith("\\boxed", start) else 5)
    if at < len(text) and text[at] == " ":
        token = text[at + 1 :].split(maxsplit=1)
        return token[0].rstrip("$") if token else None
    if at >= len(text) or text[at] != "{":
        return None
    depth = 0
    for i in range(at, len(text)):
        char = text[i]
        if char == "{" and text[i - 1] != "\\":
            depth += 1
        elif char == "}" and text[i - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[at + 1 : i]
    return None  # unbalanced: the box never closes, so no answer was stated


def clean_answer(answer: str) -> str:
    """Strip presentation around an answer: ``$``, bold, ``\\text{}`` wrapper, trailing period."""
    answer = answer.replace("\\$", "").replace("$", "").replace("**", "").strip()
    answer = answer.replace("\\displaystyle", "").replace("\\!", "").strip()
    while answer.endswith((".", "。", "\\.", ",")) and not answer.endswith("..."):
        answer = answer[:-1].rstrip()
    if answer.startswith("\\text{") and answer.endswith("}") and answer.count("{") == 1:
        answer = answer[6:-1].strip()
    return answer


def bound_response(response: str, max_chars: int) -> str:
    """Keep the tail: the final answer is at the end, and parsing cost must stay bounded."""
    return response if len(response) <= max_chars else response[-max_chars:]
