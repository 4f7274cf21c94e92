"""Clipped surrogate loss: Clip-Higher (the paper's p = 0.01 example), dual-clip, stats, TIS."""

from __future__ import annotations

import math

import pytest
import torch

from dapo.algo import PolicyLossStats, compute_policy_loss, tis_weights


def _loss_and_grad(
    ratio: float, advantage: float, **kwargs: float | None
) -> tuple[float, float, PolicyLossStats]:
    """Single-token loss and d loss / d logprob at a given ratio pi / pi_old."""
    old = torch.tensor([[math.log(0.5)]], dtype=torch.float64)
    logprobs = (old + math.log(ratio)).requires_grad_(True)
    params = {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28, **kwargs}
    loss, stats = compute_policy_loss(
        logprobs, old, torch.tensor([advantage], dtype=torch.float64), torch.ones(1, 1), **params
    )
    loss.backward()
    return loss.item(), logprobs.grad.item(), stats


@pytest.mark.parametrize(
    ("eps_high", "p_new", "still_learning"),
    [(0.2, 0.0119, True), (0.2, 0.0121, False), (0.28, 0.0121, True), (0.28, 0.0127, True), (0.28, 0.0129, False)],
)
def test_paper_example_low_probability_token_ceiling(eps_high: float, p_new: float, still_learning: bool) -> None:
    # DAPO Sec. 3.1: with eps = 0.2 a token at pi_old = 0.01 can rise to at most 0.012 in one
    # update (its gradient is clipped to zero beyond); with eps_high = 0.28 up to 0.0128.
    old = torch.tensor([[math.log(0.01)]], dtype=torch.float64)
    logprobs = torch.tensor([[math.log(p_new)]], dtype=torch.float64, requires_grad=True)
    loss, stats = compute_policy_loss(
        logprobs, old, torch.tensor([1.0], dtype=torch.float64), torch.ones(1, 1),
        clip_ratio_low=0.2, clip_ratio_high=eps_high,
    )
    loss.backward()
    assert (logprobs.grad.item() != 0.0) == still_learning
    assert stats.clip_high_count.item() == (0 if still_learning else 1)
    # loss -A r while learning, -A (1 + eps_high) once clipped: 0.012 or 0.0128 over pi_old = 0.01
    assert loss.item() == pytest.approx(-(p_new / 0.01 if still_learning else 1 + eps_high))


def test_unclipped_token_gives_policy_gradient() -> None:
    # loss = -A r, d/d logprob = -A r
    loss, grad, stats = _loss_and_grad(1.1, 2.0)
    assert loss == pytest.approx(-2.2) and grad == pytest.approx(-2.2)
    assert stats.clip_low_count.item() == stats.clip_high_count.item() == 0


@pytest.mark.parametrize("ratio", [0.7, 0.75])
def test_negative_advantage_low_clip(ratio: float) -> None:
    # A < 0, r < 1 - eps_low = 0.8: loss = max(r, 0.8) = 0.8, constant, so no gradient. (r = 0.75
    # is above 1 - eps_high = 0.72: a count against the wrong bound would miss it.)
    loss, grad, stats = _loss_and_grad(ratio, -1.0)
    assert loss == pytest.approx(0.8) and grad == 0.0
    assert stats.clip_low_count.item() == 1 and stats.clip_high_count.item() == 0


def test_dual_clip_caps_negative_advantage_loss() -> None:
    loss, grad, stats = _loss_and_grad(20.0, -1.0, clip_ratio_c=10.0)
    assert loss == pytest.approx(10.0) and grad == 0.0 and stats.dual_clip_count.item() == 1
    loss, grad, stats = _loss_and_grad(20.0, -1.0, clip_ratio_c=None)
    assert loss == pytest.approx(20.0) and grad == pytest.approx(20.0) and stats.dual_clip_count.item() == 0
    # Between 1 + eps_high and c the negative-advantage token is unclipped: loss -A r, gradient flows.
    loss, grad, _ = _loss_and_grad(5.0, -1.0, clip_ratio_c=10.0)
    assert loss == pytest.approx(5.0) and grad == pytest.approx(5.0)


def test_stats_are_masked_sums_and_add_up() -> None:
    old = torch.zeros(2, 3)
    ratios = torch.tensor([[1.5, 0.5, 1.0], [2.0, 0.5, 1.0]])
    logprobs = ratios.log()
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    adv = torch.tensor([1.0, -1.0])
    _, stats = compute_policy_loss(
        logprobs, old, adv, mask, clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=1.8
    )
    assert stats.token_count.item() == 5
    assert stats.clip_high_count.item() == 1  # (0, 0): A > 0, r = 1.5 > 1.28
    assert stats.clip_low_count.item() == 1  # (1, 1): A < 0, r = 0.5 < 0.8
    assert stats.dual_clip_count.item() == 1  # (1, 0): A < 0, r = 2 > c = 1.8
    kept = ratios[mask.bool()]
    assert stats.ratio_sum.item() == pytest.approx(kept.sum().item())
    assert stats.approx_kl_sum.item() == pytest.approx((kept - 1 - kept.log()).sum().item(), rel=1e-5)
    assert not stats.ratio_sum.requires_grad
    total = PolicyLossStats.total([stats, stats])
    assert (stats + stats).token_count.item() == total.token_count.item() == 10
    metrics = total.to_metrics()
    assert metrics["clip_frac_high"] == pytest.approx(0.2) and metrics["clip_frac_dual"] == pytest.approx(0.2)


def test_metrics_are_each_sum_over_the_token_count() -> None:
    stats = PolicyLossStats(
        token_count=torch.tensor(5), clip_low_count=torch.tensor(1), clip_high_count=torch.tensor(2),
        dual_clip_count=torch.tensor(3), approx_kl_sum=torch.tensor(0.5), ratio_sum=torch.tensor(6.0),
    )
    assert stats.to_metrics() == pytest.approx(
        {"clip_frac_low": 0.2, "clip_frac_high": 0.4, "clip_frac_dual": 0.6, "approx_kl": 0.1, "ratio_mean": 1.2}
    )


def test_per_response_and_per_token_advantages_agree() -> None:
    gen = torch.Generator().manual_seed(1)
    logprobs, old = -torch.rand(3, 4, generator=gen), -torch.rand(3, 4, generator=gen)
    adv, mask = torch.randn(3, generator=gen), torch.ones(3, 4)
    kw = {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "clip_ratio_c": 3.0}
    a, _ = compute_policy_loss(logprobs, old, adv, mask, **kw)
    b, _ = compute_policy_loss(logprobs, old, adv[:, None].expand(3, 4), mask, **kw)
    torch.testing.assert_close(a, b)


def test_extreme_log_ratio_is_clamped_to_finite_values() -> None:
    logprobs = torch.tensor([[0.0, 0.0]], requires_grad=True)
    old = torch.tensor([[-200.0, -5.0]])
    loss, stats = compute_policy_loss(
        logprobs, old, torch.tensor([-1.0]), torch.ones(1, 2), clip_ratio_low=0.2, clip_ratio_high=0.28
    )
    loss.backward()
    # log r = 200 is clamped to 20 (no gradient past the clamp); log r = 5 is not. A < 0 and no
    # dual-clip: each token's loss is -A r = r, and the token-mean (e^20 + e^5) / 2.
    assert loss.item() == pytest.approx((math.exp(20) + math.exp(5)) / 2, rel=1e-6)
    torch.testing.assert_close(logprobs.grad, torch.tensor([[0.0, math.exp(5) / 2]]))
    k3 = (math.exp(20) - 1 - 20) + (math.exp(5) - 1 - 5)
    assert stats.approx_kl_sum.item() == pytest.approx(k3, rel=1e-6)


def test_importance_weights_scale_tokens_and_carry_no_gradient() -> None:
    logprobs = torch.zeros(1, 2, requires_grad=True)
    weights = torch.tensor([[0.5, 2.0]], requires_grad=True)
    loss, _ = compute_policy_loss(
        logprobs, torch.zeros(1, 2), torch.tensor([1.0]), torch.ones(1, 2),
        clip_ratio_low=0.2, clip_ratio_high=0.28, importance_weights=weights,
    )
    loss.backward()
    assert loss.item() == pytest.approx(-(0.5 + 2.0) / 2)
    torch.testing.assert_close(logprobs.grad, torch.tensor([[-0.25, -1.0]]))
    assert weights.grad is None


def test_tis_weights_truncate_and_detach() -> None:
    old = torch.tensor([0.0, 0.0, -1.0], requires_grad=True)
    rollout = torch.tensor([-1.0, 0.5, -1.0])
    weights = tis_weights(old, rollout, cap=2.0)
    torch.testing.assert_close(weights, torch.tensor([2.0, math.exp(-0.5), 1.0]))
    assert not weights.requires_grad
    with pytest.raises(ValueError, match="cap"):
        tis_weights(old, rollout, cap=0.0)


def test_invalid_arguments_are_rejected() -> None:
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="clip_ratio_c"):
        compute_policy_loss(x, x, torch.zeros(2), x, clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=0.9)
    with pytest.raises(ValueError, match="advantages"):
        compute_policy_loss(x, x, torch.zeros(3), x, clip_ratio_low=0.2, clip_ratio_high=0.28)
    with pytest.raises(ValueError, match="clip_ratio_low"):
        compute_policy_loss(x, x, torch.zeros(2), x, clip_ratio_low=1.2, clip_ratio_high=0.28)


def test_policy_loss_stats_take_per_response_advantages_as_a_loss_gets_them() -> None:
    """A plugin passes policy_loss_stats the (B,) advantages its loss is given: against a (B, T)
    ratio with B == T they broadcast along the tokens, and the clip fractions were wrong, unsaid."""
    from dapo.algo.policy_loss import policy_loss_stats

    ratio = torch.tensor([[0.5, 1.0, 1.0], [1.0, 1.0, 1.0], [0.5, 0.5, 0.5]])  # B = T = 3
    advantages = torch.tensor([-1.0, 1.0, -1.0])
    stats = policy_loss_stats(ratio, ratio.log(), advantages, torch.ones(3, 3), 0.2, 0.28, None)
    assert int(stats.clip_low_count) == 4  # row 0's first token and row 2's three: rows with A < 0
    per_token = policy_loss_stats(ratio, ratio.log(), advantages[:, None].expand(3, 3), torch.ones(3, 3), 0.2, 0.28, None)
    assert int(per_token.clip_low_count) == 4
    with pytest.raises(ValueError, match=r"advantages of shape \(2,\) for a ratio of shape \(3, 3\)"):
        policy_loss_stats(ratio, ratio.log(), advantages[:2], torch.ones(3, 3), 0.2, 0.28, None)


def test_dual_clip_fraction_counts_only_negative_advantage_tokens_past_c() -> None:
    """clip_frac_dual counts the tokens whose loss the dual clip capped: A < 0 and r > c. A token
    with A < 0 between 1 + eps_high and c still learns, and one with A > 0 past c is high-clipped
    (counted there, not twice)."""
    ratios = torch.tensor([[5.0, 20.0, 20.0]])
    _, stats = compute_policy_loss(
        ratios.log(), torch.zeros(1, 3), torch.tensor([[-1.0, -1.0, 1.0]]), torch.ones(1, 3),
        clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=10.0,
    )
    assert int(stats.dual_clip_count) == 1  # token 1 only
    assert int(stats.clip_high_count) == 1 and int(stats.clip_low_count) == 0  # token 2


def test_advantages_carry_no_gradient() -> None:
    """A caller's advantages that are part of a graph (a plugin's learned baseline) get no gradient
    from the policy loss: A is a constant of the surrogate."""
    advantages = torch.tensor([1.0, -1.0], requires_grad=True)
    logprobs = torch.zeros(2, 2, requires_grad=True)
    loss, _ = compute_policy_loss(logprobs, torch.zeros(2, 2), advantages * 1.0, torch.ones(2, 2),
                                  clip_ratio_low=0.2, clip_ratio_high=0.28)
    loss.backward()
    assert advantages.grad is None and logprobs.grad is not None


def test_the_trainers_call_passes_each_clip_bound_to_its_side() -> None:
    """call_policy_loss, the one call the trainer and the plugin rehearsal make, hands eps_low and
    eps_high to the loss by name: A < 0 at r = 0.75 is low-clipped with eps_low = 0.2 (bound 0.8)
    and would not be with eps_low = 0.28 (bound 0.72)."""
    from dapo.algo.policy_loss import call_policy_loss

    logprobs = torch.tensor([[math.log(0.75)]], requires_grad=True)
    loss, stats = call_policy_loss(
        "decoupled_clip", logprobs, torch.zeros(1, 1), torch.tensor([-1.0]), torch.ones(1, 1),
        clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=None, loss_agg_mode="token-mean",
        num_tokens=None, num_seqs=None, norm_const=None, importance_weights=None,
    )
    loss.backward()
    assert loss.item() == pytest.approx(0.8) and logprobs.grad.item() == 0.0
    assert int(stats.clip_low_count) == 1
