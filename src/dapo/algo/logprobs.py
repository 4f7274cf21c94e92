"""Memory-conscious token log-probabilities and entropies from LM logits.

For logits z (B, T, V) and temperature tau, with s = z / tau:

    log pi(y_t) = s[y_t] - logsumexp(s)                                  (log_softmax gathered)
    H_t = -sum_v pi(v) log pi(v) = logsumexp(s) - sum_v pi(v) s[v]       (entropy of softmax(s))

A plain ``log_softmax(logits.float())`` materialises a float32 (B*T, V) copy of the batch (for
V = 152k and B*T = 32k positions that is 20 GB) and autograd keeps it for the backward pass.
Here rows (the flattened B*T positions) are processed in chunks of ``chunk_size``, each upcast
to float32 (float64 if the logits are float64) only while it is worked on. Custom autograd
functions save only the original logits and one float per row (the logsumexp, and for entropy
H), and recompute softmax chunk by chunk in backward:

    d log pi(y) / d z_v = (1[v = y] - pi(v)) / tau
    d H / d z_v = -pi(v) (log pi(v) + H) / tau

Both with gradients (an entropy bonus, ``algorithm.entropy_coef``):
:func:`logprobs_and_entropy_from_logits` computes them in one function whose backward writes one
(B*T, V) gradient, the sum of the two above; the two functions apart would each write one and
autograd a third, their sum (two more copies of the batch's logits at the backward's peak).

Outputs are float32 (float64 for float64 logits, so ``torch.autograd.gradcheck`` applies).
Non-contiguous logits (e.g. ``logits[:, :-1]``) are copied once, in their own dtype, by reshape.
Second derivatives are not supported.

On a CUDA GPU, where Triton imports, the default is neither: the fused kernels of
:mod:`dapo.algo.logprobs_triton` read each row once forward and once backward, from the (B, T, V)
logits as they lie (``fused=False`` or a ``chunk_size`` takes the chunked path; float64 always does).

Chunk size: 4096 rows on accelerators. On CPU, as many rows as fit a 16 MiB float32 buffer (131
rows at V = 32k, 27 at V = 152k): a chunk that stays in the caches and below glibc's mmap
threshold (32 MiB) is reused rather than page-faulted in afresh: forward and backward 2.3-2.7x
faster than 4096-row chunks at both vocabularies on a 2-core VM (benchmarks/bench_logprobs.py).
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from dapo.algo.triton_support import import_kernels, kernels_launch


def _compute_dtype(logits: Tensor) -> torch.dtype:
    return torch.float64 if logits.dtype == torch.float64 else torch.float32


def _scaled(logits: Tensor, dtype: torch.dtype, temperature: float, writable: bool = False) -> Tensor:
    """A chunk's logits / temperature in ``dtype``, in one pass: no copy at all for float32 logits
    at temperature 1 unless ``writable`` (the caller then works in place on its own copy)."""
    scaled = logits.to(dtype, copy=writable)
    if temperature == 1.0:
        return scaled
    return scaled / temperature if scaled is logits else scaled.div_(temperature)


_CPU_CHUNK_BYTES = 16 * 2**20
ACCELERATOR_CHUNK_ROWS = 4096


FUSED = 0  # the chunk size that stands for the fused kernels (logprobs_triton: whole rows, no chunks)


def _chunk_rows(logits: Tensor, chunk_size: int | None) -> int:
    """Rows per chunk: ``chunk_size`` if given, else the device's default (see the module doc)."""
    if chunk_size is not None:
        return chunk_size
    if logits.device.type != "cpu":
        return ACCELERATOR_CHUNK_ROWS
    return max(1, _CPU_CHUNK_BYTES // (logits.shape[-1] * _compute_dtype(logits).itemsize))


@functools.cache
def _fused_kernels() -> ModuleType | None:
    """:mod:`dapo.algo.logprobs_triton`, imported on first use on a GPU; None where Triton does
    not import (:mod:`dapo.algo.triton_support`)."""
    return import_kernels("dapo.algo.logprobs_triton")


@functools.cache
def _fused_kernels_launch(device: torch.device) -> bool:
    """Whether the fused kernels launch on ``device``; where they do not, a warning (once per
    device) and the chunked torch path (:mod:`dapo.algo.triton_support`)."""

    def probe() -> None:
        zeros = torch.zeros(1, 1, 8, device=device)
        _fused_kernels().forward(zeros, torch.zeros(1, dtype=torch.long, device=device), 1.0)

    return kernels_launch(probe, "fused GPU log-prob kernels (dapo.algo.logprobs_triton)", device,
                          "the chunked torch path computes the log-probs instead", "trainer.fused_logprobs")


def _rows_and_logits(logits: Tensor, chunk_size: int | None, fused: bool) -> tuple[int, Tensor]:
    """What the autograd functions take: FUSED and the (B, T, V) logits where the fused kernels
    run, were not declined (``fused``) and no chunk size was asked for; else the rows per chunk
    (:func:`_chunk_rows`) and the logits as (B * T, V) rows."""
    if (fused and chunk_size is None and logits.is_cuda and (kernels := _fused_kernels())
            and kernels.available(logits) and _fused_kernels_launch(logits.device)):
        return FUSED, logits
    return _chunk_rows(logits, chunk_size), logits.reshape(-1, logits.shape[-1])


def _row_chunks(num_rows: int, chunk_size: int) -> list[slice]:
    return [slice(start, min(start + chunk_size, num_rows)) for start in range(0, num_rows, chunk_size)]


def row_chunks(logits: Tensor) -> list[slice]:
    """The rows of ``logits`` (N, V) in this module's default chunks (a 16 MiB float32 buffer on
    CPU, 4096 rows on accelerators: see the module doc), for other passes over a batch's logits
    (the rollout sampler's softmax)."""
    return _row_chunks(logits.shape[0], _chunk_rows(logits, None))


class _TokenLogProbs(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, logits: Tensor, labels: Tensor, temperature: float, chunk_size: int) -> Tensor:
        ctx.temperature, ctx.chunk_size = temperature, chunk_size
        ctx.fused = chunk_size == FUSED
        if ctx.fused:
            logprobs, _, logsumexp = _fused_kernels().forward(logits, labels, temperature)
            ctx.save_for_backward(logits, labels, logsumexp)
            return logprobs
        dtype = _compute_dtype(logits)
        logprobs = torch.empty(logits.shape[0], dtype=dtype, device=logits.device)
        logsumexp = torch.empty_like(logprobs)
        for rows in _row_chunks(logits.shape[0], chunk_size):
            scaled = _scaled(logits[rows], dtype, temperature)
            logsumexp[rows] = torch.logsumexp(scaled, dim=-1)
            logprobs[rows] = scaled.gather(-1, labels[rows, None]).squeeze(-1) - logsumexp[rows]
        ctx.save_for_backward(logits, labels, logsumexp)
        return logprobs

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_logprobs: Tensor) -> tuple[Tensor | None, ...]:
        logits, labels, logsumexp = ctx.saved_tensors
        if ctx.fused:
            return (_fused_kernels().backward(logits, labels, logsumexp, logsumexp, grad_logprobs, None,
                                             ctx.temperature), None, None, None)
        grad_logits = torch.empty_like(logits)
        for rows in _row_chunks(logits.shape[0], ctx.chunk_size):
            grad_row = grad_logprobs[rows, None].to(logsumexp.dtype)
            # One float buffer per chunk, updated in place: s -> pi -> -g * pi -> g * (1[y] - pi).
            buffer = _scaled(logits[rows], logsumexp.dtype, ctx.temperature, writable=True)
            buffer.sub_(logsumexp[rows, None]).exp_().mul_(-grad_row)
            buffer.scatter_add_(-1, labels[rows, None], grad_row)
            grad_logits[rows] = buffer.div_(ctx.temperature)
        return grad_logits, None, None, None


class _TokenLogProbsAndEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, logits: Tensor, labels: Tensor, temperature: float, chunk_size: int) -> tuple[Tensor, Tensor]:
        ctx.temperature, ctx.chunk_size = temperature, chunk_size
        ctx.fused = chunk_size == FUSED
        ctx.set_materialize_grads(False)
        if ctx.fused:
            logprobs, entropy, logsumexp = _fused_kernels().forward(logits, labels, temperature)
            ctx.save_for_backward(logits, labels, logsumexp, entropy)
            return logprobs, entropy
        dtype = _compute_dtype(logits)
        logprobs = torch.empty(logits.shape[0], dtype=dtype, device=logits.device)
        entropy, logsumexp = torch.empty_like(logprobs), torch.empty_like(logprobs)
        for rows in _row_chunks(logits.shape[0], chunk_size):
            log_p = _scaled(logits[rows], dtype, temperature, writable=True)
            logsumexp[rows] = torch.logsumexp(log_p, dim=-1)
            log_p.sub_(logsumexp[rows, None])
            logprobs[rows] = log_p.gather(-1, labels[rows, None]).squeeze(-1)
            p_log_p = torch.exp(log_p).mul_(log_p)
            entropy[rows] = -p_log_p.masked_fill_(log_p == float("-inf"), 0.0).sum(-1)
        ctx.save_for_backward(logits, labels, logsumexp, entropy)
        return logprobs, entropy

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_logprobs: Tensor | None, grad_entropy: Tensor | None) -> tuple[Tensor | None, ...]:
        logits, labels, logsumexp, entropy = ctx.saved_tensors
        if grad_logprobs is None and grad_entropy is None:
            return None, None, None, None
        if ctx.fused:
            return (_fused_kernels().backward(logits, labels, logsumexp, entropy, grad_logprobs, grad_entropy,
                                             ctx.temperature), None, None, None)
        grad_logits = torch.empty_like(logits)
        for rows in _row_chunks(logits.shape[0], ctx.chunk_size):
            log_p = _scaled(logits[rows], logsumexp.dtype, ctx.temperature, writable=True).sub_(logsumexp[rows, None])
            probs = torch.exp(log_p)
            if grad_entropy is None:
                grad = log_p.zero_()
            else:  # -g_H pi (log pi + H); p = 0 (a -inf logit) gives 0, not 0 * -inf; a NaN stays NaN
                grad = log_p.add_(entropy[rows, None]).mul_(probs).masked_fill_(probs == 0, 0.0)
                grad.mul_(-grad_entropy[rows, None].to(grad.dtype))
            if grad_logprobs is not None:  # + g_lp (1[y] - pi)
                grad_lp = grad_logprobs[rows, None].to(grad.dtype)
                grad.sub_(probs.mul_(grad_lp)).scatter_add_(-1, labels[rows, None], grad_lp)
            grad_logits[rows] = grad.div_(ctx.temperature)
        return grad_logits, None, None, None


def _check_common(logits: Tensor, temperature: float, chunk_size: int | None) -> None:
    if logits.dim() != 3 or not logits.is_floating_point():
        raise ValueError(f"logits must be a float (B, T, V) tensor, got shape {tuple(logits.shape)} dtype {logits.dtype}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")


def _check_labels(logits: Tensor, labels: Tensor, temperature: float, chunk_size: int | None) -> None:
    _check_common(logits, temperature, chunk_size)
    batch, length, vocab = logits.shape
    if labels.shape != (batch, length) or labels.is_floating_point():
        raise ValueError(f"labels must be integer (B, T) = {(batch, length)}, got {tuple(labels.shape)} {labels.dtype}")
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= vocab):
        raise ValueError(
            f"labels must lie in [0, {vocab}), got [{int(labels.min())}, {int(labels.max())}]; "
            "replace ignore-index values (e.g. -100) by a valid id and mask them"
        )


def logprobs_from_logits(
    logits: Tensor, labels: Tensor, temperature: float = 1.0, chunk_size: int | None = None, fused: bool = True
) -> Tensor:
    """log softmax(logits / temperature) at ``labels``: (B, T, V), (B, T) -> (B, T), chunked, or
    on a GPU in the fused kernels of :mod:`dapo.algo.logprobs_triton` (unless ``fused`` is
    False or a ``chunk_size`` is given).

    ``labels`` must be valid token ids everywhere (replace ignore-index values such as -100 by
    any id and mask those positions out of the loss).
    """
    _check_labels(logits, labels, temperature, chunk_size)
    batch, length, _ = logits.shape
    rows, source = _rows_and_logits(logits, chunk_size, fused)
    flat = _TokenLogProbs.apply(source, labels.reshape(-1).long(), float(temperature), rows)
    return flat.view(batch, length)


def entropy_from_logits(logits: Tensor, temperature: float = 1.0, chunk_size: int | None = None,
                        fused: bool = True) -> Tensor:
    """Entropy of softmax(logits / temperature) at each position: (B, T, V) -> (B, T), chunked (the
    joint pass's, whose log-probs of token 0 nothing reads and whose backward then skips them)."""
    _check_common(logits, temperature, chunk_size)
    batch, length, _ = logits.shape
    labels = torch.zeros(batch * length, dtype=torch.long, device=logits.device)
    rows, source = _rows_and_logits(logits, chunk_size, fused)
    _, flat = _TokenLogProbsAndEntropy.apply(source, labels, float(temperature), rows)
    return flat.view(batch, length)


def logprobs_and_entropy_from_logits(
    logits: Tensor, labels: Tensor, temperature: float = 1.0, chunk_size: int | None = None, fused: bool = True
) -> tuple[Tensor, Tensor]:
    """:func:`logprobs_from_logits` and :func:`entropy_from_logits` in one pass, whose backward
    writes one gradient for both (the module doc): (B, T, V), (B, T) -> (B, T), (B, T)."""
    _check_labels(logits, labels, temperature, chunk_size)
    batch, length, _ = logits.shape
    rows, source = _rows_and_logits(logits, chunk_size, fused)
    logprobs, entropy = _TokenLogProbsAndEntropy.apply(source, labels.reshape(-1).long(), float(temperature), rows)
    return logprobs.view(batch, length), entropy.view(batch, length)
