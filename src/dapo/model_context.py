"""A model's context length, read from its ``config.json`` as vLLM reads it (no torch, no
transformers: preflight reads it before anything loads)."""

from __future__ import annotations

import math
from typing import NamedTuple


class ModelContext(NamedTuple):
    """The most positions a model takes, where that number was read (said in messages), and
    whether its positions are a learned table (no position past it exists)."""

    tokens: int
    source: str
    learned: bool = False


# RoPE types whose max_position_embeddings already is the extended context (Llama 3.1's 131072
# over its original_max_position_embeddings 8192; Phi-3's longrope, "su" its old name)
_EXTENDED_IN_MAX_POSITIONS = ("default", "llama3", "longrope", "su")


# Model types whose positions are a learned table (max_position_embeddings, GPT-2's n_positions):
# no position past it exists, where a RoPE model computes one (out of its training range)
LEARNED_POSITIONS = ("gpt2", "gpt_bigcode", "opt", "biogpt")


def model_context(model_config: dict) -> ModelContext | None:
    """The context in tokens a model's ``config.json`` (as a dict) gives, and how it was read; None
    when it names none. ``max_position_embeddings``, extended by a RoPE scaling that stretches the
    positions past it, as vLLM derives its ``max_model_len`` (the engine where a prompt plus a
    response past the context is an error): ``yarn`` holds ``factor`` x its
    ``original_max_position_embeddings`` (Qwen2.5's 4 x 32768), ``linear`` and ``dynamic`` (NTK)
    ``factor`` x ``max_position_embeddings``. ``llama3`` and ``longrope`` change no length: their
    ``max_position_embeddings`` already is the extended one. Before, a model extended with YaRN was
    held to its pre-extension length. Read from ``rope_scaling`` (transformers 4) or
    ``rope_parameters`` (5), with ``rope_type`` or the older ``type``; a RoPE per attention type
    (Gemma 3: sliding layers unscaled) and Gemma 3's linear factor (already in its
    ``max_position_embeddings``, vLLM's own exception) extend nothing. A learned position table
    (GPT-2's ``n_positions``, OPT's) is the context, said in how it was read."""
    if not isinstance(model_config.get("max_position_embeddings"), int) and isinstance(
            model_config.get("text_config"), dict):  # a composite (vision-language) config
        model_config = model_config["text_config"]
    name = "max_position_embeddings" if "max_position_embeddings" in model_config else "n_positions"  # (GPT-2's)
    positions = model_config.get(name)
    if not isinstance(positions, int) or isinstance(positions, bool):
        return None
    if str(model_config.get("model_type", "")) in LEARNED_POSITIONS or name == "n_positions":
        return ModelContext(positions, f"{name}, learned positions", learned=True)
    where = "rope_scaling" if model_config.get("rope_scaling") else "rope_parameters"
    rope = model_config.get(where)
    kind = str(rope.get("rope_type") or rope.get("type") or "default") if isinstance(rope, dict) else "default"
    factor = rope.get("factor") if isinstance(rope, dict) else None
    if (kind in _EXTENDED_IN_MAX_POSITIONS or not isinstance(factor, (int, float)) or isinstance(factor, bool)
            or not 1 < factor < math.inf or "gemma3" in str(model_config.get("model_type", ""))):
        return ModelContext(positions, "max_position_embeddings")
    if kind == "yarn":
        original = rope.get("original_max_position_embeddings") or model_config.get("original_max_position_embeddings")
        base, base_name = (original, "original_max_position_embeddings") if isinstance(original, int) else (
            positions, "max_position_embeddings")
        return ModelContext(int(base * factor), f"{where} yarn: factor {factor:g} x {base_name} {base}")
    if kind in ("linear", "dynamic"):
        return ModelContext(int(positions * factor), f"{where} {kind}: factor {factor:g} x max_position_embeddings {positions}")
    return ModelContext(positions, "max_position_embeddings")  # an unknown scaling: the length written, not a guess
