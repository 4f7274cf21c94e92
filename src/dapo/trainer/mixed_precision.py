"""bf16 weights over float32 master weights (``trainer.param_dtype=bf16``) for one process.

FSDP's mixed precision, as verl runs it (``MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=fp32)``): the forward and backward run on a bfloat16 copy of the weights, so the
activations are bf16 (the residual stream too, where autocast keeps it in float32 and casts each
matmul's input again; what the model's code computes in float32, such as RMSNorm's statistics
and RoPE's tables, stays float32); the gradient of each micro-batch is added into a float32
gradient, and AdamW updates the float32 weights:

    w16 = bf16(w32);   g32 = sum over micro-batches of float32(dL_m / dw16);   w32 <- AdamW(w32, g32)

An update smaller than bf16's resolution at w (lr 1e-6 against a spacing of 2^-8 |w|) still moves
w32; bf16 weights alone would round it away. Under FSDP2 the sharded policy gets this from
``fully_shard(mp_policy=...)`` (:func:`dapo.trainer.fsdp.shard_policy`) instead of this class.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch
from torch import nn


class Bf16ComputeWeights:
    """Swaps a float32 model's parameters to bf16 copies for a pass, and folds their gradients
    into float32 ones. The parameters stay the same ``nn.Parameter`` objects (the optimizer's, the
    rollout engine's and the checkpoint's): only their ``.data`` is swapped, as FSDP1 did. Frozen
    parameters are swapped too (as FSDP's param_dtype casts them), so every matmul sees bf16."""

    def __init__(self, model: nn.Module) -> None:
        self.params = list(model.parameters())
        wrong = sorted({str(p.dtype) for p in self.params if p.dtype != torch.float32})
        if wrong:
            raise ValueError(
                f"trainer.param_dtype=bf16 keeps float32 master weights, but the policy's are {', '.join(wrong)}: "
                "load it with model.dtype=float32")
        self._master_grads: list[torch.Tensor | None] | None = None  # while computing()

    @contextlib.contextmanager
    def computing(self) -> Iterator[None]:
        """Inside: the parameters hold fresh bf16 copies of the float32 weights (backward must run
        inside too, and :meth:`fold_gradients` after each). After, whatever happened inside: the
        float32 weights again, with the float32 gradient folded so far as ``.grad`` (None where
        nothing was folded)."""
        if self._master_grads is not None:
            raise RuntimeError("Bf16ComputeWeights.computing() is already active: it does not nest")
        masters = [p.data for p in self.params]
        self._master_grads = [p.grad for p in self.params]  # zero_grad ran before: None, normally
        try:
            for p in self.params:
                p.grad = None  # a float32 gradient cannot sit on a bf16 parameter
            cast_parameters(self.params, torch.bfloat16)
            yield
        finally:
            for p, master, grad in zip(self.params, masters, self._master_grads, strict=True):
                p.grad = None
                p.data = master
                p.grad = grad
            self._master_grads = None

    def fold_gradients(self) -> None:
        """Add the bf16 gradients of the last backward into the float32 ones and clear them."""
        assert self._master_grads is not None, "fold_gradients() belongs inside computing()"
        for index, p in enumerate(self.params):
            if p.grad is None:
                continue
            master = self._master_grads[index]
            if master is None:
                self._master_grads[index] = p.grad.float()
            else:
                master.add_(p.grad)
            p.grad = None


def cast_parameters(params: Iterable[nn.Parameter], dtype: torch.dtype) -> None:
    """Put ``params`` (a model's ``parameters()``, not its buffers) in ``dtype``, as FSDP's
    param_dtype casts them: ``model.to(dtype)`` would also round float32 buffers such as RoPE's
    inverse frequencies. The same Parameter objects, with new ``.data``."""
    for p in params:
        p.data = p.data.to(dtype)
