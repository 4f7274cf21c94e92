"""The loss's log-probs and entropies on an accelerator (tests/accelerator.py: CUDA unless
DAPO_TEST_DEVICE says otherwise; skipped without one). On CUDA the default path is the fused
Triton kernels (dapo.algo.logprobs_triton): outputs and gradients equal the float64 torch path at
Qwen2.5's vocabulary, for bf16 and float32 logits read where they lie in ``out.logits[:, :-1]``,
and the same call twice gives the same bits (resume is bit-identical)."""

from __future__ import annotations

import pytest
import torch
from tests.accelerator import DEVICE, needs_accelerator

from dapo.algo.logprobs import (
    FUSED,
    _rows_and_logits,
    logprobs_and_entropy_from_logits,
    logprobs_from_logits,
)

pytestmark = needs_accelerator


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_log_probs_entropies_and_gradients_on_the_device_equal_float64(dtype, temperature):
    torch.manual_seed(0)
    whole = (torch.randn(4, 65, 151936, device=DEVICE) * 4).to(dtype)
    whole[0, 3, 1000:2000] = float("-inf")
    logits = whole.requires_grad_()[:, :-1]  # as out.logits[:, :-1]: strided, read where it lies
    labels = torch.randint(0, 151936, (4, 64), device=DEVICE)
    if DEVICE.type == "cuda":
        assert _rows_and_logits(logits, None, True)[0] == FUSED
    grad_logprobs, grad_entropy = torch.randn(4, 64, device=DEVICE), torch.randn(4, 64, device=DEVICE)
    logprobs, entropy = logprobs_and_entropy_from_logits(logits, labels, temperature)
    ((logprobs * grad_logprobs).sum() + (entropy * grad_entropy).sum()).backward()
    reference = whole.detach()[:, :-1].double().requires_grad_()
    ref_logprobs, ref_entropy = logprobs_and_entropy_from_logits(reference, labels, temperature)
    ((ref_logprobs * grad_logprobs.double()).sum() + (ref_entropy * grad_entropy.double()).sum()).backward()
    assert (logprobs.double() - ref_logprobs).abs().max() < 1e-4
    assert (entropy.double() - ref_entropy).abs().max() < 1e-4
    grad = whole.grad[:, :-1].double()
    assert whole.grad[:, -1].abs().max() == 0
    relative = (grad - reference.grad).abs().max() / reference.grad.abs().max()
    assert relative < (5e-3 if dtype == torch.bfloat16 else 1e-5)
    again = logprobs_from_logits(whole.detach()[:, :-1], labels, temperature)
    assert torch.equal(again, logprobs_from_logits(whole.detach()[:, :-1], labels, temperature))
    assert (again - logprobs.detach()).abs().max() < 1e-5  # the log-probs alone: the same kernel
