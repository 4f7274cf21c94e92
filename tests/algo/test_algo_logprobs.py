"""Chunked token log-probs and entropy against float64 references, with gradients."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from dapo.algo import entropy_from_logits, logprobs_and_entropy_from_logits, logprobs_from_logits

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _reference_logprobs(logits: torch.Tensor, labels: torch.Tensor, temperature: float) -> torch.Tensor:
    log_p = torch.log_softmax(logits.double() / temperature, dim=-1)
    return log_p.gather(-1, labels[..., None]).squeeze(-1)


def _reference_entropy(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    log_p = torch.log_softmax(logits.double() / temperature, dim=-1)
    return -(log_p.exp() * log_p).sum(-1)


def _batch(dtype: torch.dtype, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    logits = (torch.randn(3, 5, 37, generator=gen) * 4).to(dtype)
    labels = torch.randint(0, 37, (3, 5), generator=gen)
    return logits, labels


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("chunk_size", [1, 4, 4096])  # 15 rows: single rows, a ragged last chunk, one chunk
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_values_match_float64_reference(dtype: torch.dtype, chunk_size: int, temperature: float) -> None:
    logits, labels = _batch(dtype)
    logprobs = logprobs_from_logits(logits, labels, temperature, chunk_size)
    entropy = entropy_from_logits(logits, temperature, chunk_size)
    assert logprobs.dtype == entropy.dtype == torch.float32 and logprobs.shape == (3, 5)
    # Reference uses the same (already rounded) bf16 values, so only float32 arithmetic differs.
    torch.testing.assert_close(logprobs.double(), _reference_logprobs(logits, labels, temperature), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(entropy.double(), _reference_entropy(logits, temperature), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_float32_gradients_match_float64_autograd(temperature: float) -> None:
    logits, labels = _batch(torch.float32, seed=1)
    upstream = torch.randn(3, 5, generator=torch.Generator().manual_seed(2))
    for fn, ref in (
        (lambda x: logprobs_from_logits(x, labels, temperature, 4), lambda x: _reference_logprobs(x, labels, temperature)),
        (lambda x: entropy_from_logits(x, temperature, 4), lambda x: _reference_entropy(x, temperature)),
    ):
        ours = logits.clone().requires_grad_(True)
        (fn(ours) * upstream).sum().backward()
        theirs = logits.double().requires_grad_(True)
        (ref(theirs) * upstream.double()).sum().backward()
        torch.testing.assert_close(ours.grad.double(), theirs.grad, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("trained", ["both", "logprobs", "entropy"])
def test_joint_logprobs_and_entropy_match_float64_autograd(temperature: float, trained: str) -> None:
    """An entropy bonus trains both through one backward: values and gradients are the two
    functions' (float64 autograd reference), also where the loss uses only one of its outputs."""
    logits, labels = _batch(torch.float32, seed=4)
    logits[0, 0, 3] = float("-inf")  # a masked vocabulary entry: p = 0, gradient 0, not NaN
    up_lp, up_h = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(5))
    ours = logits.clone().requires_grad_(True)
    logprobs, entropy = logprobs_and_entropy_from_logits(ours, labels, temperature, 4)
    theirs = logits.double().clamp(min=-1e4).requires_grad_(True)  # (exp(-1e4) is 0 in float64)
    ref_lp, ref_h = _reference_logprobs(theirs, labels, temperature), _reference_entropy(theirs, temperature)
    torch.testing.assert_close(logprobs.double(), ref_lp.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(entropy.double(), ref_h.detach(), atol=1e-5, rtol=1e-5)
    terms = {"both": ((logprobs, ref_lp, up_lp), (entropy, ref_h, up_h)), "logprobs": ((logprobs, ref_lp, up_lp),),
             "entropy": ((entropy, ref_h, up_h),)}[trained]
    sum(((out * up).sum() for out, _, up in terms), torch.tensor(0.0)).backward()
    sum(((ref * up.double()).sum() for _, ref, up in terms), torch.tensor(0.0, dtype=torch.float64)).backward()
    assert torch.isfinite(ours.grad).all()
    torch.testing.assert_close(ours.grad.double(), theirs.grad, atol=1e-5, rtol=1e-5)


def test_joint_logprobs_and_entropy_pass_gradcheck() -> None:
    gen = torch.Generator().manual_seed(6)
    logits = torch.randn(2, 3, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    labels = torch.randint(0, 5, (2, 3), generator=gen)
    assert torch.autograd.gradcheck(lambda x: logprobs_and_entropy_from_logits(x, labels, 0.8, 4), (logits,))


def test_an_entropy_bonus_backward_holds_one_gradient_of_the_logits() -> None:
    """The two functions apart each write a (rows, vocab) gradient and autograd a third, their sum:
    about 4.3 copies of the logits at the peak. The joint pass writes one: under 3 (the logits, their
    gradient, the matmul's gradient and chunks). Measured by benchmarks/bench_logprobs.py, each way in
    a fresh process, at a size (410 MB of logits) far above what the imports left in its high-water mark."""
    spec = importlib.util.spec_from_file_location("bench_logprobs", BENCHMARKS / "bench_logprobs.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    apart, one_pass = (bench.peak_copies(case) for case in bench.PEAK_CASES[1:])
    assert one_pass < 3.0 < apart, (one_pass, apart)


def test_bfloat16_gradient_has_input_dtype() -> None:
    logits, labels = _batch(torch.bfloat16)
    logits.requires_grad_(True)
    logprobs_from_logits(logits, labels).sum().backward()
    assert logits.grad.dtype == torch.bfloat16 and torch.isfinite(logits.grad.float()).all()


def test_gradcheck_float64() -> None:
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 3, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    labels = torch.randint(0, 5, (2, 3), generator=gen)
    assert torch.autograd.gradcheck(lambda x: logprobs_from_logits(x, labels, 0.8, 4), (logits,))
    assert torch.autograd.gradcheck(lambda x: entropy_from_logits(x, 0.8, 4), (logits,))


def test_works_without_grad_and_on_non_contiguous_slices() -> None:
    logits, labels = _batch(torch.float32)
    with torch.no_grad():
        entropy = entropy_from_logits(logits[:, :-1], chunk_size=2)
        logprobs = logprobs_from_logits(logits[:, :-1], labels[:, 1:], chunk_size=2)
    assert not entropy.requires_grad and entropy.shape == (3, 4)
    reference = _reference_logprobs(logits[:, :-1], labels[:, 1:], 1.0)
    torch.testing.assert_close(logprobs.double(), reference, atol=1e-5, rtol=1e-5)


def test_masked_vocabulary_entries_do_not_produce_nan() -> None:
    logits = torch.tensor([[[0.0, float("-inf"), 1.0]]], requires_grad=True)
    entropy = entropy_from_logits(logits)
    entropy.sum().backward()
    assert torch.isfinite(entropy).all() and torch.isfinite(logits.grad).all()
    torch.testing.assert_close(entropy.double(), _reference_entropy(torch.tensor([[[0.0, 1.0]]]), 1.0).to(torch.float64))


def test_bad_labels_and_arguments() -> None:
    logits, labels = _batch(torch.float32)
    with pytest.raises(ValueError, match="-100"):
        logprobs_from_logits(logits, torch.full_like(labels, -100))
    with pytest.raises(ValueError, match="temperature"):
        entropy_from_logits(logits, temperature=0.0)
    with pytest.raises(ValueError, match=r"\(B, T, V\)"):
        entropy_from_logits(logits[0])


def _saved_bytes(fn: Callable[[torch.Tensor], object], logits: torch.Tensor) -> int:
    """Bytes autograd keeps for backward while computing fn(logits)."""
    saved: list[int] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        saved.append(tensor.numel() * tensor.element_size())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(logits)
    return sum(saved)


def test_backward_keeps_no_float32_copy_of_the_logits() -> None:
    logits = torch.randn(4, 64, 1000, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, 1000, (4, 64))
    bf16_bytes = logits.numel() * 2
    ours = _saved_bytes(lambda x: logprobs_from_logits(x, labels, 1.0, 32), logits)
    ours_entropy = _saved_bytes(lambda x: entropy_from_logits(x, 1.0, 32), logits)
    naive = _saved_bytes(
        lambda x: torch.log_softmax(x.float(), -1).gather(-1, labels[..., None]), logits
    )
    assert ours < 1.1 * bf16_bytes and ours_entropy < 1.1 * bf16_bytes
    assert naive > 2 * bf16_bytes  # the plain float32 log_softmax keeps a full float32 copy


def test_a_nan_logit_gives_a_nan_entropy_not_zero() -> None:
    # actor/entropy read 0 for a diverged model (NaN probabilities were zeroed with the masked ones)
    logits = torch.tensor([[[0.0, float("nan"), 1.0], [0.0, float("-inf"), 1.0]]], dtype=torch.float64)
    entropy = entropy_from_logits(logits)
    assert torch.isnan(entropy[0, 0]) and entropy[0, 1].item() == pytest.approx(0.5822, abs=1e-4)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_default_cpu_chunks_fit_the_buffer_budget_and_match_the_reference(temperature: float) -> None:
    """With no chunk_size, CPU chunks hold at most 16 MiB of float32 (131 rows at V = 32000), and
    a batch split into several of them gives the float64 reference's values and gradients."""
    from dapo.algo.logprobs import _chunk_rows

    assert _chunk_rows(torch.empty(1, 1, 32000), None) == 131
    assert _chunk_rows(torch.empty(1, 1, 32000, dtype=torch.float64), None) == 65
    assert _chunk_rows(torch.empty(1, 1, 260), None) == 16131  # a small vocabulary: one chunk
    assert _chunk_rows(torch.empty(1, 1, 32000), 7) == 7
    gen = torch.Generator().manual_seed(4)
    logits = torch.randn(2, 150, 32000, generator=gen)  # 300 rows: three chunks, the last ragged
    labels = torch.randint(0, 32000, (2, 150), generator=gen)
    upstream = torch.randn(2, 150, generator=gen)
    for fn, ref in (
        (lambda x: logprobs_from_logits(x, labels, temperature), lambda x: _reference_logprobs(x, labels, temperature)),
        (lambda x: entropy_from_logits(x, temperature), lambda x: _reference_entropy(x, temperature)),
    ):
        ours = logits.clone().requires_grad_(True)
        values = fn(ours)
        (values * upstream).sum().backward()
        theirs = logits.double().requires_grad_(True)
        expected = ref(theirs)
        (expected * upstream.double()).sum().backward()
        torch.testing.assert_close(values.double(), expected.detach(), atol=1e-4, rtol=1e-5)
        torch.testing.assert_close(ours.grad.double(), theirs.grad, atol=1e-7, rtol=1e-5)
        # float32 logits at temperature 1 are read without a copy: never written to
        assert torch.equal(ours.detach(), logits)
