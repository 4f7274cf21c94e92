"""The native decoder's weight preparation (dapo.rollout.projections)."""

from __future__ import annotations

import pytest
import torch

from dapo.rollout import projections


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_a_folded_norm_weight_is_the_product_rounded_once_whatever_the_chunking(monkeypatch, dtype) -> None:
    """scaled_to computes weight * scale a few rows at a time: every chunking must give
    (weight * scale).to(dtype) bit for bit, the ragged last chunk included."""
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(37, 24, generator=generator)
    scale = torch.rand(24, generator=generator) + 0.5
    expected = (weight * scale).to(dtype)
    for chunk_rows in (1, 5, 37, 100):
        monkeypatch.setattr(projections, "_SCALE_CHUNK_ENTRIES", chunk_rows * 24)
        folded = projections.scaled_to(weight, scale, dtype)
        assert folded.dtype == dtype
        assert torch.equal(folded, expected), chunk_rows
    assert torch.equal(projections.scaled_to(weight, None, dtype), weight.to(dtype))
    # a parameter (autograd on) and a low-precision weight with a float32 scale (promoted, as a product)
    assert torch.equal(projections.scaled_to(weight.requires_grad_(), scale, dtype), expected)
    low = weight.detach().to(torch.bfloat16)
    assert torch.equal(projections.scaled_to(low, scale, dtype), (low * scale).to(dtype))
