"""The fused GPU kernels of dapo.algo.logprobs_triton, run on the CPU by Triton's interpreter
(TRITON_INTERPRET=1, set before Triton compiles anything, so in a fresh process), against the
float64 torch path: log-probs, entropies and the gradients of both, of either alone (the
entropy's alone is entropy_from_logits' backward), for float32, bf16 and float16 logits, at
temperatures 1 and 0.7, with -inf logits (a label on one; a first tile of them), a NaN row, on a
strided slice (``out.logits[:, :-1]``) read where it lies, and through the autograd functions'
fused branches. Skipped where Triton is not installed (a GPU run also checks them:
tests/algo/test_algo_logprobs_accelerator.py)."""

from __future__ import annotations

import textwrap
import warnings

import pytest
import torch
from tests.triton_interpreter import (
    NO_COMPILER,
    assert_warns_once_and_declines,
    needs_triton,
    run_in_interpreter,
)

from dapo.algo import logprobs

CHECK = textwrap.dedent("""
    import torch
    from dapo.algo import logprobs_triton
    from dapo.algo.logprobs import FUSED, _TokenLogProbs, _TokenLogProbsAndEntropy, logprobs_and_entropy_from_logits

    torch.manual_seed(0)
    worst = {}
    ROUNDING = {torch.float32: 0.0, torch.bfloat16: 2**-7, torch.float16: 2**-10}
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for vocab, temperature in ((5000, 1.0), (300, 0.7), (4096, 1.0)):  # 5000: a partial last tile
            whole = (torch.randn(3, 5, vocab) * 3).to(dtype)
            whole[1, 2, :100] = float("-inf")  # masked vocabulary entries: probability 0
            whole[2, 1, :4096] = float("-inf")  # a first tile of them (5000: the row's mass in its last tile)
            whole[2, 1, -1] = 0.0  # (never a row of -inf alone: NaN both ways, below)
            logits = whole[:, :-1]  # a strided (B, T, V) view, as out.logits[:, :-1]
            labels = torch.randint(0, vocab, (3 * 4,))
            labels[1 * 4 + 2] = 42  # a label on a masked entry: log-prob -inf
            logprobs, entropy, lse = logprobs_triton.forward(logits, labels, temperature)
            reference = logits.double().requires_grad_()
            ref_logprobs, ref_entropy = logprobs_and_entropy_from_logits(reference, labels.view(3, 4), temperature)
            key = (str(dtype), vocab, temperature)
            finite = ref_logprobs.flatten().isfinite()
            assert torch.equal(logprobs.isfinite(), finite), key
            worst[key + ("logprobs",)] = (logprobs.double() - ref_logprobs.flatten())[finite].abs().max().item()
            worst[key + ("entropy",)] = (entropy.double() - ref_entropy.flatten()).abs().max().item()
            grad_logprobs, grad_entropy = torch.randn(12), torch.randn(12)
            grad_logprobs[~finite] = 0.0  # (a -inf log-prob's gradient is NaN both ways)
            for which in ("both", "log-probs", "entropy"):
                reference.grad = None
                ref_logprobs, ref_entropy = logprobs_and_entropy_from_logits(reference, labels.view(3, 4), temperature)
                loss = 0.0
                if which != "entropy":
                    loss = loss + (torch.where(finite, ref_logprobs.flatten(), 0.0) * grad_logprobs.double()).sum()
                if which != "log-probs":
                    loss = loss + (ref_entropy.flatten() * grad_entropy.double()).sum()
                loss.backward()
                grad = logprobs_triton.backward(logits, labels, lse, entropy,
                                                grad_logprobs if which != "entropy" else None,
                                                grad_entropy if which != "log-probs" else None, temperature)
                assert grad.dtype == dtype and grad.shape == logits.shape and grad.is_contiguous()
                # within one step of the dtype (the interpreter's rounding may truncate) of the exact
                # gradient; float32 to its rounding
                error = (grad.double() - reference.grad).abs() - ROUNDING[dtype] * reference.grad.abs()
                worst[key + ("grad", which)] = error.max().item() / reference.grad.abs().max().item()
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

    # a NaN logit makes its row NaN, as the torch path does (tl.max passes over NaN)
    logits = torch.randn(1, 2, 5000)
    logits[0, 0, 4500] = float("nan")
    logprobs, entropy, lse = logprobs_triton.forward(logits, torch.tensor([3, 3]), 1.0)
    assert logprobs[0].isnan() and entropy[0].isnan() and logprobs[1].isfinite() and entropy[1].isfinite()
    assert logprobs_triton.backward(logits, torch.tensor([3, 3]), lse, entropy, torch.ones(2), None, 1.0)[0, 0].isnan().all()

    # the autograd functions' fused branches: the same gradients as their chunked ones
    whole = torch.randn(2, 7, 1000)
    labels = torch.randint(0, 1000, (12,))
    for function in (_TokenLogProbs, _TokenLogProbsAndEntropy):
        grads = []
        for chunk in (FUSED, 5):
            leaf = whole.clone().requires_grad_()
            sliced = leaf[:, :-1]
            out = function.apply(sliced if chunk == FUSED else sliced.reshape(-1, 1000), labels, 0.8, chunk)
            out = out if isinstance(out, tuple) else (out,)
            sum(o.sum() * (i + 1) for i, o in enumerate(out)).backward()
            grads.append(leaf.grad)
        assert (grads[0] - grads[1]).abs().max() < 1e-6, function
        assert grads[0][:, -1].abs().max() == 0
    print("checked", len(worst))
""")


@needs_triton
def test_the_fused_kernels_equal_the_float64_torch_path_in_triton_interpreter():
    assert "checked 45" in run_in_interpreter(CHECK, timeout=300)


def test_kernels_that_fail_to_launch_leave_the_torch_path_with_a_warning(monkeypatch):
    """Triton builds its launcher with the system's C compiler at the first launch: a machine
    without one fails there, not at import. The run then computes on the torch path, said once."""

    class Unbuildable:
        @staticmethod
        def forward(*args):
            raise NO_COMPILER

    monkeypatch.setattr(logprobs, "_fused_kernels", lambda: Unbuildable)
    assert_warns_once_and_declines(logprobs._fused_kernels_launch)


@pytest.mark.parametrize("full", [torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 MiB"),
                                  RuntimeError("Triton Error [CUDA]: out of memory")])  # torch's, or Triton's loader's
def test_out_of_memory_at_the_launch_check_is_raised_not_kept_as_kernels_that_do_not_launch(monkeypatch, full):
    """A GPU full at the first launch check cached "does not launch" for the device: the kernels
    stayed off for the rest of the process, under a warning that blamed the toolchain."""
    launches = []

    class FullOnce:
        @staticmethod
        def forward(*args):
            launches.append(1)
            if len(launches) == 1:
                raise full

    monkeypatch.setattr(logprobs, "_fused_kernels", lambda: FullOnce)
    logprobs._fused_kernels_launch.cache_clear()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no warning: nothing failed to launch
            with pytest.raises(type(full), match="out of memory"):
                logprobs._fused_kernels_launch(torch.device("cpu"))
            assert logprobs._fused_kernels_launch(torch.device("cpu"))  # asked again: they launch
    finally:
        logprobs._fused_kernels_launch.cache_clear()
