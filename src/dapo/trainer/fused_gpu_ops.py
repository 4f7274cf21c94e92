"""Fused GPU kernels for dapo-rl's training forward (:mod:`dapo.trainer.native_forward`) on CUDA:
RMSNorm, SwiGLU and RoPE, each one autograd op whose forward and backward are one Triton kernel
each (:mod:`dapo.trainer.layer_kernels_triton`, which gives the formulas and their roundings).
Attention stays torch's, on the grids (``attends_packed`` is False).

The same interface as :class:`dapo.trainer.fused_cpu_ops.FusedCpuOps`; where a kernel does not
apply (a norm or activation whose forward was replaced or hooked, a float64 model, which gradcheck
uses), the op calls the module or returns None, as torch's ops compute it.
``trainer.native_gpu_kernels=false`` opts out.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from dapo.algo.triton_support import import_kernels, kernels_launch
from dapo.rollout.llama_support import skipped_hooks
from dapo.trainer.fused_cpu_ops import NORM_FORWARDS, SILU_FORWARDS

_HALF_OR_SINGLE = (torch.float16, torch.bfloat16, torch.float32)


class FusedGpuOps:
    """The kernels of :mod:`dapo.trainer.layer_kernels_triton` as the native forward's ops."""

    attends_packed = False  # attention on the grids, in torch's kernels (no attention op)

    def __init__(self, kernels: ModuleType) -> None:
        self.kernels = kernels

    def rms_norm(self, norm: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
        """``norm(hidden)`` for (N, n) ``hidden``; under autocast in its dtype (the one the next
        matmul casts it to), else in the dtype eager gives (the weight's and input's promotion)."""
        if (NORM_FORWARDS.get(type(norm)) is not type(norm).forward or skipped_hooks(norm) or hidden.dim() != 2
                or hidden.dtype not in _HALF_OR_SINGLE or norm.weight.dtype not in _HALF_OR_SINGLE):
            return norm(hidden)
        device = hidden.device.type
        out_dtype = (torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device)
                     else torch.promote_types(hidden.dtype, norm.weight.dtype))
        return _RMSNorm.apply(hidden, norm.weight, norm.variance_epsilon, out_dtype, self.kernels)

    def swiglu(self, act_fn: nn.Module, gate_up: torch.Tensor) -> torch.Tensor:
        """``act_fn(gate) * up`` for (N, 2I) ``gate_up`` (gate the first half), the kernel's for SiLU."""
        if (SILU_FORWARDS.get(type(act_fn)) is not type(act_fn).forward or skipped_hooks(act_fn)
                or gate_up.dtype not in _HALF_OR_SINGLE or gate_up.dim() != 2 or gate_up.shape[1] % 2):
            gate, up = gate_up.chunk(2, dim=-1)
            return act_fn(gate) * up
        return _SwiGLU.apply(gate_up, self.kernels)

    def rope(self, queries_keys: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor | None:
        """``x * cos + x.roll(d/2, dims=-1) * sin`` for (N, heads, d) ``queries_keys`` (each row's
        heads contiguous) and (N, 1, d) tables, in eager's dtype; None where the kernel does not apply."""
        rows, heads, head_dim = queries_keys.shape
        if (head_dim % 2 or queries_keys.dtype not in _HALF_OR_SINGLE or queries_keys.stride()[1:] != (head_dim, 1)
                or cos.dtype not in _HALF_OR_SINGLE or sin.dtype != cos.dtype or cos.requires_grad
                or sin.requires_grad):
            return None
        out_dtype = torch.promote_types(queries_keys.dtype, cos.dtype)
        return _RoPE.apply(queries_keys, cos.reshape(rows, head_dim), sin.reshape(rows, head_dim), out_dtype,
                           self.kernels)


def fused_gpu_ops(hidden: torch.Tensor) -> FusedGpuOps | None:
    """The kernels, for a forward whose residual stream is ``hidden``: on CUDA, not float64, where
    Triton imports (a CUDA build of torch brings it) and its kernels launch (where they do not, a
    warning, once per device); else None."""
    if not hidden.is_cuda or hidden.dtype == torch.float64 or (kernels := _kernels()) is None:
        return None
    return FusedGpuOps(kernels) if _launches(hidden.device) else None


@functools.cache
def _kernels() -> ModuleType | None:
    """:mod:`dapo.trainer.layer_kernels_triton`, imported on first use on a GPU; None where
    Triton does not import (:mod:`dapo.algo.triton_support`)."""
    return import_kernels("dapo.trainer.layer_kernels_triton")


@functools.cache
def _launches(device: torch.device) -> bool:
    """Whether the kernels launch on ``device`` (:mod:`dapo.algo.triton_support`): each of the six
    runs once here, in bf16 at a small size (other dtypes and block sizes compile at their first
    use, with the same toolchain); where one fails, a warning and torch's ops."""

    def probe() -> None:
        kernels = _kernels()
        ones = torch.ones(2, 16, dtype=torch.bfloat16, device=device)
        normed, rstd = kernels.rms_norm_forward(ones, ones[0], 1e-6, torch.bfloat16)
        kernels.rms_norm_backward(normed, ones, ones[0], rstd)
        kernels.swiglu_backward(kernels.swiglu_forward(ones)[:, :8].contiguous(), ones)
        tables = ones[:, :8].contiguous()
        rotated = kernels.rope_forward(ones.view(2, 2, 8), tables, tables, torch.bfloat16)
        kernels.rope_backward(rotated, tables, tables, torch.bfloat16)

    return kernels_launch(probe, "fused GPU layer kernels (dapo.trainer.layer_kernels_triton)", device,
                          "torch's ops compute the forward instead", "trainer.native_gpu_kernels")


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, eps: float, out_dtype: torch.dtype,
                kernels: ModuleType) -> torch.Tensor:
        hidden, weight = hidden.contiguous(), weight.contiguous()
        out, rstd = kernels.rms_norm_forward(hidden, weight, eps, out_dtype)
        ctx.save_for_backward(hidden, weight, rstd)
        ctx.kernels = kernels
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        hidden, weight, rstd = ctx.saved_tensors
        grad_hidden, grad_weight = ctx.kernels.rms_norm_backward(grad_out.contiguous(), hidden, weight, rstd)
        return grad_hidden, grad_weight if ctx.needs_input_grad[1] else None, None, None, None


class _SwiGLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, gate_up: torch.Tensor, kernels: ModuleType) -> torch.Tensor:
        gate_up = gate_up.contiguous()
        ctx.save_for_backward(gate_up)
        ctx.kernels = kernels
        return kernels.swiglu_forward(gate_up)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        (gate_up,) = ctx.saved_tensors
        return ctx.kernels.swiglu_backward(grad_out.contiguous(), gate_up), None


class _RoPE(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, queries_keys: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, out_dtype: torch.dtype,
                kernels: ModuleType) -> torch.Tensor:
        cos, sin = cos.contiguous(), sin.contiguous()
        ctx.save_for_backward(cos, sin)
        ctx.kernels, ctx.dtype = kernels, queries_keys.dtype
        return kernels.rope_forward(queries_keys, cos, sin, out_dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        cos, sin = ctx.saved_tensors
        return ctx.kernels.rope_backward(grad_out.contiguous(), cos, sin, ctx.dtype), None, None, None, None
