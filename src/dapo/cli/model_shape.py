"""A model's shape for ``dapo plan``: its parameters by part, the bytes per token its layers'
activations take at the run's precision (measured on fake tensors) and its KV cache's width, read
from the model's config.json on the meta device (no weights are read), or, given only a
parameter count, the Qwen2.5 model nearest in size."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from dapo.config import DAPOConfig
from dapo.context_checks import is_builtin
from dapo.rollout.native import kv_elements_per_token
from dapo.trainer.activation_memory import ActivationBytes


@dataclass
class ModelShape:
    params: float
    layers: int
    hidden: int
    vocab: int
    layer_params: float  # the largest decoder layer's
    root_params: float  # outside the decoder layers: embeddings, final norm, an untied output layer
    output_params: float  # the output layer's (the embeddings' when tied)
    activations: ActivationBytes | None  # None: not measurable on fake tensors (see activation_note)
    activation_note: str = ""
    guessed: bool = False  # the shape of the Qwen2.5 model nearest in size
    adapter_params: float = 0.0  # LoRA's (model.lora_rank > 0): the only ones with grads and AdamW state
    cannot_run: str = ""  # why the ranks would refuse the model (trainer.sequence_parallel_size's split)
    kv_per_token: int = 0  # elements a decoding row caches per position: 2 x layers x KV heads x head size


def model_shape(cfg: DAPOConfig, params: float | None) -> ModelShape:
    """The shape of ``cfg.model.path`` (``params`` replaces its parameter count when given for a
    model that is not on this machine) and its activation bytes at the run's precision."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, Qwen2Config

    config_file = Path(cfg.model.path).expanduser() / "config.json"
    builtin = is_builtin(cfg.model.path)
    guessed = not (config_file.exists() or builtin)
    if builtin:  # its recipe's shape: nothing is built or installed
        from dapo.builtin import builtin_model_config

        config = builtin_model_config(cfg.model.path)
    elif not guessed:
        config = AutoConfig.from_pretrained(config_file.parent)
    elif params is None:
        raise FileNotFoundError(
            f"{config_file} is not on this machine: give the model's size, e.g. dapo plan CONFIG --params 32.8e9")
    else:
        _, shape = min(QWEN25_SHAPES.items(), key=lambda item: abs(math.log(item[0] / params)))
        config = Qwen2Config(**dict(zip(QWEN25_FIELDS, shape)))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    count = float(sum(p.numel() for p in model.parameters()))
    from dapo.trainer.fsdp import decoder_layers

    layer_sizes = [sum(p.numel() for p in layer.parameters()) for layer in decoder_layers(model)]
    output = model.get_output_embeddings()
    shape = ModelShape(
        params=params if guessed and params else count, layers=len(layer_sizes), hidden=config.hidden_size,
        vocab=config.vocab_size, layer_params=float(max(layer_sizes)), root_params=count - sum(layer_sizes),
        output_params=float(output.weight.numel() if output is not None else 0), activations=None, guessed=guessed,
        adapter_params=lora_adapter_params(cfg, model), kv_per_token=kv_elements_per_token(config))
    if (size := cfg.trainer.sequence_parallel_size) > 1:
        from dapo.trainer.sequence_parallel import split_problem

        shape.cannot_run = split_problem(model, size) or ""
    try:
        shape.activations = _measure_activations(cfg, model)
    except Exception as error:  # e.g. a model whose forward needs real values (data-dependent shapes)
        shape.activation_note = f"its layers could not run on fake tensors ({type(error).__name__}: {error})"
    return shape


def lora_adapter_params(cfg: DAPOConfig, model) -> float:
    """Parameters of the LoRA adapters ``cfg.model`` puts on ``model`` (0 without): r x (in +
    out) for every targeted linear layer (GPT-2's Conv1D too), matched as PEFT matches a name (the
    module's name, or its end after a dot: q_proj, self_attn.q_proj); ["all-linear"]: every one
    but the output layer."""
    from dapo.lora import is_linear_layer

    rank, targets = cfg.model.lora_rank, cfg.model.lora_target_modules
    if rank == 0:
        return 0.0
    output = model.get_output_embeddings()
    widths = {name: sum(module.weight.shape) for name, module in model.named_modules()  # in + out, either layout
              if is_linear_layer(module) and module is not output}
    return float(sum(rank * width for name, width in widths.items()
                     if targets == ["all-linear"] or any(name == t or name.endswith(f".{t}") for t in targets)))


def _measure_activations(cfg: DAPOConfig, model) -> ActivationBytes:
    import torch

    from dapo.trainer.activation_memory import measure

    low = {"bf16": torch.bfloat16, "fp16": torch.float16}
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    compute = torch.bfloat16 if cfg.trainer.param_dtype == "bf16" else dtypes[cfg.model.dtype]
    return measure(model, compute, low.get(cfg.trainer.autocast))


# Qwen2.5 base models by parameter count, from their config.json
QWEN25_FIELDS = ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
                 "num_key_value_heads", "vocab_size", "tie_word_embeddings")
QWEN25_SHAPES = {
    0.49e9: (24, 896, 4864, 14, 2, 151936, True), 1.54e9: (28, 1536, 8960, 12, 2, 151936, True),
    3.09e9: (36, 2048, 11008, 16, 2, 151936, True), 7.62e9: (28, 3584, 18944, 28, 4, 152064, False),
    14.7e9: (48, 5120, 13824, 40, 8, 152064, False), 32.8e9: (64, 5120, 27648, 40, 8, 152064, False),
    72.7e9: (80, 8192, 29568, 64, 8, 152064, False),
}
