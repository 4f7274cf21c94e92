"""The fused GPU kernels of dapo.algo.logprobs_triton, run on the CPU by Triton's interpreter
(TRITON_INTERPRET=1, set before Triton compiles anything, so in a fresh process): log-probs,
entropies and both gradients against the float64 torch path, for float32 and bf16 logits, at
temperatures 1 and 0.7, with -inf logits, and on a strided slice (``out.logits[:, :-1]``) read
where it lies. Skipped where Triton is not installed (a GPU run also checks them:
tests/algo/test_algo_logprobs_accelerator.py)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")

CHECK = textwrap.dedent("""
    import torch
    from dapo.algo import logprobs_triton
    from dapo.algo.logprobs import logprobs_and_entropy_from_logits

    torch.manual_seed(0)
    worst = {}
    for dtype in (torch.float32, torch.bfloat16):
        for vocab, temperature in ((5000, 1.0), (300, 0.7), (4096, 1.0)):  # 5000: a partial last tile
            whole = (torch.randn(3, 5, vocab) * 3).to(dtype)
            whole[1, 2, :100] = float("-inf")  # masked vocabulary entries: probability 0
            logits = whole[:, :-1]  # a strided (B, T, V) view, as out.logits[:, :-1]
            labels = torch.randint(0, vocab, (3 * 4,))
            labels[1 * 4 + 2] = 150
            logprobs, entropy, lse = logprobs_triton.forward(logits, labels, temperature)
            reference = logits.double().requires_grad_()
            ref_logprobs, ref_entropy = logprobs_and_entropy_from_logits(reference, labels.view(3, 4), temperature)
            grad_logprobs, grad_entropy = torch.randn(12), torch.randn(12)
            for with_entropy in (True, False):
                reference.grad = None
                ref_logprobs, ref_entropy = logprobs_and_entropy_from_logits(reference, labels.view(3, 4), temperature)
                loss = (ref_logprobs.flatten() * grad_logprobs.double()).sum()
                if with_entropy:
                    loss = loss + (ref_entropy.flatten() * grad_entropy.double()).sum()
                loss.backward()
                grad = logprobs_triton.backward(logits, labels, lse, entropy, grad_logprobs,
                                                grad_entropy if with_entropy else None, temperature)
                assert grad.dtype == dtype and grad.shape == logits.shape and grad.is_contiguous()
                key = (str(dtype), vocab, temperature)
                # a bf16 gradient is within one bf16 step (2^-7 relative: the interpreter's
                # rounding may truncate) of the exact one; float32 ones to float32 rounding
                rounding = 2**-7 if dtype == torch.bfloat16 else 0.0
                error = (grad.double() - reference.grad).abs() - rounding * reference.grad.abs()
                worst[key + ("grad", with_entropy)] = error.max().item() / reference.grad.abs().max().item()
            worst[key + ("logprobs",)] = (logprobs.double() - ref_logprobs.flatten()).abs().max().item()
            worst[key + ("entropy",)] = (entropy.double() - ref_entropy.flatten()).abs().max().item()
            worst[key + ("lse",)] = (lse.double() - torch.logsumexp(reference.detach().flatten(0, 1) / temperature, -1)).abs().max().item()
    for key, error in worst.items():  # float32 accumulation: 1e-5 of values of order 10
        assert error < 1e-5, (key, error)

    # Qwen2.5's vocabulary at temperature 0.6: logits / tau up to ~30, entropies of ~2. H as
    # lse - E[x] (two numbers near 30) was 8.4e-6 off and its gradient 3.2e-6 (of the largest);
    # as log S - E[x - m], 8.6e-7 and 1.1e-6
    logits = torch.randn(1, 24, 151936) * 4
    labels = torch.randint(0, 151936, (24,))
    logprobs, entropy, lse = logprobs_triton.forward(logits, labels, 0.6)
    reference = logits.double().requires_grad_()
    ref_logprobs, ref_entropy = logprobs_and_entropy_from_logits(reference, labels.view(1, 24), 0.6)
    grad_logprobs, grad_entropy = torch.randn(24), torch.randn(24)
    ((ref_logprobs.flatten() * grad_logprobs.double()).sum() + (ref_entropy.flatten() * grad_entropy.double()).sum()).backward()
    grad = logprobs_triton.backward(logits, labels, lse, entropy, grad_logprobs, grad_entropy, 0.6)
    assert (entropy.double() - ref_entropy.flatten()).abs().max() < 2e-6
    assert (grad.double() - reference.grad).abs().max() < 2e-6 * reference.grad.abs().max()
    print("checked", len(worst))
""")


def test_the_fused_kernels_equal_the_float64_torch_path_in_triton_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1")
    result = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "checked 30" in result.stdout
