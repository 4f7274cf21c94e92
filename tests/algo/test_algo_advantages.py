"""Group-relative advantages: hand-computed cases, a per-group loop reference, properties."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dapo.algo import (
    ADVANTAGE_ESTIMATORS,
    compute_advantages,
    register_advantage,
)

EPS = 1e-6


def _loop_reference(estimator: str, scores: list[float], ids: list[int], eps: float = EPS) -> list[float]:
    """Straightforward per-group Python loop, float64, following the documented formulas."""
    out = [0.0] * len(scores)
    for gid in set(ids):
        members = [i for i, g in enumerate(ids) if g == gid]
        values = [scores[i] for i in members]
        size = len(values)
        mean = sum(values) / size if size > 1 else 0.0
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / (size - 1)) if size > 1 else 1.0
        for i in members:
            if estimator == "grpo":
                out[i] = (scores[i] - mean) / (std + eps)
            elif estimator in ("dr_grpo", "reinforce_pp_baseline"):
                out[i] = scores[i] - mean
            elif estimator == "rloo":
                out[i] = size / (size - 1) * (scores[i] - mean) if size > 1 else 0.0
    if estimator == "reinforce_pp_baseline":
        mean = sum(out) / len(out)
        std = math.sqrt(sum((v - mean) ** 2 for v in out) / (len(out) - 1)) if len(out) > 1 else 1.0
        out = [(v - mean) / (std + eps) for v in out]
    return out


def test_grpo_hand_computed_group() -> None:
    # mean 0.5, unbiased std sqrt((3 * 0.25 + 2.25) / 3) = 1
    scores = torch.tensor([1.0, -1.0, 1.0, 1.0])
    adv = compute_advantages("grpo", scores, torch.zeros(4, dtype=torch.long))
    expected = torch.tensor([0.5, -1.5, 0.5, 0.5]) / (1 + EPS)
    torch.testing.assert_close(adv, expected)


def test_rloo_is_score_minus_mean_of_the_others() -> None:
    scores = torch.tensor([1.0, -1.0, 1.0, 1.0], dtype=torch.float64)
    adv = compute_advantages("rloo", scores, torch.zeros(4, dtype=torch.long))
    torch.testing.assert_close(adv, torch.tensor([2 / 3, -2.0, 2 / 3, 2 / 3], dtype=torch.float64))


def test_dr_grpo_has_no_std_division() -> None:
    scores = torch.tensor([3.0, 1.0, 5.0, 5.0])
    adv = compute_advantages("dr_grpo", scores, torch.tensor([0, 0, 1, 1]))
    torch.testing.assert_close(adv, torch.tensor([1.0, -1.0, 0.0, 0.0]))


def test_group_of_one_conventions() -> None:
    scores = torch.tensor([2.0], dtype=torch.float64)
    ids = torch.tensor([4])
    assert compute_advantages("grpo", scores, ids).item() == pytest.approx(2.0 / (1 + EPS))
    assert compute_advantages("dr_grpo", scores, ids).item() == 2.0
    assert compute_advantages("rloo", scores, ids).item() == 0.0
    assert compute_advantages("reinforce_pp_baseline", scores, ids).item() == 0.0


@pytest.mark.parametrize("estimator", ["grpo", "dr_grpo", "rloo", "reinforce_pp_baseline"])
def test_interleaved_arbitrary_group_ids_match_loop_reference(estimator: str) -> None:
    ids = [70, -3, 70, 1_000_000, -3, 70, 1_000_000, 5]
    scores = [0.25, 1.0, -1.0, 0.0, 0.5, 2.0, 1.5, 3.0]
    adv = compute_advantages(estimator, torch.tensor(scores, dtype=torch.float64), torch.tensor(ids))
    expected = torch.tensor(_loop_reference(estimator, scores, ids), dtype=torch.float64)
    torch.testing.assert_close(adv, expected)


def test_output_dtype_follows_scores() -> None:
    ids = torch.tensor([0, 0, 1, 1])
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        assert compute_advantages("grpo", torch.tensor([1.0, 0.0, 0.0, 1.0], dtype=dtype), ids).dtype == dtype


def test_bad_inputs_are_rejected_with_reasons() -> None:
    ids = torch.tensor([0, 0])
    with pytest.raises(ValueError, match="registered:.*grpo"):
        compute_advantages("ppo_gae", torch.zeros(2), ids)
    with pytest.raises(ValueError, match="NaN"):
        compute_advantages("grpo", torch.tensor([1.0, float("nan")]), ids)
    with pytest.raises(ValueError, match="integer"):
        compute_advantages("grpo", torch.zeros(2), torch.zeros(2))
    with pytest.raises(ValueError, match="shape"):
        compute_advantages("grpo", torch.zeros(3), ids)


def test_register_custom_estimator() -> None:
    @register_advantage("test_only_raw_score")
    def raw(scores: torch.Tensor, group_ids: torch.Tensor, eps: float) -> torch.Tensor:
        return scores

    try:
        out = compute_advantages("test_only_raw_score", torch.tensor([0.5, 2.0]), torch.tensor([1, 1]))
        torch.testing.assert_close(out, torch.tensor([0.5, 2.0]))
        with pytest.raises(ValueError, match="already registered"):
            register_advantage("test_only_raw_score")(raw)
    finally:
        del ADVANTAGE_ESTIMATORS["test_only_raw_score"]


_values = st.floats(min_value=-5, max_value=5, allow_nan=False, width=32)


@settings(max_examples=50, deadline=None)
@given(value=_values, others=st.lists(_values, min_size=0, max_size=6), size=st.integers(2, 8))
def test_constant_group_has_exactly_zero_advantage(value: float, others: list[float], size: int) -> None:
    # A constant group (e.g. 0.1 repeated, whose float mean is not exactly 0.1) next to other groups.
    scores = torch.tensor([value] * size + others, dtype=torch.float32)
    ids = torch.tensor([9] * size + list(range(len(others))))
    for estimator in ("grpo", "dr_grpo", "rloo"):
        adv = compute_advantages(estimator, scores, ids)
        assert torch.equal(adv[:size], torch.zeros(size)), estimator
    # REINFORCE++-baseline whitens over the batch, which shifts zeros by -mean/std; its pre-whitening
    # centring is dr_grpo's (checked above), and a batch of only constant groups stays exactly 0.
    only_constant = compute_advantages("reinforce_pp_baseline", scores[:size], ids[:size])
    assert torch.equal(only_constant, torch.zeros(size))


@settings(max_examples=50, deadline=None)
@given(
    data=st.lists(st.tuples(st.integers(0, 4), _values), min_size=1, max_size=16),
    seed=st.integers(0, 2**16),
)
def test_matches_loop_reference_and_is_permutation_equivariant(data: list[tuple[int, float]], seed: int) -> None:
    ids = [g for g, _ in data]
    scores = [s for _, s in data]
    perm = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed))
    for estimator in ("grpo", "dr_grpo", "rloo", "reinforce_pp_baseline"):
        adv = compute_advantages(estimator, torch.tensor(scores, dtype=torch.float64), torch.tensor(ids))
        expected = torch.tensor(_loop_reference(estimator, scores, ids), dtype=torch.float64)
        torch.testing.assert_close(adv, expected, atol=1e-6, rtol=1e-9)
        permuted = compute_advantages(
            estimator, torch.tensor(scores, dtype=torch.float64)[perm], torch.tensor(ids)[perm]
        )
        torch.testing.assert_close(permuted, adv[perm], atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize(("result", "message"), [
    (lambda s: s[:-1], r"returned shape \(3,\) for 4 responses: it must return shape \(4,\)"),
    (lambda s: s.unsqueeze(-1), r"returned shape \(4, 1\) for 4 responses"),
    (lambda s: s.tolist(), r"returned a list, not a tensor of shape \(4,\)"),
    (lambda s: s / 0, r"returned NaN or inf for 4 of 4 responses"),
    (lambda s: s > 0.5, r"returned a torch.bool tensor: advantages are real numbers"),  # a mask, not advantages
])
def test_an_estimator_that_does_not_return_one_finite_advantage_per_response_is_named(result, message, monkeypatch):
    from dapo.algo import PluginError

    monkeypatch.setitem(ADVANTAGE_ESTIMATORS, "bad_estimator", lambda scores, ids, eps: result(scores))
    with pytest.raises(PluginError, match=r"advantage estimator 'bad_estimator' \(.*test_algo_advantages.py:\d+\) " + message):
        compute_advantages("bad_estimator", torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.tensor([0, 0, 1, 1]))


def test_advantage_eps_zero_is_allowed_and_gives_the_plain_standardised_score():
    out = compute_advantages("grpo", torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), eps=0.0)
    torch.testing.assert_close(out, torch.tensor([1 / math.sqrt(2), -1 / math.sqrt(2)]))


def test_a_non_finite_score_is_blamed_on_the_reward_function():
    with pytest.raises(ValueError, match="reward function"):
        compute_advantages("grpo", torch.tensor([1.0, float("nan")]), torch.tensor([0, 0]))


@pytest.mark.parametrize("estimator", ["grpo", "dr_grpo", "rloo"])
def test_a_constant_float64_group_has_advantages_exactly_zero(estimator):
    """0.1 three times: a plain mean leaves about -1e-17 in float64 (signal from nothing)."""
    scores = torch.tensor([0.1, 0.1, 0.1, 1.0, 0.0], dtype=torch.float64)
    advantages = compute_advantages(estimator, scores, torch.tensor([0, 0, 0, 1, 1]))
    assert torch.equal(advantages[:3], torch.zeros(3, dtype=torch.float64))


def test_integer_or_empty_scores_are_refused():
    """Integer rewards went through float64 and back: advantages truncated toward 0 (0.87 -> 0), no
    signal and no error; an empty batch has no responses to compute advantages for."""
    with pytest.raises(ValueError, match=r"scores must be a 1-D float tensor, got shape \(4,\) dtype torch.int64"):
        compute_advantages("grpo", torch.tensor([1, 0, 1, 0]), torch.tensor([0, 0, 1, 1]))
    with pytest.raises(ValueError, match="scores is empty"):
        compute_advantages("grpo", torch.tensor([]), torch.tensor([], dtype=torch.long))


def _opo_reference(scores: list[float], ids: list[int], lengths: list[int]) -> list[float]:
    """OPO by its formula, a Python loop in float64: A_i = R_i - sum_j L_j R_j / sum_j L_j; a group of one, A = R."""
    out = []
    for i, gid in enumerate(ids):
        members = [j for j, g in enumerate(ids) if g == gid]
        if len(members) == 1:
            out.append(scores[i])
            continue
        weights = [lengths[j] for j in members] if sum(lengths[j] for j in members) else [1] * len(members)
        out.append(scores[i] - sum(w * scores[j] for w, j in zip(weights, members)) / sum(weights))
    return out


def test_opo_is_the_score_less_the_length_weighted_group_mean() -> None:
    """verl's opo: the baseline sum_j L_j R_j / sum_j L_j (0 for a group of one); empty responses
    weigh alike (verl: 0/0); a constant group is exactly 0, whatever its lengths."""
    ids = [70, -3, 70, 5, -3, 70, 9, 9, 4, 4, 4]
    scores = [1.0, 0.0, 0.0, 3.0, 1.0, 1.0, 0.5, 1.5, 0.1, 0.1, 0.1]
    lengths = [10, 7, 30, 4, 1, 60, 0, 0, 3, 17, 250]
    adv = compute_advantages("opo", torch.tensor(scores, dtype=torch.float64), torch.tensor(ids),
                             response_lengths=torch.tensor(lengths))
    torch.testing.assert_close(adv, torch.tensor(_opo_reference(scores, ids, lengths), dtype=torch.float64))
    assert adv[0].item() == pytest.approx(1 - 70 / 100) and adv[3].item() == 3.0  # (10 + 60) / 100; a group of one
    assert torch.equal(adv[-3:], torch.zeros(3, dtype=torch.float64))  # 0.1 three times: exactly 0
    constant = compute_advantages("opo", torch.tensor([0.3, 0.3, 0.3], dtype=torch.float64), torch.tensor([1, 1, 1]),
                                  response_lengths=torch.tensor([1, 2, 4]))
    assert torch.equal(constant, torch.zeros(3, dtype=torch.float64))  # (sum L R / sum L leaves 5.6e-17 here)


def test_only_an_estimator_that_takes_response_lengths_is_given_them() -> None:
    seen = {}

    @register_advantage("lengths_seen")
    def lengths_seen(scores, group_ids, eps, *, response_lengths):
        seen["lengths"] = response_lengths
        return scores - scores.mean()

    try:
        scores, ids, lengths = torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), torch.tensor([3, 5])
        compute_advantages("lengths_seen", scores, ids, response_lengths=lengths)
        assert torch.equal(seen["lengths"], lengths)
        compute_advantages("grpo", scores, ids, response_lengths=lengths)  # (grpo names none: not passed)
        from dapo.algo import PluginError

        with pytest.raises(PluginError, match=r"'lengths_seen' .* takes \['response_lengths'\], not given"):
            compute_advantages("lengths_seen", scores, ids)
        with pytest.raises(ValueError, match=r"response_lengths shape \(3,\) != scores shape \(2,\)"):
            compute_advantages("lengths_seen", scores, ids, response_lengths=torch.tensor([1, 2, 3]))
    finally:
        ADVANTAGE_ESTIMATORS.pop("lengths_seen", None)
