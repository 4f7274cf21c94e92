"""DAPO algorithm core (arXiv 2503.14476), pure torch: no I/O, no models, no files.

- :mod:`~dapo.algo.advantages`: group-relative advantages (GRPO, Dr.GRPO, RLOO, REINFORCE++-baseline).
- :mod:`~dapo.algo.policy_loss`: the clipped surrogate with Clip-Higher, dual-clip and TIS.
- :mod:`~dapo.algo.aggregation`: Token-Level Policy Gradient Loss with global normalisers.
- :mod:`~dapo.algo.filtering`: Dynamic Sampling's filter of constant-outcome groups.
- :mod:`~dapo.algo.overlong`: Overlong Filtering and Soft Overlong Punishment.
- :mod:`~dapo.algo.kl`: KL penalty estimators (unused by DAPO itself, beta = 0).
- :mod:`~dapo.algo.logprobs`: chunked token log-probs and entropy from logits.
"""

from dapo.algo.advantages import (
    ADVANTAGE_ESTIMATORS,
    broadcast_to_tokens,
    compute_advantages,
    register_advantage,
)
from dapo.algo.aggregation import LOSS_AGG_MODES, aggregate_loss, count_tokens_and_seqs
from dapo.algo.filtering import GroupFilterResult, filter_groups
from dapo.algo.kl import KL_ESTIMATORS, kl_penalty
from dapo.algo.logprobs import entropy_from_logits, logprobs_from_logits
from dapo.algo.overlong import overlong_filter_mask, soft_overlong_penalty
from dapo.algo.policy_loss import PolicyLossStats, compute_policy_loss, tis_weights

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "KL_ESTIMATORS",
    "LOSS_AGG_MODES",
    "GroupFilterResult",
    "PolicyLossStats",
    "aggregate_loss",
    "broadcast_to_tokens",
    "compute_advantages",
    "compute_policy_loss",
    "count_tokens_and_seqs",
    "entropy_from_logits",
    "filter_groups",
    "kl_penalty",
    "logprobs_from_logits",
    "overlong_filter_mask",
    "register_advantage",
    "soft_overlong_penalty",
    "tis_weights",
]
