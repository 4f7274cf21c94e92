"""The built-in math verifier: extraction + equivalence, and the policy between them.

Policy (what counts as correct), in order:
1. The response is cut to its last ``max_response_chars`` characters (the answer is at the end).
2. The final answer is taken behind the last anchor (``Answer:`` line or ``\\boxed{}``); no
   anchor means no answer, which is wrong. The ground truth is cleaned the same way when it
   has an anchor itself (a boxed or "Final Answer:" solution); chained boxes in it are a list.
3. An inequality disjunction (``x<-1 or x>2``, see :mod:`~dapo.rewards.inequalities`) is one
   answer, not a hedge: when the final answer is one, or the ground truth is one and the final
   answer states a single item, each disjunction is compared as the interval union it describes
   (``(-\\infty,-1)\\cup(2,\\infty)``).
   Otherwise, ground truth with one answer: a final answer offering several candidates ("34 or 35",
   two different boxes on the last line, two ``$...$`` segments on the answer line) is wrong.
4. Ground truth that is a list or set (``1, 2``, ``\\{1,2\\}``, ``3 and 5``, see
   :func:`~dapo.rewards.equivalence.answer_items`): the stated answers (chained boxes
   ``\\boxed{1}, \\boxed{2}``, several math segments, or one ``1, 2`` / ``1 or 2``) are joined
   and compared as a set: every element right, none missing, none extra.
5. :func:`~dapo.rewards.equivalence.quick_verdict` (``quick_list_verdict`` for lists) decides
   integers exactly with string operations; everything else goes to math-verify.

:func:`prepare` does steps 1-5 up to the math-verify call: pure, linear-time string work that
the scorer runs in the parent process. :func:`verify` is the whole pipeline in-process.
"""

from __future__ import annotations

from dataclasses import dataclass

from dapo.rewards.equivalence import (
    answer_items,
    canonical_integer,
    join_items,
    math_equal,
    quick_list_verdict,
    quick_verdict,
)
from dapo.rewards.extract import (
    Extracted,
    bound_response,
    clean_answer,
    extract_answer,
    resolve_extractor,
)
from dapo.rewards.inequalities import interval_union
from dapo.rewards.unicode_math import unicode_math_to_latex

DEFAULT_MAX_RESPONSE_CHARS = 20000
PRED_DISPLAY_CHARS = 100


@dataclass(frozen=True)
class Prepared:
    """A response after extraction: the answer, the cleaned ground truth, and the verdict
    if string operations could decide it (None: math-verify must)."""

    pred: str
    ground_truth: str
    verdict: bool | None


def clean_ground_truth(ground_truth: str) -> str:
    """Ground truths may come as ``$...$``, ``\\boxed{...}`` or a whole solution with a final
    ``Answer:`` line; keep the bare answer. Chained boxes (``\\boxed{1}, \\boxed{2}``) are a list."""
    anchored = extract_answer(ground_truth, "any")
    if anchored is None:
        return clean_answer(ground_truth)
    return join_items(list(anchored.items)) if anchored.items else anchored.text


def _stated_items(extracted: Extracted) -> list[str]:
    """Every element the final answer states: chained boxes / segments, each possibly a list."""
    parts = extracted.items or (extracted.text,)
    return [item for part in parts for item in answer_items(part)]


def _as_sets_of_reals(extracted: Extracted, gold: str) -> tuple[str, str] | None:
    """(answer, ground truth) with each inequality disjunction rewritten as its interval union,
    or None when neither side is one (step 3). The answer must be a single stated answer: a
    hedge around a disjunction stays a hedge, and against a disjunction ground truth, a list
    (``x<-1, x>2``, chained boxes) keeps the list comparison it always had."""
    single = extracted.candidates == 1 and not extracted.items
    pred_union = interval_union(extracted.text) if single else None
    gold_union = interval_union(gold)
    if pred_union is None and (gold_union is None or len(_stated_items(extracted)) > 1):
        return None
    return pred_union or extracted.text, gold_union or gold


def prepare(
    response: str,
    ground_truth: str,
    extractor: str = "answer",
    max_response_chars: int = DEFAULT_MAX_RESPONSE_CHARS,
) -> Prepared:
    """Extract the answer and decide it when that needs no parsing (steps 1-5 above)."""
    text = bound_response(response, max_response_chars)
    gold = unicode_math_to_latex(clean_ground_truth(bound_response(ground_truth, max_response_chars)))
    gold = canonical_integer(gold) or gold  # math-verify sees "50", never "50\%"
    extracted = extract_answer(text, resolve_extractor(extractor, None))
    if extracted is None or not extracted.text:
        return Prepared(pred="", ground_truth=gold, verdict=False)
    extracted = extracted.in_latex()  # 34·2, 34², 2√3: Unicode mathematics as LaTeX
    as_sets = _as_sets_of_reals(extracted, gold)
    if as_sets is not None:  # "x<-1 or x>2": one set of reals, neither a hedge nor a list
        pred_set, gold_set = as_sets
        return Prepared(pred_set, gold_set, quick_verdict(pred_set, gold_set))
    gold_items = answer_items(gold)
    if len(gold_items) > 1:  # a list / set ground truth: compare the stated answers as a set
        pred_items = _stated_items(extracted)
        verdict = quick_list_verdict(pred_items, gold_items)
        return Prepared(join_items(pred_items), join_items(gold_items), verdict)
    if extracted.hedged:
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
    that runs past ``timeout_s``. ``extractor``: "answer", "boxed", "any" or "auto" (= "any").
    """
    prepared = prepare(response, ground_truth, extractor, max_response_chars)
    correct = prepared.verdict
    if correct is None:
        correct = math_equal(prepared.pred, prepared.ground_truth)
    return correct, shorten(prepared.pred)
