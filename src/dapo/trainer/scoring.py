"""Scoring a generation: decode each completion and score it against its problem.

Training rollouts and evaluation both score through :func:`score_completions`, so they can never
disagree on what counts as correct.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from transformers import PreTrainedTokenizerBase

from dapo.data.records import Problem
from dapo.rewards import RewardScorer
from dapo.rewards.types import RewardResult
from dapo.rewards.user_functions import RewardFunctionError
from dapo.rollout.base import GenerationResult


@dataclass
class ScoredGeneration:
    """A generation's completions, decoded (``texts``) and scored (``results``), prompt-major."""

    texts: list[str]
    results: list[RewardResult]


def score_completions(
    tokenizer: PreTrainedTokenizerBase, scorer: RewardScorer, problems: list[Problem], generation: GenerationResult
) -> ScoredGeneration:
    """Decode prompt-major completions and score each against its problem."""
    completions = generation.completions
    texts = tokenizer.batch_decode([c.token_ids for c in completions], skip_special_tokens=True)
    owners = [problems[c.prompt_index] for c in completions]
    results = scorer.score(
        texts, [p.ground_truth for p in owners], [p.data_source for p in owners], [p.extra for p in owners]
    )
    return ScoredGeneration(texts, results)


def completion_records(
    tokenizer: PreTrainedTokenizerBase,
    problems: list[Problem],
    prompt_token_ids: list[list[int]],
    generation: GenerationResult,
    scored: ScoredGeneration,
    count: int,
) -> list[dict[str, Any]]:
    """``count`` completions spread evenly over a round, as what the model saw and wrote: the
    prompt (chat template included), the response, the extracted answer, the ground truth and
    the reward (before overlong shaping)."""
    completions = generation.completions
    picked = sorted({i * len(completions) // count for i in range(count)}) if completions and count else []
    records = []
    for i in picked:
        completion, result = completions[i], scored.results[i]
        problem = problems[completion.prompt_index]
        records.append({
            "data_source": problem.data_source,
            "prompt": tokenizer.decode(prompt_token_ids[completion.prompt_index], skip_special_tokens=False),
            "response": scored.texts[i],
            "pred": result.pred,
            "ground_truth": problem.ground_truth,
            "score": result.score,
            "acc": result.acc,
            "num_tokens": len(completion.token_ids),
            "finish_reason": completion.finish_reason,
        })
    return records


class RewardFailureWatch:
    """Stops a run whose reward cannot give signal: one scorer failing (raising, timing out,
    returning a wrong type) on every response of ``max_failing_steps`` consecutive steps."""

    def __init__(self, scorer: RewardScorer, max_failing_steps: int) -> None:
        self.scorer, self.max_failing_steps = scorer, max_failing_steps
        self.streak: dict[str, int] = {}  # scorer label -> consecutive steps it failed on everything

    def observe(self, results: list[RewardResult]) -> None:
        """Count this step; raise :class:`RewardFunctionError` naming the scorer past the limit."""
        if not results:
            return
        failed_everywhere = set.intersection(*(set(r.failed) for r in results))
        self.streak = {label: self.streak.get(label, 0) + 1 for label in failed_everywhere}
        for label, steps in self.streak.items():
            if self.max_failing_steps and steps >= self.max_failing_steps:
                first = self.scorer.first_failure.get(label, "no detail recorded")
                raise RewardFunctionError(
                    f"reward scorer {label} failed on every response of the last {steps} steps ({len(results)} "
                    f"this step), so the reward gives no learning signal; first failure: {first} (the whole "
                    f"traceback is logged above). Fix {label}, or set reward.max_failing_steps=0 to go on"
                )
