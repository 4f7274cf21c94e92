"""DAPO algorithm core (arXiv 2503.14476), pure torch: no I/O, no models, no files.

- :mod:`~dapo.algo.advantages`: group-relative advantages (GRPO, Dr.GRPO, RLOO, REINFORCE++-baseline).
- :mod:`~dapo.algo.policy_loss`: the clipped surrogate with Clip-Higher, dual-clip and TIS.
- :mod:`~dapo.algo.aggregation`: Token-Level Policy Gradient Loss with global normalisers.
- :mod:`~dapo.algo.filtering`: Dynamic Sampling's filter of constant-outcome groups.
- :mod:`~dapo.algo.overlong`: Overlong Filtering and Soft Overlong Punishment.
- :mod:`~dapo.algo.kl`: KL penalty estimators (unused by DAPO itself, beta = 0).
- :mod:`~dapo.algo.logprobs`: chunked token log-probs and entropy from logits.
- :mod:`~dapo.algo.registry`: the registries that ``algorithm.advantage`` / ``policy_loss`` /
  ``loss_agg_mode`` name (extend them from ``algorithm.plugins``; docs/extending.md).
"""

from dapo.algo.advantages import (
    ADVANTAGE_ESTIMATORS,
    compute_advantages,
    register_advantage,
)
from dapo.algo.aggregation import (
    LOSS_AGG_MODES,
    aggregate_loss,
    call_loss_aggregation,
    count_tokens_and_seqs,
)
from dapo.algo.filtering import GroupFilterResult, filter_groups
from dapo.algo.kl import KL_ESTIMATORS, kl_penalty
from dapo.algo.logprobs import (
    entropy_from_logits,
    logprobs_and_entropy_from_logits,
    logprobs_from_logits,
)
from dapo.algo.overlong import overlong_filter_mask, soft_overlong_penalty
from dapo.algo.policy_loss import (
    POLICY_LOSSES,
    PolicyLossStats,
    call_policy_loss,
    compute_policy_loss,
    policy_loss_stats,
    tis_weights,
)
from dapo.algo.registry import PluginError, Registry

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "KL_ESTIMATORS",
    "LOSS_AGG_MODES",
    "POLICY_LOSSES",
    "GroupFilterResult",
    "PluginError",
    "PolicyLossStats",
    "Registry",
    "aggregate_loss",
    "call_loss_aggregation",
    "call_policy_loss",
    "compute_advantages",
    "compute_policy_loss",
    "count_tokens_and_seqs",
    "entropy_from_logits",
    "logprobs_and_entropy_from_logits",
    "filter_groups",
    "kl_penalty",
    "logprobs_from_logits",
    "overlong_filter_mask",
    "policy_loss_stats",
    "register_advantage",
    "soft_overlong_penalty",
    "tis_weights",
]
