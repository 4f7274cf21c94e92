"""Fused GPU kernels (Triton) for :mod:`dapo.algo.logprobs`: token log-probabilities and
entropies of softmax(z / tau), each row's logits read once forward and once backward.

The chunked torch path there makes about a dozen float32 passes over the response logits per
update (upcast, logsumexp, gather, the entropy's exp and sum, the backward's softmax): on an H200
with Qwen2.5's 151,936-token vocabulary these kernels are 10.9-11.5x faster, and a 0.5B model's
update 1.21-1.23x (docs/benchmarks.md, "On a GPU"). Here one program handles one row, in tiles of
the vocabulary, with float32 accumulators whatever the logits' dtype. Forward, for x = z / tau, an online
softmax (running max m, S = sum_v e^(x_v - m) and T = sum_v e^(x_v - m) (x_v - m), both
rescaled when m grows):

    lse = m + log S,   log pi(y) = (x_y - m) - log S,   H = log S - T / S   (H = lse - E_pi[x])

(H as lse - E_pi[x] would subtract two numbers of the logits' size, 30 at temperature 0.6 on
Qwen2.5-like logits, to get one of a few units: its float32 error grows with them.)

Backward, one pass writing the gradient in the logits' dtype (the module doc of logprobs.py):

    d/dz_v = (g_lp (1[v = y] - pi_v) - g_H pi_v (log pi_v + H)) / tau

A probability that underflows to 0 (a -inf logit) contributes 0 to H and its gradient, and a row
with a NaN logit is NaN, as in the torch path (a +inf logit gives NaN log-probs here, -inf there:
non-finite either way, and the update skips a non-finite loss). Each row is summed in one fixed
order, so results are deterministic (bit-identical resume). They differ from the torch path in
the last bits of float32 (another summation order).
"""

# (no `from __future__ import annotations`: Triton reads the kernels' tl.constexpr annotations)
import contextlib

import torch
import triton
import triton.language as tl
from torch import Tensor

BLOCK = 4096  # vocabulary entries per tile


def available(logits: Tensor) -> bool:
    """Whether the fused kernels run for ``logits`` (B, T, V): CUDA, a 16- or 32-bit float (float64
    takes the torch path, which gradcheck uses), any strides but the vocabulary's
    (``out.logits[:, :-1]`` is read where it lies, not copied)."""
    return (logits.is_cuda and logits.dim() == 3 and logits.stride(2) == 1
            and logits.dtype in (torch.float16, torch.bfloat16, torch.float32))


@triton.jit
def _forward_kernel(logits_ptr, labels_ptr, logprobs_ptr, entropy_ptr, lse_ptr, length, batch_stride,
                    position_stride, vocab, inv_temperature, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    row_ptr = logits_ptr + (row // length) * batch_stride + (row % length) * position_stride
    running_max = tl.full([], float("-inf"), tl.float32)
    sum_exp = tl.zeros([], tl.float32)
    sum_exp_x = tl.zeros([], tl.float32)
    nans = tl.zeros([], tl.int32)  # NaN logits: tl.max and the weights below would pass over them
    for start in range(0, vocab, BLOCK_V):
        offsets = start + tl.arange(0, BLOCK_V)
        inside = offsets < vocab
        x = tl.load(row_ptr + offsets, mask=inside, other=float("-inf")).to(tl.float32) * inv_temperature
        nans += tl.sum((x != x).to(tl.int32), axis=0)
        new_max = tl.maximum(running_max, tl.max(x, axis=0))
        # exp(-inf - -inf) would be NaN while every entry so far is -inf: no mass to rescale then
        rescale = tl.where(running_max == new_max, 1.0, tl.exp(running_max - new_max))
        weights = tl.where(x > float("-inf"), tl.exp(x - new_max), 0.0)
        # sum_v e^(x_v - m)(x_v - m) about the new max: the old terms shift by (m_old - m_new)
        shift = tl.where(sum_exp > 0, (running_max - new_max) * sum_exp, 0.0)
        sum_exp_x = (sum_exp_x + shift) * rescale + tl.sum(tl.where(weights > 0, weights * (x - new_max), 0.0), axis=0)
        sum_exp = sum_exp * rescale + tl.sum(weights, axis=0)
        running_max = new_max
    # a row with a NaN logit is NaN throughout, as the torch path's (its backward then too)
    log_sum_exp = tl.where(nans > 0, float("nan"), tl.log(sum_exp))
    label = tl.load(labels_ptr + row)
    label_x = tl.load(row_ptr + label).to(tl.float32) * inv_temperature
    tl.store(lse_ptr + row, running_max + log_sum_exp)
    tl.store(logprobs_ptr + row, (label_x - running_max) - log_sum_exp)
    # H = lse - E[x] = log S - E[x - m]: two terms of H's size (lse - E[x] cancels terms of the logits' size)
    tl.store(entropy_ptr + row, log_sum_exp - sum_exp_x / sum_exp)


@triton.jit
def _backward_kernel(logits_ptr, labels_ptr, lse_ptr, entropy_ptr, grad_logprobs_ptr, grad_entropy_ptr,
                     grad_logits_ptr, length, batch_stride, position_stride, vocab, inv_temperature,
                     HAS_GRAD_LP: tl.constexpr, HAS_GRAD_H: tl.constexpr, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    row_ptr = logits_ptr + (row // length) * batch_stride + (row % length) * position_stride
    lse = tl.load(lse_ptr + row)
    label = tl.load(labels_ptr + row)
    grad_lp = tl.load(grad_logprobs_ptr + row).to(tl.float32) if HAS_GRAD_LP else 0.0
    grad_h = tl.load(grad_entropy_ptr + row).to(tl.float32) if HAS_GRAD_H else 0.0
    entropy = tl.load(entropy_ptr + row) if HAS_GRAD_H else 0.0
    for start in range(0, vocab, BLOCK_V):
        offsets = start + tl.arange(0, BLOCK_V)
        inside = offsets < vocab
        x = tl.load(row_ptr + offsets, mask=inside, other=0.0).to(tl.float32)
        log_p = x * inv_temperature - lse
        probs = tl.exp(log_p)
        grad = -grad_lp * probs
        if HAS_GRAD_H:
            grad -= tl.where(probs > 0, grad_h * probs * (log_p + entropy), 0.0)
        grad = tl.where(offsets == label, grad + grad_lp, grad) * inv_temperature
        tl.store(grad_logits_ptr + row * vocab + offsets, grad.to(grad_logits_ptr.dtype.element_ty),
                 mask=inside)


def launching_on(device: torch.device) -> contextlib.AbstractContextManager:
    """``device`` made the current CUDA device while a kernel launches: Triton launches on the
    current device, not the tensors' (trainer.device=cuda:1 in one process). (Triton's interpreter
    runs CPU tensors in tests.)"""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def forward(logits: Tensor, labels: Tensor, temperature: float) -> tuple[Tensor, Tensor, Tensor]:
    """Log-probs at ``labels`` (B * T), entropies and logsumexps (float32, B * T each) of
    ``logits`` (B, T, V) / ``temperature``."""
    batch, length, vocab = logits.shape
    logprobs, entropy, lse = (torch.empty(batch * length, dtype=torch.float32, device=logits.device)
                              for _ in range(3))
    if batch * length:
        with launching_on(logits.device):
            _forward_kernel[(batch * length,)](logits, labels, logprobs, entropy, lse, length, logits.stride(0),
                                               logits.stride(1), vocab, 1.0 / temperature, BLOCK_V=BLOCK)
    return logprobs, entropy, lse


def backward(logits: Tensor, labels: Tensor, lse: Tensor, entropy: Tensor, grad_logprobs: Tensor | None,
             grad_entropy: Tensor | None, temperature: float) -> Tensor:
    """The gradient of ``logits`` (B, T, V; contiguous, their dtype) from the outputs' gradients
    (B * T each; None: zero)."""
    batch, length, vocab = logits.shape
    grad_logits = torch.empty(batch, length, vocab, dtype=logits.dtype, device=logits.device)
    if batch * length:
        with launching_on(logits.device):
            _backward_kernel[(batch * length,)](
                logits, labels, lse, entropy, lse if grad_logprobs is None else grad_logprobs.contiguous(),
                lse if grad_entropy is None else grad_entropy.contiguous(), grad_logits, length, logits.stride(0),
                logits.stride(1), vocab,
                1.0 / temperature, HAS_GRAD_LP=grad_logprobs is not None, HAS_GRAD_H=grad_entropy is not None,
                BLOCK_V=BLOCK)
    return grad_logits
