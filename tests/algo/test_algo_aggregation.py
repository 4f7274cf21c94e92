"""Loss aggregation: hand-computed modes, edge cases, and exact global normalisation under
gradient accumulation (micro-batches) and data parallelism (shards)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dapo.algo import LOSS_AGG_MODES, aggregate_loss, compute_policy_loss, count_tokens_and_seqs

LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, 9.0, 9.0]], dtype=torch.float64)
MASK = torch.tensor([[1, 1, 1], [1, 0, 0]])


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", 10 / 4),  # (1 + 2 + 3 + 4) / 4 tokens
        ("seq-mean-token-mean", (6 / 3 + 4 / 1) / 2),
        ("seq-mean-token-sum", (6 + 4) / 2),
        ("seq-mean-token-sum-norm", (6 + 4) / (2 * 4)),
    ],
)
def test_modes_hand_computed(mode: str, expected: float) -> None:
    assert aggregate_loss(LOSS, MASK, mode, norm_const=4.0).item() == pytest.approx(expected)


def test_token_mean_weights_long_responses_more_than_seq_mean() -> None:
    # DAPO Sec. 3.3: under seq-mean-token-mean each token of the 3-token response weighs 1/6,
    # under token-mean 1/4, the same as the single token of the short response.
    logprobs = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    aggregate_loss(logprobs * 1.0, MASK, "token-mean").backward()
    assert torch.allclose(logprobs.grad, MASK.double() / 4)
    logprobs.grad = None
    aggregate_loss(logprobs * 1.0, MASK, "seq-mean-token-mean").backward()
    assert torch.allclose(logprobs.grad, torch.tensor([[1 / 6] * 3, [1 / 2, 0, 0]], dtype=torch.float64))


def test_explicit_global_normalisers_are_used() -> None:
    assert aggregate_loss(LOSS, MASK, "token-mean", num_tokens=20).item() == pytest.approx(10 / 20)
    assert aggregate_loss(LOSS, MASK, "seq-mean-token-sum", num_seqs=torch.tensor(5)).item() == pytest.approx(10 / 5)


def test_no_tokens_gives_zero_loss_with_grad_not_nan() -> None:
    loss_in = torch.randn(2, 3, requires_grad=True)
    for mode in LOSS_AGG_MODES:
        loss = aggregate_loss(loss_in, torch.zeros(2, 3), mode, norm_const=3.0)
        assert loss.item() == 0.0 and loss.requires_grad
        (grad,) = torch.autograd.grad(loss, loss_in)
        assert torch.equal(grad, torch.zeros(2, 3))


def test_nan_at_masked_positions_does_not_leak() -> None:
    loss_in = torch.tensor([[1.0, float("nan")], [2.0, float("inf")]])
    assert aggregate_loss(loss_in, torch.tensor([[1, 0], [1, 0]]), "token-mean").item() == 1.5


def test_empty_responses_are_not_counted_as_sequences() -> None:
    # An overlong-filtered response (all-zero mask row) does not dilute the seq-mean.
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]])
    tokens, seqs = count_tokens_and_seqs(mask)
    assert (tokens.item(), seqs.item()) == (4, 2)
    three_rows = torch.cat([LOSS, torch.ones(1, 3, dtype=torch.float64)])
    assert aggregate_loss(three_rows, mask, "seq-mean-token-sum").item() == pytest.approx(5.0)


def test_bad_mode_and_missing_norm_const_are_rejected() -> None:
    with pytest.raises(ValueError, match="registered:.*token-mean"):
        aggregate_loss(LOSS, MASK, "sample-mean")
    with pytest.raises(ValueError, match="norm_const"):
        aggregate_loss(LOSS, MASK, "seq-mean-token-sum-norm")
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        aggregate_loss(LOSS, MASK[:, :2], "token-mean")
    with pytest.raises(ValueError, match="registered:.*token-mean"):  # the name first, as before the shapes
        aggregate_loss(LOSS, MASK[:, :2], "sample-mean")


# ---- global normalisers: micro-batches x shards == the whole mini-batch ---------------------


def _policy_loss(
    logprobs: torch.Tensor, old: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, mode: str,
    **norm: float | torch.Tensor,
) -> torch.Tensor:
    loss, _ = compute_policy_loss(
        logprobs, old, adv, mask, clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0,
        loss_agg_mode=mode, norm_const=7.0, **norm,
    )
    return loss


def _random_batch(seed: int, rows: int, length: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(rows, length, generator=gen, dtype=torch.float64) * 3
    logprobs = old + torch.randn(rows, length, generator=gen, dtype=torch.float64) * 0.4
    adv = torch.randn(rows, generator=gen, dtype=torch.float64)
    lengths = torch.randint(0, length + 1, (rows,), generator=gen)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
    return logprobs, old, adv, mask


@settings(max_examples=50, deadline=None)
@given(
    rows=st.integers(1, 10),
    length=st.integers(1, 6),
    seed=st.integers(0, 2**16),
    parts=st.data(),
)
def test_micro_batches_and_shards_reproduce_whole_batch_gradient(rows: int, length: int, seed: int, parts: st.DataObject) -> None:
    logprobs, old, adv, mask = _random_batch(seed, rows, length)
    # Every row goes to some (rank, micro-batch); rows of one part need not be contiguous.
    shard = parts.draw(st.lists(st.integers(0, 2), min_size=rows, max_size=rows), label="shard")
    micro = parts.draw(st.lists(st.integers(0, 3), min_size=rows, max_size=rows), label="micro")
    part_of_row = torch.tensor([4 * s + m for s, m in zip(shard, micro)])
    num_tokens, num_seqs = count_tokens_and_seqs(mask)  # what the trainer all-reduces up front

    for mode in LOSS_AGG_MODES:
        whole = logprobs.clone().requires_grad_(True)
        whole_loss = _policy_loss(whole, old, adv, mask, mode)
        whole_loss.backward()

        split = logprobs.clone().requires_grad_(True)
        accumulated = torch.zeros((), dtype=torch.float64)
        for part in part_of_row.unique():
            rows_in_part = (part_of_row == part).nonzero().squeeze(-1)
            part_loss = _policy_loss(
                split[rows_in_part], old[rows_in_part], adv[rows_in_part], mask[rows_in_part], mode,
                num_tokens=num_tokens, num_seqs=num_seqs,
            )
            part_loss.backward()
            accumulated = accumulated + part_loss.detach()
        torch.testing.assert_close(accumulated, whole_loss.detach(), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(split.grad, whole.grad, rtol=1e-12, atol=1e-12)


def test_local_normaliser_would_give_a_different_gradient() -> None:
    # Two micro-batches with 1 and 3 tokens. verl's legacy per-micro-batch token-mean, averaged
    # over the 2 micro-batches, weighs the lone token 1/2 and the others 1/6 each, not 1/4 each.
    logprobs, old, adv, _ = _random_batch(0, 2, 3)
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]])
    whole = logprobs.clone().requires_grad_(True)
    _policy_loss(whole, old, adv, mask, "token-mean").backward()

    legacy, global_norm = (logprobs.clone().requires_grad_(True) for _ in range(2))
    for row in (0, 1):
        sl = slice(row, row + 1)
        (_policy_loss(legacy[sl], old[sl], adv[sl], mask[sl], "token-mean") / 2).backward()
        _policy_loss(global_norm[sl], old[sl], adv[sl], mask[sl], "token-mean", num_tokens=4).backward()
    torch.testing.assert_close(global_norm.grad, whole.grad)
    assert not torch.allclose(legacy.grad, whole.grad)
    assert legacy.grad[0, 0] / whole.grad[0, 0] == pytest.approx(2.0)


@settings(max_examples=50, deadline=None)
@given(rows=st.integers(1, 6), length=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_masked_tokens_get_exactly_zero_gradient(rows: int, length: int, seed: int) -> None:
    logprobs, old, adv, mask = _random_batch(seed, rows, length)
    # Padding may hold garbage log-probs (e.g. -inf or NaN from a padded position).
    garbage = torch.tensor([float("-inf"), float("nan"), 50.0], dtype=torch.float64)
    padded = torch.where(mask == 0, garbage[torch.arange(rows * length).view(rows, length) % 3], logprobs)
    for mode in LOSS_AGG_MODES:
        leaf = padded.clone().requires_grad_(True)
        loss = _policy_loss(leaf, old, adv, mask, mode)
        loss.backward()
        assert torch.isfinite(loss)
        assert torch.equal(leaf.grad[mask == 0], torch.zeros(int((mask == 0).sum()), dtype=torch.float64))
        assert torch.isfinite(leaf.grad).all()


def test_a_registered_mode_that_returns_no_scalar_is_named(monkeypatch):
    from dapo.algo import PluginError

    monkeypatch.setitem(LOSS_AGG_MODES, "per_seq", lambda loss, mask, tokens, seqs, const: loss.sum(-1) / tokens)
    loss, mask = torch.ones(2, 3, requires_grad=True), torch.ones(2, 3)
    with pytest.raises(PluginError, match=r"loss aggregation mode 'per_seq' \(.*test_algo_aggregation.py:\d+\) "
                                          r"returned shape \(2,\): it must return a scalar"):
        aggregate_loss(loss, mask, "per_seq")


def test_a_zero_norm_const_or_a_negative_normaliser_is_refused_not_an_inf_or_a_flipped_loss():
    with pytest.raises(ValueError, match="norm_const"):
        aggregate_loss(torch.ones(1, 2), torch.ones(1, 2), "seq-mean-token-sum-norm", norm_const=0)
    with pytest.raises(ValueError, match="num_tokens"):
        aggregate_loss(torch.ones(1, 2), torch.ones(1, 2), "token-mean", num_tokens=-2.0)
    with pytest.raises(ValueError, match="num_tokens"):  # a tensor's too (it was read as 1)
        aggregate_loss(torch.ones(1, 2), torch.ones(1, 2), "token-mean", num_tokens=torch.tensor(-2))


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"])
def test_a_normaliser_of_zero_given_as_a_number_gives_a_zero_loss_not_nan(mode):
    """A mini-batch with no loss token, its counts passed as Python numbers (0, 0.0): 0/0 was NaN
    when the number went through unclamped (the tensor path is clamped)."""
    loss = torch.zeros(2, 3, requires_grad=True)
    mask = torch.zeros(2, 3)
    for zero in (0, 0.0):
        assert aggregate_loss(loss, mask, mode, num_tokens=zero, num_seqs=zero).item() == 0.0
