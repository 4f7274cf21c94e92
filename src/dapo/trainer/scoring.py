"""Scoring a generation: decode each completion and score it against its problem.

Training rollouts and evaluation both score through :func:`score_completions`, so they can never
disagree on what counts as correct.
"""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase

from dapo.data.records import Problem
from dapo.rewards import RewardScorer
from dapo.rewards.types import RewardResult
from dapo.rollout.base import GenerationResult


def score_completions(
    tokenizer: PreTrainedTokenizerBase, scorer: RewardScorer, problems: list[Problem], generation: GenerationResult
) -> list[RewardResult]:
    """Decode prompt-major completions and score each against its problem (training and
    evaluation both score through here, so they can never disagree)."""
    completions = generation.completions
    texts = tokenizer.batch_decode([c.token_ids for c in completions], skip_special_tokens=True)
    owners = [problems[c.prompt_index] for c in completions]
    return scorer.score(
        texts, [p.ground_truth for p in owners], [p.data_source for p in owners], [p.extra for p in owners]
    )
