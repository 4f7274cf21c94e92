"""Batch reward scoring: built-in verifier + weighted user functions, never hanging.

Per response i (DAPO: correct_score = +1, incorrect_score = -1, one verifier, no user functions):

    score_i = verifier_weight * (correct_score if acc_i else incorrect_score)
              + sum_k weight_k * user_score_{k,i}

``acc`` comes from the verifier when ``verifier_weight != 0``, else from the first user
function (its ``"acc"`` if it returns one, else ``weight * score > 0``), and so does the answer
(``pred``, maj@k's vote): the verifier's, else that function's ``"pred"``. A scorer that runs past its
deadline or fails (raises, wrong return type, worker crash) sets ``timed_out`` / ``error`` and
contributes the lower of ``weight * incorrect_score`` and ``weight * correct_score`` (never a bonus); the item is incorrect (``acc = False``) when the failed
scorer is the one ``acc`` comes from (the verifier's math-verify call, or the first user function
without the verifier). Another function's failure costs its weight in the score but does not
make a correct answer wrong: avg@k and the correctness filter read the verifier's verdict.

A user function that returns None for an item does not apply to it (TRL's convention, for
multi-task data): it adds nothing to that item's score, is no failure, and is counted in the metric
``<function>/not_applicable`` (1.0 on the item, 0.0 on the items it applies to or failed on);
``acc`` then comes from the first user function that applies. An item that no reward source
applies to (every user function returned None, the verifier off) has no reward: it fails as
:data:`NO_REWARD`, scoring what every function's failure would.

Within one batch, a user function that times out on call after call, across problems, with no
call finishing in time in between, is taken for hung: its calls not yet started are not run but
fail as timeouts (:mod:`dapo.rewards.breaker`); the next batch tries it again.

Extraction and the integer comparison run here, in the parent: linear-time string work on
length-bounded text (``reward.verifier=math_dapo``'s, the reference scorer's regular expressions
on a response's last 300 characters, and on each distinct ground truth once, unbounded as
there). Only math-verify calls and user functions go to the worker pool, where
every task has a hard, kill-enforced deadline.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from dapo.config.schema import RewardConfig
from dapo.rewards.breaker import Breaker, Record
from dapo.rewards.correctness_source import CorrectnessSourceCheck
from dapo.rewards.extract import resolve_extractor
from dapo.rewards.math_dapo import math_dapo_verdict
from dapo.rewards.pool import Outcome, WorkerPool, default_num_workers
from dapo.rewards.start_checks import DataSample, check_on_data, function_extra, smoke_test
from dapo.rewards.types import RewardResult
from dapo.rewards.user_functions import (
    NOT_APPLICABLE_KEY,
    absolute_spec,
    function_labels,
)
from dapo.rewards.verifier import Prepared, prepare, shorten
from dapo.warning_format import said_again

logger = logging.getLogger("dapo.rewards")

# The failure of an item no reward source applies to, named as a scorer is (RewardResult.failed,
# reward_failures/<label>): no function's label has a hyphen.
NO_REWARD = "no-applicable-reward"


class RewardScorer:
    """Scores batches of responses; use as a context manager (it owns worker processes)."""

    def __init__(self, cfg: RewardConfig) -> None:
        self.cfg = cfg
        self._specs = [absolute_spec(f.path) for f in cfg.functions]
        self._labels = function_labels(self._specs)
        self.labels = tuple(self._labels)  # each user function's label (metrics, messages), in config order
        self._weights = [f.weight for f in cfg.functions]
        self._batch_sizes = [f.batch_size for f in cfg.functions]
        self._timeouts = [f.timeout_s for f in cfg.functions]
        self._reported: set[tuple[str, str]] = set()
        self.num_timeouts = 0  # items that timed out, over the scorer's life
        self.num_errors = 0  # items with a failing scorer, over the scorer's life
        self.first_failure: dict[str, str] = {}  # scorer label -> its first failure, in one line
        self.printed_chars: dict[str, int] = {}  # user function label -> characters it printed
        self.printed_between_items = 0  # characters printed between items (whose, nobody knows)
        # per user function, its calls that returned and that failed (timed out or died) over the
        # scorer's life: the breaker tells a hang from a function that times out now and then by them
        self._call_records: dict[int, Record] = {}
        self._trips: dict[int, int] = {}  # per user function, the batches the breaker stopped it in
        self._correctness_source = CorrectnessSourceCheck(self._labels, self._weights)
        # with the verifier off: whether the function acc comes from has returned a "pred" (maj@k's votes)
        self.functions_read_answers = False
        self.failed_on_the_dummy: set[int] = set()  # user functions that raised or timed out on the start-up item
        num_workers = cfg.num_workers or default_num_workers()
        self._pool = WorkerPool(num_workers, self._specs, cfg.timeout_s,
                                memory_limit_bytes=int(cfg.memory_limit_gb * 2**30))
        try:
            smoke_test(self)
        except BaseException:
            self._pool.close()
            raise

    def check_data(self, samples: list[DataSample]) -> None:
        """Once the data has loaded: the columns TRL functions require, and each function on each
        split's first row (:func:`~dapo.rewards.start_checks.check_on_data`)."""
        check_on_data(self, samples)

    def score(
        self,
        responses: list[str],
        ground_truths: list[str],
        data_sources: list[str] | None = None,
        extras: list[dict] | None = None,
        prompts: list[Any] | None = None,
        thinking: list[bool] | None = None,
    ) -> list[RewardResult]:
        """One :class:`RewardResult` per response, in order; never raises for a bad response.
        ``prompts``: the problem each answers (a string or a chat list), for user functions'
        ``extra`` (:func:`function_extra`). ``thinking``: the response began inside a reasoning
        model's thinking, its prompt ending in ``<think>`` (its chat template's): the verifier reads it
        so, an answer counting only after its ``</think>``; user functions get it as generated."""
        n = len(responses)
        data_sources = list(data_sources) if data_sources is not None else [None] * n
        extras = list(extras) if extras is not None else [{} for _ in range(n)]
        prompts = list(prompts) if prompts is not None else [None] * n
        thinking = list(thinking) if thinking is not None else [False] * n
        if not len(ground_truths) == len(data_sources) == len(extras) == len(prompts) == len(thinking) == n:
            raise ValueError(
                f"score() got {n} responses, {len(ground_truths)} ground truths, {len(data_sources)} data "
                f"sources, {len(extras)} extras, {len(prompts)} prompts and {len(thinking)} thinking flags; they must match"
            )
        texts = [_as_text(r) for r in responses]
        golds = [_as_text(g) for g in ground_truths]
        read = [f"<think>\n{text}" if inside else text for text, inside in zip(texts, thinking)]
        prepared = self._prepare(read, golds, data_sources)
        tasks: list[tuple] = []
        math_task = {}
        for i, item in enumerate(prepared):
            if item is not None and item.verdict is None:
                math_task[i] = len(tasks)
                tasks.append(("math", item.ground_truth, item.pred))
        calls = [(k, range(start, min(start + (size or 1), n)))  # (function, the responses of one call)
                 for k, size in enumerate(self._batch_sizes) for start in range(0, n, size or 1)]
        fn_tasks = [self._task(k, [(texts[i], golds[i], function_extra(extras[i], data_sources[i], prompts[i]))
                                   for i in items])
                    for k, items in calls]
        timeouts = [None] * len(tasks) + [self._timeouts[k] for k, _ in calls]
        # per function, what each call scores (its problems), for the breaker; math-verify's: none
        groups = [None] * len(tasks) + [k for k, _ in calls]
        subjects = [None] * len(tasks) + [tuple(_problem(golds[i], prompts[i]) for i in items) for _, items in calls]
        breaker = Breaker(groups, subjects, self._pool.num_workers if self.cfg.skip_hung else 0, self._call_records)
        tasks += fn_tasks
        outcomes = self._pool.run(tasks, timeouts, breaker) if tasks else []
        self._report_output(tasks)
        # each response's outcome of each function; a batch that failed as a whole fails its every response
        fn_outcomes: list[list[Outcome]] = [[] for _ in range(n)]
        for (k, items), (kind, detail) in zip(calls, outcomes[len(tasks) - len(calls):]):
            for position, i in enumerate(items):
                fn_outcomes[i].append(detail[position] if self._batch_sizes[k] and kind == "ok" else (kind, detail))
        results = [
            self._combine(prepared[i], outcomes[math_task[i]] if i in math_task else None, fn_outcomes[i])
            for i in range(n)
        ]
        self._report_skipped(breaker, calls, len(tasks) - len(calls))  # (after the first failure's own line)
        if not any(p is not None for p in prepared):  # the verifier off: acc from the user functions
            self._correctness_source.observe(results)
        return results

    def _report_skipped(self, breaker: Breaker, calls: list[tuple[int, range]], first_call: int) -> None:
        """One line per function the breaker stopped in this batch: how many responses it skipped,
        in full the first time, then in short the 10th, 100th, ... time (a function that hangs on
        every call trips every batch; its timeouts are counted in the metrics each step)."""
        for k, skipped in breaker.skipped.items():
            trip = breaker.tripped[k]
            self._trips[k] = trips = self._trips.get(k, 0) + 1
            if trips == 1:
                responses = sum(len(calls[task_id - first_call][1]) for task_id in skipped)
                logger.warning(trip.first_warning(self._labels[k], self._specs[k], self._batch_sizes[k] > 0, responses))
            elif said_again(trips):
                logger.warning(trip.again_warning(self._labels[k], trips))

    def _task(self, k: int, items: list[tuple[str, str, dict]]) -> tuple:
        """Function ``k``'s task for ``items`` (response, ground truth, extra): one item for a
        per-response function, up to its batch_size for a batched one."""
        if self._batch_sizes[k]:
            responses, ground_truths, extras = (list(column) for column in zip(*items))
            return ("batch", k, responses, ground_truths, extras)
        (response, ground_truth, extra), = items
        return ("fn", k, response, ground_truth, extra)

    def _prepare(
        self, texts: list[str], golds: list[str], data_sources: list[str | None]
    ) -> list[Prepared | None]:
        if self.cfg.verifier_weight == 0:
            return [None] * len(texts)
        if self.cfg.verifier == "math_dapo":  # the reference run's: exact match, decided here
            verdicts = [math_dapo_verdict(text, gold) for text, gold in zip(texts, golds)]
            return [Prepared(answer, gold, correct, empty_answer_line=found and not answer)
                    for correct, answer, gold, found in verdicts]
        return [
            prepare(text, gold, resolve_extractor(self.cfg.extractor, source),
                    self.cfg.max_response_chars)
            for text, gold, source in zip(texts, golds, data_sources)
        ]

    def _combine(
        self, prepared: Prepared | None, math_outcome: Outcome | None, fn_outcomes: list[Outcome]
    ) -> RewardResult:
        cfg = self.cfg
        answer = prepared.pred if prepared else ""
        result = RewardResult(score=0.0, acc=False, pred=shorten(answer), answer=answer,
                              empty_answer_line=prepared is not None and prepared.empty_answer_line)
        verifier_acc = prepared.verdict if prepared is not None else None
        if math_outcome is not None:
            verifier_acc = self._outcome_ok(math_outcome, "math-verify", result) and math_outcome[1]
        user_acc = None
        acc_from = None  # the user function acc comes from: the first that applies to the item
        for k, outcome in enumerate(fn_outcomes):
            label = self._labels[k]
            ok = self._outcome_ok(outcome, label, result)
            applies = not ok or outcome[1][0] is not None  # (a failed function's applying is unknown: it does)
            result.extra[f"{label}/{NOT_APPLICABLE_KEY}"] = 0.0 if applies else 1.0
            acc_from = k if acc_from is None and applies else acc_from
            if not ok:
                result.score += self._failure_score(k)
                continue
            score, acc, metrics, pred = outcome[1]
            if score is None:  # None: this function does not apply to this item; it adds nothing
                result.extra.update({f"{label}/{key}": value for key, value in metrics.items()})
                continue
            if not math.isfinite(result.score + self._weights[k] * score):  # finite, but 1e308 * 2 is not
                self._outcome_ok(("bad", f"{score} x weight {self._weights[k]} overflows the reward"), label, result)
                result.score += self._failure_score(k)
                continue
            result.score += self._weights[k] * score
            result.extra[f"{label}/score"] = score
            result.extra.update({f"{label}/{key}": value for key, value in metrics.items()})
            if k == acc_from:  # its contribution, not its raw return: under a negative weight a high score is a penalty
                user_acc = acc if acc is not None else self._weights[k] * score > 0
                if prepared is None and pred is not None:  # the verifier off: the answer is the function's
                    result.answer, result.pred = pred, shorten(pred)
                    self.functions_read_answers = True
        if prepared is None and acc_from is None and fn_outcomes:
            self._no_reward(result)
        acc_source = "math-verify" if prepared is not None else (NO_REWARD if acc_from is None else self._labels[acc_from])
        result.unmeasured_by = acc_source if acc_source in result.failed else None
        if prepared is not None:
            correct = bool(verifier_acc)
            result.score += cfg.verifier_weight * (
                cfg.correct_score if correct else cfg.incorrect_score
            )
        # False when acc's own source failed: verifier_acc (math-verify) or user_acc (never set)
        result.acc = bool(verifier_acc if prepared is not None else user_acc)
        if result.timed_out or result.error:
            self.num_timeouts += result.timed_out
            self.num_errors += result.error
        return result

    def _no_reward(self, result: RewardResult) -> None:
        """An item no reward source applies to (every user function returned None, the verifier
        off) has no reward: it fails as :data:`NO_REWARD`, not as any function's failure, scoring
        what every function's failure would (not 0, TRL's sum of no rewards, which a policy could
        learn to reach by dodging every function, for more than a wrong answer scores)."""
        result.score += sum(self._failure_score(k) for k in range(len(self._labels)))
        result.error = True
        result.failed.append(NO_REWARD)
        self._report_once(NO_REWARD, "no_reward", None, during="a response")

    def _failure_score(self, k: int) -> float:
        """What user function ``k`` adds when it fails: the lower of weight * incorrect_score and
        weight * correct_score, never a bonus (a negative weight, a penalty, times incorrect_score
        would pay the policy for making the function fail)."""
        weight = self._weights[k]
        return min(weight * self.cfg.incorrect_score, weight * self.cfg.correct_score)

    def _deadline_of(self, label: str) -> float:
        """The per-item deadline of the scorer named ``label``: its own timeout_s, or reward.timeout_s."""
        own = self._timeouts[self._labels.index(label)] if label in self._labels else None
        return own or self.cfg.timeout_s

    def _report_output(self, tasks: list[tuple]) -> None:
        """Count what user functions printed; show the first output of each function once, and
        the first of what was printed between items (by no item: its function is unknown)."""
        for task_id, (text, total) in sorted(self._pool.outputs.items()):
            label = self._labels[tasks[task_id][1]] if tasks[task_id][0] != "math" else "math-verify"
            if label not in self.printed_chars:
                logger.warning(
                    "%s printed while scoring; what reward functions print is captured, not shown (this is "
                    "the first call's output, %d of %d characters; later output is only counted):\n%s",
                    label, len(text), total, text,
                )
            self.printed_chars[label] = self.printed_chars.get(label, 0) + total
        if self._pool.stray_output is not None:
            text, total = self._pool.stray_output
            if not self.printed_between_items:
                logger.warning(
                    "something printed between items, in a scoring worker: a thread or a program a reward "
                    "function left running? It is captured, not shown (the first of it, %d of %d "
                    "characters; later output is only counted):\n%s", len(text), total, text,
                )
            self.printed_between_items += total

    def _outcome_ok(self, outcome: Outcome, label: str, result: RewardResult) -> bool:
        kind, detail = outcome
        if kind == "ok":
            return True
        if kind == "timeout":
            result.timed_out = True
        else:
            result.error = True
        result.failed.append(label)
        self._report_once(label, kind, detail, during="a response")
        return False

    def _report_once(self, label: str, kind: str, detail: Any, during: str) -> None:
        """Log the first failure of each kind per scorer; later ones are only counted."""
        if (label, kind) in self._reported:
            return
        self._reported.add((label, kind))
        message = self._failure_message(label, kind, detail, during)
        # one line for the run-stopping error: a traceback's last line names the exception
        last_line = next((line for line in reversed(message.splitlines()) if line.strip()), message)
        self.first_failure.setdefault(label, message if kind != "raised" else
                                      f"{label} raised {last_line.strip()} (the whole traceback is logged above)")
        costs = "" if kind == "no_reward" else "it scores the lower of weight * incorrect_score and weight * correct_score; "
        logger.warning("%s (%sfurther failures of this kind are counted, not shown)", message, costs)

    def _failure_message(self, label: str, kind: str, detail: Any, during: str) -> str:
        """What went wrong, naming the scorer and, for a user function, its file or module (a
        traceback names it too, but a timeout, a bad value or a dead worker has none)."""
        where = f" ({self._specs[self._labels.index(label)]})" if label in self._labels else ""
        if kind == "no_reward":
            return (f"no reward function applies to {during}: every user function returned None (does not apply) "
                    "and the built-in verifier is off (reward.verifier_weight=0), so it has no reward; it scores the "
                    f"sum of every function's failure score and counts as {NO_REWARD} in reward_failures/, not as "
                    "theirs. Have a function apply to every item (to each data_source of the data), or turn the "
                    "verifier on")
        if kind == "timeout":
            return f"{label} ran past its {self._deadline_of(label)} s deadline on {during}{where}"
        if kind == "raised":
            return f"{label} raised on {during}:\n{detail}"
        if kind == "bad":
            return f"{label} returned a bad value on {during}{where}: {detail}"
        return f"the worker running {label} died on {during}{where} ({detail or 'crashed'})"

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the scoring workers (for resource accounting; not their keepers, which
        the pool starts and reaps: ``_pool.pids``)."""
        return self._pool.scoring_pids

    @property
    def extracts_answers(self) -> bool:
        """Whether results carry the extracted answer (``pred``, maj@k's vote): the verifier's, or
        with the verifier off the ``"pred"`` of the function acc comes from, once it has returned one."""
        return self.cfg.verifier_weight != 0 or self.functions_read_answers

    @property
    def votes_exactly(self) -> bool:
        """Whether maj@k counts answers as one only as the same string: math_dapo's (its exact
        match), and a user function's "pred" (its own normal form, as verl's maj@k counts it)."""
        return self.cfg.verifier == "math_dapo" or self.cfg.verifier_weight == 0

    def close(self) -> None:
        """Stop the worker processes."""
        self._pool.close()

    def __enter__(self) -> RewardScorer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _problem(ground_truth: str, prompt: Any) -> tuple[str, str | None]:
    """The problem a response answers, as the breaker tells problems apart (a chat prompt by its text)."""
    return ground_truth, prompt if prompt is None or isinstance(prompt, str) else repr(prompt)


def _as_text(value: Any) -> str:
    """Responses and ground truths as text (parquet ground truths may be ints)."""
    return value if isinstance(value, str) else "" if value is None else str(value)
