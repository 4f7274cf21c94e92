"""Bytes a decoder layer keeps for its backward pass, per token: measured, not assumed.

A rule of thumb (Korthikanti et al. 2022: 34 x H bytes per token per layer in 16 bits) assumes
a 4H GELU MLP and 16-bit norms. A Qwen2.5-32B layer keeps about 67 x H in bf16: its SwiGLU MLP is
5.4H wide and saves four such tensors, and RMSNorm saves its input in float32. So the layer is
run instead, on fake tensors (``FakeTensorMode``: shapes and dtypes, no storage, no arithmetic;
a 32B model's two layers cost a fraction of a second), at three lengths t, and every tensor
autograd saves is counted once (by storage). The bytes of a layer fit

    bytes(t) = c + a t + q t^2

where ``a`` is what :class:`ActivationBytes` reports per token; ``c`` is weights the layer saves
that are not the parameters themselves (autocast's bf16 copies); ``q`` (the eager mask or
attention scores) is left out: the training forward on a GPU uses flash/SDPA kernels whose
memory is linear in t. Layers run with the precision the trainer gives them: bf16 weights for
``trainer.param_dtype=bf16``, autocast on float32 weights for ``trainer.autocast``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch import nn

from dapo.trainer.fsdp import decoder_layers

LENGTHS = (16, 32, 64)  # three lengths determine c + a t + q t^2


@dataclass(frozen=True)
class ActivationBytes:
    """Per-token bytes of one training forward (T tokens in a micro-batch)."""

    layer: float  # one decoder layer saves T x layer for its backward (all of them without checkpointing)
    layer_input: float  # a layer's input hidden states: what gradient checkpointing keeps of each layer
    outside_layers: float  # the embeddings' output, the final norm and the output layer's input
    weight_copies: float  # bytes per layer (not per token) of cast weights saved for backward (autocast)


def measure(model: nn.Module, compute_dtype: torch.dtype, autocast_dtype: torch.dtype | None) -> ActivationBytes:
    """Measure ``model`` (a causal LM on the meta device, whose decoder layer list this cuts to
    two) computing in ``compute_dtype``, under autocast to ``autocast_dtype`` if given. Raises
    whatever the model's forward raises on fake tensors (data-dependent shapes, as MoE routing)."""
    _keep_two_layers(model)
    model.to(compute_dtype)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        fake = model.to_empty(device="cpu")
        fake.train()
        # flash kernels need a GPU and SDPA's memory is as linear in t; eager (for what SDPA does
        # not compute, as Gemma 2's soft-capping) adds t^2 scores, which the fit leaves out
        for kernel in ("sdpa", "eager"):
            fake.config._attn_implementation = kernel
            try:
                per_length = {t: _saved_bytes(fake, t, autocast_dtype) for t in LENGTHS}
                break
            except ValueError:
                if kernel == "eager":
                    raise
    layer_fit = _fit([per_length[t]["layer"] for t in LENGTHS])
    outside_fit = _fit([per_length[t]["outside"] for t in LENGTHS])
    return ActivationBytes(layer=layer_fit[1], layer_input=per_length[LENGTHS[0]]["input"] / LENGTHS[0],
                           outside_layers=outside_fit[1], weight_copies=max(0.0, layer_fit[0]))


def _keep_two_layers(model: nn.Module) -> None:
    first = decoder_layers(model)[:1]
    for module in model.modules():
        for name, child in module.named_children():
            if isinstance(child, nn.ModuleList) and len(child) and first and child[0] is first[0]:
                setattr(module, name, nn.ModuleList(list(child)[:2]))
                return
    raise ValueError(f"{type(model).__name__} has no list of decoder layers")


def _saved_bytes(model: nn.Module, tokens: int, autocast_dtype: torch.dtype | None) -> dict[str, float]:
    """Bytes autograd saves in the second decoder layer ("layer"; the first may compute what the
    model shares across layers) and outside the layers ("outside"), and the second layer's input,
    for a forward of ``tokens`` tokens through ``model`` (fake tensors, inside FakeTensorMode)."""
    layers = decoder_layers(model)
    where = ["outside"]
    counted: dict[int, tuple[str, int]] = {}
    layer_input = [0]

    def enter(module: nn.Module, args: tuple, kwargs: dict) -> None:
        where[0] = "layer" if module is layers[1] else "first"
        if module is layers[1]:
            hidden = args[0] if args else kwargs["hidden_states"]
            layer_input[0] = hidden.numel() * hidden.element_size()

    def leave(*_: object) -> None:
        where[0] = "outside"

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        counted.setdefault(id(storage), (where[0], storage.nbytes()))
        return tensor

    hooks = [h for layer in layers for h in (layer.register_forward_pre_hook(enter, with_kwargs=True),
                                              layer.register_forward_hook(leave))]
    autocast = (torch.autocast("cpu", dtype=autocast_dtype) if autocast_dtype is not None
                else contextlib.nullcontext())
    weights = {id(t.untyped_storage()) for t in [*model.parameters(), *model.buffers()]}
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), autocast:
            model(input_ids=torch.zeros(1, tokens, dtype=torch.long), use_cache=False)
    finally:
        for hook in hooks:
            hook.remove()
    totals = {"layer": 0.0, "outside": 0.0, "first": 0.0, "input": float(layer_input[0])}
    for storage_id, (place, nbytes) in counted.items():
        if storage_id not in weights:  # the parameters themselves are not activations
            totals[place] += nbytes
    return totals


def _fit(values: list[float]) -> tuple[float, float, float]:
    """(c, a, q) of c + a t + q t^2 through the points (LENGTHS, values), exactly."""
    (t0, t1, t2), (y0, y1, y2) = LENGTHS, values
    q = ((y2 - y0) / (t2 - t0) - (y1 - y0) / (t1 - t0)) / (t2 - t1)
    a = (y1 - y0) / (t1 - t0) - q * (t1 + t0)
    return y0 - a * t0 - q * t0 * t0, a, q
