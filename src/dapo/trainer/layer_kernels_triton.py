"""Fused GPU kernels (Triton) for dapo-rl's training forward (:mod:`dapo.trainer.native_forward`):
RMSNorm, SwiGLU and RoPE, each one kernel forward and one backward
(:mod:`dapo.trainer.fused_gpu_ops` wraps them as autograd ops).

Why: on an H200 the 0.5B update's time beside the matmuls went to elementwise chains, each op a
pass over memory (RMSNorm: upcast, pow, mean, rsqrt, two products, downcast; SwiGLU: silu and a
product, and their backward ops; RoPE: two products, a roll and a sum): ``mul`` alone took 111 ms in
3,822 calls of an 881 ms update (docs/benchmarks.md, "On a GPU").

With them the update of a 0.5B model (bench_update, 56k tokens, bf16 weights) took 0.53-0.58 s
against 0.72-0.73 s on torch's ops (1.26-1.31x; MFU 25% -> 33%), the fused log-prob kernels on in both.

The formulas are Hugging Face's eager ones, in float32 arithmetic, with its roundings to the
tensors' dtype where eager rounds (bf16: each product of SwiGLU and RoPE, RMSNorm's normalised
value before the weight's product). On the H200, bf16 RoPE outputs equal eager's bit for bit
(the accelerator test asserts it), as did all 20M of SwiGLU's in one check at 4096 x 4864 (its
sigmoid's exp is not torch's: the test allows two spacings), and 4e-6 of RMSNorm's were a spacing
away (r summed in another order, with Triton's square root and division); float32 outputs agree
to a few float32 spacings. Backward, in float32 from the upstream gradient, rounded once to the
input's dtype:

    RMSNorm   y = w * (x * r),  r = (mean(x^2) + eps)^-1/2
              dx = r * (g w - x r^2 mean(g w x)),   dw = sum over rows of g * x * r
    SwiGLU    y = silu(a) * b,  silu(a) = a sigma(a)
              da = g b sigma(a) (1 + a (1 - sigma(a))),   db = g silu(a)
    RoPE      y_i = x_i c_i + x_(i+d/2 mod d) s_i   (s: the sign-folded sine of native_forward)
              dx_i = g_i c_i + g_(i+d/2 mod d) s_(i+d/2 mod d)

Each output is written by one program in one fixed order (RMSNorm's weight gradient: fixed
blocks of rows, then one sum), so results are deterministic (bit-identical resume).
"""

# (no `from __future__ import annotations`: Triton reads the kernels' tl.constexpr annotations)
import torch
import triton
import triton.language as tl
from torch import Tensor

from dapo.algo.logprobs_triton import launching_on

SWIGLU_BLOCK = 1024  # columns of the intermediate per program
NORM_GRAD_PROGRAMS = 512  # blocks of rows whose weight-gradient partial sums are added at the end


@triton.jit
def _rms_norm_forward_kernel(x_ptr, w_ptr, out_ptr, rstd_ptr, width, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    columns = tl.arange(0, BLOCK)
    inside = columns < width
    x_raw = tl.load(x_ptr + row * width + columns, mask=inside, other=0.0)
    x = x_raw.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / width + eps)
    normed = (x * rstd).to(x_raw.dtype).to(tl.float32)  # eager rounds it to the input's dtype
    w = tl.load(w_ptr + columns, mask=inside, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * width + columns, (w * normed).to(out_ptr.dtype.element_ty), mask=inside)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def _rms_norm_backward_kernel(grad_ptr, x_ptr, w_ptr, rstd_ptr, grad_x_ptr, partial_w_ptr, rows, width,
                              rows_per_program, BLOCK: tl.constexpr):
    program = tl.program_id(0).to(tl.int64)
    columns = tl.arange(0, BLOCK)
    inside = columns < width
    w = tl.load(w_ptr + columns, mask=inside, other=0.0).to(tl.float32)
    grad_w = tl.zeros([BLOCK], tl.float32)
    first = program * rows_per_program
    for offset in range(0, rows_per_program):
        row = first + offset
        if row < rows:
            x = tl.load(x_ptr + row * width + columns, mask=inside, other=0.0).to(tl.float32)
            g = tl.load(grad_ptr + row * width + columns, mask=inside, other=0.0).to(tl.float32)
            rstd = tl.load(rstd_ptr + row)
            gw = g * w
            mean_gwx = tl.sum(gw * x, axis=0) / width
            grad_x = rstd * (gw - x * (rstd * rstd * mean_gwx))
            tl.store(grad_x_ptr + row * width + columns, grad_x.to(grad_x_ptr.dtype.element_ty), mask=inside)
            grad_w += g * x * rstd
    tl.store(partial_w_ptr + program * width + columns, grad_w, mask=inside)


@triton.jit
def _swiglu_forward_kernel(gate_up_ptr, out_ptr, width, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    columns = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = columns < width
    gate_raw = tl.load(gate_up_ptr + row * 2 * width + columns, mask=inside, other=0.0)
    gate = gate_raw.to(tl.float32)
    up = tl.load(gate_up_ptr + row * 2 * width + width + columns, mask=inside, other=0.0).to(tl.float32)
    silu = (gate * tl.sigmoid(gate)).to(gate_raw.dtype).to(tl.float32)  # eager's act_fn(gate), rounded
    tl.store(out_ptr + row * width + columns, (silu * up).to(out_ptr.dtype.element_ty), mask=inside)


@triton.jit
def _swiglu_backward_kernel(grad_ptr, gate_up_ptr, grad_gate_up_ptr, width, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    columns = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = columns < width
    gate_raw = tl.load(gate_up_ptr + row * 2 * width + columns, mask=inside, other=0.0)
    gate = gate_raw.to(tl.float32)
    up = tl.load(gate_up_ptr + row * 2 * width + width + columns, mask=inside, other=0.0).to(tl.float32)
    g = tl.load(grad_ptr + row * width + columns, mask=inside, other=0.0).to(tl.float32)
    sigmoid = tl.sigmoid(gate)
    silu = (gate * sigmoid).to(gate_raw.dtype).to(tl.float32)
    grad_gate = g * up * sigmoid * (1.0 + gate * (1.0 - sigmoid))
    out_type = grad_gate_up_ptr.dtype.element_ty
    tl.store(grad_gate_up_ptr + row * 2 * width + columns, grad_gate.to(out_type), mask=inside)
    tl.store(grad_gate_up_ptr + row * 2 * width + width + columns, (g * silu).to(out_type), mask=inside)


@triton.jit
def _rope_forward_kernel(x_ptr, row_stride, cos_ptr, sin_ptr, out_ptr, heads, head_dim,
                         BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    head = tl.arange(0, BLOCK_H)[:, None]
    dim = tl.arange(0, BLOCK_D)[None, :]
    inside = (head < heads) & (dim < head_dim)
    partner = (dim + head_dim // 2) % head_dim  # roll(x, d/2)[i] = x[(i + d/2) mod d]
    x = tl.load(x_ptr + row * row_stride + head * head_dim + dim, mask=inside, other=0.0).to(tl.float32)
    rolled = tl.load(x_ptr + row * row_stride + head * head_dim + partner, mask=inside, other=0.0).to(tl.float32)
    cos = tl.load(cos_ptr + row * head_dim + dim, mask=dim < head_dim, other=0.0).to(tl.float32)
    sin = tl.load(sin_ptr + row * head_dim + dim, mask=dim < head_dim, other=0.0).to(tl.float32)
    out_type = out_ptr.dtype.element_ty
    # eager rounds each product, then their sum, to the output's dtype
    out = (x * cos).to(out_type).to(tl.float32) + (rolled * sin).to(out_type).to(tl.float32)
    tl.store(out_ptr + row * heads * head_dim + head * head_dim + dim, out.to(out_type), mask=inside)


@triton.jit
def _rope_backward_kernel(grad_ptr, cos_ptr, sin_ptr, grad_x_ptr, heads, head_dim,
                          BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    head = tl.arange(0, BLOCK_H)[:, None]
    dim = tl.arange(0, BLOCK_D)[None, :]
    inside = (head < heads) & (dim < head_dim)
    partner = (dim + head_dim // 2) % head_dim
    base = row * heads * head_dim + head * head_dim
    g = tl.load(grad_ptr + base + dim, mask=inside, other=0.0).to(tl.float32)
    g_partner = tl.load(grad_ptr + base + partner, mask=inside, other=0.0).to(tl.float32)
    cos = tl.load(cos_ptr + row * head_dim + dim, mask=dim < head_dim, other=0.0).to(tl.float32)
    sin_partner = tl.load(sin_ptr + row * head_dim + partner, mask=dim < head_dim, other=0.0).to(tl.float32)
    grad_x = g * cos + g_partner * sin_partner
    tl.store(grad_x_ptr + base + dim, grad_x.to(grad_x_ptr.dtype.element_ty), mask=inside)


def rms_norm_forward(hidden: Tensor, weight: Tensor, eps: float, out_dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """RMSNorm of contiguous (N, n) ``hidden`` in ``out_dtype``, and each row's r (float32, N)."""
    rows, width = hidden.shape
    out = torch.empty(rows, width, dtype=out_dtype, device=hidden.device)
    rstd = torch.empty(rows, dtype=torch.float32, device=hidden.device)
    if rows:
        with launching_on(hidden.device):
            _rms_norm_forward_kernel[(rows,)](hidden, weight, out, rstd, width, eps,
                                              BLOCK=triton.next_power_of_2(width))
    return out, rstd


def rms_norm_backward(grad_out: Tensor, hidden: Tensor, weight: Tensor, rstd: Tensor) -> tuple[Tensor, Tensor]:
    """Gradients of ``hidden`` (its dtype) and ``weight`` (its dtype) from contiguous ``grad_out``."""
    rows, width = hidden.shape
    grad_hidden = torch.empty_like(hidden)
    programs = max(1, min(rows, NORM_GRAD_PROGRAMS))
    partial = torch.empty(programs, width, dtype=torch.float32, device=hidden.device)
    if rows:
        with launching_on(hidden.device):
            _rms_norm_backward_kernel[(programs,)](grad_out, hidden, weight, rstd, grad_hidden, partial, rows, width,
                                                   triton.cdiv(rows, programs), BLOCK=triton.next_power_of_2(width))
    else:
        partial.zero_()
    return grad_hidden, partial.sum(0).to(weight.dtype)


def swiglu_forward(gate_up: Tensor) -> Tensor:
    """silu(gate) * up of contiguous (N, 2I) ``gate_up`` (gate the first half), (N, I) in its dtype."""
    rows, width = gate_up.shape[0], gate_up.shape[1] // 2
    out = gate_up.new_empty(rows, width)
    if rows:
        with launching_on(gate_up.device):
            _swiglu_forward_kernel[(rows, triton.cdiv(width, SWIGLU_BLOCK))](gate_up, out, width, BLOCK=SWIGLU_BLOCK)
    return out


def swiglu_backward(grad_out: Tensor, gate_up: Tensor) -> Tensor:
    """The gradient of ``gate_up`` (N, 2I) from contiguous ``grad_out`` (N, I)."""
    rows, width = gate_up.shape[0], gate_up.shape[1] // 2
    grad_gate_up = torch.empty_like(gate_up)
    if rows:
        with launching_on(gate_up.device):
            _swiglu_backward_kernel[(rows, triton.cdiv(width, SWIGLU_BLOCK))](grad_out, gate_up, grad_gate_up, width,
                                                                              BLOCK=SWIGLU_BLOCK)
    return grad_gate_up


def rope_forward(queries_keys: Tensor, cos: Tensor, sin: Tensor, out_dtype: torch.dtype) -> Tensor:
    """Rotated (N, heads, d) ``queries_keys`` (rows at any stride, each row's heads contiguous)
    with contiguous (N, d) tables, as a contiguous (N, heads, d) tensor in ``out_dtype``."""
    rows, heads, head_dim = queries_keys.shape
    out = torch.empty(rows, heads, head_dim, dtype=out_dtype, device=queries_keys.device)
    if rows:
        with launching_on(queries_keys.device):
            # without fused multiply-adds: Triton fused a product into the sum past its rounding to
            # bf16, and 24% of the values differed from eager's by a spacing (H200)
            _rope_forward_kernel[(rows,)](queries_keys, queries_keys.stride(0), cos, sin, out, heads, head_dim,
                                          BLOCK_H=triton.next_power_of_2(heads),
                                          BLOCK_D=triton.next_power_of_2(head_dim), enable_fp_fusion=False)
    return out


def rope_backward(grad_out: Tensor, cos: Tensor, sin: Tensor, dtype: torch.dtype) -> Tensor:
    """The gradient of the rotated tensor's input (contiguous, ``dtype``) from contiguous ``grad_out``."""
    rows, heads, head_dim = grad_out.shape
    grad = torch.empty(rows, heads, head_dim, dtype=dtype, device=grad_out.device)
    if rows:
        with launching_on(grad_out.device):
            _rope_backward_kernel[(rows,)](grad_out, cos, sin, grad, heads, head_dim,
                                           BLOCK_H=triton.next_power_of_2(heads),
                                           BLOCK_D=triton.next_power_of_2(head_dim))
    return grad
