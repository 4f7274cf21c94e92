"""Answer tags, ``<answer>34</answer>``: DeepSeek-R1-Zero's format (``data.template=r1``), which open-r1's and
TRL's GRPO examples ask for too. A tag is an anchor of the ``answer`` and ``any`` extractors where it states an
answer: closed within a line's length after it around more than a placeholder (``<answer></answer> tags`` and
``<answer>...</answer>`` name the format, after an answer stated before them), or never closed but opening its
line (a response cut off in its answer, ``<answer>35``; ``put it in <answer> tags`` is prose). Its answer is
read from its content to the end of its closing tag's line, the tags dropped, as an ``Answer:`` line is, so
that ``<answer>34</answer> or 35`` hedges as ``Answer: 34 or 35`` does. Linear string scanning.
"""

from __future__ import annotations

import bisect
import re

OPENING_TAG = r"<answer[ \t]{0,3}>"  # (a pattern of the extractor's anchors, matched case-insensitively)
_OPENING_TAG = re.compile(OPENING_TAG, re.IGNORECASE)
_CLOSING_TAG = re.compile(r"</answer[ \t]{0,3}>", re.IGNORECASE)
_TAGS = re.compile(r"</?answer[ \t]{0,3}>", re.IGNORECASE)
# What a tag that only names the format holds: "<answer></answer> tags", "<answer>...</answer>", "<answer> answer
# here </answer>" (the R1 template's own words, which a base model echoes)
_PLACEHOLDER = re.compile(r"[\s.…]*|\s*(?:(?:your|the)\s+)?(?:final\s+)?\$?answer\$?(?:\s+here)?\s*", re.IGNORECASE)
_MAX_PLACEHOLDER_CHARS = 40


def closing_tags(text: str) -> list[int]:
    """Where each closing tag of ``text`` starts, in order (looked up once: a search from each of many tags
    on took time in the product of their number and the length searched)."""
    return [close.start() for close in _CLOSING_TAG.finditer(text)]


def tag_states_answer(text: str, start: int, end: int, closes: list[int], max_chars: int) -> bool:
    """Whether the tag at ``text[start:end]`` states an answer (module rules; ``closes``: :func:`closing_tags`;
    one closed more than ``max_chars`` after it, the extractor's longest line, is not closed)."""
    after = bisect.bisect_left(closes, end)
    if after < len(closes) and closes[after] - end <= max_chars:
        return closes[after] - end > _MAX_PLACEHOLDER_CHARS or _PLACEHOLDER.fullmatch(text, end, closes[after]) is None
    before = text[max(0, start - 16) : start]  # (bounded: a long line may hold many tags)
    return not before.rpartition("\n")[2].strip() and ("\n" in before or start <= 16)


def tag_answer_end(text: str, end: int, limit: int) -> int | None:
    """Where the answer of the tag ending at ``end`` ends: the end of its closing tag's line (``</answer> or
    35`` is read too); None when it does not close before ``limit``."""
    close = _CLOSING_TAG.search(text, end, limit)
    if close is None:
        return None
    line_end = text.find("\n", close.end())
    return len(text) if line_end < 0 else line_end


def holds_closed_tag(text: str) -> bool:
    """Whether ``text`` holds an answer tag closed after it (an answer in the form, read or not)."""
    opened = _OPENING_TAG.search(text)
    return opened is not None and _CLOSING_TAG.search(text, opened.end()) is not None


def without_tags(line: str) -> str:
    """``line`` with its answer tags as blank space: ``34</answer> or 35`` is ``34  or 35``."""
    return _TAGS.sub(" ", line)
