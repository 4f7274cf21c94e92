"""Held-out evaluation: avg@k, pass@k and maj@k.

Copies of a problem (the AIME-2024 file holds each of its 30 problems 32 times) share a uid and
are evaluated once, with k samples per unique problem:
    avg@k = mean over problems of (correct samples / k)        -- DAPO's "avg@32"
    pass@k = mean over problems of [any of the k samples is correct]
    maj@k = mean over problems of [the most frequent extracted answer is correct]
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from dapo.config import ConfigError, DAPOConfig
from dapo.data.records import Problem
from dapo.rewards import RewardScorer
from dapo.rewards.types import RewardResult
from dapo.rollout.base import RolloutEngine, SamplingParams
from dapo.trainer.scoring import score_completions
from dapo.trainer.setup import RunSetup, make_sampling_params


@dataclass
class EvalResult:
    metrics: dict[str, float]
    num_problems: int
    k: int


def unique_problems(problems: list[Problem], max_problems: int = 0) -> list[Problem]:
    """One problem per uid, in file order; at most ``max_problems`` when > 0."""
    seen: dict[str, Problem] = {}
    for problem in problems:
        seen.setdefault(problem.uid, problem)
    unique = list(seen.values())
    return unique[:max_problems] if max_problems > 0 else unique


def score_at_k(results: list[RewardResult], k: int) -> dict[str, float]:
    """avg@k, pass@k, maj@k from prompt-major results (k consecutive results per problem)."""
    num_problems = len(results) // k
    avg = passed = majority = 0.0
    for i in range(num_problems):
        group = results[i * k : (i + 1) * k]
        correct = [r.acc for r in group]
        avg += sum(correct) / k
        passed += float(any(correct))
        answered = [r for r in group if r.pred]
        if answered:
            top_pred, _ = Counter(r.pred for r in answered).most_common(1)[0]
            majority += float(next(r.acc for r in answered if r.pred == top_pred))
    n = max(num_problems, 1)
    return {f"eval/avg@{k}": avg / n, f"eval/pass@{k}": passed / n, f"eval/maj@{k}": majority / n}


def evaluate(
    engine: RolloutEngine,
    tokenizer: PreTrainedTokenizerBase,
    scorer: RewardScorer,
    prompt_token_ids: list[list[int]],
    problems: list[Problem],
    params: SamplingParams,
) -> EvalResult:
    """Sample ``params.n`` responses per problem, score them, and compute the @k metrics."""
    generation = engine.generate(prompt_token_ids, params)
    results = score_completions(tokenizer, scorer, problems, generation)
    metrics = score_at_k(results, params.n)
    completions = generation.completions
    metrics["eval/response_length_mean"] = sum(len(c.token_ids) for c in completions) / max(len(completions), 1)
    metrics["eval/truncation_rate"] = sum(c.finish_reason == "length" for c in completions) / max(len(completions), 1)
    return EvalResult(metrics=metrics, num_problems=len(problems), k=params.n)


def evaluate_held_out(cfg: DAPOConfig, run: RunSetup, scorer: RewardScorer) -> EvalResult:
    """The @k metrics of ``run``'s model on its held-out problems (data.eval_files, one entry per
    uid, at most eval.max_problems), sampled with the eval.* settings."""
    if run.data.eval is None:
        raise ConfigError("data.eval_files is empty: nothing to evaluate on")
    problems = unique_problems(run.data.eval.problems, cfg.eval.max_problems)
    encoded = run.encoder.encode(problems)
    params = make_sampling_params(cfg, run.stop_token_ids, evaluation=True)
    return evaluate(run.engine, run.tokenizer, scorer, encoded.token_ids, problems, params)
