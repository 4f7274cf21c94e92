"""What the scorer checks of the user functions before a run scores anything:

* at start, before the model loads: each function called once on a dummy item (a function that
  returns a wrong type is a bug, found in seconds, not after minutes of loading and a rollout);
* once the data has loaded (:func:`check_on_data`): the columns a TRL function requires (its
  parameters without a default, TRL's dataset columns) against the columns of each split's rows,
  and each function called on each split's first row, with that row's prompt, in its format (a
  chat, for TRL's conversational functions) and its columns (the dummy item has none).

A function that raises or times out there may be failing for the item's sake (a dummy's missing
column, a made-up response): it is warned of, not counted as the function's first failure, so a
real one during training is still shown and named.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dapo.rewards.tracebacks import without_own_frames
from dapo.rewards.user_functions import RewardFunctionError

if TYPE_CHECKING:
    from dapo.rewards.scorer import RewardScorer

logger = logging.getLogger("dapo.rewards")


def function_extra(extra: dict | None, data_source: str | None, prompt: Any = None) -> dict:
    """What a user function gets as ``extra``, built here alone: a copy of the row's extra fields,
    after the ``prompt`` it answers (an LLM judge reads the question, as TRL's reward functions
    get it) and with the row's ``data_source`` (which the loader takes out of the row's fields, as
    verl's ``compute_score`` gets it as an argument), unless the row has a field of that name."""
    fields = {} if prompt is None else {"prompt": prompt}
    fields.update(extra or {})
    if data_source is not None:
        fields.setdefault("data_source", data_source)
    return fields


# the fields every real item's extra has (the problem's prompt, the row's data_source), no others
SMOKE_ITEM = ("Reasoning...\nAnswer: 1", "1", function_extra(None, "smoke_test", "What is 0 + 1?"))


@dataclass(frozen=True)
class DataSample:
    """What :func:`check_on_data` reads of one split of the data: its first row as the scorer's
    item (a response stating the row's ground truth, the ground truth, the row's ``extra``) and
    the columns its rows have (any of them; a row without one holds None there, as a dataset does)."""

    split: str  # "training data", "held-out data"
    where: str  # the first row's file and row, as a data error names it
    item: tuple[str, str, dict]
    columns: frozenset[str]
    answer_key: str = ""  # the column the ground truth is read from (data.answer_key), for the messages
    files: tuple[str, ...] = ()


def smoke_test(scorer: RewardScorer) -> None:
    """Call each user function once on the dummy item, in a worker, before training starts.

    A wrong return type is a bug: raise. Raising or timing out may be the dummy item's fault
    (it has no extra fields but prompt and data_source): warn, showing the traceback; the data's
    first rows tell (:func:`check_on_data`). None is no wrong return: the function may not apply to
    the dummy item (said at INFO).
    """
    outcomes = _call_each(scorer, SMOKE_ITEM)
    for k, (spec, label, (kind, detail)) in enumerate(zip(scorer._specs, scorer.labels, outcomes)):
        if kind == "bad":
            raise RewardFunctionError(f"reward function {spec!r} returned a bad value: {detail}, on the start-up "
                                      f"test item (response {SMOKE_ITEM[0]!r}, ground truth {SMOKE_ITEM[1]!r}, "
                                      f"extra {SMOKE_ITEM[2]!r}), before the run starts")
        if kind != "ok":
            scorer.failed_on_the_dummy.add(k)
            logger.warning("%s (this run goes on: the dummy item has no extra fields but prompt and data_source, "
                           "so a column of your data reads None on it, and its prompt is text, so a function "
                           "written for chat prompts (TRL's conversational format) gets its completion as text, "
                           "not as a list of messages; it is tried on your data's first row once that has loaded)",
                           scorer._failure_message(label, kind, _shown(kind, detail), "a dummy item at start-up"))
        elif detail[0] is None:
            logger.info("%s returned None on the start-up test item: it does not apply to it (its return values "
                        "are checked on the items it applies to) (%s)", label, spec)


def check_on_data(scorer: RewardScorer, samples: Sequence[DataSample]) -> None:
    """Each TRL function's required columns against each split's, then each function on each
    split's first row: a missing column, or a bad value returned on a real row, raises
    :class:`RewardFunctionError` (the run has not started); a raise or a timeout there is warned of."""
    required = _call_each(scorer, None)
    for sample in samples:
        for spec, (kind, needed) in zip(scorer._specs, required):
            if kind == "ok" and (missing := [name for name in needed if name not in sample.columns]):
                raise RewardFunctionError(_missing_columns_message(spec, missing, sample))
    for sample in samples:
        outcomes = _call_each(scorer, sample.item)
        for k, (spec, label, (kind, detail)) in enumerate(zip(scorer._specs, scorer.labels, outcomes)):
            during = f"the first row of the {sample.split} ({sample.where})"
            if kind == "bad":
                raise RewardFunctionError(f"reward function {spec!r} returned a bad value: {detail}, on {during}, "
                                          f"given response {sample.item[0]!r}, before the run starts")
            if kind != "ok":
                said = scorer._failure_message(label, kind, _shown(kind, detail), during)
                logger.warning("%s, given the response %r (this run goes on; each failure during training is "
                               "counted in reward_failures/%s)", said, sample.item[0], label)
            elif k in scorer.failed_on_the_dummy:
                scorer.failed_on_the_dummy.discard(k)
                logger.info("%s returned a value on %s: its failure on the start-up dummy item was the dummy's", label,
                            during)


def _shown(kind: str, detail: Any) -> Any:
    """A failure's detail as a warning shows it: a traceback without the worker's own frames."""
    return without_own_frames(detail) if kind == "raised" else detail


def _call_each(scorer: RewardScorer, item: tuple[str, str, dict] | None) -> list[tuple[str, Any]]:
    """Each user function's outcome on ``item`` (a batched one's: the item's own, in its batch of
    one); for None, the columns each requires (``("ok", names)``)."""
    count = len(scorer._specs)
    tasks = [("columns", k) if item is None else scorer._task(k, [item]) for k in range(count)]
    outcomes = scorer._pool.run(tasks, scorer._timeouts)
    return [detail[0] if item is not None and kind == "ok" and scorer._batch_sizes[k] else (kind, detail)
            for k, (kind, detail) in enumerate(outcomes)]


def _missing_columns_message(spec: str, missing: list[str], sample: DataSample) -> str:
    """Why a TRL function cannot score this data: the columns it requires that no row has."""
    names = ", ".join(repr(name) for name in missing)
    plural = "s" * (len(missing) > 1)
    files = f" ({', '.join(sample.files)})" if sample.files else ""
    answers = (f"; the ground truth is its column {sample.answer_key!r} (data.answer_key)"
               if sample.answer_key else "")
    return (f"reward function {spec!r} is called as TRL calls it, with the dataset's columns by name, and requires "
            f"the column{plural} {names}, which no row of the {sample.split}{files} has: it would get None for every "
            f"response. The rows' columns: {', '.join(sorted(sample.columns))}{answers}. Name the parameter{plural} "
            f"after the data's column{plural}, or give {'them defaults' if plural else 'it a default'} "
            f"({missing[0]}=None) where the function is meant to go without")
