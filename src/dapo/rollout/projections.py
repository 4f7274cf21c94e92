"""Linear layers as the native decoder runs them: pre-packed weights, post-ops fused into the matmul.

On CPU a weight is reordered once (per weight change) into the layout its matmul library wants (MKL
for float32, oneDNN for bfloat16) instead of at every call, and oneDNN applies an activation, a
product or a residual add to the float32 accumulator of the same call (one op instead of two or
three over the output). Elsewhere (GPU, float16) plain F.linear.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


def fused(linears: list[nn.Linear]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Concatenate Linear layers along their outputs: one matmul computes all of them."""
    weight = torch.cat([lin.weight for lin in linears], dim=0)
    biases = biases_or_zeros(linears)
    return weight, None if biases is None else torch.cat(biases)


def biases_or_zeros(linears: list[nn.Linear] | tuple[nn.Linear, ...]) -> list[torch.Tensor] | None:
    """Each layer's bias, zeros for a layer without one (to be fused with others'); None if none has one."""
    if all(lin.bias is None for lin in linears):
        return None
    return [lin.bias if lin.bias is not None else lin.weight.new_zeros(lin.out_features) for lin in linears]


# Entries of the full-precision product that scaled_to computes at a time (4 MB in float32).
_SCALE_CHUNK_ENTRIES = 2**20


def scaled_to(weight: torch.Tensor, scale: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor:
    """``weight * scale`` (a folded RMSNorm weight over its input columns; None: no scale) in
    ``dtype``: the product in their promoted precision, rounded once, as ``(weight * scale).to(dtype)``.
    On CPU a few rows at a time through one small buffer: the whole product would be a fresh temporary
    as large as the weight (545 MB in float32 for a 152k-vocabulary output layer) that glibc maps
    from the OS at every preparation, its page faults costing more than the arithmetic (that output
    layer, a micro-benchmark on this project's CPU machine: 104 ms instead of 298 ms)."""
    if scale is None:
        return weight.to(dtype)
    if weight.device.type != "cpu":  # a caching allocator: no page faults, and fewer kernel launches
        return (weight * scale).to(dtype)
    out = weight.new_empty(weight.shape, dtype=dtype)
    rows = max(1, _SCALE_CHUNK_ENTRIES // max(1, weight.shape[1]))
    product_dtype = torch.promote_types(weight.dtype, scale.dtype)
    buffer = weight.new_empty(min(rows, weight.shape[0]), weight.shape[1], dtype=product_dtype)
    with torch.no_grad():  # (out= takes no autograd; the decoder's weights are constants)
        for start in range(0, weight.shape[0], rows):
            chunk = weight[start : start + rows]
            out[start : start + rows].copy_(torch.mul(chunk, scale, out=buffer[: len(chunk)]))
    return out


_HAS_MKL_LINEAR = torch.backends.mkl.is_available() and hasattr(torch.ops.mkl, "_mkl_linear")
_HAS_MKLDNN_BF16_LINEAR = (
    torch.backends.mkldnn.is_available()
    and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    and torch.ops.mkldnn._is_mkldnn_bf16_supported()
)
# the residual add as a post-op of that call (a private overload: checked, not assumed)
_HAS_MKLDNN_BINARY_POST_OP = _HAS_MKLDNN_BF16_LINEAR and "binary" in torch.ops.mkldnn._linear_pointwise.overloads()


def runs_on_onednn(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether a Projection of weights on ``device`` in ``dtype`` is oneDNN-packed."""
    return device.type == "cpu" and dtype == torch.bfloat16 and _HAS_MKLDNN_BF16_LINEAR


class Projection:
    """y = x W^T + b, and residual + x W^T + b (:meth:`add_to`).

    Folded RMSNorms are applied to the input: RMSNorm(x) W'^T = (x / rms(x)) W'^T with the
    norm's weight folded into W', so the norm costs one reduction and one division. On
    CPU the weight is pre-packed once per weight change (MKL for float32, oneDNN for bfloat16), which
    saves re-packing it at every call: bit-identical results, 1.3-1.5x faster small-batch matmuls."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, rows_hint: int) -> None:
        self.weight, self.bias, self.rows_hint = weight, bias, rows_hint
        self.packed, self.kind = None, "plain"
        on_cpu = weight.device.type == "cpu"
        if on_cpu and weight.dtype == torch.float32 and _HAS_MKL_LINEAR:
            self.packed = torch.ops.mkl._mkl_reorder_linear_weight(weight, rows_hint)
            self.kind = "mkl"
        elif runs_on_onednn(weight.device, weight.dtype):
            self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, rows_hint)
            self.kind = "onednn"

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "onednn":
            return torch.ops.mkldnn._linear_pointwise(x.contiguous(), self.packed, self.bias, "none", [], "")
        if self.kind == "mkl":
            return torch.ops.mkl._mkl_linear(x, self.packed, self.weight, self.bias, self.rows_hint)
        return F.linear(x, self.weight, self.bias)

    def add_to(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """residual + x W^T + b: the residual stream's update, in one oneDNN call (a binary post-op,
        added to the float32 accumulator before rounding) where the weight is oneDNN-packed
        (saves an op per call: 3% faster decoding at 128 rows)."""
        if self.kind == "onednn" and _HAS_MKLDNN_BINARY_POST_OP:
            return torch.ops.mkldnn._linear_pointwise.binary(x.contiguous(), residual, self.packed, self.bias, "add")
        return residual.add_(self(x))

    def silu(self, x: torch.Tensor) -> torch.Tensor:
        """SiLU(x W^T + b), the activation a post-op of the oneDNN call (onednn kind only)."""
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), self.packed, self.bias, "swish", [], "")

    def times(self, x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        """(x W^T + b) * other, the product a binary post-op of the oneDNN call (onednn kind only)."""
        return torch.ops.mkldnn._linear_pointwise.binary(x.contiguous(), other, self.packed, self.bias, "mul")


class GatedUp:
    """SiLU(x W_gate^T) * (x W_up^T), the MLP's hidden activation.

    Where oneDNN runs the weights (bf16 on CPU), two matmuls with SiLU and the product as their
    post-ops (applied to the float32 accumulator, rounded once): no chunk, SiLU or multiply op
    over the (B, intermediate) activation, which took a fifth as long as the fused matmul at 128
    decode rows (profile). Elsewhere one fused gate/up matmul, then SiLU and the product."""

    def __init__(
        self,
        gate: nn.Linear,
        up: nn.Linear,
        scale: torch.Tensor | None,
        dtype: torch.dtype,
        make: Callable[[torch.Tensor, torch.Tensor | None], Projection],
    ) -> None:
        """``scale``: a folded RMSNorm weight multiplied into both weights' input columns;
        ``make(weight, bias)`` builds a projection in ``dtype``, the session's."""

        def scaled(weight: torch.Tensor) -> torch.Tensor:
            return scaled_to(weight, scale, dtype)

        self.split = _HAS_MKLDNN_BINARY_POST_OP and runs_on_onednn(gate.weight.device, dtype)
        if self.split:
            self.gate = make(scaled(gate.weight), gate.bias)
            self.up = make(scaled(up.weight), up.bias)
        else:
            weight, bias = fused([gate, up])
            self.gate = make(scaled(weight), bias)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.split:
            return self.up.times(x, self.gate.silu(x))
        gate, up = self.gate(x).chunk(2, dim=-1)
        return F.silu(gate).mul_(up)
