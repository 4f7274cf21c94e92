"""Dynamic Sampling group filter: constant-metric groups are dropped, mixed ones kept."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dapo.algo import compute_advantages, filter_groups


def test_hand_computed_groups_in_first_appearance_order() -> None:
    ids = torch.tensor([5, 5, 2, 9, 2, 9, 9, 1])
    metric = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.5])
    result = filter_groups(ids, metric)
    assert result.keep.tolist() == [False, False, True, False, True, False, False, False]
    # groups 5, 9, 1 are constant (a group of one too), in first-appearance order
    assert result.constant_values.tolist() == [1.0, 0.0, 0.5]  # all-correct vs all-wrong
    assert (result.num_groups, result.num_kept, result.num_constant) == (4, 1, 3)


def test_non_binary_and_tiny_differences_are_kept_exactly() -> None:
    ids = torch.tensor([0, 0, 1, 1])
    metric = torch.tensor([0.3, 0.3 + 1e-12, -0.7, -0.7], dtype=torch.float64)
    result = filter_groups(ids, metric)
    assert result.keep.tolist() == [True, True, False, False]
    assert result.constant_values.tolist() == [-0.7]


def test_bool_metric_and_nan_rejection() -> None:
    result = filter_groups(torch.tensor([3, 3, 4, 4]), torch.tensor([True, False, True, True]))
    assert result.keep.tolist() == [True, True, False, False] and result.constant_values.tolist() == [1.0]
    with pytest.raises(ValueError, match="NaN"):
        filter_groups(torch.tensor([0, 0]), torch.tensor([1.0, float("nan")]))
    with pytest.raises(ValueError, match="integer"):
        filter_groups(torch.tensor([0.0, 0.0]), torch.tensor([1.0, 0.0]))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 3), st.sampled_from([-1.0, 0.0, 0.1, 1.0])), min_size=1, max_size=24))
def test_matches_loop_reference_and_advantages(data: list[tuple[int, float]]) -> None:
    ids = torch.tensor([g for g, _ in data])
    metric = torch.tensor([m for _, m in data])
    result = filter_groups(ids, metric)
    seen: list[int] = []
    for g, _ in data:
        if g not in seen:
            seen.append(g)
    mixed = {g for g in seen if len({m for h, m in data if h == g}) > 1}
    constant_values = [next(m for h, m in data if h == g) for g in seen if g not in mixed]
    assert result.constant_values.tolist() == pytest.approx(constant_values)
    assert (result.num_groups, result.num_kept) == (len(seen), len(mixed))
    assert result.keep.tolist() == [g in mixed for g, _ in data]
    # Dropped groups of 2+ responses are exactly those whose GRPO advantages are all zero.
    adv = compute_advantages("grpo", metric, ids)
    for g in seen:
        members = ids == g
        if int(members.sum()) > 1:
            assert bool((adv[members] == 0).all()) == (g not in mixed)


def test_boolean_group_ids_or_a_metric_of_another_length_are_refused():
    """A mask passed as group ids would read as two groups; extra metric values were ignored."""
    with pytest.raises(ValueError, match="integer"):
        filter_groups(torch.tensor([True, True]), torch.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="must both be"):
        filter_groups(torch.tensor([0, 0, 1, 1]), torch.tensor([1.0, 1.0, 0.0, 1.0, 5.0, 6.0]))


def test_constant_values_keep_a_float_metrics_dtype():
    assert filter_groups(torch.tensor([0, 0]), torch.tensor([1.0, 1.0])).constant_values.dtype == torch.float32
