"""Boxed answers: the last brace-balanced ``\\boxed{...}`` / ``\\fbox{...}``, and the boxes chained to it.

Boxes on the last box's line that are chained to it by list separators (``,`` ``;`` ``and``
``or``, or only blank space, ``\\quad`` and math delimiters between them) are the *items* of a
multi-box answer (``\\boxed{1}, \\boxed{2}``); other boxes on that line with a different content
are further candidates (a hedge), except boxes joined by "or" that together state one inequality
disjunction (``\\boxed{x<-1} or \\boxed{x>2}``, :func:`join_inequality_boxes`). The box must hold the
whole answer: another answer next to it (``$35$ or \\boxed{34}``, ``\\boxed{34} or 35``) or math
that continues it (``\\boxed{34}^2``) is a further candidate too, and a sign written before it
belongs to it (``-\\boxed{34}`` is -34). Capped scans, linear in the input length.
"""

from __future__ import annotations

import re

from dapo.rewards.alternatives import alternative_is_the_value
from dapo.rewards.answer_lists import answer_items
from dapo.rewards.answer_text import Extracted, clean_answer, sign_before, signed
from dapo.rewards.counts import item_count
from dapo.rewards.disowned import disowned_after
from dapo.rewards.equivalence import choice_of, vote_key
from dapo.rewards.hedges import (
    bare_remark_changes,
    list_remark_changes,
    list_tail_changes,
    restates_list,
    without_bare_remark,
)
from dapo.rewards.inequalities import is_inequality_disjunction, is_or
from dapo.rewards.later_hedges import HEDGE_WINDOW, disowned_later, hedged_later, rounds
from dapo.rewards.number_forms import (
    remark_changes_the_number,
    restates,
    spells_the_value,
    starts_with_scale_word,
    value_of,
)
from dapo.rewards.reasons import without_reason
from dapo.rewards.remark_words import (
    BOUNDING_WORDS,
    BOUNDING_WORDS_AFTER,
    GREEK_LETTERS,
    NAME,
    NUMBER_WORDS,
    OR_ADVERBS,
    spelled_numbers_as_digits,
)
from dapo.rewards.restatements import after_its_noun
from dapo.rewards.unicode_math import unicode_math_to_latex
from dapo.rewards.units import unit_remark_changes, without_unit_power

BOX_COMMANDS = ("\\boxed", "\\fbox")
# a number or math just before the last box, joined to it by "or": "$35$ or \\boxed{34}"
_ALTERNATIVE_BEFORE = re.compile(r"[0-9$})] {0,3}(?:or|\\lor) {0,3}$", re.IGNORECASE)
# ... or just after it: "\\boxed{34} or 35", "\\boxed{34}$, or $x = 35$", "\\boxed{34}, or equivalently
# x_1 = 35", "\\boxed{34} or maybe 35", "\\boxed{34}, or, perhaps, 35" (a number after the "or" and up to two
# adverbs, remark_words.OR_ADVERBS, or an approximation: "\\boxed{34}, or about 35"), "\\boxed{34} or more" (as
# "$34$ or more").
_ALTERNATIVE_AFTER = re.compile(
    r"(?:\\[)\]]|[\s$.,]){0,8}(?:or|\\lor|\\vee|\\text\{ {0,3}or {0,3}\})(?![A-Za-z])(?:\\\(|[\s$(,]){0,8}"
    r"(?:(?:" + OR_ADVERBS + r")(?![A-Za-z])[\s,$]{0,8}){0,2}"
    r"(?:(?:about|approximately|approx\.?|roughly|around|nearly|almost|\\approx|[≈~∼])(?:\\\(|[\s$(]){0,8})?"
    r"(?:(?:" + NAME + r" {0,3}= {0,3})?[+-]? {0,3}"
    r"(?:[0-9]|\\(?:d?frac|sqrt|boxed|pi|infty|" + GREEK_LETTERS + r")(?![A-Za-z]))"
    r"|(?:more|less|fewer|greater|higher|lower|above|below)(?![A-Za-z])"
    r"|(?P<spelled>" + NUMBER_WORDS + r")(?![A-Za-z]))", re.IGNORECASE)
# ... or a value alone after it with no "or": "\\boxed{34}; 35", "\\boxed{34}, maybe 35.", "\\boxed{34} 35" (spaced;
# glued, "\\boxed{34}35" continues the box, _CONTINUED_AFTER), or a list of them: "\\boxed{34}, 35, or 36". Only
# bare values ending the line: one that goes on ("\\boxed{34}, 34 = 2 \\cdot 17", "\\boxed{34}; 2 \\cdot 17 = 34",
# "12:00") is a justification, read as before. A period ends the answer's sentence: "\\boxed{34}. 35 is wrong
# because" is no second answer.
_BARE_VALUE = (r"[+-]? {0,3}(?:[0-9][0-9,]{0,30}(?:\.[0-9]{1,30})?"
               r"|\\d?frac\{[^{}]{1,20}\}\{[^{}]{1,20}\}|\\sqrt\{[^{}]{1,20}\}|\\pi(?![A-Za-z]))")
# (a space after each separator: values glued by commas, "35,36,37", would split many ways before a failed match)
_MORE_VALUES = r"(?:[\s$]{0,2}[,;]?[\s$]{1,4}(?:(?:or|and)[\s$]{1,4})?" + _BARE_VALUE + r"){0,8}"
_VALUE_AFTER = re.compile(
    r"(?:\\[)\]]|[\s$]){0,8}[,;]?(?:\\[)\]]|[\s$]){0,8}(?:(?:" + OR_ADVERBS + r")(?![A-Za-z])[\s,$]{0,8}){0,2}"
    r"(?:" + NAME + r" {0,3}= {0,3})?(?P<value>" + _BARE_VALUE + r")(?P<more>" + _MORE_VALUES + r")[\s$.]{0,8}$",
    re.IGNORECASE)
_ONE_BARE_VALUE = re.compile(_BARE_VALUE)
# The closing of groups the box sits in: "\\boxed{\\boxed{3}} or 4", "\\textbf{\\boxed{3}} or 4", "\\left(\\boxed{3}\\right) or 4"
_CLOSING_GROUPS = re.compile(r"^(?:\s{0,3}(?:\}|\\right\s{0,3}(?:[)\]|.]|\\\}|\\rangle|\\[rv]vert(?![A-Za-z]))))+")
# Another choice letter after a box holding one: "\\boxed{B} or C", "\\boxed{B}, maybe (C)", "\\boxed{(B)} or (C)",
# "\\boxed{B} (C)", "\\boxed{B} (or C)", "\\boxed{B} and C"; not a sentence that opens with a letter ("\\boxed{B}. A check ...")
_CHOICE = r"(?:\\textbf\{\s{0,3})?(?:\([A-E]\)|[A-E](?![A-Za-z]))"
_LETTER = re.compile(r"(?<![A-Za-z\\])[A-E](?![A-Za-z])")
# what may follow a letter in brackets: the end of the line, or "or" ("\\boxed{B} (A) fails" is a remark on A)
_CHOICE_ENDS = r"(?=[\s$.!?;,)}]{0,8}$|[\s,]{0,3}(?:or|\\lor)(?![A-Za-z]))"
_CHOICE_AFTER = re.compile(
    r"[\s$,;]{0,8}(?:(?:(?:or|\\lor)(?![A-Za-z])|/|\\text\{\s{0,3}or\s{0,3}\})[\s,$]{0,4}"
    + r"(?:(?:" + OR_ADVERBS + r")(?![A-Za-z])[\s,$]{0,4}){0,2}" + _CHOICE  # "or C", "/C", "or maybe (C)", "\\text{ or } C"
    + r"|(?:(?:" + OR_ADVERBS + r")(?![A-Za-z])[\s,$]{0,4}){1,2}" + _CHOICE  # "maybe (C)"
    + r"|(?:\\textbf\{\s{0,3})?\([A-E]\)" + _CHOICE_ENDS  # "(C)"
    + r"|\(\s{0,3}(?:or|\\lor|" + OR_ADVERBS + r")(?![A-Za-z])[\s,$]{0,4}" + _CHOICE  # "(or C)"
    # "and C", ", C", "\\& C" ending the line: two letters for one ("\\boxed{B} and C are wrong" is a remark)
    + r"|[\s$]{0,4}(?:(?:and|\\land|\\text\{\s{0,3}and\s{0,3}\})(?![A-Za-z])|,|&|\\&)[\s$]{0,4}" + _CHOICE + _CHOICE_ENDS
    + ")")
# An estimate's words with no value: "\\boxed{34} or so", "give or take", "more or less" (bracketed or not).
_ESTIMATE_AFTER = re.compile(r"[\s$,(]{0,8}(?:or\s{1,3}so|give\s{1,3}or\s{1,3}take|more\s{1,3}or\s{1,3}less)(?![A-Za-z])",
                             re.IGNORECASE)
# ... or a bound ending the line after it: "\\boxed{34} at least", "\\boxed{3} colors at most" (not one that opens a
# remark: "\\boxed{5} (at least one of each color)", "\\boxed{6}, at most one per row")
BOUNDED_AFTER = re.compile(r"[\s$,]{0,4}(?:[A-Za-z]{2,20}[\s,]{1,3})?(?:" + BOUNDING_WORDS_AFTER + r")[\s.!]*$",
                           re.IGNORECASE)
# ... or a bound right before the box: "at least \\boxed{34}", "not \\boxed{35}", "no more than $\\boxed{5}$", as
# "at least $34$" is (remark_words.BOUNDING_WORDS; "least" and "most" only after "at": "the least \\boxed{3}"). Not
# an approximation word: "$25\\pi \\approx \\boxed{78.54}$" answers a question that asks for the rounding.
_QUALIFIED_BEFORE = re.compile(r"(?<![A-Za-z])(?:at\s{1,3}(?:least|most)|(?!least|most)(?:" + BOUNDING_WORDS + r"))"
                               r"(?:[\s$]|\\[(\[])*$", re.IGNORECASE)
# Between two chained boxes: spacing and math delimiters, dropped before looking for a separator.
_GAP_NOISE = re.compile(r"\\(?:quad|qquad|[,;: ()\[\]])|[\s$.]")
_LIST_SEPARATOR = re.compile(r"[,;]|(?<![A-Za-z])(?:and|or)(?![A-Za-z])", re.IGNORECASE)
# Math that continues the box, so that the box is not the whole answer: a digit, brace or K ("thousand")
# glued to it ("\\boxed{34}35", "\\boxed{34}{,}000", "\\boxed{34}K"; "\\boxed{300} K" is kelvin), a
# power that is not a degree sign or an ordinal ("\\boxed{34}^2", not "^\\circ" or "^{th}"), a product,
# root or plus-minus ("\\boxed{2}\\sqrt{3}", "\\boxed{34} \\times 10^3", "\\boxed{34} \\pm 1") or
# arithmetic on a number.
_CONTINUED_AFTER = re.compile(
    r"[0-9]|[Kk](?![A-Za-z])"
    r"|\{(?! {0,3}(?:\}|\\(?:text|textrm|mathrm|mbox|[,;]|quad)(?![A-Za-z])))"  # not "{}", "{\\text{ cm}}"
    r"| {0,3}(?:\^(?! {0,3}\{? {0,3}(?:\\(?:circ|prime)(?![A-Za-z])|(?:\\(?:text|textrm|mathrm)\{ {0,3})?(?:th|st|nd|rd)"
    r"(?![A-Za-z])))|\\(?:sqrt|times|cdot|div|pi|d?frac|pm|mp)(?![A-Za-z])|±"
    r"|[+\-*/] {0,3}(?:[0-9]|\\(?:d?frac|sqrt|pi)(?![A-Za-z]))|[–‒][0-9])")  # "\\boxed{34}–35": a range
# ... and, past the math's close, a slash or dash before another number: "$\\boxed{34}$ / $35$", "$\\boxed{34}$–35".
_VALUE_PAST_MATH = re.compile(r"\$ {0,3}(?:/ {0,3}\$ {0,3}|[–‒]|-{1,3})[+-]?[0-9]")
# LaTeX's spaces (thin, medium, thick, a control space, a tie, \\quad), read as the blank they show,
# and an empty group, which shows nothing: what follows a box is judged as if they were not there
_LATEX_SPACE = re.compile(r"\\[,;: ]|~|\\q?quad(?![A-Za-z])")
_EMPTY_GROUP = re.compile(r"\{ {0,3}\}")
# A LaTeX line break ("\\\\", "\\\\[2pt]") shows what follows on a line of its own: read as a separator,
# so that "\\boxed{34} \\\\ 35" states a second value as "\\boxed{34}; 35" does.
_LINE_BREAK = re.compile(r"\\\\(?:\[[^\[\]]{0,12}\])?")
# A remark in square brackets, read as one in parentheses: "\\boxed{34} [or 35]" offers another answer; one
# without a letter ("[1]") is a reference, left.
_BRACKET_REMARK = re.compile(r"^([\s$]{0,4})\[(?=[^\[\]]{0,200}[A-Za-z])([^\[\]()]{0,200})\]")
# Display or inline math closing right after the box, read as a closing "$": "\\[\\boxed{34}\\] (or 35)".
_MATH_CLOSING = re.compile(r"^(\s{0,4})\\[\])]")
# A parenthesis just after the box: a remark, unless it offers another answer or scales it ("(or 35)").
_REMARK_AFTER = re.compile(r"[\s$]{0,4}\(([^()]{0,200})\)")
_NESTED_REMARK_AFTER = re.compile(r"[\s$]{0,4}\(((?:[^()]|\([^()]{0,100}\)){0,200})\)")  # "(or \\exp(2))"
_TEXT_OPENING = re.compile(r"\$|\\(?:text|textrm|mathrm|mbox)\{")  # "$ \\text{ thousand}$": the word
_MAX_AFTER_CHARS = 100  # how much of the line after the last box is read
_MAX_BOXES_PER_LINE = 16  # boxes compared when looking for several candidates on one line
_MAX_GAP_CHARS = 80  # boxes further apart than this are not one multi-box answer


def last_box_start(text: str) -> int:
    return max(text.rfind(box) for box in BOX_COMMANDS)


def from_last_box(text: str) -> Extracted | None:
    text = join_inequality_boxes(text)
    start = last_box_start(text)
    if start < 0:
        return None
    span = _box_span(text, start)
    if span is None or not span[0].strip():
        return None
    line_start = text.rfind("\n", 0, start) + 1
    content = clean_answer(span[0])
    stated = without_reason(content)  # "\boxed{34 \text{ since } n = 35}": the reason is no answer (reasons.py)
    answer = signed(stated if stated is not None else content, sign_before(text[line_start:start]))  # "-\boxed{34}"
    boxes = _boxes_in(text[line_start:start])
    # Several boxes with different contents on the final line offer several candidates.
    candidates = 1 + len({vote_key(clean_answer(c)) for _, _, c in boxes} - {vote_key(answer)})  # 34 and 34.0: one
    items = _chained_items(text[line_start:start], boxes, answer)
    qualified = stated is None or offers_another_before(text[line_start:start])  # "$35$ or \boxed{34}"
    qualified = qualified or _QUALIFIED_BEFORE.search(text[max(line_start, start - 40) : start]) is not None
    # numbers in words read as digits: "\\boxed{34}; thirty-five" and "\\boxed{34}. Maybe thirty-five." hedge
    after = spelled_numbers_as_digits(text[span[1] : span[1] + _MAX_AFTER_CHARS].split("\n", 1)[0])
    after = _CLOSING_GROUPS.sub("", after, count=1)  # "\\boxed{\\boxed{3}} or 4": read past the groups it closes
    # ... or the response disowns a numeric answer after it ("\\boxed{34}. This is wrong."), or the text after it changes it
    qualified = (qualified or (disowned_after(after, text[line_start:start]) and value_of(answer) is not None)
                 or changed_after(after, answer, list(items) or answer_items(answer))
                 or hedged_later(later := spelled_numbers_as_digits(text[span[1] : span[1] + HEDGE_WINDOW]), answer)
                 or disowned_later(later, answer, text[line_start:start])  # "\\boxed{34}\n\nWait, that's wrong."
                 or _another_choice_after(after, answer))  # "\\boxed{B} or C"
    if qualified:  # "\boxed{34} or 35", "\boxed{34}^2", "\boxed{34, 5} (or 35)": not the whole answer
        candidates = max(candidates, 2)
    return Extracted(answer, candidates=candidates, items=items, qualified=qualified)


def _another_choice_after(after: str, answer: str) -> bool:
    """Whether ``answer`` is a choice letter and ``after`` offers another (``\\boxed{B} or C``, ``(or C)``, ``, maybe
    (C)``; not ``, simply B``, nor a remark that goes on past the letter: ``\\boxed{B} (A) fails``)."""
    letter = choice_of(answer)
    offered = _CHOICE_AFTER.match(after) if letter is not None else None
    return offered is not None and _LETTER.findall(offered.group(0))[-1] != letter


def offers_another_before(text: str) -> bool:
    """Whether ``text``, before an answer, ends in a number or math and "or" (``$35$ or``, ``35 or``)."""
    return _ALTERNATIVE_BEFORE.search(text[-_MAX_AFTER_CHARS:]) is not None


def changed_after(after: str, answer: str, stated: list[str] | None = None) -> bool:
    """Whether the text after the last box (whose content is ``answer``; ``stated``: the items of
    the answer when it is a list, chained boxes or ``34, 5`` in one) offers another answer or
    continues its math; an "or" or a remark that restates the box's value does not
    (``\\boxed{\\frac12} or 0.5``, ``\\boxed{\\frac13}, or about 0.33``, ``\\boxed{34} (34 ways)``, ``\\boxed{2} or
    \\sqrt{4}``; a closed form is computed: ``\\boxed{2} or \\sqrt{2}`` and ``\\boxed{2} or e^2`` offer another
    value, :mod:`~dapo.rewards.alternatives`), nor one
    that restates a list's values or counts its items (``\\boxed{1, 2} (2 solutions)``,
    :func:`~dapo.rewards.hedges.list_remark_changes`). An approximation or a restatement without
    brackets is read as in brackets (``\\boxed{\\frac13} \\approx 0.5``, ``\\boxed{\\frac13}, i.e. about 0.5``,
    ``\\boxed{34} = 35``: another value; :func:`~dapo.rewards.hedges.bare_remark_changes`). A parenthesis
    with brackets inside is read only for a computed form of another value (``\\boxed{2} (or \\exp(2))``). A
    unit or counted noun before a remark is the value's (``\\boxed{34} ways, or 35`` and ``\\boxed{34} cm (that
    is, 35)`` offer 35: :func:`~dapo.rewards.restatements.after_its_noun`), and a quantity restated in another unit
    is read with that unit (``\\boxed{5} cm, i.e. 50 mm`` and ``\\boxed{5} cm, or 50 mm`` restate 5 cm, ``\\boxed{5} cm,
    i.e. 5 mm`` offers another value: :func:`~dapo.rewards.units.unit_remark_changes`). A value after the box
    with no "or" is another answer too (``\\boxed{34}; 35``, ``\\boxed{34}, maybe 35``), so are an estimate's words
    (``\\boxed{34} or so``, ``(approximately)``), and past a remark that restates the box the line is read on
    (``\\boxed{34} (34 ways) 35``)."""
    after = unicode_math_to_latex(after)  # "\\boxed{34} （或 35）", "\\boxed{34} ≈ 35"
    after = _EMPTY_GROUP.sub("", _LATEX_SPACE.sub(" ", _LINE_BREAK.sub("; ", after)))  # "\\boxed{34}\\,000"
    after = _BRACKET_REMARK.sub(r"\1(\2)", _MATH_CLOSING.sub(r"\1$", after, count=1), count=1)  # "[or 35]": "(or 35)"
    original = answer
    is_list = stated is not None and item_count(stated) > 1  # "\\pm 3" states two
    converted = None if is_list else unit_remark_changes(after, answer)
    if converted is not None:  # "\\boxed{5} cm, i.e. 50 mm": the same quantity; "i.e. 5 mm": another
        return converted
    after = without_unit_power(after_its_noun(after))  # "\\boxed{34}, i.e. 34 cm^2": 34 restated, not squared
    own = answer if is_list else without_bare_remark(answer)  # "\\boxed{34 \\approx 34} (about 35)": on 34
    if own is None:
        return True  # "\\boxed{\\sqrt2 \\approx 7} (since n is odd)": two values already
    answer = own
    tail = after.lstrip(" \t$.,")
    restated = restates_list(stated, tail) if is_list and stated is not None else restates(answer, tail)
    if (alternative := _ALTERNATIVE_AFTER.match(after)) and not restated and not (
            alternative.group("spelled") and spells_the_value(alternative.group("spelled"), answer)):
        return True  # "\\boxed{3}, or four" (not "\\boxed{34}, or thirty-four")
    if (offered := _VALUE_AFTER.match(after)) and not _CONTINUED_AFTER.match(after):
        values = [offered.group("value"), *_ONE_BARE_VALUE.findall(offered.group("more"))]  # "35, or 36" after it
        if not all(restates_list(stated, value) if is_list and stated is not None
                   else restates(answer, value) or rounds(value, answer) for value in values):
            return True  # "\\boxed{34}; 35": a second value ("\\boxed{34}, 34.0" and "\\boxed{2\\pi}, 6.28" restate it)
    if _ESTIMATE_AFTER.match(after) or BOUNDED_AFTER.match(after):
        return True  # "\\boxed{34} or so", "\\boxed{34} at most": not the value
    value = value_of(answer) if tail and not is_list else None  # nothing after the box: not computed
    if alternative_is_the_value(tail, answer, value) is False:
        return True  # "\\boxed{2} or e^2", "\\boxed{2}, otherwise 35": a value _ALTERNATIVE_AFTER does not name
    if _CONTINUED_AFTER.match(after) or _VALUE_PAST_MATH.match(after):
        return True
    words = _TEXT_OPENING.sub(" ", after).replace("{", " ")  # "\\boxed{34}{\\text{ thousand}}" too
    if starts_with_scale_word(words):  # "\\boxed{34} thousand", as "$34$ thousand"
        return True
    if list_tail_changes(stated, tail) if is_list and stated is not None else bare_remark_changes(answer, tail):
        return True  # "\\boxed{\\frac13} \\approx 0.5", "\\boxed{34, 5} \\approx 35"
    remark = _REMARK_AFTER.match(after) or _REMARK_AFTER.match(words)  # "\\boxed{34} \\text{ (negative)}"
    if remark is None:  # "\\boxed{2} (or \\exp(2))": brackets inside, only a computed form is read
        nested = _NESTED_REMARK_AFTER.match(after)
        return nested is not None and alternative_is_the_value(nested.group(1), answer, value) is False
    if is_list and stated is not None:
        changes = list_remark_changes(remark.group(1), stated)
    else:
        changes = remark_changes_the_number(remark.group(1), answer)
    if changes or remark.re is not _REMARK_AFTER or remark.string is not after:
        return changes
    return changed_after(after[remark.end():], original, stated)  # "\\boxed{34} (34 ways) 35": read on past the remark


def join_inequality_boxes(text: str) -> str:
    """``\\boxed{x<-1} or \\boxed{x>2}`` -> ``\\boxed{x<-1 \\text{ or } x>2}``: boxes chained to the
    last one by "or" alone (``or``, ``\\text{ or }``, ``\\lor``), whose contents together are an
    inequality disjunction in one variable, state one set of reals, not several answers. Anything
    else (``\\boxed{3} or \\boxed{4}``, ``\\boxed{x=3} or \\boxed{x=4}``, boxes joined by a comma or
    "and", inequalities in two variables) is returned unchanged, for the hedge and list rules."""
    start = last_box_start(text)
    span = _box_span(text, start) if start >= 0 else None
    if span is None:
        return text
    line_start = text.rfind("\n", 0, start) + 1
    boxes = _boxes_in(text[line_start : span[1]])
    if len(boxes) < 2 or boxes[-1][0] != start - line_start:
        return text
    chain = [boxes[-1]]
    for box in reversed(boxes[:-1]):
        gap = text[line_start + box[1] : line_start + chain[0][0]]
        if len(gap) > _MAX_GAP_CHARS or not is_or(_GAP_NOISE.sub(" ", gap)):
            break
        chain.insert(0, box)
    joined = " \\text{ or } ".join(clean_answer(content) for _, _, content in chain)
    if len(chain) < 2 or not is_inequality_disjunction(joined):
        return text
    return f"{text[: line_start + chain[0][0]]}\\boxed{{{joined}}}{text[line_start + chain[-1][1] :]}"


def around_last_box(text: str) -> tuple[str, str] | None:
    """(the text before the last box, with its boxes stripped; the text after the last box), or None when the
    last box does not close."""
    start = last_box_start(text)
    span = _box_span(text, start) if start >= 0 else None
    return None if span is None else (strip_boxes(text[:start]), text[span[1] :])


def outer_boxes(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of the first few boxes in ``text`` that are not nested in another, in order."""
    return _boxes_in(text)


def _chained_items(line: str, boxes: list[tuple[int, int, str]], last: str) -> tuple[str, ...]:
    """The boxes chained to the last one by list separators, in order, each with the sign written
    before it (``\\boxed{1}, -\\boxed{2}``); () for a lone box."""
    items = [last]
    gap_end = len(line)
    for index in range(len(boxes) - 1, -1, -1):
        box_start, box_end, content = boxes[index]
        gap = line[box_end:gap_end]
        if len(gap) > _MAX_GAP_CHARS:
            break
        bare = _GAP_NOISE.sub(" ", gap).strip()
        if bare and not _LIST_SEPARATOR.search(bare):
            break
        before = line[boxes[index - 1][1] if index > 0 else 0 : box_start]
        items.append(signed(clean_answer(content), sign_before(before)))
        gap_end = box_start
    return tuple(reversed(items)) if len(items) > 1 else ()


def _boxes_in(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of the first few boxes, in order: capped, so nested boxes cannot
    make this quadratic. ``end`` is just past the closing brace."""
    boxes: list[tuple[int, int, str]] = []
    tried = 0  # unbalanced boxes count too: each try scans to the end of the text
    for box in BOX_COMMANDS:
        at = text.find(box)
        while at >= 0 and tried < _MAX_BOXES_PER_LINE:
            tried += 1
            if (span := _box_span(text, at)) is not None:
                boxes.append((at, span[1], span[0]))
            at = text.find(box, at + len(box))
    boxes.sort()
    # A box nested in another (\boxed{\boxed{1}}) is part of its parent, not a separate answer;
    # a parent that holds nothing but it states the nested box's content (1, not \boxed{1}).
    outer: list[tuple[int, int, str]] = []
    for start, end, content in boxes:
        if not outer or start >= outer[-1][1]:
            outer.append((start, end, _innermost(content)))
    return outer


def _innermost(content: str) -> str:
    """A box's content with the boxes that wholly wrap it taken off (``\boxed{1}`` -> ``1``),
    a bounded number of times."""
    for _ in range(_MAX_BOXES_PER_LINE):
        inner = content.strip()
        if not inner.startswith(BOX_COMMANDS) or (span := _box_span(inner, 0)) is None or span[1] != len(inner):
            break
        content = span[0]
    return content


def strip_boxes(line: str) -> str:
    """The line without its (first few) boxes."""
    kept, at = [], 0
    for start, end, _ in _boxes_in(line):
        kept.append(line[at:start])
        at = end
    kept.append(line[at:])
    return " ".join(kept)


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

