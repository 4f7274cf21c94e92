"""What the policy worker's passes report: a log-prob pass's sums and an optimizer update's stats
(summed over data-parallel ranks by the Ray driver, turned into metrics by step_metrics)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from dapo.algo import PolicyLossStats


@dataclass
class LogprobPass:
    """Result of a no-grad log-prob pass over a batch (sums over response tokens)."""

    logprobs: list[np.ndarray] = field(default_factory=list)  # per response, float32 (as a Sample holds them)
    tokens: float = 0.0
    entropy_sum: float = 0.0
    # Over the tokens of responses sampled this step only: a carried-over response's rollout
    # log-probs are an older policy's, so its gap would add a step of training to the mismatch.
    mismatch_tokens: float = 0.0
    mismatch_abs_sum: float = 0.0  # sum |log pi_old_trainer - log pi_rollout|
    mismatch_kl_sum: float = 0.0  # sum of k3 estimates of KL(pi_rollout || pi_old_trainer)

    @staticmethod
    def sum_of(parts: list[LogprobPass], logprobs: list[np.ndarray] | None = None) -> LogprobPass:
        """The sums of several passes (e.g. one per data-parallel rank), with ``logprobs`` given."""
        total = LogprobPass(logprobs=logprobs or [])
        for part in parts:
            total.tokens += part.tokens
            total.entropy_sum += part.entropy_sum
            total.mismatch_tokens += part.mismatch_tokens
            total.mismatch_abs_sum += part.mismatch_abs_sum
            total.mismatch_kl_sum += part.mismatch_kl_sum
        return total


# The skip reason of a rank whose own loss was finite while another's was not: every rank skips
# the update, and the Ray driver says the reason of one that saw it (RayPolicyGroup.update).
PEER_NONFINITE_LOSS = "another rank's loss is not finite"


@dataclass
class UpdateStats:
    """One optimizer update: its loss and gradient norm, and the policy-loss sums (clip counts,
    KL, token count) of its micro-batches, added up."""

    loss: float = 0.0  # what was minimised: pg_loss - entropy bonus + KL penalty
    pg_loss: float = 0.0  # the policy-gradient loss alone
    policy: PolicyLossStats | None = None  # None until a micro-batch has been computed
    grad_norm: float = 0.0
    # why the update was dropped, its loss or gradient not finite ("loss is nan", PEER_NONFINITE_LOSS);
    # "" for an update made. Said once, from here: by PolicyWorker.update in one process, by the
    # Ray driver for all its ranks (RayPolicyGroup.update), never by a rank.
    skip_reason: str = ""
    # no update was made because no token of the mini-batch is in the loss (every response masked
    # by overlong filtering): AdamW would still move the weights by momentum and weight decay
    empty: bool = False
    diagnostics: LogprobPass | None = None  # entropy / mismatch sums, for on-policy updates
    # sum over the loss's tokens of the KL penalty's estimate to the reference model (a 0-dim
    # tensor; None without the penalty, algorithm.kl_coef = 0, or on a rank of empty micro-batches)
    ref_kl_sum: torch.Tensor | None = None

    @property
    def skipped(self) -> bool:
        """The update was dropped because the loss or gradient was not finite (see ``skip_reason``)."""
        return bool(self.skip_reason)

    @property
    def loss_not_finite(self) -> bool:
        """The update was dropped because its loss was (a forward's, on some rank: float16's loss
        scaling has no part in it), not only its gradient norm."""
        return self.skip_reason.startswith(("loss is ", PEER_NONFINITE_LOSS))

    @property
    def skip_message(self) -> str:
        """What the user is told of a skipped update (once per update, whatever the ranks)."""
        return f"skipped an optimizer update: {self.skip_reason}; weights left unchanged"
