"""A rehearsal of the selected plugins on a tiny synthetic batch, before a run loads anything.

Why: the trainer checks what a registered advantage estimator, policy loss or aggregation mode
returns at its first call (:class:`~dapo.algo.registry.PluginError`), which on a large model comes
after minutes of loading and a first rollout. The same calls, with the same arguments, on 2
prompts x rollout.n responses of up to 3 tokens find a wrong shape, a detached loss, an exception
or a loss that does not add up over micro-batches in milliseconds. Each entry is called through
its registry's one calling function, through which the trainer calls it too: an estimator
through :func:`~dapo.algo.advantages.compute_advantages`, a policy loss through
:func:`~dapo.algo.policy_loss.call_policy_loss`, an aggregation mode through
:func:`~dapo.algo.aggregation.aggregate_loss`'s :func:`~dapo.algo.aggregation.call_loss_aggregation`;
each signature is the one list of what its
entries are passed, so a plugin is rehearsed with the arguments the run passes it. An exception
is an error but for one that names a device: that may be the rehearsal's own (a CPU batch for a
loss that moves its tensors to a GPU), and is only warned of.
Built-in entries are not rehearsed: their tests cover them.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch

from dapo.algo.advantages import ADVANTAGE_ESTIMATORS, compute_advantages
from dapo.algo.aggregation import LOSS_AGG_MODES, aggregate_loss
from dapo.algo.policy_loss import POLICY_LOSSES, call_policy_loss
from dapo.algo.registry import PluginError, Registry, describe

_BATCH = "a synthetic batch of 2 prompts x rollout.n responses of up to 3 tokens"
# what an exception's message says when a CPU batch is the rehearsal's fault, not the plugin's
_DEVICE_WORDS = ("cuda", "device", "gpu", "triton")


def is_builtin(registry: Registry, name: str) -> bool:
    return getattr(registry.lookup(name), "__module__", "").startswith("dapo.algo.")


def rehearse_plugins(
    advantage: str,
    policy_loss: str,
    loss_agg_mode: str,
    *,
    advantage_eps: float,
    clip_ratio_low: float,
    clip_ratio_high: float,
    clip_ratio_c: float | None,
    norm_const: float,
    tis_cap: float | None,
    group_size: int = 2,
    constant_group: bool = False,
    masked_response: bool = False,
) -> None:
    """Call each selected plugin as the trainer does (advantages from scores and group ids of
    ``group_size`` responses; the policy loss and its backward; the aggregation of a per-token
    loss); raise PluginError naming the entry, its file and the contract it broke: a wrong return
    (a non-finite loss too), an exception (but one that names a device, which may be the CPU
    batch's fault: warned of), or a loss that does not add up over micro-batches given the batch's
    normalisers. The batch has what the run's batches may: with ``constant_group`` (no Dynamic
    Sampling) a group whose rewards are all equal (its std 0), with ``masked_response`` (overlong
    filtering) a response every token of which is masked out of the loss."""
    rows = 2 * group_size
    generator = torch.Generator().manual_seed(0)
    scores = torch.rand(rows, generator=generator, dtype=torch.float64)
    if constant_group:
        scores[group_size:] = 1.0
    group_ids = torch.arange(rows) // group_size
    lengths = torch.tensor([3 - i % 3 for i in range(rows)])  # 3, 2, 1, 3, ... tokens
    response_mask = (torch.arange(3) < lengths[:, None]).float()
    if masked_response:
        response_mask[-1] = 0.0
    responses_in_loss = float((response_mask.sum(-1) > 0).sum())  # (count_loss_tokens's num_seqs)
    norms = {"num_tokens": float(response_mask.sum()), "num_seqs": responses_in_loss, "norm_const": norm_const}
    logprobs = (-torch.rand(rows, 3, generator=generator) - 0.1).requires_grad_()
    old_logprobs = logprobs.detach() + 0.05 * torch.randn(rows, 3, generator=generator)
    advantages = torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(rows)]) * (1 + torch.arange(rows) / rows)
    halves = (slice(0, group_size), slice(group_size, rows))  # two micro-batches of one group each
    batch = _BATCH + ("; its second group's rewards all equal (algorithm.dynamic_sampling=false trains such groups)"
                      * constant_group) + ("; its last response wholly masked (algorithm.overlong_filtering)"
                                           * masked_response)

    def rows_of(part: slice | None, *tensors: torch.Tensor) -> list[torch.Tensor]:  # None: the whole batch's
        return [t if part is None else t[part] for t in tensors]  # (whole: the leaf itself, whose .grad is read)

    def policy_loss_of(part: slice | None, weight: float = 1.0) -> torch.Tensor:
        tensors = rows_of(part, logprobs, old_logprobs, advantages, response_mask)
        loss, _ = call_policy_loss(
            policy_loss, *tensors,
            clip_ratio_low=clip_ratio_low, clip_ratio_high=clip_ratio_high, clip_ratio_c=clip_ratio_c,
            loss_agg_mode=loss_agg_mode, **norms,
            importance_weights=None if tis_cap is None else torch.full_like(tensors[3], weight),
        )
        return loss

    def aggregated(part: slice | None) -> torch.Tensor:
        return aggregate_loss(*rows_of(part, -logprobs.detach(), response_mask), loss_agg_mode, **norms)

    entries = [(ADVANTAGE_ESTIMATORS, advantage), (POLICY_LOSSES, policy_loss), (LOSS_AGG_MODES, loss_agg_mode)]
    for registry, name in entries:
        if is_builtin(registry, name):
            continue
        try:
            if registry is ADVANTAGE_ESTIMATORS:
                advantages = compute_advantages(name, scores, group_ids, advantage_eps, response_lengths=lengths).float()
                continue
            loss_of = policy_loss_of if registry is POLICY_LOSSES else aggregated
            whole = loss_of(None)  # (first: a contract it breaks is said of the whole batch)
            if not torch.isfinite(whole).all():
                masked = " (one of its responses wholly masked, as overlong filtering masks them)" * masked_response
                raise PluginError(f"{registry.kind} {name!r}, {describe(registry[name])}, returned the loss "
                                  f"{float(whole.detach())}{masked}: a non-finite loss is skipped, and every batch "
                                  "like this one would train nothing")
            if registry is POLICY_LOSSES:
                whole.backward()
            parts = [float(loss_of(half).detach()) for half in halves]
            _check_adds_up(registry, name, float(whole.detach()), parts, norms)
            if registry is POLICY_LOSSES and tis_cap is not None:
                _check_weights_used(name, whole, lambda: policy_loss_of(None, weight=0.5), logprobs, tis_cap)
        except PluginError as error:
            raise PluginError(f"{error} (found before the run loaded, on {batch})") from error
        except Exception as error:
            said = f"{registry.kind} {name!r}, {describe(registry[name])}, raised {type(error).__name__}: {error}"
            if not any(word in str(error).lower() for word in _DEVICE_WORDS):
                raise PluginError(f"{said}, on {batch} ({rows} responses, their response_mask float32 of 0 and 1, "
                                  "advantages float32 of shape (B,)), before the run loaded: a real batch would raise "
                                  "it after the model loads and a rollout") from error
            # maybe the rehearsal's fault (a CPU batch for a loss that moves its tensors to a GPU)
            warnings.warn(f"{said} on {batch} before the run loaded; the run goes on, and stops if a real batch "
                          "raises too", stacklevel=2)


def _check_weights_used(name: str, whole: torch.Tensor, half_weighted_loss: Callable[[], torch.Tensor],
                        logprobs: torch.Tensor, tis_cap: float) -> None:
    """With algorithm.tis_cap a policy loss is given truncated importance weights; one that takes the
    parameter and leaves them out of its loss and gradient (its weights all 0.5 change neither) would
    train uncorrected while the config says it corrects. (The gradient too: a straight-through loss
    reports the unweighted value and applies the weights through its gradient.) ``whole``'s backward has
    run; ``logprobs.grad`` holds its gradient, as it does again after."""
    grad = logprobs.grad.clone() if logprobs.grad is not None else torch.zeros_like(logprobs)
    logprobs.grad = None
    half = half_weighted_loss()
    half.backward()
    half_grad = logprobs.grad if logprobs.grad is not None else torch.zeros_like(logprobs)
    logprobs.grad = grad
    loss, half_value = float(whole.detach()), float(half.detach())
    unchanged = math.isclose(loss, half_value, rel_tol=1e-6, abs_tol=1e-9) and torch.allclose(grad, half_grad)
    if not unchanged or (abs(loss) < 1e-12 and not bool(grad.abs().gt(0).any())):
        return  # (a loss of 0 and no gradient, an estimator's zero advantages: nothing to tell from)
    raise PluginError(
        f"policy loss {name!r}, {describe(POLICY_LOSSES[name])}, takes importance_weights but neither its loss nor its "
        f"gradient changes with them (all 1: {loss:.6g}; all 0.5: {half_value:.6g}): algorithm.tis_cap={tis_cap:g} "
        "would correct nothing. Multiply each token's loss by its weight (as decoupled_clip does), or set "
        "algorithm.tis_cap=null"
    )


def _check_adds_up(registry: Registry, name: str, whole: float, parts: list[float], norms: dict[str, float]) -> None:
    """The trainer adds up the gradients of a mini-batch's micro-batches (trainer.micro_batch_tokens),
    each loss given the mini-batch's token and response counts: a loss that normalises by its own
    micro-batch's (a masked mean) would change with the micro-batch size and weigh a short
    micro-batch's tokens more."""
    if math.isclose(sum(parts), whole, rel_tol=1e-4, abs_tol=1e-6):
        return
    raise PluginError(
        f"{registry.kind} {name!r}, {describe(registry[name])}, does not add up over micro-batches: its losses over "
        f"the batch's two halves, each given the whole batch's num_tokens={norms['num_tokens']:g} and "
        f"num_seqs={norms['num_seqs']:g} (as the trainer gives every micro-batch its mini-batch's), sum to "
        f"{sum(parts):.6g}, and its loss over the whole batch is {whole:.6g}. The trainer adds up its micro-batches' "
        "gradients, so a loss normalised by its own micro-batch (a masked mean, .mean()) would change with "
        "trainer.micro_batch_tokens; divide by num_tokens or num_seqs, as aggregate_loss(loss, response_mask, "
        "loss_agg_mode, num_tokens=num_tokens, num_seqs=num_seqs, norm_const=norm_const) does"
    )
