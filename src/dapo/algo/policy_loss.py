"""DAPO's clipped surrogate loss with Clip-Higher, dual-clip and truncated importance sampling.

DAPO objective (arXiv 2503.14476, Eq. 8), per token t of response o_i:

    r_{i,t}(theta) = pi_theta(o_{i,t} | q, o_{i,<t}) / pi_old(o_{i,t} | q, o_{i,<t})
    J = E[ 1/sum_i|o_i| * sum_i sum_t min( r_{i,t} A_i, clip(r_{i,t}, 1 - eps_low, 1 + eps_high) A_i ) ]

As a loss to minimise (the negative objective), per token:

    pg1 = -A * r
    pg2 = -A * clip(r, 1 - eps_low, 1 + eps_high)
    loss = max(pg1, pg2)

Clip-Higher (Section 3.1) decouples eps_low (0.2) from eps_high (0.28). The paper's example: with
eps = 0.2 a token with pi_old = 0.01 can rise to at most 0.01 * 1.2 = 0.012 in one update before
its gradient is clipped to zero, but a token at 0.9 can reach 1.08 (i.e. it is unconstrained);
raising eps_high to 0.28 lets the rare token reach 0.0128, which keeps entropy from collapsing.

Dual-clip (Ye et al. 2020; used by the DAPO reference run with c = 10): for A < 0 a huge ratio
makes -A * r unbounded, so the loss is further capped at -A * c:

    loss = min(max(pg1, pg2), -A * c)    when A < 0 and clip_ratio_c is not None

Safety: log r = logprobs - old_logprobs is clamped to [-20, 20] before exp, so a stray log-prob
cannot produce inf/NaN (e^20 ~ 4.9e8 is already far outside every clip range; a clamped token
has zero gradient, like any clipped one).

Truncated importance sampling (TIS): when the rollout engine's probabilities pi_rollout differ
from the trainer's pi_old (vLLM vs training numerics, top-p sampling, ...), each token's loss is
multiplied by the detached weight w = min(pi_old / pi_rollout, cap); see :func:`tis_weights`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields

import torch
from torch import Tensor

from dapo.algo.aggregation import aggregate_loss
from dapo.algo.registry import PluginError, Registry, defined_at, passed_arguments

LOG_RATIO_CLAMP = 20.0

# fn(logprobs, old_logprobs, advantages, response_mask, *, <the keywords of call_policy_loss>)
#    -> (scalar loss, PolicyLossStats), called only through :func:`call_policy_loss`; selected by
#    algorithm.policy_loss. The built-in "decoupled_clip" is :func:`compute_policy_loss`.
POLICY_LOSSES: Registry = Registry("policy loss")


@dataclass
class PolicyLossStats:
    """Detached 0-dim SUMS over the unmasked tokens of one micro-batch.

    Add them across micro-batches (``a + b`` or :meth:`total`) and divide by ``token_count``
    (:meth:`to_metrics`) for mini-batch fractions and means.
    """

    token_count: Tensor
    # A < 0 and r < 1 - eps_low: clipped at the low bound (gradient 0).
    clip_low_count: Tensor
    # A > 0 and r > 1 + eps_high: clipped at the high bound (gradient 0).
    clip_high_count: Tensor
    # A < 0 and r > c: capped by dual-clip (always 0 when dual-clip is off).
    dual_clip_count: Tensor
    # Sum of k3 = (r - 1) - log r, an unbiased, non-negative per-token estimate of KL(pi_old || pi_theta)
    # (samples come from pi_old; E_old[r - 1] = 0 and E_old[-log r] = KL(pi_old || pi_theta)).
    approx_kl_sum: Tensor
    ratio_sum: Tensor
    # A plugin loss's own metrics: name -> a 0-dim SUM over the unmasked tokens, logged as its
    # per-token mean, actor/plugin/<name> ({"tis_weight": (weights * mask).sum()}: the mean weight).
    extra_sums: dict[str, Tensor] = field(default_factory=dict)

    def __add__(self, other: PolicyLossStats) -> PolicyLossStats:
        names = dict.fromkeys([*self.extra_sums, *other.extra_sums])  # a name one side lacks adds 0 there
        return PolicyLossStats(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self) if f.name != "extra_sums"},
            extra_sums={name: self.extra_sums.get(name, 0) + other.extra_sums.get(name, 0) for name in names},
        )

    def cpu(self) -> PolicyLossStats:
        """The same sums, detached, on the CPU (a rank's, for the driver)."""
        return PolicyLossStats(
            **{f.name: getattr(self, f.name).detach().cpu() for f in fields(self) if f.name != "extra_sums"},
            extra_sums={name: value.detach().cpu() for name, value in self.extra_sums.items()},
        )

    @staticmethod
    def total(stats: list[PolicyLossStats]) -> PolicyLossStats:
        """Sum of the stats of several micro-batches (a non-empty list)."""
        if not stats:
            raise ValueError("PolicyLossStats.total needs at least one entry")
        result = stats[0]
        for item in stats[1:]:
            result = result + item
        return result

    def to_metrics(self) -> dict[str, float]:
        """Fractions of tokens clipped, mean approx KL and mean ratio (0 when there are no tokens)."""
        count = max(float(self.token_count), 1.0)
        return {
            "clip_frac_low": float(self.clip_low_count) / count,
            "clip_frac_high": float(self.clip_high_count) / count,
            "clip_frac_dual": float(self.dual_clip_count) / count,
            "approx_kl": float(self.approx_kl_sum) / count,
            "ratio_mean": float(self.ratio_sum) / count,
            **{f"plugin/{name}": float(value) / count for name, value in self.extra_sums.items()},
        }


def _check_policy_inputs(
    logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, response_mask: Tensor,
    clip_ratio_low: float, clip_ratio_high: float, clip_ratio_c: float | None,
) -> None:
    if logprobs.dim() != 2 or old_logprobs.shape != logprobs.shape or response_mask.shape != logprobs.shape:
        raise ValueError(
            f"logprobs {tuple(logprobs.shape)}, old_logprobs {tuple(old_logprobs.shape)} and "
            f"response_mask {tuple(response_mask.shape)} must all be the same (B, T)"
        )
    if advantages.shape not in (logprobs.shape, logprobs.shape[:1]):
        raise ValueError(f"advantages must be (B, T) or (B,), got {tuple(advantages.shape)} for logprobs {tuple(logprobs.shape)}")
    if not 0 < clip_ratio_low < 1:
        raise ValueError(f"clip_ratio_low must be in (0, 1), got {clip_ratio_low}")
    if clip_ratio_high <= 0:
        raise ValueError(f"clip_ratio_high must be > 0, got {clip_ratio_high}")
    if clip_ratio_c is not None and clip_ratio_c <= 1:
        raise ValueError(f"clip_ratio_c must be > 1 (dual-clip caps -A*r at -A*c), got {clip_ratio_c}")


@POLICY_LOSSES.register("decoupled_clip")
def compute_policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    *,
    clip_ratio_low: float,
    clip_ratio_high: float,
    clip_ratio_c: float | None = None,
    loss_agg_mode: str = "token-mean",
    num_tokens: float | Tensor | None = None,
    num_seqs: float | Tensor | None = None,
    norm_const: float | None = None,
    importance_weights: Tensor | None = None,
) -> tuple[Tensor, PolicyLossStats]:
    """DAPO clipped policy-gradient loss (scalar) and its clip statistics.

    Args:
        logprobs: (B, T) log pi_theta of the sampled tokens (carries the gradient).
        old_logprobs: (B, T) log pi_old, the policy that produced the batch (no gradient).
        advantages: (B, T) per-token or (B,) per-response advantages A.
        response_mask: (B, T) 1 for response tokens that enter the loss.
        clip_ratio_low, clip_ratio_high: eps_low, eps_high of Clip-Higher.
        clip_ratio_c: dual-clip bound c > 1 for A < 0, or None to disable.
        loss_agg_mode, num_tokens, num_seqs, norm_const: see :func:`dapo.algo.aggregate_loss`.
        importance_weights: optional detached (B, T) per-token weights (e.g. :func:`tis_weights`).
    """
    _check_policy_inputs(
        logprobs, old_logprobs, advantages, response_mask, clip_ratio_low, clip_ratio_high, clip_ratio_c
    )
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)
    advantages = advantages.detach()
    # Zeroing masked positions first keeps a padded -inf/NaN log-prob out of the gradient too.
    log_ratio = torch.where(response_mask != 0, logprobs - old_logprobs.detach(), 0.0)
    log_ratio = torch.clamp(log_ratio, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)

    pg_unclipped = -advantages * ratio
    pg_clipped = -advantages * torch.clamp(ratio, 1.0 - clip_ratio_low, 1.0 + clip_ratio_high)
    per_token_loss = torch.maximum(pg_unclipped, pg_clipped)
    if clip_ratio_c is not None:
        dual_clipped = torch.minimum(per_token_loss, -advantages * clip_ratio_c)
        per_token_loss = torch.where(advantages < 0, dual_clipped, per_token_loss)
    if importance_weights is not None:
        if importance_weights.shape != logprobs.shape:
            raise ValueError(f"importance_weights must be (B, T) like logprobs, got {tuple(importance_weights.shape)}")
        per_token_loss = per_token_loss * importance_weights.detach()

    loss = aggregate_loss(
        per_token_loss, response_mask, loss_agg_mode,
        num_tokens=num_tokens, num_seqs=num_seqs, norm_const=norm_const,
    )
    stats = policy_loss_stats(ratio.detach(), log_ratio.detach(), advantages, response_mask, clip_ratio_low, clip_ratio_high, clip_ratio_c)
    return loss, stats


# each token's term needs its own token only: a sequence-parallel rank computes it on its chunk
# (trainer.sequence_parallel_size; a plugin loss marks itself the same way, docs/extending.md)
compute_policy_loss.token_level = True  # type: ignore[attr-defined]


def call_policy_loss(
    name: str,
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    *,
    clip_ratio_low: float,
    clip_ratio_high: float,
    clip_ratio_c: float | None,
    loss_agg_mode: str,
    num_tokens: float | Tensor | None,
    num_seqs: float | Tensor | None,
    norm_const: float | None,
    importance_weights: Tensor | None,
) -> tuple[Tensor, PolicyLossStats]:
    """``POLICY_LOSSES[name]`` called as every caller calls it, its result checked: a registered
    loss (a plugin's) that returns something else than ``(scalar loss with a gradient,
    PolicyLossStats)`` is named with its file, instead of failing later in the update or dropping
    the policy metrics.

    This signature is the one list of what a policy loss is passed (:data:`POLICY_LOSS_CALL`):
    every keyword is required and forwarded by name, so the trainer's update and the plugin
    rehearsal (:mod:`dapo.algo.rehearsal`), which both call here, cannot pass a plugin different
    arguments: a keyword added for one is a TypeError in the other until it passes it too."""
    loss_fn = POLICY_LOSSES.lookup(name)
    result = loss_fn(
        logprobs, old_logprobs, advantages, response_mask,
        clip_ratio_low=clip_ratio_low, clip_ratio_high=clip_ratio_high, clip_ratio_c=clip_ratio_c,
        loss_agg_mode=loss_agg_mode, num_tokens=num_tokens, num_seqs=num_seqs, norm_const=norm_const,
        importance_weights=importance_weights,
    )
    what = f"policy loss {name!r} ({defined_at(loss_fn)})"
    if not isinstance(result, tuple) or len(result) != 2:
        got = f"a tuple of {len(result)}" if isinstance(result, tuple) else f"a {type(result).__name__}"
        raise PluginError(f"{what} returned {got}: it must return (loss, stats), a scalar tensor and the "
                          "PolicyLossStats of dapo.algo.policy_loss_stats")
    loss, stats = result
    if not isinstance(loss, Tensor) or loss.dim() != 0:
        got = f"shape {tuple(loss.shape)}" if isinstance(loss, Tensor) else f"a {type(loss).__name__}"
        raise PluginError(f"{what} returned a loss of {got}: it must be a scalar (0-dim) tensor; reduce the "
                          "per-token loss with dapo.algo.aggregate_loss and the num_tokens/num_seqs it is given")
    if torch.is_grad_enabled() and logprobs.requires_grad and not loss.requires_grad:
        raise PluginError(f"{what} returned a loss without a gradient: compute it from logprobs, not detached")
    if type(stats) is not PolicyLossStats:  # a subclass's fields would be lost in the sum of micro-batches
        subclass = ("; not a subclass: its own fields are not summed or logged"
                    if isinstance(stats, PolicyLossStats) else "")
        raise PluginError(f"{what} returned stats of type {type(stats).__name__}: return the PolicyLossStats "
                          "that dapo.algo.policy_loss_stats builds (the clip fractions, KL and ratio metrics)"
                          f"{subclass}")
    return loss, _checked_extra_sums(stats, what)


def _checked_extra_sums(stats: PolicyLossStats, what: str) -> PolicyLossStats:
    """``stats`` with its plugin metrics detached (a graph kept in them would live on through the
    sum of micro-batches), each a 0-dim tensor under a metric name, or a PluginError saying which."""
    if not isinstance(stats.extra_sums, dict):
        raise PluginError(f"{what} returned extra_sums of type {type(stats.extra_sums).__name__}: a dict of "
                          "metric name -> 0-dim tensor, the sum over the unmasked tokens")
    for name, value in stats.extra_sums.items():
        if not isinstance(name, str) or not _METRIC_NAME.fullmatch(name):
            raise PluginError(f"{what} returned an extra_sums name {name!r}: letters, digits, '_', '.', '-' "
                              "and '/' (it is logged as actor/plugin/<name>)")
        if not isinstance(value, Tensor) or value.dim() != 0:
            got = f"shape {tuple(value.shape)}" if isinstance(value, Tensor) else f"a {type(value).__name__}"
            raise PluginError(f"{what} returned extra_sums[{name!r}] of {got}: a 0-dim tensor, the sum over the "
                              "unmasked tokens (it is logged divided by their count)")
    stats.extra_sums = {name: value.detach() for name, value in stats.extra_sums.items()}
    return stats


_METRIC_NAME = re.compile(r"[A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)*")


# How a policy loss is called, (positional argument names, keyword argument names): read off
# call_policy_loss, the one call there is, for the config's check of a plugin's signature
# (dapo.config.training) and docs/extending.md's table, which its test compares.
POLICY_LOSS_CALL: tuple[tuple[str, ...], tuple[str, ...]] = passed_arguments(call_policy_loss)


def policy_loss_stats(
    ratio: Tensor, log_ratio: Tensor, advantages: Tensor, response_mask: Tensor,
    clip_ratio_low: float, clip_ratio_high: float, clip_ratio_c: float | None,
) -> PolicyLossStats:
    """Clip counts, k3 KL and ratio sums over the unmasked tokens, for any ratio-based loss.
    ``advantages``: per response, (B,) as a policy loss is given them, or per token, (B, T)."""
    given = tuple(advantages.shape)
    if advantages.dim() == 1:  # (B,) against (B, T) would broadcast along the tokens (B == T: wrong counts, unsaid)
        advantages = advantages.unsqueeze(-1)
    if advantages.dim() != 2 or advantages.shape[0] != ratio.shape[0] or advantages.shape[1] not in (1, ratio.shape[1]):
        raise ValueError(f"policy_loss_stats: advantages of shape {given} for a ratio of shape "
                         f"{tuple(ratio.shape)}: give them per response, (B,), or per token, (B, T)")
    active = response_mask != 0
    negative, positive = advantages < 0, advantages > 0
    clip_low = active & negative & (ratio < 1.0 - clip_ratio_low)
    clip_high = active & positive & (ratio > 1.0 + clip_ratio_high)
    if clip_ratio_c is None:
        dual = torch.zeros_like(active)
    else:
        dual = active & negative & (ratio > clip_ratio_c)
    zeros = torch.zeros_like(ratio)
    k3 = (ratio - 1.0) - log_ratio
    return PolicyLossStats(
        token_count=active.sum(),
        clip_low_count=clip_low.sum(),
        clip_high_count=clip_high.sum(),
        dual_clip_count=dual.sum(),
        approx_kl_sum=torch.where(active, k3, zeros).sum(),
        ratio_sum=torch.where(active, ratio, zeros).sum(),
    )


def tis_weights(old_logprobs: Tensor, rollout_logprobs: Tensor, cap: float) -> Tensor:
    """Truncated importance sampling weights w_t = min(pi_old / pi_rollout, cap), detached.

    Corrects for the rollout engine sampling from pi_rollout while the loss assumes pi_old
    (the trainer's recomputation of the same policy). The log-ratio is clamped to [-20, 20]
    before exp, which cannot change the result for any cap below e^20.
    """
    if old_logprobs.shape != rollout_logprobs.shape:
        raise ValueError(f"old_logprobs {tuple(old_logprobs.shape)} != rollout_logprobs {tuple(rollout_logprobs.shape)}")
    if cap <= 0:
        raise ValueError(f"TIS cap must be > 0, got {cap}")
    log_ratio = torch.clamp(old_logprobs - rollout_logprobs, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    return torch.clamp(torch.exp(log_ratio), max=cap).detach()
