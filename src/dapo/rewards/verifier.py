"""The built-in math verifier: extraction + equivalence, and the policy between them.

Policy (what counts as correct), in order:
1. The response is cut to its last ``max_response_chars`` characters (the answer is at the end).
2. The final answer is taken behind the last anchor (``Answer:`` line or ``\\boxed{}``); no
   anchor means no answer, which is wrong. A whole answer in words is its number (``Answer: two``,
   ``one hundred``; so is a ground truth in words). The ground truth is cleaned the same way when it
   has an anchor itself (a boxed or "Final Answer:" solution); chained boxes in it are a list.
   An equation written value first (``34 = x``) is read name first (``x = 34``). An answer that
   states no value math-verify reads one out of is wrong: a dangling operator (``34 +``), a bare
   relation (``\\approx 34``, ``\\ge 34``), an equation on an expression of one variable
   (``x^2=34``, ``34 = 35x``) or between two rational numbers (``34 = 35``, ``\\frac12 = 0.6``, ``\\frac12 = \\frac23``,
   ``34 = 2 \\text{ cm}``: a unit on one side, or the same on both, is dropped); see
   :mod:`~dapo.rewards.incomplete`. A reason after the answer's value or name is no answer (``x (since n is 35)``,
   ``34 since n = 35``, ``\\boxed{34 \\text{ since } n = 35}``: :mod:`~dapo.rewards.reasons`, at extraction). A count of items then as many items after "i.e.", "that is" or
   "namely" states the items (``2 solutions, i.e. 3 and 5``:
   :func:`~dapo.rewards.restatements.items_after_count`).
3. An inequality disjunction (``x<-1 or x>2``, see :mod:`~dapo.rewards.inequalities`) is one
   answer, not a hedge: when the final answer is one, or the ground truth is one and the final
   answer states a single item, each disjunction is compared as the interval union it describes
   (``(-\\infty,-1)\\cup(2,\\infty)``); so are one inequality and one interval (``x > 2`` and
   ``(2,\\infty)``, either way round), except a ground truth ``(3,5)``, which may be a point
   (:func:`~dapo.rewards.inequalities.is_open_pair`). Sets stated in two different variables are wrong.
   Otherwise, ground truth with one answer: a remark closing the answer is dropped when it only
   describes or restates it (``\\frac13 (approximately 0.33)``, ``(or about 0.33)``, ``\\frac13, or
   about 0.33``, ``\\sqrt2 (about 1.41)``) and makes it wrong when it offers another value
   (``(about 0.5)``, ``(or 35)``, ``(or x = 35)``, ``\\sqrt2 (about 7)``, ``e^2 (about 9)``, ``34 (about 34K)``,
   ``\\sqrt2 (\\approx \\frac{1}{1})``; a closed form by its computed value, ``2 (or \\sqrt{2})`` offers
   another and ``2 (or \\sqrt{4})`` restates it, :mod:`~dapo.rewards.alternatives`); a count of the
   answer's items is a remark when it is their number (``34 (1 solution)``; ``(2 solutions)`` offers another), see
   :func:`~dapo.rewards.number_forms.without_closing_remark`; then a final answer offering several
   candidates ("34 or 35", two different boxes on the last line, two ``$...$`` segments on the
   answer line) is wrong, and so is one naming a unit other than the ground truth's (``34 hours``
   for ``34 minutes``).
4. Ground truth that is a list or set (``1, 2``, ``\\{1,2\\}``, ``3 and 5``, see
   :func:`~dapo.rewards.answer_lists.answer_items`): the stated answers (chained boxes
   ``\\boxed{1}, \\boxed{2}``, several math segments, or one ``1, 2`` / ``1 or 2``) are joined
   and compared as a set: every element right, none missing, none extra. Text around the list that
   offers another answer or continues its math makes it wrong as for one answer (``\\boxed{34, 5} (or
   35)``, ``\\boxed{34, 5}^2``); a remark closing it is dropped when it counts its items right (``(2
   solutions)``) or is in words (:mod:`~dapo.rewards.hedges`). An approximation written without
   brackets after a value (``\\sqrt2 \\approx 1.414``; ``\\sqrt2 \\approx 7`` and ``x = \\sqrt2 \\approx 7`` are
   wrong) follows the rule of a bracketed one, in a single answer and in each item; so does a
   restatement after "i.e.", "ie", "that is" or "equivalently" (``2, i.e. \\sqrt{4}`` states 2; ``34, i.e.
   \\frac{2}{3}``, ``x = 2; i.e. \\sqrt{2}`` are wrong; ``34, i.e. 2x`` is left to math-verify), while an
   ``=`` or "which is" keeps the rules of the Answer line (:mod:`~dapo.rewards.hedges`). A value ends at its
   unit or counted noun, and a LaTeX constant is a value, not a name (``34 ways, that is, 35``, ``\\infty,
   that is, 35`` are wrong; ``34 cm, or about 34`` states 34: :mod:`~dapo.rewards.restatements`).
5. :func:`~dapo.rewards.equivalence.quick_verdict` (``quick_list_verdict`` for lists) decides
   integers exactly with string operations; everything else goes to math-verify.

:func:`prepare` does steps 1-5 up to the math-verify call: pure, linear-time string work that
the scorer runs in the parent process. :func:`verify` is the whole pipeline in-process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from dapo.rewards.answer_lists import (
    answer_items,
    join_items,
    named_tuple_as_list,
    quick_list_verdict,
    tuple_as_named,
)
from dapo.rewards.answer_text import Extracted, bound_response, clean_answer
from dapo.rewards.approximations import equals_value
from dapo.rewards.counts import item_count
from dapo.rewards.equivalence import quick_verdict, vote_key
from dapo.rewards.extract import extract_answer, resolve_extractor
from dapo.rewards.hedges import without_bare_remark, without_list_remark
from dapo.rewards.incomplete import name_first, states_no_value
from dapo.rewards.inequalities import is_open_pair, real_set
from dapo.rewards.math_verify_call import math_equal
from dapo.rewards.number_forms import (
    VARIABLE_PREFIX,
    canonical_integer,
    value_of,
    without_closing_remark,
)
from dapo.rewards.remark_words import spelled_answer_as_digits, spelled_numbers_as_digits
from dapo.rewards.restatements import items_after_count
from dapo.rewards.unicode_math import unicode_math_to_latex
from dapo.rewards.units import in_dollars, units_differ
from dapo.rewards.unread import unread_part

DEFAULT_MAX_RESPONSE_CHARS = 20000
PRED_DISPLAY_CHARS = 100


@dataclass(frozen=True)
class Prepared:
    """A response after extraction: the answer, the cleaned ground truth, and the verdict
    if string operations could decide it (None: math-verify must)."""

    pred: str
    ground_truth: str
    verdict: bool | None
    # math_dapo: an ``Answer:`` line whose answer normalises to "" (the reference's maj@k votes
    # for "" apart from [INVALID], a response without the line)
    empty_answer_line: bool = False


def clean_ground_truth(ground_truth: str) -> str:
    """Ground truths may come as ``$...$``, ``\\boxed{...}`` or a whole solution with a final
    ``Answer:`` line, or GSM8K's, ending in a ``#### 72`` line; keep the bare answer. Chained
    boxes (``\\boxed{1}, \\boxed{2}``) are a list."""
    if (last_line := ground_truth.rstrip().rpartition("\n")[2].strip()).startswith("####"):
        return clean_answer(last_line.removeprefix("####").strip())
    anchored = extract_answer(ground_truth, "any")
    if anchored is None:
        return clean_answer(ground_truth)
    return join_items(list(anchored.items)) if anchored.items else anchored.text


def _stated_items(extracted: Extracted) -> list[str]:
    """Every element the final answer states: chained boxes / segments, each possibly a list."""
    parts = extracted.items or (extracted.text,)
    return [item for part in parts for item in answer_items(part)]


def _items_in(text: str) -> int:
    """How many values ``text`` states as a list (``3 and 5``: 2), for
    :func:`~dapo.rewards.restatements.items_after_count`."""
    return item_count(answer_items(text))


def _list_answer(extracted: Extracted) -> list[str] | None:
    """The items a list answer states (:func:`_stated_items`), with a remark closing it dropped
    (``34, 5 (2 solutions)``) and an approximation after an item's value dropped (``\\sqrt2 \\approx
    1.41, 3``); None when text around it offers another answer (``\\boxed{34, 5} (or 35)``,
    ``\\boxed{34, 5}^2``, ``$34, 5$ or 35``: :attr:`Extracted.qualified`, :mod:`~dapo.rewards.hedges`)."""
    if extracted.qualified:
        return None
    if not extracted.items:
        text = without_list_remark(extracted.text)
        if text is None:
            return None
        extracted = replace(extracted, text=text)
    items = [without_bare_remark(item) for item in _stated_items(extracted)]
    return None if None in items else items  # type: ignore[return-value]


def _as_sets_of_reals(extracted: Extracted, gold: str) -> Prepared | None:
    """The comparison of step 3, or None when it does not apply: each side that states a set of
    reals (:func:`~dapo.rewards.inequalities.real_set`) rewritten as that set when one side is an
    inequality disjunction, or one is an inequality and the other an interval (``x > 2`` and
    ``(2,\\infty)``, either way round). The answer must be a single stated answer: a hedge around
    a disjunction stays a hedge, and against a disjunction ground truth, a list (``x<-1, x>2``,
    chained boxes) keeps the list comparison it always had. Two inequalities, or two intervals,
    are compared as before (math-verify). Sets stated in two different variables are different
    answers (``y > 2`` for ``x > 2``); a bare interval names none, so fits any."""
    if extracted.candidates > 1:  # "$35$ or \\boxed{(-\\infty,-1)\\cup(2,\\infty)}": a hedge (before: right)
        return None
    pred_set = real_set(extracted.text) if not extracted.items else None
    gold_set = real_set(gold)
    if gold_set is not None and gold_set.variable is None and is_open_pair(gold):
        gold_set = None  # a gold (3,5) may be a point: "3<x<5" is not it (before: right, as an interval)
    if (gold_set is not None and pred_set is None and _values_alone(_stated_items(extracted))) or (
            pred_set is not None and gold_set is None and not is_open_pair(extracted.text)
            and _values_alone(answer_items(gold))):
        # "1, 3" for 1<x<3, "x \in (1,3)" for "1, 3": the ends, not the set between them (math-verify's match)
        return Prepared(join_items(_stated_items(extracted)), gold, verdict=False)
    kinds = {found.kind for found in (pred_set, gold_set) if found is not None}
    if "disjunction" in kinds:
        pred_is_union = pred_set is not None and pred_set.kind == "disjunction"
        if not pred_is_union and len(_stated_items(extracted)) > 1:
            return None
    elif kinds != {"inequality", "interval"} or pred_set is None or gold_set is None:
        return None
    pred = pred_set.latex if pred_set is not None else extracted.text
    gold_text = gold_set.latex if gold_set is not None else gold
    if pred_set is not None and gold_set is not None and None not in (pred_set.variable, gold_set.variable) \
            and pred_set.variable != gold_set.variable:
        return Prepared(pred, gold_text, verdict=False)
    return Prepared(pred, gold_text, quick_verdict(pred, gold_text))


_THOUSANDS_GROUP = re.compile(r"[0-9]{3}(?![0-9])")
_COLUMN_SPEC = re.compile(r"^\s{0,3}\{[lcr| ]{1,20}\}")
_CASES = re.compile(r"\\begin\{[dr]?cases\*?\}|\\left\\\{\s{0,3}\\begin\{array\}")
# a ground truth that states several values or a set: "\\pm 2021", "x \\in \\{2, 3\\}", "x = \\{2, 3\\}"
_SEVERAL_IN_GOLD = re.compile(r"\\(?:pm|mp|in)(?![A-Za-z])|[±∓]|\\\{")
_OPENS_WITH_A_NUMBER = re.compile(r"[+-]?\s{0,3}(?:[0-9]|\\[dt]?frac(?![A-Za-z]))")
# Characters that show nothing: "3\u200b4" is read as the 34 it shows, "34\u200b35" as 3435
# (zero-width spaces and joiners, word joiner, BOM; soft hyphen, grapheme joiner, Mongolian vowel separator;
# direction marks, embeddings and isolates; invisible times, separator and plus)
_INVISIBLE_CHARS = "\u200b\u200c\u200d\u2060\ufeff\u00ad\u034f\u180e\u200e\u200f\u202a\u202b\u202c\u202d\u202e" \
    "\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069"
_INVISIBLE = re.compile(f"[{_INVISIBLE_CHARS}]")
_PROOF_END = re.compile(r"\$\s{0,3}\\(?:blacksquare|square|qed|Box)\s{0,3}\$|\\(?:blacksquare|qed)(?![A-Za-z])|\u220e")
_PROOF_END_PARTS = ("square", "qed", "Box", "\u220e")  # one of which every _PROOF_END match holds
# LaTeX's non-breaking space, or a horizontal space, between two digits ("34~35", "34 ~ 35",
# "34\\hspace{1em}35" show two numbers, not one of them)
_TIE_BETWEEN_DIGITS = re.compile(r"(?<=[0-9]) {0,3}(?:~|\\hspace\*?\{[^{}]{0,20}\}) {0,3}(?=[0-9])")
# Unicode's spaces, which show as a space does ("34\u00a035" two numbers, "1\u00a0000" one): read as one
_UNICODE_SPACE = re.compile("[\u00a0\u2000-\u200a\u202f\u205f\u3000]")


def _names_another_axis(pred: str, ground_truth: str) -> bool:
    """Whether both answers name a coordinate, x, y or z, with a value (``x = 2``, ``y=2``), and not the same
    one: a line or plane answer, where the letter is the answer (the values alone compared equal)."""
    names = [VARIABLE_PREFIX.match(answer.strip()) for answer in (pred, ground_truth)]  # (cheap: first)
    letters = {match.group(0).split("=")[0].strip().lower() for match in names if match is not None}
    if None in names or len(letters) != 2 or not letters <= {"x", "y", "z"}:
        return False
    if len(answer_items(pred)) > 1 or len(answer_items(ground_truth)) > 1:
        return False  # "y=4, x=3": a list, whose names are compared item by item
    # "y = x" for "x = y": a line solved for the other letter
    return all(value_of(answer.strip()[name.end():]) is not None  # type: ignore[union-attr]
               for answer, name in zip((pred, ground_truth), names))


def _states_several_values(answer: str, ground_truth: str) -> bool:
    """Whether ``answer`` is a list of two or more numbers that differ (``3 \\text{ red}, 4 \\text{ blue}``) while
    ``ground_truth`` is one value, not a tuple, interval or vector (``1, 2`` for ``(1, 2)`` is left to
    math-verify) nor two or a set (``\\pm 2021``, ``x \\in \\{2, 3\\}``). Math-verify reads ``3, 4`` as a set, but
    a word after a number broke its list: it read ``3 \\text{ red}, 4 \\text{ blue}`` as 3. So is a value per case
    (``\\begin{cases} 3 & n \\text{ even} \\\\ 4 & n \\text{ odd} \\end{cases}``) for a ground truth without cases:
    math-verify read the last row's. Items of one value in two forms (``\\frac12, 0.5``) are left as before."""
    if ground_truth.lstrip().startswith(("(", "[", "\\left", "\\langle", "<")) or _SEVERAL_IN_GOLD.search(ground_truth):
        return False  # ("-2021, 2021" for "\\pm 2021": math-verify's suite counts it right; "x \\in \\{2, 3\\}")
    if _CASES.search(answer) and not _CASES.search(ground_truth):
        return _differ(_case_values(answer))
    items = answer_items(answer)
    if len(items) < 2 or not all(_OPENS_WITH_A_NUMBER.match(item) for item in items):
        return False  # "34, i.e. 34 m/s": a restatement (its rules)
    if any(_THOUSANDS_GROUP.match(item) for item in items[1:]):
        return False  # "1,000.99m²": a number whose unit kept it from reading as one (left as before)
    return _differ(items)


def _case_values(answer: str) -> list[str]:
    """The value of each row of the first cases environment in ``answer`` (what precedes its ``&``)."""
    body = _CASES.split(answer, 1)[1].split("\\end", 1)[0]
    body = _COLUMN_SPEC.sub("", body, count=1)  # "\\begin{array}{ll}"
    return [row.split("&", 1)[0].strip() for row in body.split("\\\\") if row.strip()]


def _differ(values: list[str]) -> bool:
    """Whether two or more ``values`` are not all one value (by maj@k's
    :func:`~dapo.rewards.equivalence.vote_key`, then computed: ``\\frac12, 0.5`` are one; one not computed differs)."""
    if len(values) < 2 or len({vote_key(value) for value in values}) == 1:
        return False
    computed = [value_of(value) for value in values]
    return None in computed or not all(equals_value(value, computed[0]) for value in computed[1:])  # type: ignore[arg-type]


def _values_alone(items: list[str]) -> bool:
    """Two or more items, each a value (``1, 3``, ``x=1, x=3``)."""
    return len(items) > 1 and all(value_of(item) is not None for item in items)


def after_reasoning(response: str) -> str:
    """The part of ``response`` after a reasoning model's thinking (``<think>...</think>``, as
    DeepSeek-R1 and Qwen3 write it): the final answer is read there alone, never from an answer
    tried inside the thinking; a response still thinking when it ended states none ("")."""
    if "</think>" in response:
        return response.rpartition("</think>")[2]
    return "" if "<think>" in response else response


def as_rendered(text: str) -> str:
    """``text`` as a reader sees it: characters that show nothing gone (zero-width, direction marks, soft
    hyphens); Unicode's spaces, and a ``~`` or ``\\hspace{}`` between digits, a space; and without a proof's end
    mark (``$\\blacksquare$``, ``\\qed``, ``∎``), which is no answer: read as one, it hid the value before it on
    the Answer line."""
    # (each pattern run only where its characters are: a 7k-character response took 0.1 ms a pass)
    if any(char in text for char in _INVISIBLE_CHARS):
        text = _INVISIBLE.sub("", text)
    if not text.isascii():
        text = _UNICODE_SPACE.sub(" ", text)
    if "~" in text or "hspace" in text:
        text = _TIE_BETWEEN_DIGITS.sub(" ", text)
    if any(mark in text for mark in _PROOF_END_PARTS):
        text = _PROOF_END.sub("", text)
    return text


def prepare(
    response: str,
    ground_truth: str,
    extractor: str = "answer",
    max_response_chars: int = DEFAULT_MAX_RESPONSE_CHARS,
) -> Prepared:
    """Extract the answer and decide it when that needs no parsing (steps 1-5 above)."""
    # the thinking is cut off first, then the length: a response cut at max_response_length inside its
    # thinking, longer than max_response_chars, lost its "<think>" to the bound and was read as an answer
    text = bound_response(after_reasoning(as_rendered(response)), max_response_chars)
    stated_gold = unicode_math_to_latex(clean_ground_truth(as_rendered(
        bound_response(ground_truth, max_response_chars))))
    stated_gold = spelled_answer_as_digits(stated_gold)  # a ground truth "two" is 2, as an answer "2"
    gold = canonical_integer(stated_gold) or stated_gold  # math-verify sees "50", never "50\%"
    gold = named_tuple_as_list(gold)  # "(x, y) = (3, 4)": x=3, y=4, compared name by name
    extracted = extract_answer(text, resolve_extractor(extractor, None))
    if extracted is None or not extracted.text:
        return Prepared(pred="", ground_truth=gold, verdict=False)
    extracted = extracted.in_latex()  # 34·2, 34², 2√3: Unicode mathematics as LaTeX
    extracted = replace(extracted, text=spelled_answer_as_digits(extracted.text))  # "Answer: two" is 2
    if any(char.isdigit() for char in extracted.text):  # "34. Maybe thirty-five": read as "Maybe 35" is
        extracted = replace(extracted, text=spelled_numbers_as_digits(extracted.text))
    listed = items_after_count(extracted.text, _items_in) if not extracted.items else None
    if listed is not None:  # "2 solutions, i.e. 3 and 5": the items the count names
        extracted = replace(extracted, text=listed)
    extracted = replace(extracted, text=name_first(extracted.text),  # "34 = x" is read as "x = 34"
                        items=tuple(name_first(item) for item in extracted.items))
    if _names_another_axis(extracted.text, stated_gold):  # "x = 2" for the line "y=2"
        return Prepared(pred=extracted.text, ground_truth=stated_gold, verdict=False)
    if any(states_no_value(item, gold) or unread_part(item, gold) for item in extracted.items or (extracted.text,)):
        return Prepared(pred=extracted.text, ground_truth=gold, verdict=False)  # "34 +", "\\approx 34", "34–35"
    as_sets = _as_sets_of_reals(extracted, gold)
    if as_sets is not None:  # "x<-1 or x>2", "x > 2" for (2,\infty): sets of reals, not hedges or lists
        return as_sets
    gold_items = answer_items(gold)
    if len(gold_items) > 1:  # a list / set ground truth: compare the stated answers as a set
        pred_items = _list_answer(extracted)
        if pred_items is None:  # "\\boxed{34, 5} (or 35)", "(3 solutions)": another answer
            return Prepared(join_items(_stated_items(extracted)), join_items(gold_items), verdict=False)
        pred_items = tuple_as_named(pred_items, gold_items)  # "(x, y) = (2, 5)" for "x=5, y=2"
        verdict = quick_list_verdict(pred_items, gold_items)
        return Prepared(join_items(pred_items), join_items(gold_items), verdict)
    # a remark in the gold too: the answer's is compared with it
    gold_has_a_remark = without_closing_remark(gold) != gold or without_bare_remark(gold) != gold
    answer = extracted.text if gold_has_a_remark else without_bare_remark(extracted.text)  # "\\sqrt2 \\approx 1.41"
    if answer is not None and not gold_has_a_remark:  # "\\frac13 (about 0.33)"; "\\sqrt2 \\approx 7": two values
        answer = without_closing_remark(answer)
    if answer is None:  # "\\frac13 (about 0.5)", "34 (or 35)": a second value in a remark
        return Prepared(pred=extracted.text, ground_truth=gold, verdict=False)
    extracted = replace(extracted, text=answer)  # "\\frac13 (or about 0.33)": the value, restated
    if extracted.hedged:
        return Prepared(pred=extracted.text, ground_truth=gold, verdict=False)
    if _states_several_values(extracted.text, gold):  # "3 \\text{ red}, 4 \\text{ blue}" for 3
        return Prepared(pred=extracted.text, ground_truth=gold, verdict=False)
    if units_differ(extracted.text, stated_gold, in_dollars(ground_truth)):  # "34 hours" for "34 minutes"
        return Prepared(pred=extracted.text, ground_truth=gold, verdict=False)
    return Prepared(extracted.text, gold, quick_verdict(extracted.text, gold))


def shorten(pred: str, limit: int = PRED_DISPLAY_CHARS) -> str:
    """Head and tail of a long answer, for logs."""
    if len(pred) <= limit:
        return pred
    half = (limit - 3) // 2
    return f"{pred[:half]}...{pred[-half:]}"


def verify(
    response: str,
    ground_truth: str,
    extractor: str = "answer",
    max_response_chars: int = DEFAULT_MAX_RESPONSE_CHARS,
) -> tuple[bool, str]:
    """(correct, shortened predicted answer) for one response, computed in this process.

    Input is length-bounded, but math-verify itself has no hard deadline here: for untrusted
    model output at scale use :class:`~dapo.rewards.scorer.RewardScorer`, which kills a worker
    that runs past ``timeout_s``. ``extractor``: "answer" (this function's default: the last
    "Answer:" line alone, as DAPO's prompt asks for), "boxed", "gsm8k", "any" (whichever of an
    Answer line and a box the response states last), or "auto" (``reward.extractor``'s default,
    which picks one of them by a row's data source; here, with none, "any")."""
    prepared = prepare(response, ground_truth, extractor, max_response_chars)
    correct = prepared.verdict
    if correct is None:
        correct = math_equal(prepared.pred, prepared.ground_truth)
    return correct, shorten(prepared.pred)
