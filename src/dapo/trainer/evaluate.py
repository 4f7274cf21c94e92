"""Held-out evaluation: avg@k, pass@k and maj@k.

Copies of a problem (the AIME-2024 file holds each of its 30 problems 32 times) share a uid and
are evaluated once, with k samples per unique problem:
    avg@k = mean over problems of (correct samples / k)        -- DAPO's "avg@32"
    pass@k = mean over problems of [any of the k samples is correct]
    maj@k = mean over problems of [the most frequent extracted answer is correct]

A reward that cannot score (a judge that is down, a function that raises) is counted
(``eval/reward_errors``, ``eval/reward_timeouts``, ``eval/reward_failures/<function>``) and said; where
the scorer that decides correctness failed on every sample, the @k are not accuracies and are left
out (:attr:`EvalResult.unscored` says why: ``dapo eval`` stops with it, a training run warns).
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from transformers import PreTrainedTokenizerBase

from dapo.config import ConfigError, DAPOConfig
from dapo.data.records import Problem
from dapo.rewards import RewardScorer
from dapo.rewards.equivalence import vote_key
from dapo.rewards.math_dapo import NO_ANSWER
from dapo.rewards.types import RewardResult
from dapo.rollout.base import Completion, RolloutEngine, SamplingParams, request_seed
from dapo.trainer.eval_warnings import (
    all_unmeasured,
    at_k_names,
    failure_warnings,
    unread_answers_note,
    unscored_message,
)
from dapo.trainer.scoring import sample_record, score_completions
from dapo.trainer.setup import RunSetup, make_sampling_params
from dapo.trainer.step_metrics import reward_function_metrics

# Evaluation generates in chunks of at least this many sequences, to show progress between them
# without starving a batched engine (a chunk is a whole generate() call).
MIN_SEQUENCES_PER_CHUNK = 256
MAX_CHUNKS = 20
# (dapo eval says it before the model loads, evaluate_model and evaluate_held_out where they meet it)
NO_EVAL_DATA = "data.eval_files is empty: nothing to evaluate on (give data.eval_files=[FILE,...])"
_CORRECT_VOTE = "\x00correct"  # maj@k's one vote for every answer judged correct (no answer text equals it)

ProgressCallback = Callable[[int, int], None]  # (problems done, problems in all)


@dataclass
class EvalResult:
    metrics: dict[str, float]  # overall, and per data_source when there are several
    num_problems: int
    k: int
    # One record per sample (prompt-major): what the model wrote, its extracted answer and score.
    samples: list[dict[str, Any]] = field(default_factory=list)
    # Why the @k metrics are left out, in one line: the scorer that decides correctness failed on
    # every sample, so they would be 0 without measuring anything ("" when they are measured).
    unscored: str = ""


def unique_problems(problems: list[Problem], max_problems: int = 0) -> list[Problem]:
    """One problem per (data_source, uid), in file order (an eval file's repeats are one problem;
    a problem two benchmarks share counts in each); at most ``max_problems`` when > 0."""
    seen: dict[tuple[str, str], Problem] = {}
    for problem in problems:
        seen.setdefault(problem.eval_key, problem)
    unique = list(seen.values())
    return unique[:max_problems] if max_problems > 0 else unique


def _answer_key(result: RewardResult, exact: bool = False) -> str | None:
    """The key a sample's answer votes under in maj@k, None for no vote: answers count as the
    same when their :func:`vote_key` is (the same integer, or the same text up to LaTeX cosmetics),
    or with ``exact`` when they are the same string (reward.verifier=math_dapo's answers,
    normalised, which it compares as strings: ``34.`` and ``34.0`` are two wrong answers there, as
    in the reference's maj@k, and a response without an ``Answer:`` line votes for ``[INVALID]``,
    as the reference's ``pred`` does, apart from one whose line's answer normalises to "").
    Without ``exact`` a sample without an answer casts no vote.
    Wrong answers of equal value in other forms (``0.5``, ``\\frac{1}{2}``) vote apart, which can
    favour the correct answer."""
    if exact:
        return result.answer or ("" if result.empty_answer_line else NO_ANSWER)
    return vote_key(result.answer) if result.answer else None


def _votes(group: list[RewardResult], exact: bool = False) -> Counter[str]:
    """maj@k's votes of one problem's samples. Every answer judged correct equals the ground truth,
    so those samples cast one vote each for the correct answer (:data:`_CORRECT_VOTE`), extracted
    or not; so does a sample whose scoring failed (a timeout, a crashed worker: acc unmeasured,
    counted wrong) when its answer's key is a correct sample's: the same answer, which would
    otherwise vote apart from itself. The others vote by :func:`_answer_key`."""
    keys = [_answer_key(result, exact) for result in group]
    correct_keys = {key for key, result in zip(keys, group) if result.acc and result.answer}
    return Counter(
        _CORRECT_VOTE if result.acc or (result.unmeasured_by is not None and key in correct_keys) else key
        for key, result in zip(keys, group) if result.acc or key is not None
    )


def score_at_k(results: list[RewardResult], k: int, majority_vote: bool = True,
               exact_votes: bool = False) -> dict[str, float]:
    """avg@k, pass@k, maj@k from prompt-major results (k consecutive results per problem). maj@k:
    the most voted answer (ties: the first of them to appear) is correct; a sample judged correct
    votes for the correct answer, extracted or not, and so does one whose scoring failed with a
    correct sample's answer; a wrong sample without an extracted answer does not vote, but with
    ``exact_votes`` it votes for ``[INVALID]``; a problem without any vote counts as wrong.
    ``majority_vote=False`` (results without extracted answers: a reward with no verifier) leaves
    maj@k out rather than report 0; ``exact_votes``: wrong answers vote by their string (:func:`_votes`)."""
    num_problems = len(results) // k
    num_correct, passed, majority = 0, 0.0, 0.0
    for i in range(num_problems):
        group = results[i * k : (i + 1) * k]
        correct = [r.acc for r in group]
        num_correct += sum(correct)  # counted, divided once: a sum of fractions misses by an ulp (6 of 12: 0.49999999999999994)
        passed += float(any(correct))
        votes = _votes(group, exact_votes)  # first-seen order breaks ties
        if votes:
            majority += float(votes.most_common(1)[0][0] == _CORRECT_VOTE)
    n = max(num_problems, 1)
    metrics = {f"eval/avg@{k}": num_correct / (n * k), f"eval/pass@{k}": passed / n}
    if majority_vote:
        metrics[f"eval/maj@{k}"] = majority / n
    return metrics


def _sample_and_score(
    engine: RolloutEngine,
    tokenizer: PreTrainedTokenizerBase,
    scorer: RewardScorer,
    prompt_token_ids: list[list[int]],
    problems: list[Problem],
    params: SamplingParams,
    on_progress: ProgressCallback | None,
) -> tuple[list[str], list[RewardResult], list[Completion]]:
    """Every problem's ``params.n`` responses, in problem order: their texts, scores and completions,
    generated a chunk of problems at a time, each problem with its own seed (:func:`evaluate`)."""
    texts: list[str] = []
    results: list[RewardResult] = []
    completions: list[Completion] = []
    if on_progress is not None:
        on_progress(0, len(problems))
    seeds = problem_seeds(params.seed, problems)
    for chunk_index, chunk in enumerate(_chunks(len(problems), params.n)):
        seed = None if params.seed is None else params.seed + chunk_index
        chunk_params = replace(params, seed=seed, request_seeds=None if seeds is None else seeds[chunk])
        generation = engine.generate(prompt_token_ids[chunk], chunk_params)
        scored = score_completions(tokenizer, scorer, problems[chunk], generation, params.n, prompt_token_ids[chunk])
        texts += scored.texts
        results += scored.results
        completions += generation.completions
        if on_progress is not None:
            on_progress(chunk.stop, len(problems))
    return texts, results, completions


def _add_per_source_metrics(
    metrics: dict[str, float],
    problems: list[Problem],
    results: list[RewardResult],
    culprits: list[str | None],
    n: int,
    votes: tuple[bool, bool],
) -> list[str]:
    """With more than one data_source, each one's @k metrics, mean score and problem count under
    ``eval/<source>/``; returns the sources whose correctness scorer failed on every sample (their
    @k left out, not reported as 0)."""
    sources = sorted({p.data_source for p in problems})
    unscored_sources: list[str] = []
    if len(sources) > 1:
        for source in sources:
            picked = [i for i, p in enumerate(problems) if p.data_source == source]
            per_source = [results[i * n + j] for i in picked for j in range(n)]
            if all_unmeasured([culprits[i * n + j] for i in picked for j in range(n)]):
                unscored_sources.append(source)
            else:
                at_k = score_at_k(per_source, n, *votes)
                metrics.update({key.replace("eval/", f"eval/{source}/"): value for key, value in at_k.items()})
                metrics[f"eval/{source}/score_mean"] = _mean_score(per_source)
            metrics[f"eval/{source}/num_problems"] = float(len(picked))
    return unscored_sources


def evaluate(
    engine: RolloutEngine,
    tokenizer: PreTrainedTokenizerBase,
    scorer: RewardScorer,
    prompt_token_ids: list[list[int]],
    problems: list[Problem],
    params: SamplingParams,
    on_progress: ProgressCallback | None = None,
    said: set[str] | None = None,
) -> EvalResult:
    """Sample ``params.n`` responses per problem, score them, and compute the @k metrics, overall
    and per ``data_source``. Each problem samples with a seed of its own (:func:`problem_seeds`), so
    that its samples do not depend on the other problems evaluated (eval.max_problems, other eval
    files); the hf engine, which draws a call's rows from one stream, samples chunk c of the
    problems with seed ``params.seed + c``.

    Scorings that failed are counted (:func:`failure_metrics`) and each failing function said in a
    warning; where the scorer that decides correctness failed on every sample (of the whole set,
    or of one data_source) the @k are left out, not reported as 0 (the whole set's: why, in
    ``unscored``, for the caller to raise or warn). Notes said once a run (boxed answers an
    ``Answer:``-line extractor does not read) are left out when their kind is in ``said``, which
    they are added to (None: always said)."""
    if len(prompt_token_ids) != len(problems):  # metrics index results by problem
        raise ValueError(f"{len(prompt_token_ids)} prompts for {len(problems)} problems")
    texts, results, completions = _sample_and_score(engine, tokenizer, scorer, prompt_token_ids, problems, params,
                                                    on_progress)
    culprits = [result.unmeasured_by for result in results]
    unscored = all_unmeasured(culprits)
    votes = (scorer.extracts_answers, scorer.votes_exactly)  # (maj@k's: whether answers vote, by string)
    metrics = {} if unscored else score_at_k(results, params.n, *votes)
    metrics["eval/num_problems"] = float(len(problems))
    metrics["eval/response_length_mean"] = sum(len(c.token_ids) for c in completions) / max(len(completions), 1)
    metrics["eval/truncation_rate"] = sum(c.finish_reason == "length" for c in completions) / max(len(completions), 1)
    metrics.update(failure_metrics(results))
    # every score holding a failure's penalty: no mean reward measured, as no avg@k
    metrics.update(score_metrics(results, with_mean=not unscored))
    unscored_sources = _add_per_source_metrics(metrics, problems, results, culprits, params.n, votes)
    for message in failure_warnings(scorer, results, culprits, params.n, unscored_sources):
        warnings.warn(message, stacklevel=2)
    if said is None or UNREAD_ANSWERS_EVAL not in said:  # (not read again once said)
        data_sources = [problems[index // params.n].data_source for index in range(len(results))]
        note = unread_answers_note(scorer.cfg, data_sources, texts, results, "evaluation")
        if note is not None:
            if said is not None:
                said.add(UNREAD_ANSWERS_EVAL)
            warnings.warn(note + (" (said once a run)" if said is not None else ""), stacklevel=2)
    samples = [
        # the prompt on every sample, as the data holds it (text or chat list): one file to read
        # what was asked and answered, as the run's completions.jsonl has it
        {"uid": problems[index // params.n].uid, "sample": index % params.n, "prompt": problems[index // params.n].prompt,
         **sample_record(problems[index // params.n], text, result, completion),
         # what maj@k counted (pred is shortened): its answer in full, by its vote key; None: no vote
         "vote": _answer_key(result, scorer.votes_exactly) if scorer.extracts_answers else None,
         # the scorer whose failure left acc unmeasured (None: measured): its vote pools with a correct same answer
         "unmeasured_by": result.unmeasured_by}
        for index, (text, result, completion) in enumerate(zip(texts, results, completions))
    ]
    why = unscored_message(scorer, culprits, params.n) if unscored else ""
    return EvalResult(metrics=metrics, num_problems=len(problems), k=params.n, samples=samples, unscored=why)


# ------------------------------------------------------------------ scorings that failed
UNREAD_ANSWERS_EVAL = "unread answers (evaluation)"  # the kind of note evaluate() says once a run


def score_metrics(results: list[RewardResult], with_mean: bool = True) -> dict[str, float]:
    """``eval/score_mean`` (unless not ``with_mean``), the mean reward of the held-out samples
    before overlong shaping (what a graded reward reads, which avg@k's verdicts do not show), and
    ``eval/reward/<function>/<key>``, the means of what user reward functions returned (as
    ``reward/*`` in training)."""
    per_function = reward_function_metrics(results)
    return {**({"eval/score_mean": _mean_score(results)} if with_mean else {}),
            **{f"eval/{key}": value for key, value in per_function.items() if key.startswith("reward/")}}


def _mean_score(results: list[RewardResult]) -> float:
    return sum(result.score for result in results) / max(len(results), 1)


def failure_metrics(results: list[RewardResult]) -> dict[str, float]:
    """``eval/reward_timeouts`` and ``eval/reward_errors`` (samples, as rollout/* counts them), and
    ``eval/reward_failures/<function>`` for each scorer that failed on any sample."""
    counts = Counter(label for result in results for label in result.failed)
    return {"eval/reward_timeouts": float(sum(r.timed_out for r in results)),
            "eval/reward_errors": float(sum(r.error for r in results)),
            **{f"eval/reward_failures/{label}": float(count) for label, count in sorted(counts.items())}}


def problem_seeds(seed: int | None, problems: list[Problem]) -> list[int] | None:
    """Each problem's sampling seed: :func:`request_seed` of the evaluation's ``seed`` and a digest
    of the problem's (data_source, uid), its identity in evaluation (None: unseeded)."""
    if seed is None:
        return None
    digests = (hashlib.sha256("\x00".join(problem.eval_key).encode()).digest() for problem in problems)
    return [request_seed(seed, int.from_bytes(digest[:8], "little")) for digest in digests]  # type: ignore[misc]


def _chunks(num_problems: int, k: int) -> list[slice]:
    """Problem ranges of at least MIN_SEQUENCES_PER_CHUNK sequences each, at most MAX_CHUNKS."""
    per_chunk = max(math.ceil(MIN_SEQUENCES_PER_CHUNK / k), math.ceil(num_problems / MAX_CHUNKS), 1)
    return [slice(start, min(start + per_chunk, num_problems)) for start in range(0, num_problems, per_chunk)]


def evaluate_held_out(
    cfg: DAPOConfig, run: RunSetup, scorer: RewardScorer, on_progress: ProgressCallback | None = None,
    said: set[str] | None = None,
) -> EvalResult:
    """The @k metrics of ``run``'s model on its held-out problems (data.eval_files, one entry per
    (data_source, uid), at most eval.max_problems), sampled with the eval.* settings.

    Where the scorer that decides correctness failed on every sample, there are no @k and the
    result's ``unscored`` says why: one of a training run (``said``: the kinds of note the run has
    said, see :func:`evaluate`) warns and returns the other metrics, the failure counts among them;
    a standalone evaluation (``said`` None: ``dapo eval``) leaves it to its caller, which saves the
    samples and then raises :class:`~dapo.rewards.user_functions.RewardFunctionError`
    (:func:`dapo.trainer.summary.evaluate_model`)."""
    if run.data.eval is None:
        raise ConfigError(NO_EVAL_DATA)
    problems = unique_problems(run.data.eval.problems, cfg.eval.max_problems)
    encoded = run.encoder.encode(problems)
    params = make_sampling_params(cfg, run.stop_token_ids, evaluation=True)
    result = evaluate(run.engine, run.tokenizer, scorer, encoded.token_ids, problems, params, on_progress, said)
    if result.unscored and said is not None:
        warnings.warn(f"{result.unscored} (this evaluation's {at_k_names(params.n, scorer.extracts_answers)} are not "
                      "logged, its eval/reward_failures/* are; the run goes on)", stacklevel=2)
    return result
