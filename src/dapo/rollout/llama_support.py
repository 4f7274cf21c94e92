"""Which models a functional Llama-family forward can compute from their weights.

Both fast forwards, the native engine's decoder (:mod:`dapo.rollout.llama_decoder`) and the
trainer's (:mod:`dapo.trainer.native_forward`), read the weights instead of calling the modules.
So a model with anything they would skip (another architecture, an extra norm, a quantised or
adapter projection, a forward hook, a RoPE whose frequencies change with the length) is refused
here with the reason, and runs Hugging Face's forward instead.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.fsdp import FSDPModule

from dapo.lora import is_lora_layer
from dapo.rollout.hf_compat import rope_length_threshold

_SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "mistral")
# The submodules a functional forward reads (the decoder's, a layer's, its attention's, its MLP's):
# anything else would be skipped silently (a newer transformers' or a variant's extra norm, an
# adapter), so it is refused.
_DECODER_PARTS = {"embed_tokens", "layers", "norm", "rotary_emb"}
_LAYER_PARTS = {"self_attn", "mlp", "input_layernorm", "post_attention_layernorm"}
_ATTENTION_PARTS = {"q_proj", "k_proj", "v_proj", "o_proj"}
_MLP_PARTS = {"gate_proj", "up_proj", "down_proj", "act_fn"}


def _is_plain_linear(module: object, adapters: bool = False) -> bool:
    """An ``nn.Linear`` itself (not a quantised or adapter wrapper), or with ``adapters`` a LoRA
    layer over one, whose merged weights a forward may read (:func:`dapo.lora.is_lora_layer`)."""
    return type(module) is nn.Linear or (adapters and is_lora_layer(module))


def unsupported_reason(model: nn.Module, max_length: int) -> str | None:
    """Why ``model`` cannot use the fast path for sequences of ``max_length`` tokens (the
    longest the forward computes: a prompt and all but the last of its new tokens), or None."""
    if reason := architecture_reason(model, adapters=True):
        return reason
    config = model.config
    # the RoPE table comes from the model's own rotary module (scaled variants included, e.g.
    # Llama 3's), built once for all positions: for frequencies that follow the longest position
    # (longrope, dynamic) only while no sequence passes the length where they change. Past it
    # Hugging Face's generate recomputes them for new tokens while the cache keeps its keys'
    # rotation, and the trainer's forward rotates a whole sequence, its last sampled token
    # included (max_length + 1 tokens), by the frequencies of that length.
    rope = rope_length_threshold(model)
    if rope is not None and max_length + 1 > rope[1]:
        return (f"sequences of up to {max_length + 1} tokens (prompt and response) pass {rope[1]}, where rope "
                f"type {rope[0]!r} changes its frequencies")
    window = getattr(config, "sliding_window", None)
    if config.model_type == "mistral" and window is not None and max_length > window:
        return f"sequence length {max_length} exceeds Mistral's sliding window {window}"
    hooked = next((name for name, module in model.named_modules() if skipped_hooks(module)), None)
    if hooked is not None:  # ("" names the model itself)
        return (f"forward hooks (or a replaced forward) on {hooked or 'the model'}, which this decoder would "
                "skip: it reads the weights instead of calling the modules")
    if global_hooks():
        return "global forward hooks (torch.nn.modules.module.register_module_forward_hook), which this decoder would skip"
    return None


def skipped_hooks(module: nn.Module) -> bool:
    """Whether ``module`` has forward hooks, forward pre-hooks, full backward hooks or an
    instance's own forward (accelerate's hooks replace it): a forward that reads its weights
    instead of calling it would skip them silently. FSDP2's own hooks do not count (a functional
    forward that supports FSDP2 calls its units)."""
    state = module._get_fsdp_state() if isinstance(module, FSDPModule) else None
    hooks = [*module._forward_hooks.values(), *module._forward_pre_hooks.values(),
             *module._backward_hooks.values(), *module._backward_pre_hooks.values()]
    foreign = [hook for hook in hooks if not _inert(hook) and (state is None or getattr(hook, "__self__", None) is not state)]
    return bool(foreign) or "forward" in vars(module)


# transformers' own hooks that a functional forward may skip, by (module, function name):
# output_capturing_hook records a layer's output only inside a call that asked for hidden states
# or attentions (installed for good by the first such call; neither fast path asks);
# make_inputs_require_grads (gradient_checkpointing_enable) marks the embedding's output as
# needing a gradient, for reentrant checkpointing: the training forward calls the embedding, and
# the decoder runs under inference_mode.
_INERT_HOOKS = {("transformers.utils.output_capturing", "output_capturing_hook"),
                ("transformers.modeling_utils", "make_inputs_require_grads")}


def _inert(hook: object) -> bool:
    name = getattr(hook, "__qualname__", "").rsplit(".", 1)[-1]
    return (getattr(hook, "__module__", None), name) in _INERT_HOOKS


def global_hooks() -> bool:
    """Whether hooks registered for every module's calls (torch's global forward and backward
    hooks) exist: they would run on the modules a functional forward calls and not on the rest."""
    hooks = torch.nn.modules.module
    return any(getattr(hooks, name, None) for name in (
        "_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks", "_global_backward_pre_hooks"))


def architecture_reason(model: nn.Module, adapters: bool = False) -> str | None:
    """Why ``model`` is not a Llama-family model whose layers a functional forward can compute
    from their weights (this decoder's, and the trainer's native_forward), or None. ``adapters``:
    LoRA layers count as their merged weights (a decoder reads them once per weight update; a
    training forward could not, it must train the adapters)."""
    config = model.config
    if config.model_type not in _SUPPORTED_MODEL_TYPES:
        return f"model_type {config.model_type!r} is not one of {_SUPPORTED_MODEL_TYPES}"
    if getattr(config, "hidden_act", None) != "silu":
        return f"hidden_act {getattr(config, 'hidden_act', None)!r} is not 'silu'"
    decoder = getattr(model, "model", None)
    if not all(hasattr(decoder, name) for name in ("embed_tokens", "layers", "norm", "rotary_emb")):
        return "model does not have the model.{embed_tokens,layers,norm,rotary_emb} layout"
    if any(kind != "full_attention" for kind in getattr(config, "layer_types", None) or []):
        return "sliding-window attention layers are not supported"
    if extra := sorted({name for name, _ in decoder.named_children()} - _DECODER_PARTS):
        return f"the decoder has submodules this forward does not compute ({', '.join(extra)})"
    for index, layer in enumerate(decoder.layers):
        attn, mlp = layer.self_attn, layer.mlp
        for module, parts, where in ((layer, _LAYER_PARTS, ""), (attn, _ATTENTION_PARTS, ".self_attn"),
                                     (mlp, _MLP_PARTS, ".mlp")):
            if extra := sorted({name for name, _ in module.named_children()} - parts):
                return f"layer {index}{where} has submodules this forward does not compute ({', '.join(extra)})"
        projections = [
            attn.q_proj,
            attn.k_proj,
            attn.v_proj,
            attn.o_proj,
            mlp.gate_proj,
            mlp.up_proj,
            mlp.down_proj,
        ]
        if not all(_is_plain_linear(p, adapters) for p in projections) or not _is_plain_linear(model.lm_head, adapters):
            return ("projections are not plain nn.Linear (a quantised model, or adapters"
                    + (" other than LoRA's)" if adapters else ", which this forward would not train)"))
    return None
