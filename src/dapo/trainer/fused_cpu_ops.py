"""Fused CPU kernels for dapo-rl's training forward (:mod:`dapo.trainer.native_forward`): RMSNorm,
SwiGLU and RoPE, each one autograd op whose forward and backward are one C pass each
(``dapo/rollout/kernels/train_fused.c``, built with the decode kernels by
:mod:`dapo.rollout.cpu_kernels`: x86-64 Linux with AVX-512 F, BW and VL, with or without
AVX512-BF16, and a C compiler), and attention on
the packed tokens (:mod:`dapo.trainer.fused_cpu_attention`).

Why: with the matmuls near this CPU's peak, much of the rest of the built-in model's bf16 update
went to elementwise chains, each op a pass over memory (RMSNorm: pow, mean, rsqrt, two products and
autocast's cast; SwiGLU: silu, a product, then their backward ops and the cat of the two halves'
gradients). The formulas (the C source has them) and their precision are torch's: float32
arithmetic, bf16 read exactly and rounded to nearest even where torch's bf16 tensors round;
sums run in another order, so results agree with torch's ops to float32 rounding, and a bf16
value can land one rounding away (tests/trainer/test_trainer_fused_cpu_ops.py checks both against
float64). The RoPE backward rounds its two terms' sum once, where torch rounds each term to bf16 first.

Where the kernels do not apply (another CPU or dtype, a norm or activation whose forward was
replaced or hooked), :func:`fused_cpu_ops` returns None or the op calls the module, as before.
``trainer.native_cpu_kernels=false`` opts out.
"""

from __future__ import annotations

import ctypes
import functools
import math
import warnings
from typing import Any

import torch
from torch import nn
from torch.autograd.function import once_differentiable
from transformers.activations import SiLUActivation
from transformers.models.llama.modeling_llama import LlamaRMSNorm
from transformers.models.mistral.modeling_mistral import MistralRMSNorm
from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm

from dapo.rollout.cpu_kernels import cpu_kernel_library
from dapo.rollout.llama_support import skipped_hooks
from dapo.trainer.fused_cpu_attention import (
    AttentionSegments,
    attention_reference,
    attention_segments,
    fused_attention,
)

# the norms whose formula the kernel computes, with the forward it stands in for (a forward
# replaced since, as a test's float64 norm, is called instead)
NORM_FORWARDS = {cls: cls.forward for cls in (LlamaRMSNorm, Qwen2RMSNorm, MistralRMSNorm)}
SILU_FORWARDS = {cls: cls.forward for cls in (nn.SiLU, SiLUActivation)}
_FLOAT = (torch.float32, torch.bfloat16)


class FusedCpuOps:
    """The training kernels, bound from the loaded CPU kernel library."""

    attends_packed = True  # attention on the packed tokens (fused_cpu_attention), not the grids

    def __init__(self, library: ctypes.CDLL) -> None:
        pointer, size, flag, real = ctypes.c_void_p, ctypes.c_long, ctypes.c_int, ctypes.c_float
        signatures = {
            "dapo_rms_norm_forward": [pointer, pointer, size, size, real, pointer, flag, pointer, flag],
            "dapo_rms_norm_backward": [pointer, flag, pointer, pointer, pointer, size, size, pointer, pointer, pointer, flag],
            "dapo_swiglu_forward": [pointer, size, size, flag, pointer, flag],
            "dapo_swiglu_backward": [pointer, pointer, size, size, flag, pointer, flag],
            "dapo_rope_forward": [pointer, size, flag, size, size, size, pointer, pointer, pointer, flag],
            "dapo_rope_backward": [pointer, size, size, size, pointer, pointer, pointer, flag, flag],
            "dapo_packed_attention_forward": [pointer, size, pointer, size, flag, pointer, pointer, size, pointer,
                                              pointer, pointer, size, size, size, size, real, size, size, pointer,
                                              pointer, pointer, flag],
            "dapo_packed_attention_backward": [pointer, pointer, size, pointer, size, flag, pointer, pointer, pointer,
                                               size, pointer, pointer, pointer, pointer, pointer, size, size, size, real,
                                               size, size, pointer, pointer, pointer, flag],
            "dapo_packed_attention_scratch": [size, size, size, size, flag],
        }
        self.functions: dict[str, Any] = {}
        for name, arguments in signatures.items():
            function = getattr(library, name)
            function.argtypes, function.restype = arguments, size if name.endswith("_scratch") else None
            self.functions[name.removeprefix("dapo_")] = function

    def rms_norm(self, norm: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
        """``norm(hidden)`` for float32 (N, n) ``hidden``, in bf16 under bf16 autocast (the dtype the
        next matmul casts it to) or float32; the module itself where the kernel does not compute it."""
        if (NORM_FORWARDS.get(type(norm)) is not type(norm).forward or skipped_hooks(norm) or hidden.dim() != 2
                or hidden.dtype != torch.float32 or norm.weight.dtype != torch.float32):
            return norm(hidden)
        bf16 = torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
        return _RMSNorm.apply(hidden, norm.weight, norm.variance_epsilon, bf16, self)

    def swiglu(self, act_fn: nn.Module, gate_up: torch.Tensor) -> torch.Tensor:
        """``act_fn(gate) * up`` for (N, 2I) ``gate_up`` (gate the first half), the kernel's for SiLU."""
        if SILU_FORWARDS.get(type(act_fn)) is not type(act_fn).forward or skipped_hooks(act_fn) or gate_up.dtype not in _FLOAT:
            gate, up = gate_up.chunk(2, dim=-1)
            return act_fn(gate) * up
        return _SwiGLU.apply(gate_up, self)

    def rope(self, queries_keys: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor | None:
        """``x * cos + x.roll(d/2, dims=-1) * sin`` in float32 for (N, heads, d) ``queries_keys``
        (rows contiguous within), (N, 1, d) float32 tables; None where the kernel does not apply."""
        rows, heads, head_dim = queries_keys.shape
        if (head_dim % 32 or queries_keys.dtype not in _FLOAT or queries_keys.stride()[1:] != (head_dim, 1)
                or cos.dtype != torch.float32 or sin.dtype != torch.float32 or cos.requires_grad or sin.requires_grad):
            return None
        return _RoPE.apply(queries_keys, cos.reshape(rows, head_dim), sin.reshape(rows, head_dim), self)

    def attention(self, queries_keys: torch.Tensor, values: torch.Tensor, segments: AttentionSegments,
                  heads: tuple[int, int, int, float]) -> torch.Tensor | None:
        """Attention on the packed tokens of ``segments`` (:func:`dapo.trainer.fused_cpu_attention.fused_attention`)."""
        return fused_attention(self, queries_keys, values, segments, heads)


def fused_cpu_ops(hidden: torch.Tensor) -> FusedCpuOps | None:
    """The kernels, for a forward whose residual stream is ``hidden``: float32 on the CPU (float32
    weights, with or without bf16 autocast), where the CPU kernels load and pass :func:`self_test`;
    else None."""
    if hidden.device.type != "cpu" or hidden.dtype != torch.float32:
        return None
    library = cpu_kernel_library()  # warns once, on a CPU they are for, where it does not load
    return None if library is None else _tested(library)


def _tested(library: ctypes.CDLL) -> FusedCpuOps | None:
    global _failed_warned
    ops, error = _bound(library)
    if error is None:
        return ops
    if not _failed_warned:
        _failed_warned = True  # first: a warning filter that raises must not make every later forward raise
        warnings.warn(f"the fused CPU training kernels are not used: they failed their self-test ({error}); torch's "
                      "ops compute the forward instead (trainer.native_cpu_kernels=false silences this)", stacklevel=3)
    return None


_failed_warned = False


@functools.cache
def _bound(library: ctypes.CDLL) -> tuple[FusedCpuOps, str | None]:
    ops = FusedCpuOps(library)
    # first called inside a forward: under autocast, no_grad or inference_mode, none of which the test is for
    with torch.autocast("cpu", enabled=False), torch.inference_mode(False), torch.enable_grad():
        try:
            return ops, self_test(ops)
        except Exception as error:  # noqa: BLE001 - a test that cannot run (a default device set elsewhere): off
            return ops, f"it raised {error!r}"


def self_test(ops: FusedCpuOps) -> str | None:
    """None if each kernel's forward and backward match float64 on a small random case (a width
    that is not a multiple of 16, two RoPE chunks per half-head, attention with an empty response
    and two query heads per KV head), in float32 and in bf16 (to a few bf16 roundings); else what differed."""
    errors = {}
    for dtype, tolerance in ((torch.float32, 1e-4), (torch.bfloat16, 0.05)):
        generator = torch.Generator().manual_seed(0)
        hidden = torch.randn(5, 40, generator=generator, requires_grad=True)
        norm = Qwen2RMSNorm(40, eps=1e-6)
        with torch.no_grad():
            norm.weight.uniform_(0.5, 1.5, generator=generator)
        gate_up = torch.randn(5, 2 * 24, generator=generator).to(dtype).requires_grad_()
        queries_keys = torch.randn(5, 3, 64, generator=generator).to(dtype).requires_grad_()
        cos, sin = torch.randn(2, 5, 1, 64, generator=generator)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            normed = ops.rms_norm(norm, hidden)
        # attention: prompts of 3 and 1 tokens; responses of 4, 0 and 2 after prompts 0, 1, 0; 2 query heads, 1 KV head
        segments = attention_segments(torch.arange(3) >= torch.tensor([[0], [2]]),
                                      torch.arange(4) < torch.tensor([[4], [0], [2]]), torch.tensor([0, 1, 0]))
        attention_qk = torch.randn(10, 3, 32, generator=generator, requires_grad=True)
        values = torch.randn(10, 32, generator=generator).to(dtype).requires_grad_()
        heads = (2, 1, 32, 32 ** -0.5)
        fused = [normed, ops.swiglu(nn.SiLU(), gate_up), ops.rope(queries_keys, cos, sin),
                 ops.attention(attention_qk, values, segments, heads)]
        x = queries_keys.double()
        exact = [_rms_norm_reference(hidden.double(), norm.weight.double(), norm.variance_epsilon),
                 nn.functional.silu(gate_up[:, :24].double()) * gate_up[:, 24:].double(),
                 x * cos.double() + x.roll(32, dims=-1) * sin.double(),
                 attention_reference(attention_qk.double(), values.double(), segments, heads)]
        inputs_of = {"rms_norm": [hidden, norm.weight], "swiglu": [gate_up], "rope": [queries_keys],
                     "attention": [attention_qk, values]}
        for (name, inputs), out, reference in zip(inputs_of.items(), fused, exact):
            if out is None:
                errors[f"{name} ({dtype})"] = math.inf  # it declined a case it is for
                continue
            grad = torch.randn(out.shape, generator=generator).to(out.dtype)
            got = torch.autograd.grad(out, inputs, grad)
            expected = torch.autograd.grad(reference, inputs, grad.double())
            error = max((out.double() - reference).abs().max().item(),
                        *((a.double() - b).abs().max().item() for a, b in zip(got, expected)))
            if not error < tolerance:
                errors[f"{name} ({dtype})"] = error
    return ", ".join(f"{name}: max error {error:.3g} against float64" for name, error in errors.items()) or None


def _rms_norm_reference(hidden: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return weight * hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + eps)


def _threads() -> int:
    return torch.get_num_threads()


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, eps: float, bf16: bool,
                ops: FusedCpuOps) -> torch.Tensor:
        hidden, weight = hidden.contiguous(), weight.contiguous()
        rows, width = hidden.shape
        out = torch.empty(rows, width, dtype=torch.bfloat16 if bf16 else torch.float32, device="cpu")
        rstd = torch.empty(rows, dtype=torch.float32, device="cpu")
        ops.functions["rms_norm_forward"](hidden.data_ptr(), weight.data_ptr(), rows, width, eps, out.data_ptr(),
                                          bf16, rstd.data_ptr(), _threads())
        ctx.save_for_backward(hidden, weight, rstd)
        ctx.ops = ops
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        hidden, weight, rstd = ctx.saved_tensors
        grad_out = grad_out.contiguous()
        rows, width = hidden.shape
        grad_hidden, grad_weight = torch.empty_like(hidden), torch.empty_like(weight)
        threads = _threads()
        scratch = torch.empty(threads, width, dtype=torch.float32, device="cpu")  # each thread's share of grad_weight
        ctx.ops.functions["rms_norm_backward"](
            grad_out.data_ptr(), grad_out.dtype == torch.bfloat16, hidden.data_ptr(), weight.data_ptr(),
            rstd.data_ptr(), rows, width, grad_hidden.data_ptr(), grad_weight.data_ptr(), scratch.data_ptr(), threads)
        return grad_hidden, grad_weight if ctx.needs_input_grad[1] else None, None, None, None


class _SwiGLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, gate_up: torch.Tensor, ops: FusedCpuOps) -> torch.Tensor:
        gate_up = gate_up.contiguous()
        width = gate_up.shape[-1] // 2
        rows = gate_up.numel() // (2 * width)
        out = gate_up.new_empty(*gate_up.shape[:-1], width)
        ops.functions["swiglu_forward"](gate_up.data_ptr(), rows, width, gate_up.dtype == torch.bfloat16,
                                        out.data_ptr(), _threads())
        ctx.save_for_backward(gate_up)
        ctx.ops = ops
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        (gate_up,) = ctx.saved_tensors
        grad_out = grad_out.to(gate_up.dtype).contiguous()
        width = gate_up.shape[-1] // 2
        grad_gate_up = torch.empty_like(gate_up)
        ctx.ops.functions["swiglu_backward"](grad_out.data_ptr(), gate_up.data_ptr(), gate_up.numel() // (2 * width),
                                             width, gate_up.dtype == torch.bfloat16, grad_gate_up.data_ptr(), _threads())
        return grad_gate_up, None


class _RoPE(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, queries_keys: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                ops: FusedCpuOps) -> torch.Tensor:
        rows, heads, head_dim = queries_keys.shape
        cos, sin = cos.contiguous(), sin.contiguous()
        out = torch.empty(rows, heads, head_dim, dtype=torch.float32, device="cpu")
        ops.functions["rope_forward"](queries_keys.data_ptr(), queries_keys.stride(0),
                                      queries_keys.dtype == torch.bfloat16, rows, heads, head_dim, cos.data_ptr(),
                                      sin.data_ptr(), out.data_ptr(), _threads())
        ctx.save_for_backward(cos, sin)
        ctx.ops, ctx.dtype = ops, queries_keys.dtype
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        cos, sin = ctx.saved_tensors
        grad_out = grad_out.to(torch.float32).contiguous()
        rows, heads, head_dim = grad_out.shape
        grad = torch.empty(rows, heads, head_dim, dtype=ctx.dtype, device="cpu")
        ctx.ops.functions["rope_backward"](grad_out.data_ptr(), rows, heads, head_dim, cos.data_ptr(), sin.data_ptr(),
                                           grad.data_ptr(), ctx.dtype == torch.bfloat16, _threads())
        return grad, None, None, None
