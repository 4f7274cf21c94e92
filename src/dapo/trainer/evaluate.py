"""Held-out evaluation: avg@k, pass@k and maj@k.

Copies of a problem (the AIME-2024 file holds each of its 30 problems 32 times) share a uid and
are evaluated once, with k samples per unique problem:
    avg@k = mean over problems of (correct samples / k)        -- DAPO's "avg@32"
    pass@k = mean over problems of [any of the k samples is correct]
    maj@k = mean over problems of [the most frequent extracted answer is correct]
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from transformers import PreTrainedTokenizerBase

from dapo.config import ConfigError, DAPOConfig
from dapo.data.records import Problem
from dapo.rewards import RewardScorer
from dapo.rewards.equivalence import vote_key
from dapo.rewards.types import RewardResult
from dapo.rollout.base import Completion, RolloutEngine, SamplingParams
from dapo.trainer.scoring import sample_record, score_completions
from dapo.trainer.setup import RunSetup, make_sampling_params

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


def unique_problems(problems: list[Problem], max_problems: int = 0) -> list[Problem]:
    """One problem per (data_source, uid), in file order (an eval file's repeats are one problem;
    a problem two benchmarks share counts in each); at most ``max_problems`` when > 0."""
    seen: dict[tuple[str, str], Problem] = {}
    for problem in problems:
        seen.setdefault(problem.eval_key, problem)
    unique = list(seen.values())
    return unique[:max_problems] if max_problems > 0 else unique


def _vote(result: RewardResult) -> str:
    """The answer a sample votes for in maj@k. Every answer the verifier judged correct equals the
    ground truth, so they are one answer; others count as the same when their :func:`vote_key`
    is (the same integer, or the same text up to LaTeX cosmetics). Wrong answers of equal value in
    other forms (``0.5``, ``\\frac{1}{2}``) vote apart, which can favour the correct answer."""
    if result.acc:
        return _CORRECT_VOTE
    return vote_key(result.answer)


def score_at_k(results: list[RewardResult], k: int, majority_vote: bool = True) -> dict[str, float]:
    """avg@k, pass@k, maj@k from prompt-major results (k consecutive results per problem). maj@k:
    the most voted answer (ties: the first of them to appear) is correct; a sample judged correct
    votes for the correct answer, extracted or not; a problem without any vote counts as wrong.
    ``majority_vote=False`` (results without extracted answers: a reward with no verifier) leaves
    maj@k out rather than report 0."""
    num_problems = len(results) // k
    avg = passed = majority = 0.0
    for i in range(num_problems):
        group = results[i * k : (i + 1) * k]
        correct = [r.acc for r in group]
        avg += sum(correct) / k
        passed += float(any(correct))
        # a sample judged correct votes for the correct answer even when no answer was extracted
        # (a user reward function can judge without one); first-seen order breaks ties
        votes = Counter(_vote(r) for r in group if r.answer or r.acc)
        if votes:
            majority += float(votes.most_common(1)[0][0] == _CORRECT_VOTE)
    n = max(num_problems, 1)
    metrics = {f"eval/avg@{k}": avg / n, f"eval/pass@{k}": passed / n}
    if majority_vote:
        metrics[f"eval/maj@{k}"] = majority / n
    return metrics


def evaluate(
    engine: RolloutEngine,
    tokenizer: PreTrainedTokenizerBase,
    scorer: RewardScorer,
    prompt_token_ids: list[list[int]],
    problems: list[Problem],
    params: SamplingParams,
    on_progress: ProgressCallback | None = None,
) -> EvalResult:
    """Sample ``params.n`` responses per problem, score them, and compute the @k metrics, overall
    and per ``data_source``. Chunk c of the problems samples with seed ``params.seed + c``."""
    if len(prompt_token_ids) != len(problems):  # metrics index results by problem
        raise ValueError(f"{len(prompt_token_ids)} prompts for {len(problems)} problems")
    texts: list[str] = []
    results: list[RewardResult] = []
    completions: list[Completion] = []
    if on_progress is not None:
        on_progress(0, len(problems))
    for chunk_index, chunk in enumerate(_chunks(len(problems), params.n)):
        seed = None if params.seed is None else params.seed + chunk_index
        generation = engine.generate(prompt_token_ids[chunk], replace(params, seed=seed))
        scored = score_completions(tokenizer, scorer, problems[chunk], generation, params.n)
        texts += scored.texts
        results += scored.results
        completions += generation.completions
        if on_progress is not None:
            on_progress(chunk.stop, len(problems))
    metrics = score_at_k(results, params.n, scorer.extracts_answers)
    metrics["eval/num_problems"] = float(len(problems))
    metrics["eval/response_length_mean"] = sum(len(c.token_ids) for c in completions) / max(len(completions), 1)
    metrics["eval/truncation_rate"] = sum(c.finish_reason == "length" for c in completions) / max(len(completions), 1)
    sources = sorted({p.data_source for p in problems})
    if len(sources) > 1:
        for source in sources:
            picked = [i for i, p in enumerate(problems) if p.data_source == source]
            per_source = [results[i * params.n + j] for i in picked for j in range(params.n)]
            metrics.update({key.replace("eval/", f"eval/{source}/"): value
                            for key, value in score_at_k(per_source, params.n, scorer.extracts_answers).items()})
            metrics[f"eval/{source}/num_problems"] = float(len(picked))
    samples = [
        # the prompt on every sample, as the data holds it (text or chat list): one file to read
        # what was asked and answered, as the run's completions.jsonl has it
        {"uid": problems[index // params.n].uid, "sample": index % params.n, "prompt": problems[index // params.n].prompt,
         **sample_record(problems[index // params.n], text, result, completion)}
        for index, (text, result, completion) in enumerate(zip(texts, results, completions))
    ]
    return EvalResult(metrics=metrics, num_problems=len(problems), k=params.n, samples=samples)


def _chunks(num_problems: int, k: int) -> list[slice]:
    """Problem ranges of at least MIN_SEQUENCES_PER_CHUNK sequences each, at most MAX_CHUNKS."""
    per_chunk = max(math.ceil(MIN_SEQUENCES_PER_CHUNK / k), math.ceil(num_problems / MAX_CHUNKS), 1)
    return [slice(start, min(start + per_chunk, num_problems)) for start in range(0, num_problems, per_chunk)]


def evaluate_held_out(
    cfg: DAPOConfig, run: RunSetup, scorer: RewardScorer, on_progress: ProgressCallback | None = None
) -> EvalResult:
    """The @k metrics of ``run``'s model on its held-out problems (data.eval_files, one entry per
    (data_source, uid), at most eval.max_problems), sampled with the eval.* settings."""
    if run.data.eval is None:
        raise ConfigError(NO_EVAL_DATA)
    problems = unique_problems(run.data.eval.problems, cfg.eval.max_problems)
    encoded = run.encoder.encode(problems)
    params = make_sampling_params(cfg, run.stop_token_ids, evaluation=True)
    return evaluate(run.engine, run.tokenizer, scorer, encoded.token_ids, problems, params, on_progress)
