"""A box on the Answer line: when it is the line's answer, and what around it offers another.

A ``\\boxed{}`` on the Answer line wins over the rest of the line (:mod:`~dapo.rewards.extract`), with two rules
for the text around it:

- **A box that states the reason is no answer** (:func:`without_boxed_reason`). A "since" or "because" clause
  after the line's value or name is the reason's (:mod:`~dapo.rewards.reasons`), and so is a box in it that
  states the reason rather than an answer: one that holds a relation (``Answer: 34, since \\boxed{n = 35}`` and
  ``Answer: 34 (since \\boxed{n = 35})`` state 34, ``Answer: \\boxed{34}, since \\boxed{n = 35}`` the box before
  the reason) or one the reason goes on to describe (``Answer: $34$ because $\\boxed{35}$ is odd``: 34). Before,
  the last box won even inside the reason (right for 35). A box that holds a value alone and ends the reason (its
  unit or counted noun and closing punctuation aside) is the line's boxed answer, as a box is everywhere else:
  ``Answer: n = 5 since n is odd and the count is \\boxed{35}`` states 35 (it read ``n = 5`` when every box in a
  reason was the reason's), ``Answer: \\boxed{34}, since \\boxed{35}`` boxes two values (a hedge). A box at the
  start of the line, after words only (``Answer: since n is odd, \\boxed{35}``) or after a word that concludes
  the reason (``Answer: n = 5, since n is odd, so \\boxed{n = 35}``: "so", "hence", "thus", "therefore",
  "giving", "the answer is") is the answer too; a reason whose "or" offers a value stays on the line for the
  hedge rules (``34, since \\boxed{n = 35}, or 36``: wrong).
- **A bare value before a reason whose box holds another offers both** (:func:`_value_before_reason_changes`):
  ``Answer: 35, since \\boxed{34}`` is wrong, ``Answer: 34, since \\boxed{34}`` and ``Answer: n = 5 since n is
  odd and the count is \\boxed{35}`` are not (the first restates it, the second names a step).
- **Only an "or" that restates the box's value is no hedge** (:func:`from_line_box`). An "or" or "either"
  before the box (``35 or \\boxed{34}``, ``either \\boxed{34}``), or anywhere after it but at the opening of the
  remark right after it, offers another answer. The "or" that opens that remark (after the value's unit or
  counted noun, punctuation or a parenthesis: ``\\boxed{5} cm, or 50 mm``, ``\\boxed{34} (or 34.0)``) is judged as
  the boxed extractor judges it (:func:`~dapo.rewards.boxes.changed_after`): one that restates the value with a
  number or math is a remark (``Answer: \\boxed{2} or \\sqrt{4}``, ``Answer: \\boxed{\\frac13}, or about 0.33``:
  right), one with another value a hedge (``or \\sqrt{2}``, ``or 5 mm``), and so is a number after its parenthesis
  (``\\boxed{34} (or 34) 35``). Before, every "or" on the line was a hedge, so the Answer line judged wrong what
  the boxed extractor judged right. An "or" followed by no number or math (``\\boxed{34} or so``) stays a hedge.

Bounded: at most :data:`~dapo.rewards.boxes._MAX_BOXES_PER_LINE` boxes masked, one reason pass
(:func:`~dapo.rewards.reasons.without_reason`) and linear regular-expression scans of one line.
"""

from __future__ import annotations

import re

from dapo.rewards.answer_text import HEDGE, Extracted
from dapo.rewards.boxes import around_last_box, from_last_box, last_box_start, outer_boxes
from dapo.rewards.number_forms import restates, value_of
from dapo.rewards.reasons import REASON_WORD, without_reason
from dapo.rewards.remark_words import spelled_numbers_as_digits
from dapo.rewards.restatements import after_its_noun, letters_end_a_value

# The "or" that opens the remark right after the box: "\\boxed{2} or", "\\boxed{5} cm, or", "\\boxed{34} (or",
# "\\boxed{2}$ or", "\\boxed{2} \\text{ or }", "\\boxed{2} \\lor".
_OPENING_OR = re.compile(r"(?:\\[)\]]|[\s$.,;(]){0,8}(?:\\text\{ {0,3})?(?:or|\\lor)(?![A-Za-z])", re.IGNORECASE)
# What an "or" restating a value states after it: a digit or math ("or 0.33", "or \\sqrt{4}"); not "or so".
_STATES_A_VALUE = re.compile(r"[0-9]|\\[A-Za-z]")
# A word that ends a reason with what it concludes: "since n is odd, so \\boxed{35}", "hence", "the answer is".
_CONCLUSION = re.compile(r"(?<![A-Za-z\\])(?:so|hence|thus|therefore|giving|gives|yielding|yields|answer\s+is)"
                         r"(?![A-Za-z])", re.IGNORECASE)
# What makes a box a statement of the reason, not a value: a relation ("n = 35", "n \\ge 35", "x \\in S") or a copula.
_RELATION = re.compile(r"[=<>≤≥≠≈]|\\(?:[lg]eq?|[lg]eqslant|neq?|approx|equiv|sim|in|notin|subseteq|subset)(?![A-Za-z])"
                       r"|(?<![A-Za-z\\])(?:is|are|equals)(?![A-Za-z])", re.IGNORECASE)
# Closing delimiters and punctuation around what follows a box: "\\boxed{35}$.", "\\boxed{35}\\)", "\\boxed{35})".
_CLOSINGS = re.compile(r"(?:\\[)\]]|[\s$.,;!?)\]])+")
_TEXT_WRAPPER = re.compile(r"\\(?:text|textrm|mathrm|mbox|textnormal)\s{0,3}\{([A-Za-z ]{0,40})\}")
# A word outside LaTeX commands: "2 cases" names what it counts, a step rather than a bare value.
_WORD_OUTSIDE_LATEX = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
_PLACEHOLDER = 0xE000  # boxes masked as "\\boxed{<private-use character>}" while the reasons are read


def without_boxed_reason(line: str) -> str:
    """``line`` without the reason clause the last box is in, when that clause follows a value or name (module
    rules): ``34, since \\boxed{n = 35}`` -> ``34``; ``line`` itself otherwise. The boxes are masked while the
    reasons are read, so a reason inside one (``\\boxed{34 \\text{ since } n = 35}``) is the box's own."""
    boxes = outer_boxes(line)
    if not boxes or last_box_start(line) >= boxes[-1][1]:  # none, or more boxes on the line than are read
        return line
    masked, at = [], 0
    for index, (start, end, _) in enumerate(boxes):
        masked.append(f"{line[at:start]}\\boxed{{{chr(_PLACEHOLDER + index)}}}")
        at = end
    masked_line = "".join(masked) + line[at:]
    stated = without_reason(masked_line)
    last = f"\\boxed{{{chr(_PLACEHOLDER + len(boxes) - 1)}}}"
    if (stated is None or last in stated or _concludes(masked_line[: masked_line.index(last)])
            or _boxes_an_answer(line, boxes[-1])):
        return line
    for index, (start, end, _) in enumerate(boxes):
        stated = stated.replace(f"\\boxed{{{chr(_PLACEHOLDER + index)}}}", line[start:end])
    return stated


def _boxes_an_answer(line: str, box: tuple[int, int, str]) -> bool:
    """Whether the box a reason holds is the line's boxed answer rather than the reason's own statement: it holds a
    value, no relation (``\\boxed{35}``, not ``\\boxed{n = 35}``), and nothing after it but its unit or counted noun
    and closing punctuation (``the count is \\boxed{35}.``, ``\\boxed{35} ways``; not ``\\boxed{35} is odd``, which the
    reason goes on to describe). A box marks the answer wherever else it stands, so one that states a value and
    ends the reason is that answer (``Answer: n = 5 since n is odd and the count is \\boxed{35}``: 35)."""
    _, end, content = box
    if _RELATION.search(content) is not None:
        return False
    tail = _CLOSINGS.sub(" ", _TEXT_WRAPPER.sub(r" \1 ", line[end:])).strip()
    return not tail or letters_end_a_value(f"{content} {tail}")


def _concludes(before_box: str) -> bool:
    """Whether a conclusion word stands between the last reason word in ``before_box`` and its end: the box after
    it is what the reason concludes, not part of the reason (``n = 5, since n is odd, so \\boxed{35}``)."""
    reasons = list(REASON_WORD.finditer(before_box))
    return bool(reasons) and _CONCLUSION.search(before_box, reasons[-1].end()) is not None


def from_line_box(line: str) -> Extracted | None:
    """The answer of an Answer line with a box (module rules): the last box's, with two candidates when an "or"
    or "either" outside it offers another answer; None when the line has no closed box."""
    boxed = from_last_box(line)
    around = around_last_box(line)
    if boxed is None or around is None or boxed.candidates > 1:
        return boxed
    before, after = around
    remark = spelled_numbers_as_digits(after_its_noun(after))  # "or thirty-four" restates 34 as "or 34" does
    opening = _OPENING_OR.match(remark)
    words = [word.end() for word in HEDGE.finditer(remark)]
    judged = opening is not None and words == [opening.end()] and _STATES_A_VALUE.search(remark, opening.end())
    if judged and opening is not None and "(" in opening.group(0):  # "(or 34) 35": a number after the remark
        close = remark.find(")", opening.end())
        judged = close >= 0 and not any(char.isdigit() for char in remark[close + 1 :])
    if HEDGE.search(before) or (words and not judged) or _value_before_reason_changes(before, boxed.text):
        return Extracted(boxed.text, candidates=2, items=boxed.items, qualified=True)  # "$34$ or $\boxed{35}$"
    return boxed


def _value_before_reason_changes(before: str, boxed: str) -> bool:
    """Whether the line states a bare value before a reason whose box holds another: ``Answer: 35, since
    \\boxed{34}`` offers both (a named value, ``n = 5 since ... \\boxed{35}``, or a counted one, ``2 cases,
    since ...``, is a step; ``34, since \\boxed{34}`` and ``2, since \\boxed{\\sqrt{4}}`` restate it)."""
    reason = REASON_WORD.search(before)
    if reason is None:
        return False
    head = before[: reason.start()].strip(" \t,;($")
    if not head or _RELATION.search(head) is not None or _WORD_OUTSIDE_LATEX.search(head):  # "2 cases, since"
        return False
    head_value = value_of(head)
    return head_value is not None and head_value != value_of(boxed) and not restates(boxed, head)
