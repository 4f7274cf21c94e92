"""Loss aggregation: DAPO's Token-Level Policy Gradient Loss and the sample-level alternatives.

DAPO (arXiv 2503.14476, Section 3.3, Eq. 12) averages the per-token loss over ALL tokens of ALL
responses of the (mini-)batch:

    L = 1 / (sum_i |o_i|) * sum_i sum_{t=1}^{|o_i|} loss_{i,t}                        "token-mean"

whereas GRPO first averages within each response, so every response weighs the same whatever its
length and the tokens of long responses are under-weighted:

    L = 1 / G * sum_i 1 / |o_i| * sum_t loss_{i,t}                                  "seq-mean-token-mean"

Other modes: "seq-mean-token-sum" (sum over tokens, mean over responses) and
"seq-mean-token-sum-norm" (Dr.GRPO: sum over tokens, divided by (number of responses * a
constant such as the maximum response length)). verl's mode of that name divides by the constant
only, not by the number of responses: its loss is G times ours for G responses (and, in its
micro-batched loop, depends on the micro-batch size). Ours is the Dr.GRPO formula; with Adam the
factor mostly cancels, but it changes when the gradient clip binds.

Global normalisers. The denominators above belong to the whole optimizer mini-batch, which the
trainer splits into gradient-accumulation micro-batches and data-parallel ranks. Each call here
sees one micro-batch on one rank; pass ``num_tokens`` (total response tokens of the whole
mini-batch, over all micro-batches and ranks) and ``num_seqs`` (total responses) so that

    sum over micro-batches and ranks of aggregate_loss(micro-batch) == loss of the whole mini-batch

exactly, and so are the gradients (sum the micro-batch gradients; average across ranks only if
the trainer also multiplies by the world size, i.e. use a SUM all-reduce). Normalising by the
local count instead (verl's legacy per-micro-batch mean, TRL's "bnpo") weights tokens of short
micro-batches more. :func:`count_tokens_and_seqs` gives the local counts to sum up front.

Masks are 0/1 (bool or float). A response with no unmasked token (e.g. removed by Overlong
Filtering) contributes nothing and is not counted in the default ``num_seqs``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from dapo.algo.registry import PluginError, Registry, defined_at, passed_arguments

# fn(masked_loss (B, T) with 0 at masked positions, token_mask (B, T) bool, num_tokens, num_seqs,
#    norm_const) -> scalar; num_tokens / num_seqs are the global normalisers, never 0. Called only
#    through :func:`call_loss_aggregation`, whose signature is the list (:data:`LOSS_AGG_CALL`).
LossAggregator = Callable[[Tensor, Tensor, "float | Tensor", "float | Tensor", "float | None"], Tensor]

LOSS_AGG_MODES: Registry[LossAggregator] = Registry("loss aggregation mode")


@LOSS_AGG_MODES.register("token-mean")
def token_mean(masked_loss: Tensor, token_mask: Tensor, num_tokens, num_seqs, norm_const) -> Tensor:
    """DAPO: sum(loss * mask) / num_tokens."""
    return masked_loss.sum() / num_tokens


@LOSS_AGG_MODES.register("seq-mean-token-mean")
def seq_mean_token_mean(masked_loss: Tensor, token_mask: Tensor, num_tokens, num_seqs, norm_const) -> Tensor:
    """GRPO: sum_i [sum_t (loss * mask)_i / max(|o_i|, 1)] / num_seqs."""
    lengths = token_mask.sum(-1).clamp_min(1).to(masked_loss.dtype)
    return (masked_loss.sum(-1) / lengths).sum() / num_seqs


@LOSS_AGG_MODES.register("seq-mean-token-sum")
def seq_mean_token_sum(masked_loss: Tensor, token_mask: Tensor, num_tokens, num_seqs, norm_const) -> Tensor:
    """sum_i sum_t (loss * mask)_i / num_seqs."""
    return masked_loss.sum() / num_seqs


@LOSS_AGG_MODES.register("seq-mean-token-sum-norm")
def seq_mean_token_sum_norm(masked_loss: Tensor, token_mask: Tensor, num_tokens, num_seqs, norm_const) -> Tensor:
    """Dr.GRPO: sum_i sum_t (loss * mask)_i / (num_seqs * norm_const)."""
    if norm_const is None or norm_const <= 0:
        raise ValueError(
            f"loss_agg_mode 'seq-mean-token-sum-norm' needs norm_const > 0 (e.g. the max "
            f"response length), got {norm_const}"
        )
    return masked_loss.sum() / (num_seqs * norm_const)


def count_tokens_and_seqs(response_mask: Tensor) -> tuple[Tensor, Tensor]:
    """(number of response tokens, number of responses with >= 1 token) of a (B, T) mask, as int64.

    Sum these over every micro-batch and rank of a mini-batch to get ``num_tokens`` / ``num_seqs``.
    """
    lengths = (response_mask != 0).sum(-1)
    return lengths.sum(), (lengths > 0).sum()


def _denominator(value: float | Tensor, name: str) -> float | Tensor:
    """The normaliser, with 0 replaced by 1 so an empty batch gives a 0 loss (with grad), not NaN.
    A negative one (a miscounted global count) is refused; on an accelerator, where the check
    would wait for the device, a tensor's is not checked."""
    if isinstance(value, Tensor):
        if value.device.type == "cpu" and bool((value < 0).any()):
            raise ValueError(f"{name} must be >= 0, got {value.tolist()}")
        return torch.where(value > 0, value, torch.ones_like(value))
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value if value > 0 else 1.0


def aggregate_loss(
    per_token_loss: Tensor,
    response_mask: Tensor,
    mode: str,
    *,
    num_tokens: float | Tensor | None = None,
    num_seqs: float | Tensor | None = None,
    norm_const: float | None = None,
) -> Tensor:
    """Reduce a (B, T) per-token loss to a scalar with the global normalisers of ``mode`` (a name
    in :data:`LOSS_AGG_MODES`; the built-in modes' formulas are in their docstrings above).

    ``num_tokens`` / ``num_seqs`` default to this batch's own counts (see
    :func:`count_tokens_and_seqs`); pass the whole mini-batch totals under gradient accumulation
    or data parallelism. Masked positions are excluded with ``torch.where``, so a NaN or inf
    there (e.g. a padded log-prob) cannot leak into the loss.
    """
    LOSS_AGG_MODES.lookup(mode)  # an unknown name is told before a shape error
    if per_token_loss.dim() != 2 or per_token_loss.shape != response_mask.shape:
        raise ValueError(
            f"per_token_loss {tuple(per_token_loss.shape)} and response_mask "
            f"{tuple(response_mask.shape)} must both be (B, T)"
        )
    token_mask = response_mask != 0
    masked_loss = torch.where(token_mask, per_token_loss * response_mask.to(per_token_loss.dtype), 0.0)
    local_tokens, local_seqs = count_tokens_and_seqs(response_mask)
    total_tokens = _denominator(local_tokens if num_tokens is None else num_tokens, "num_tokens")
    total_seqs = _denominator(local_seqs if num_seqs is None else num_seqs, "num_seqs")
    return call_loss_aggregation(mode, masked_loss, token_mask, total_tokens, total_seqs, norm_const)


def call_loss_aggregation(
    mode: str,
    masked_loss: Tensor,
    token_mask: Tensor,
    num_tokens: float | Tensor,
    num_seqs: float | Tensor,
    norm_const: float | None,
) -> Tensor:
    """``LOSS_AGG_MODES[mode]`` called as every caller calls it, its result checked: a registered
    mode (a plugin's) that returns no scalar tensor is named with its file here, not at backward().

    This signature is the one list of what an aggregation mode is passed (:data:`LOSS_AGG_CALL`),
    forwarded in its order, all required: :func:`aggregate_loss`, which builds the masked loss and
    the normalisers, calls here for every caller (the policy losses, the trainer's entropy and KL
    terms, the plugin rehearsal of :mod:`dapo.algo.rehearsal`), so a plugin is rehearsed with the
    arguments the update passes it."""
    aggregate = LOSS_AGG_MODES.lookup(mode)
    loss = aggregate(masked_loss, token_mask, num_tokens, num_seqs, norm_const)
    if not isinstance(loss, Tensor) or loss.dim() != 0:  # a plugin's mode; found here, not at backward()
        got = f"shape {tuple(loss.shape)}" if isinstance(loss, Tensor) else f"a {type(loss).__name__}"
        raise PluginError(f"loss aggregation mode {mode!r} ({defined_at(aggregate)}) returned {got}: it must "
                          "return a scalar (0-dim) tensor")
    return loss


# How a loss aggregation mode is called, (positional argument names, keyword argument names): read
# off call_loss_aggregation, the one call there is, for the config's check of a plugin's signature
# (dapo.config.training) and docs/extending.md's table, which its test compares.
LOSS_AGG_CALL: tuple[tuple[str, ...], tuple[str, ...]] = passed_arguments(call_loss_aggregation)
