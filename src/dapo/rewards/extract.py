"""Answer extraction: find the model's final answer behind an explicit anchor.

Two anchors, as in the DAPO reference and the MATH convention:
- ``answer``: the text after the last ``Answer:`` (DAPO's prompt asks for a last line
  ``Answer: $Answer``; ``**Answer:**`` and ``Final Answer:`` count too, and so does a heading alone
  on its line without a colon, ``**Final Answer**`` or ``## Answer``, as models write it before a
  box on the next line); the answer is the rest of that line, or the next non-empty line when the
  anchor ends its line. A display block opened on that line (``$$`` or ``\\[``) runs to its
  closing delimiter. An answer tag, ``<answer>34</answer>``, is an anchor too where it states one, its
  content read as such a line (:mod:`dapo.rewards.answer_tags`). On the line: a chat-template or
  end-of-text token (``<|im_end|>``, ``</s>``) ends it; ``I hope it is correct`` (the Minerva format "The
  final answer is X. I hope it is correct.") ends it, what follows read as text after the line is; a
  ``\\boxed{}`` on it wins over everything else, unless it states the reason after the line's value (a
  relation, or a box the reason goes on to describe; an "or" around it may still offer another answer:
  :mod:`dapo.rewards.answer_line_boxes`); a sentence ``... is X`` / ``... are X`` gives X (when X states
  a number or math, or the words before it do not); several ``$...$`` segments are several candidates,
  unless together they state one inequality disjunction (``$x<-1$ or $x>2$``, see
  :mod:`dapo.rewards.inequalities`) or one segment said again (``$34$ and $34$``).
- ``gsm8k``: the rest of the line behind the last ``####`` followed by a number (``#### 72``, not a
  Markdown heading ``#### Step 2``), the answer GSM8K's solutions end in and verl's GSM8K
  preprocessing asks for; a response without one is read as ``any`` does.
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
from dataclasses import replace

from dapo.rewards.answer_line_boxes import from_line_box, without_boxed_reason
from dapo.rewards.answer_lists import answer_items
from dapo.rewards.answer_tags import (
    OPENING_TAG,
    closing_tags,
    tag_answer_end,
    tag_states_answer,
    without_tags,
)
from dapo.rewards.answer_text import Extracted
from dapo.rewards.answer_text import bound_response as bound_response
from dapo.rewards.answer_text import clean_answer as clean_answer
from dapo.rewards.boxes import (
    BOUNDED_AFTER,
    BOX_COMMANDS,
    from_last_box,
    join_inequality_boxes,
    last_box_start,
)
from dapo.rewards.counts import item_count
from dapo.rewards.disowned import disowned_after, without_rejected_value
from dapo.rewards.inequalities import is_inequality_disjunction
from dapo.rewards.later_hedges import HEDGE_WINDOW, disowned_later, hedged_later
from dapo.rewards.math_segments import (
    EQUATED_SEGMENTS,
    QUALIFIER,
    drop_remark_after_math,
    math_segments,
    segment_items,
    segments_qualified,
    single_segment_answer,
)
from dapo.rewards.number_forms import restates
from dapo.rewards.reasons import REASON_WORD, without_reason
from dapo.rewards.remark_math import plain_value_with_math_remark
from dapo.rewards.remark_words import spelled_numbers_as_digits
from dapo.rewards.restatements import THAT, one_value_segments, restating_that

# "Answer:", "**Answer:**", "Final answer :", full-width colon; or a heading alone on its line with
# no colon ("**Final Answer**", "## Answer"), whose answer is the next non-empty line. Quantifiers
# bounded so a long run of spaces or stars cannot make the match backtrack quadratically.
# Or an answer tag, ``<answer>34</answer>`` (one that states an answer: :mod:`dapo.rewards.answer_tags`).
_ANSWER_ANCHOR = re.compile(r"answer[ \t*]{0,8}[:：]"
                            r"|(?<![^\n])[ \t#*>]{0,12}(?:final[ \t]{1,3})?answer[ \t*#]{0,8}(?![^\n])"
                            r"|" + OPENING_TAG, re.IGNORECASE)
# What may precede an anchor that states the answer on its own line (see _opens_its_line).
# A math segment that only wraps words ("$\text{square units}$").
_WORDS_SEGMENT = re.compile(r"\$\s{0,3}\\(?:text|textrm|mathrm|mbox)\{\s{0,3}([A-Za-z][A-Za-z .]{0,40})\}\s{0,3}\$")
_SENTENCE_END = re.compile(r"[.!?。](?:\s|\$)")
_LINE_OPENING = re.compile(r"[\s#*>\-]{0,12}(?:(?:[A-Za-z]{1,12}[ ,]{1,3}){0,3}final[ \t]{1,3})?", re.IGNORECASE)
_HOPE = re.compile(r"i hope it is correct", re.IGNORECASE)
# <|im_end|>, <|eot_id|>, <|endoftext|>; DeepSeek's <｜end▁of▁sentence｜>; Llama-2/Mistral's </s>, Gemma's
# <eos> and <end_of_turn>, as a base model writes them in plain text
_END_TOKEN = re.compile(r"<\||<｜|</s>|<eos>|<end_of_turn>")
# "The largest $n$ is 34": the answer follows the last copula outside math.
_COPULA = re.compile(r"(?<![A-Za-z\\])(?:is|are|equals)(?![A-Za-z])", re.IGNORECASE)
_RELATIVE_WORDS = ("which", "what")
_RELATIVE_CLAUSE = re.compile(r",\s{0,3}(?:which|where|since|because)(?![A-Za-z])", re.IGNORECASE)
# "34 is the answer": a copula whose tail only names the answer, which is before it.
_NAMES_THE_ANSWER = re.compile(r"(?:(?:the|my|our)\s{1,3})?(?:final\s{1,3}|correct\s{1,3})?(?:answer|result)\.?",
                               re.IGNORECASE)
_NUMBER = re.compile(r"[0-9][0-9.,]*")  # the number a qualifier may stand before
_REASON_AFTER_VALUE = re.compile(r"(?<=[0-9}$A-Za-z])\s{0,3}[,(]\s{0,3}(?:because|since)(?![A-Za-z])", re.IGNORECASE)
_CLOSING_REMARK = re.compile(r"(?<=\S) {0,3}\([^()]{0,400}\)\s*$")  # "34 (not 35)"
_BOUNDED_AFTER = re.compile(r"[0-9}$]" + BOUNDED_AFTER.pattern, re.IGNORECASE)  # "34 at least", "34 ways, at most"
# A relation with nothing before it states a bound, not a value: "\ge 34", "< 34", "\neq 34".
_BARE_RELATION = re.compile(r"\s{0,3}(?:\\(?:geq?|leq?|neq?|gt|lt|geqslant|leqslant)(?![A-Za-z])|[<>≤≥≠])")
_MAX_LINE_CHARS = 5000  # an "answer line" longer than this is not a final answer
# GSM8K's "#### 72": a value after it (a number, as verl's GSM8K scorer reads), not a Markdown
# heading ("#### Step 2", "#### Final Answer") nor the prompt's "after '####'" echoed
_HASHES_ANCHOR = re.compile(r"(?<!#)####[ \t]{0,8}(?=[$\\(]{0,3}[-+\u2212]?[0-9])")
EXTRACTORS = ("answer", "boxed", "gsm8k", "any")


def resolve_extractor(extractor: str, data_source: str | None) -> str:
    """Map the configured extractor to "answer", "boxed", "gsm8k" or "any" for one row.

    ``auto`` rule: a data source whose name contains "dapo" (DAPO-Math-17K and the AIME files
    published with it, data_source "math_dapo") or begins with "aime" uses the ``Answer:`` line its
    prompt asks for, as verl routes both to its math_dapo scorer; one whose name contains "gsm8k"
    (verl's preprocessed openai/gsm8k, whose prompt asks for the answer after "####") the
    ``#### 72`` line, as verl's GSM8K scorer; any other source takes whichever anchor the response
    states last (``any``).
    """
    if extractor in EXTRACTORS:
        return extractor
    if extractor != "auto":
        raise ValueError(f"extractor={extractor!r} is not one of ['answer', 'boxed', 'gsm8k', 'auto']")
    source = (data_source or "").lower()
    return "answer" if "dapo" in source or source.startswith("aime") else "gsm8k" if "gsm8k" in source else "any"


def extract_answer(text: str, extractor: str) -> Extracted | None:
    """Return the final answer behind the last anchor of the chosen kind, or None if none.

    ``extractor`` is "answer", "boxed", "gsm8k" or "any" (the later of the two anchors wins; after a box,
    only an ``Answer:`` that opens its line or sentence counts, see :func:`_opens_its_line`).
    """
    if extractor == "answer":
        return _from_answer_line(text)
    if extractor == "boxed":
        return from_last_box(text)
    if extractor == "gsm8k":
        hashes = next(reversed(list(_HASHES_ANCHOR.finditer(text))), None)  # the last
        if hashes is None:
            return extract_answer(text, "any")
        return _line_answer(text, hashes.end(), text.find("\n", hashes.end()) % (len(text) + 1))  # (-1: the end)
    if extractor == "any":
        anchor = _last_answer_anchor(text)
        box_at = last_box_start(text)
        if anchor is None:
            return from_last_box(text)
        # A box on the answer line itself ("Answer: \boxed{34}") is unwrapped by the line path;
        # a box on a later line is the answer stated last.
        if box_at >= _answer_line_end(text, anchor):
            return from_last_box(text)
        # After a box, "answer:" in prose ("To verify the answer: plug n = 3 in") states no
        # answer; an anchor that opens its line ("Final Answer: 35") corrects the box.
        if box_at >= 0 and not _opens_its_line(text, anchor):
            return from_last_box(text)
        return _from_answer_line(text, anchor) or (from_last_box(text) if box_at >= 0 else None)
    raise ValueError(f"extractor={extractor!r} is not one of {list(EXTRACTORS)}")


def _opens_its_line(text: str, anchor: re.Match[str]) -> bool:
    """Whether the anchor starts its line or sentence, after markup and a few words ending in
    "final" (``**Answer:**``, ``## Final Answer:``, ``... = 10,455. Final Answer:``,
    ``Therefore, the final answer:``); not ``To verify the answer:``."""
    if _is_tag(anchor):  # an answer tag, wherever it stands ("</think> <answer>34</answer>")
        return True
    line_start = text.rfind("\n", 0, anchor.start()) + 1
    before = text[max(line_start, anchor.start() - 80) : anchor.start()]
    sentence_ends = list(_SENTENCE_END.finditer(before))
    opening = before[sentence_ends[-1].end() :] if sentence_ends else before
    return (bool(sentence_ends) or anchor.start() - line_start <= 80) and _LINE_OPENING.fullmatch(opening) is not None


def _last_answer_anchor(text: str) -> re.Match[str] | None:
    """The last match of _ANSWER_ANCHOR that states an answer (:func:`_states_an_answer`). Each match holds one
    "answer" (and before it at most markup and "final", from its line's start, or a tag's "<"), so the last
    is found from the last "answer" back, each tried where a match holding it would start (its line's
    start, the character before it, itself): 2 us for a 7k-character response, where scanning it all took
    100 us. (Text whose lower-casing moves positions, or with a "ſ", which IGNORECASE reads as "s", is
    scanned whole: no other character matches a letter of "answer" under IGNORECASE.)"""
    lowered = text.lower()
    closes = closing_tags(text) if "<answer" in lowered else []
    if len(lowered) != len(text) or "\u017f" in text:
        return next((anchor for anchor in reversed(list(_ANSWER_ANCHOR.finditer(text)))
                     if _states_an_answer(text, anchor, closes)), None)
    at = lowered.rfind("answer")
    while at >= 0:
        for start in (text.rfind("\n", 0, at) + 1, max(at - 1, 0), at):  # (at - 1: "<answer>")
            anchor = _ANSWER_ANCHOR.match(text, start)
            if anchor is not None and anchor.start() <= at < anchor.end() and _states_an_answer(text, anchor, closes):
                return anchor
        at = lowered.rfind("answer", 0, at)
    return None


def _is_tag(anchor: re.Match[str]) -> bool:
    """Whether an anchor is an answer tag (the only one that opens with "<")."""
    return anchor.group(0).startswith("<")


def _states_an_answer(text: str, anchor: re.Match[str], closes: list[int]) -> bool:
    """Whether ``anchor`` states an answer: any but an answer tag, and a tag that does (``tag_states_answer``)."""
    return not _is_tag(anchor) or tag_states_answer(text, anchor.start(), anchor.end(), closes, _MAX_LINE_CHARS)


def _answer_line_start(text: str, anchor: re.Match[str]) -> int:
    """Where the answer starts: after the anchor, skipping blank space, empty lines and the
    closing ``**`` of a bold ``**Answer:**``."""
    at = anchor.end()
    while at < len(text) and (text[at].isspace() or text[at] == "*"):
        at += 1
    return at


def _answer_line_end(text: str, anchor: re.Match[str]) -> int:
    """End of the answer line; a display block opened on it (``$$``, ``\\[``) runs to its close; an answer
    tag's content, to the end of its closing tag's line (when it closes)."""
    start = _answer_line_start(text, anchor)
    if _is_tag(anchor) and (end := tag_answer_end(text, anchor.end(), start + _MAX_LINE_CHARS)):
        return end
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


def _from_answer_line(text: str, anchor: re.Match[str] | None = None) -> Extracted | None:
    """The answer behind ``anchor``, the last Answer anchor (found here when not given)."""
    anchor = anchor or _last_answer_anchor(text)
    if anchor is None:
        return None
    return _line_answer(text, _answer_line_start(text, anchor), _answer_line_end(text, anchor))


def _line_answer(text: str, start: int, end: int) -> Extracted | None:
    """The answer stated on ``text[start:end]``, several candidates where a line after it offers
    another ("Alternatively, 35." below it) or calls it wrong ("Wait, that's wrong.")."""
    stated, rest = _answer_part(text[start:end][:_MAX_LINE_CHARS].replace("\n", " "))
    extracted = _clean_line(stated)
    # what follows "I hope it is correct" on the line is read as a line after it ("34. I hope it is correct. Or 35.")
    later = spelled_numbers_as_digits((rest + "\n" if rest else "") + text[end : end + HEDGE_WINDOW])
    if extracted is not None and (hedged_later(later, extracted.text) or disowned_later(later, extracted.text, stated)):
        return replace(extracted, candidates=max(extracted.candidates, 2), qualified=True)
    return extracted


def _answer_part(line: str) -> tuple[str, str]:
    """``line`` to a leaked chat-template or end-of-text token and to the Minerva format's "I hope it is
    correct", which end its answer, with its answer tags as blank space ("<answer>34</answer> or 35": "34 or
    35"); and what follows that phrase before the token (at most HEDGE_WINDOW characters, "" without one)."""
    special = _END_TOKEN.search(line)
    line = without_tags(line[: special.start()] if special is not None else line)
    hope = _HOPE.search(line)
    if hope is None:
        return line, ""
    return line[: hope.start()], line[hope.end() : hope.end() + HEDGE_WINDOW].lstrip(" .!")  # (past its full stop)


def _clean_line(line: str) -> Extracted | None:
    """The answer ``line`` states (the answer part of its line: :func:`_answer_part`)."""
    line = line.replace("**", "").replace("`", "").strip()
    if any(box in line for box in BOX_COMMANDS):
        line = without_boxed_reason(line)  # "34, since \boxed{n = 35}": the reason's box is no answer
    if any(box in line for box in BOX_COMMANDS):  # "$34$ or $\boxed{35}$": an "or" outside it may still hedge
        boxed = from_line_box(line := join_inequality_boxes(line))  # "\boxed{x<-1} or \boxed{x>2}": one set
        if boxed is not None:
            return boxed
    line = line.replace("$$", "$").replace("\\(", "$").replace("\\)", "$")
    line = EQUATED_SEGMENTS.sub(" = ", line)  # "$a+b$ = $34$" is one equation, not two answers
    stated = without_reason(line := line.replace("\\[", "$").replace("\\]", "$"))  # "x (since n is 35)" is x
    if stated is None:  # "34, since n is 35, or 36": an "or" and a value in a reason offer another answer
        return Extracted(clean_answer(line), candidates=2, qualified=True)
    kept = without_rejected_value(stated)  # "2. The root -3 is extraneous": 2 is the answer
    read = plain_value_with_math_remark(kept) if kept is not None else None  # "34 (when $n = 2$)": 34 the answer
    if read is None:  # "2. 2 is wrong": disowned; "25 ($n = 5$ gives the max)": two values
        return Extracted(clean_answer(stated), candidates=2, qualified=True)
    if _offered_alternative(stated := read):  # "34 unless it is 35", "35, or it is 34"
        return Extracted(clean_answer(stated), candidates=2, qualified=True)
    line = one_value_segments(drop_remark_after_math(_after_copula(stated)))  # "$34$, that is, $34$": one value
    segments = math_segments(line)
    if len(segments) > 1 and is_inequality_disjunction(whole := clean_answer(line)):
        return Extracted(whole)  # "$x<-1$ or $x>2$": one set of reals, not two answers
    # "$34$ $\text{square units}$": words in math delimiters are words after the answer
    if len(segments) > 1 and (as_words := _WORDS_SEGMENT.sub(r" \1 ", line)) != line and math_segments(as_words):
        line, segments = as_words, math_segments(as_words)
    if len(segments) > 1:
        items = segment_items(line)
        qualified = segments_qualified(line, items)  # "$34$, $5$ (or 35)": not the whole answer
        return Extracted(" ; ".join(items), candidates=len(segments), items=items, qualified=qualified)
    if len(segments) == 1:
        line = single_segment_answer(line, segments[0])
        if line is None:
            return Extracted(clean_answer(segments[0]), candidates=2, qualified=True)
    answer = clean_answer(line)
    if not answer:
        return None
    # a qualifier bounds the last number, the one math-verify reads when it falls back to numbers ("not 10
    # which is 1,000.99€" is right for 1000.99, as in its suite; "not" is 10's), not one in a remark or a
    # reason after it: "34 (not 35)", "34 because n over 2 is odd"
    stated = _stated_part(answer)
    last_number = None
    for last_number in _NUMBER.finditer(stated):  # noqa: B007 - we want the last match
        pass
    bare_relation = _BARE_RELATION.match(answer) is not None and not answer.endswith(">")  # not "<1, 2>"
    disowned = last_number is not None and disowned_after(stated[last_number.end() :], stated[: last_number.start()])
    if bare_relation or disowned or _BOUNDED_AFTER.search(stated) or (
            last_number is not None and QUALIFIER.search(stated[: last_number.start()][-40:])):
        # "\ge 34", "The answer isn't 34", "34 at most", "34. This is wrong.": not the value 34
        return Extracted(answer, candidates=2, qualified=True)
    return Extracted(answer)


def _stated_part(answer: str) -> str:
    """``answer`` without a parenthesis that closes it or a reason clause after it, when what is
    left still states a number: ``34 (not 35)`` and ``34 because n over 2 is odd`` state 34."""
    head = REASON_WORD.split(answer, maxsplit=1)[0]
    head = _CLOSING_REMARK.sub("", head)
    return head if any(char.isdigit() for char in head) else answer


def _after_copula(line: str) -> str:
    """``The largest $n$ is 34`` -> ``34``: the tail after the last copula outside ``$...$``.

    Taken when the tail states a number or math, or when the words before the copula do not
    (``The winner is Evelyn``); ``$x = 5$ is the only solution`` keeps the whole line. A
    relative clause describes the answer and is skipped: ``$x^2$, which is even`` keeps
    ``x^2``; ``34, which is even`` after a copula is cut to ``34``. A comma after the copula is
    punctuation, not the answer's (``The answer is, \\frac{2}{3}``). "that is" is read by
    :func:`~dapo.rewards.restatements.restating_that`: after a value it is no copula (``34, that is, 35``
    and ``34 ways, that is, 35`` are kept whole, the verifier judges the remark), after a name it is one
    (``x, that is, \\frac{2}{3}`` gives ``\\frac{2}{3}``). A copula in a reason after a value (a comma or
    parenthesis, then "since" or "because") is the reason's: ``34 ways, since n is even`` is ``34 ways``, as ``34
    (since n is even)`` is (one right after a value or name is dropped before this: :mod:`~dapo.rewards.reasons`).
    This rule is still live for what that pass leaves in place: a reason after math that ends in words
    (``the number of $n$ values, since n is 35``, not 35) or past its cap on reasons read.
    After words with no value the copula is read as before (``the answer, since it is 35``).
    """
    last = None
    dollars = 0
    at = 0
    reason = _REASON_AFTER_VALUE.search(line)  # "34 ways, since n is even": its "is" is the reason's
    reason = reason if reason is not None and _states_math(line[: reason.start()]) else None  # not "x, since it is 34"
    for match in _COPULA.finditer(line, 0, reason.start() if reason is not None else len(line)):
        dollars += line.count("$", at, match.start())
        at = match.start()
        that_is = restating_that(line, at, _items_in)  # (None: not the "is" of "that is", its own rule)
        relative = line[max(0, at - 8) : at].rstrip().lower().endswith(_RELATIVE_WORDS) or that_is is True
        if dollars % 2 == 0 and not relative and not (that_is is None and _in_remark_after_value(line[:at])):
            last = match
    if last is None:  # "540, which is even": a relative clause without a number describes the answer
        head, *clause = _RELATIVE_CLAUSE.split(line, maxsplit=1)
        describes = clause and (not any(c.isdigit() for c in clause[0])  # "5, since x is 5": a reason restating it
                                or (reason is not None and restates(head.strip(), clause[0])))
        return head.strip() if describes and _states_math(head) else line
    head, tail = line[: last.start()], line[last.end() :].strip(" :").lstrip(" ,")
    tail = _RELATIVE_CLAUSE.split(tail, maxsplit=1)[0].strip()
    that = THAT.search(head, max(0, len(head) - 24))
    if that is not None and that.group(1) == "(" and tail.endswith(")") and tail.count(")") > tail.count("("):
        tail = tail[:-1].rstrip()  # "x (that is, 34)": the parenthesis around the copula closes after its value
    if _NAMES_THE_ANSWER.fullmatch(tail) and _states_math(head):  # "34 is the answer."
        return head.strip()
    if tail and (_states_math(tail) or not _states_math(head)):
        return tail
    return line


def _in_remark_after_value(head: str) -> bool:
    """Whether a copula after ``head`` lies in a remark on a value the line already stated: in a
    parenthesis opened right after it (``204 (the remainder when N is divided by 1000)``, ``$35$ (n
    is $34$)``: 204 and 35, not what the remark equates). (An alternative to the value the line
    opens with, ``35 or it is 34``, is judged before: :func:`_offered_alternative`.)"""
    opened = head.rfind("(")
    return opened > 0 and head.count("(", opened) > head.count(")", opened) and _ends_in_value(head[:opened])


def _offered_alternative(line: str) -> bool:
    """Whether ``line`` opens with a value and offers another after "or", "unless", "otherwise" or
    "else" and a copula (``34 unless it is 35``, ``35, or it is 34``, ``35 or 36 or it is 34``): a
    hedge. Not a restatement of the value (``5, or equivalently it is 5``, ``$m+n = 7+27 = 34$, or
    the answer is 34``), nor a conclusion drawn after it (``$x = 3$ or $x = -3$, so the product is $-9$``)."""
    opening = _OPENING_ALTERNATIVE.match(line)
    if opening is None:
        return False
    copula = next(_COPULA.finditer(line, opening.end()), None)
    if copula is None or _CONCLUSION.search(line, opening.end(), copula.start()):
        return False
    closed = line.find(")", opening.end())
    if "(" in opening.group(0) and 0 <= closed < copula.start():  # "$f(2)$ (or $f$ at 2) is 5": a name's
        return False
    tail = line[copula.end() :].strip(" :,.()")
    value = clean_answer(opening.group("value")).rpartition("=")[2].strip()  # an equation's result
    return _states_math(tail) and not restates(value, tail)


def _ends_in_value(text: str) -> bool:
    """Whether ``text`` ends in a value (a number, math, a closing bracket), punctuation aside."""
    stripped = text.rstrip(" ,;(")
    return bool(stripped) and stripped[-1] in "0123456789$})]" and _states_math(text)


# a line that opens with one value (a number, or one $...$), then "or", "unless", "otherwise" or "else"
_OPENING_ALTERNATIVE = re.compile(r"\s{0,3}(?P<value>\$[^$]{1,120}\$|[-+\u2212]?[0-9][0-9.,/]{0,40})\s{0,3},?\s{0,3}"
                                  r"\(?\s{0,3}(?:or|unless|otherwise|else)(?![A-Za-z])", re.IGNORECASE)
_CONCLUSION = re.compile(r"(?<![A-Za-z])(?:so|thus|hence|therefore)(?![A-Za-z])", re.IGNORECASE)


def _items_in(text: str) -> int:
    """How many values ``text`` states as a list (``(1,2) and (3,4)``: 2), for :func:`restating_that`."""
    return item_count(answer_items(text))


def _states_math(text: str) -> bool:
    return "$" in text or "\\" in text or any(char.isdigit() for char in text)
