"""KL penalty estimators: hand values and Monte-Carlo unbiasedness of k1/k3."""

from __future__ import annotations

import math

import pytest
import torch

from dapo.algo import kl_penalty


def test_estimators_hand_computed() -> None:
    logprobs, ref = torch.tensor([-1.0, -2.0]), torch.tensor([-1.5, -1.0])
    torch.testing.assert_close(kl_penalty(logprobs, ref, "k1"), torch.tensor([0.5, -1.0]))
    torch.testing.assert_close(kl_penalty(logprobs, ref, "abs"), torch.tensor([0.5, 1.0]))
    torch.testing.assert_close(kl_penalty(logprobs, ref, "k2"), torch.tensor([0.125, 0.5]))
    k3 = torch.tensor([math.exp(-0.5) + 0.5 - 1, math.exp(1.0) - 1.0 - 1])
    torch.testing.assert_close(kl_penalty(logprobs, ref, "k3"), k3)


def test_k3_is_clamped_and_non_negative() -> None:
    out = kl_penalty(torch.tensor([-30.0, 0.0, -0.1]), torch.tensor([0.0, -30.0, 0.0]), "k3")
    assert out[0].item() == 10.0  # exp(30) clamped
    assert (out >= 0).all()



def test_k3_gradient_stays_finite_far_from_the_reference_and_at_minus_inf() -> None:
    """exp of a log-ratio of 95 is inf in float32: without clamping the log-ratio first (as verl
    does), the gradient is NaN, even at a masked position, where 0 x inf leaks through backward."""
    logprobs = torch.tensor([-95.0, -0.5, -float("inf")], requires_grad=True)
    kl = kl_penalty(logprobs, torch.zeros(3), "k3")
    assert torch.isfinite(kl).all()
    (kl * torch.tensor([1.0, 1.0, 0.0])).sum().backward()
    assert torch.isfinite(logprobs.grad).all()


@pytest.mark.parametrize("estimator", ["k1", "abs", "k2", "k3"])
def test_a_masked_padding_positions_minus_inf_sends_no_nan_back(estimator: str) -> None:
    """A model that masks its pad token gives it -inf log-probs at padded response positions: k2's
    square sent NaN back through them (0 x NaN), every update then skipped for its NaN gradient."""
    from dapo.algo import aggregate_loss

    mask = torch.tensor([[1.0, 0.0]])
    for policy_inf, ref_inf in ((True, True), (True, False), (False, True)):
        logprobs = torch.tensor([[-1.0, -float("inf") if policy_inf else -2.0]], requires_grad=True)
        ref = torch.tensor([[-1.2, -float("inf") if ref_inf else -2.0]])
        loss = aggregate_loss(kl_penalty(logprobs, ref, estimator, mask), mask, "token-mean")
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(logprobs.grad).all(), (estimator, logprobs.grad)
        assert logprobs.grad[0, 1] == 0.0
        expected = kl_penalty(logprobs[:, :1].detach(), ref[:, :1], estimator)[0, 0]
        torch.testing.assert_close(loss.detach(), expected)  # the real token's value, unchanged


def test_k1_and_k3_are_unbiased_for_kl_policy_to_reference() -> None:
    gen = torch.Generator().manual_seed(0)
    policy = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    ref = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    true_kl = (policy * (policy / ref).log()).sum().item()
    samples = torch.multinomial(policy, 200_000, replacement=True, generator=gen)
    for estimator in ("k1", "k3"):
        estimate = kl_penalty(policy.log()[samples], ref.log()[samples], estimator).mean().item()
        assert estimate == pytest.approx(true_kl, abs=0.01), estimator


def test_unknown_estimator_and_shape_mismatch() -> None:
    with pytest.raises(ValueError, match="valid"):
        kl_penalty(torch.zeros(2), torch.zeros(2), "k4")
    with pytest.raises(ValueError, match="ref_logprobs"):
        kl_penalty(torch.zeros(2), torch.zeros(3), "k1")
