"""Overlong Reward Shaping: Soft Overlong Punishment and Overlong Filtering."""

from __future__ import annotations

import pytest
import torch

from dapo.algo import overlong_filter_mask, soft_overlong_penalty


def test_soft_punishment_piecewise_formula() -> None:
    # L_max = 20, L_cache = 4: free up to 16, linear ramp to -1 at 20, -1 beyond.
    lengths = torch.tensor([0, 16, 17, 18, 20, 25])
    expected = torch.tensor([0.0, 0.0, -0.25, -0.5, -1.0, -1.0])
    torch.testing.assert_close(soft_overlong_penalty(lengths, 20, 4), expected)
    torch.testing.assert_close(soft_overlong_penalty(lengths, 20, 4, penalty_factor=0.5), expected * 0.5)


def test_reference_run_numbers() -> None:
    # L_max = 20480, L_cache = 4096: the penalty starts after 16384 tokens and a response
    # truncated by our engine (exactly L_max tokens) already gets the full -1.
    out = soft_overlong_penalty(torch.tensor([16384, 18432, 20480]), 20480, 4096)
    torch.testing.assert_close(out, torch.tensor([0.0, -0.5, -1.0]))


def test_zero_buffer_only_punishes_beyond_the_limit() -> None:
    out = soft_overlong_penalty(torch.tensor([19, 20, 21]), 20, 0, penalty_factor=2.0)
    torch.testing.assert_close(out, torch.tensor([0.0, 0.0, -2.0]))


def test_float_lengths_keep_their_dtype() -> None:
    out = soft_overlong_penalty(torch.tensor([18.0], dtype=torch.float64), 20, 4)
    assert out.dtype == torch.float64 and out.item() == -0.5


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="buffer_len"):
        soft_overlong_penalty(torch.tensor([1]), 10, 11)
    with pytest.raises(ValueError, match="penalty_factor"):
        soft_overlong_penalty(torch.tensor([1]), 10, 2, penalty_factor=-1.0)


def test_overlong_filter_mask() -> None:
    out = overlong_filter_mask(torch.tensor([True, False, False]))
    torch.testing.assert_close(out, torch.tensor([0.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="bool"):
        overlong_filter_mask(torch.tensor([1, 0]))


def test_a_negative_buffer_or_a_zero_length_limit_is_refused():
    with pytest.raises(ValueError, match="buffer_len"):
        soft_overlong_penalty(torch.tensor([1]), 10, -2)
    with pytest.raises(ValueError, match="max_response_length"):
        soft_overlong_penalty(torch.tensor([1]), 0, 0)


def test_the_penalty_takes_its_range_ends():
    """algorithm.overlong_penalty_factor=0 is a valid config (shaping off by its factor): no
    penalty, no error; a buffer as long as L_max ramps over the whole length, as documented."""
    assert torch.equal(soft_overlong_penalty(torch.tensor([0, 9, 10]), 10, 4, 0.0).abs(), torch.zeros(3))
    torch.testing.assert_close(soft_overlong_penalty(torch.tensor([0, 5, 10]), 10, 10),
                               torch.tensor([0.0, -0.5, -1.0]))
