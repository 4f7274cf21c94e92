"""A rehearsal of the selected plugins on a tiny synthetic batch, before a run loads anything.

Why: the trainer checks what a registered advantage estimator, policy loss or aggregation mode
returns at its first call (:class:`~dapo.algo.registry.PluginError`), which on a large model comes
after minutes of loading and a first rollout. The same calls, with the same arguments, on 2
prompts x 2 responses of 3 tokens find a wrong shape, a detached loss or an exception in
milliseconds. Each entry is called through its registry's one calling function, through which
the trainer calls it too: an estimator through :func:`~dapo.algo.advantages.compute_advantages`,
a policy loss through :func:`~dapo.algo.policy_loss.call_policy_loss`, an aggregation mode
through :func:`~dapo.algo.aggregation.aggregate_loss`'s
:func:`~dapo.algo.aggregation.call_loss_aggregation`; each signature is the one list of what its
entries are passed, so a plugin is rehearsed with the arguments the run passes it. An exception
is only a warning: it may be the rehearsal's own (a CPU batch for a loss that moves its tensors
to a GPU), as a reward function's failure on the scorer's dummy item is.
Built-in entries are not rehearsed: their tests cover them.
"""

from __future__ import annotations

import warnings

import torch

from dapo.algo.advantages import ADVANTAGE_ESTIMATORS, compute_advantages
from dapo.algo.aggregation import LOSS_AGG_MODES, aggregate_loss
from dapo.algo.policy_loss import POLICY_LOSSES, call_policy_loss
from dapo.algo.registry import PluginError, Registry, describe

_BATCH = "a synthetic batch of 2 prompts x 2 responses of up to 3 tokens"


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
) -> None:
    """Call each selected plugin as the trainer does (advantages from scores and group ids; the
    policy loss and its backward; the aggregation of a per-token loss); raise PluginError naming
    the entry, its file and the contract it broke, or warn of an exception it raised."""
    scores = torch.tensor([1.0, 0.0, 0.25, 0.75], dtype=torch.float64)
    group_ids = torch.tensor([0, 0, 1, 1])
    response_mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]], dtype=torch.float32)
    num_tokens, num_seqs = float(response_mask.sum()), 4.0
    generator = torch.Generator().manual_seed(0)
    logprobs = (-torch.rand(4, 3, generator=generator) - 0.1).requires_grad_()
    old_logprobs = logprobs.detach() + 0.05 * torch.randn(4, 3, generator=generator)
    entries = [(ADVANTAGE_ESTIMATORS, advantage), (POLICY_LOSSES, policy_loss), (LOSS_AGG_MODES, loss_agg_mode)]
    advantages = torch.tensor([1.0, -1.0, -0.5, 0.5])
    for registry, name in entries:
        if is_builtin(registry, name):
            continue
        try:
            if registry is ADVANTAGE_ESTIMATORS:
                advantages = compute_advantages(name, scores, group_ids, advantage_eps).float()
            elif registry is POLICY_LOSSES:
                loss, _ = call_policy_loss(
                    name, logprobs, old_logprobs, advantages, response_mask,
                    clip_ratio_low=clip_ratio_low, clip_ratio_high=clip_ratio_high, clip_ratio_c=clip_ratio_c,
                    loss_agg_mode=loss_agg_mode, num_tokens=num_tokens, num_seqs=num_seqs, norm_const=norm_const,
                    importance_weights=None if tis_cap is None else torch.ones(4, 3),
                )
                loss.backward()
            else:
                aggregate_loss(-logprobs.detach(), response_mask, name, num_tokens=num_tokens, num_seqs=num_seqs,
                               norm_const=norm_const)
        except PluginError as error:
            raise PluginError(f"{error} (found before the run loaded, on {_BATCH})") from error
        except Exception as error:  # maybe the rehearsal's fault (a CPU batch for a loss that moves tensors to a GPU)
            warnings.warn(f"{registry.kind} {name!r}, {describe(registry[name])}, raised {type(error).__name__}: "
                          f"{error} on {_BATCH} before the run loaded; the run goes on, and stops if a real batch "
                          "raises too", stacklevel=2)
