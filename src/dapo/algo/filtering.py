"""Dynamic Sampling group filter (DAPO, arXiv 2503.14476, Section 3.2, Eq. 11).

DAPO over-samples and keeps only the groups whose outcomes are mixed:

    0 < |{o_i | is_equivalent(a, o_i)}| < G

A group whose responses are all correct (accuracy 1) or all wrong (accuracy 0) has zero
group-relative advantage on every response and so contributes no gradient; it only shrinks the
effective batch. We keep a group iff its metric is not constant, i.e. max != min within the
group (equivalently std > 0). This works for non-binary rewards too, unlike a test of the mean
lying strictly inside (0, 1). The comparison is exact, with no float tolerance: two rewards that
differ at all give the group a non-zero advantage, and exactly equal rewards give exactly zero
advantage (see :mod:`dapo.algo.advantages`), so exactness matches what the loss would see.
A group of one response is constant and therefore dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class GroupFilterResult:
    """Outcome of :func:`filter_groups`. Group-level tensors are in first-appearance order."""

    # (N,) bool: the response belongs to a kept (non-constant) group.
    keep: Tensor
    # Number of distinct groups, kept and dropped.
    num_groups: int
    num_kept: int
    num_constant: int
    # Each dropped (constant) group's metric value, in first-appearance order, so the trainer
    # can tell all-correct groups from all-wrong ones.
    constant_values: Tensor


def filter_groups(group_ids: Tensor, metric: Tensor) -> GroupFilterResult:
    """Keep groups whose ``metric`` (N,) is not constant; ``group_ids`` (N,) in any order."""
    if group_ids.dim() != 1 or metric.shape != group_ids.shape:
        raise ValueError(f"group_ids {tuple(group_ids.shape)} and metric {tuple(metric.shape)} must both be (N,)")
    if group_ids.is_floating_point() or group_ids.dtype == torch.bool:
        raise ValueError(f"group_ids must be an integer tensor, got {group_ids.dtype}")
    values = metric.to(torch.float64)  # exact for bool, int32 and float32 metrics
    if bool(torch.isnan(values).any()):
        raise ValueError("metric contains NaN: a NaN reward cannot be compared for Dynamic Sampling")

    unique_ids, inverse = torch.unique(group_ids, return_inverse=True)
    num_groups = unique_ids.numel()
    positions = torch.arange(group_ids.numel(), device=group_ids.device)
    first_seen = torch.full((num_groups,), group_ids.numel(), dtype=torch.long, device=group_ids.device)
    first_seen = first_seen.scatter_reduce(0, inverse, positions, reduce="amin")
    appearance_order = torch.argsort(first_seen)

    group_max = torch.full((num_groups,), -float("inf"), dtype=torch.float64, device=values.device)
    group_max = group_max.scatter_reduce(0, inverse, values, reduce="amax")
    group_min = torch.full((num_groups,), float("inf"), dtype=torch.float64, device=values.device)
    group_min = group_min.scatter_reduce(0, inverse, values, reduce="amin")
    group_mixed = group_max != group_min

    ordered_mixed = group_mixed[appearance_order]
    ordered_values = group_min[appearance_order].to(metric.dtype if metric.is_floating_point() else torch.float64)
    num_kept = int(ordered_mixed.sum())
    return GroupFilterResult(
        keep=group_mixed[inverse],
        num_groups=num_groups,
        num_kept=num_kept,
        num_constant=num_groups - num_kept,
        constant_values=ordered_values[~ordered_mixed],
    )
