"""Facts about Hugging Face models that several layers read, in one place: what differs between
the transformers versions dapo-rl supports (>= 5.0), and which RoPE variants a model uses."""

from __future__ import annotations

import inspect

from torch import nn


def cache_keyword(model: nn.Module) -> str:
    """The keyword ``model``'s forward takes its key/value cache by: ``cache`` from transformers
    5.24 on (there ``past_key_values`` is deprecated, to be removed in 5.40), ``past_key_values``
    before, and in models (remote code included) that have not been renamed."""
    parameters = inspect.signature(model.forward).parameters  # follows the deprecation wrapper
    return "cache" if "cache" in parameters else "past_key_values"


def text_config(model: nn.Module) -> object:
    """``model``'s config, or its text model's where it is composite (a vision-language model)."""
    config = getattr(model, "config", None)
    return config.get_text_config() if callable(getattr(config, "get_text_config", None)) else config


def _text_config_and_ropes(model: nn.Module) -> tuple[object, list[dict]]:
    """``model``'s (text) config and its RoPE parameters: one dict, or one per attention type
    (Gemma 3: {"full_attention": {...}, "sliding_attention": {...}})."""
    config = text_config(model)
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    per_type = isinstance(rope, dict) and any(isinstance(v, dict) for v in rope.values())
    ropes = [v for v in rope.values() if isinstance(v, dict)] if per_type else [rope]
    return config, [r for r in ropes if isinstance(r, dict)]


def rotary_module(model: nn.Module) -> nn.Module | None:
    """``model.model.rotary_emb``, the Llama family's (and most decoders') rotary module, or None."""
    return getattr(getattr(model, "model", None), "rotary_emb", None)


def _follows_length(rope_type: str) -> bool:
    return rope_type == "longrope" or "dynamic" in rope_type  # (transformers' own test for dynamic: a substring)


def length_following_rope(model: nn.Module) -> str | None:
    """The type of ``model``'s RoPE if its frequencies follow a forward call's longest position
    (``longrope``, ``dynamic``), or None."""
    _, ropes = _text_config_and_ropes(model)
    types = [str(r.get("rope_type", r.get("type"))) for r in ropes]
    # and the rotary module's own type, which the config may no longer say (edited after the build)
    types.append(str(getattr(rotary_module(model), "rope_type", None)))
    return next((t for t in types if _follows_length(t)), None)


def rope_length_threshold(model: nn.Module) -> tuple[str, int] | None:
    """(rope type, threshold) of a RoPE whose frequencies follow a call's longest sequence, or None:
    for ``longrope`` the short factors up to ``original_max_position_embeddings`` tokens, the long
    ones past it; for ``dynamic`` the model's own frequencies up to ``max_position_embeddings``,
    past it frequencies recomputed for the exact length (transformers' dynamic_rope_update reads
    ``max(position_ids) + 1`` of the whole call: every sequence in a batch or packed row gets the
    longest one's). Sequences no longer than the threshold rotate as a short one does alone."""
    rope_type = length_following_rope(model)
    if rope_type is None:
        return None
    config, ropes = _text_config_and_ropes(model)
    mpe = int(getattr(config, "max_position_embeddings", 0) or 0)
    if rope_type != "longrope":
        return rope_type, int(getattr(rotary_module(model), "original_max_seq_len", mpe))
    limits = [r.get("original_max_position_embeddings") for r in ropes if r.get("rope_type", r.get("type")) == "longrope"]
    limits.append(getattr(config, "original_max_position_embeddings", None))
    return rope_type, min(int(limit) for limit in limits if limit) if any(limits) else mpe


def rope_frequency_group(rope: tuple[str, int], length: int) -> int:
    """Which frequencies a sequence of ``length`` tokens gets alone under ``rope``
    (:func:`rope_length_threshold`'s): 0 for the short ones, else longrope's long ones (1) or
    dynamic's for exactly this length. Sequences of one group can share a forward call."""
    rope_type, threshold = rope
    if length <= threshold:
        return 0
    return 1 if rope_type == "longrope" else length


def reset_dynamic_rope(rotary: nn.Module | None) -> None:
    """Put a ``dynamic`` rotary module back to its own frequencies, as a fresh one: transformers
    keeps the frequencies a longer call grew it to, and restores them only for a shorter call
    than ``max_position_embeddings``, so a later call of exactly that many tokens, or one between
    it and the earlier length, would rotate by the earlier call's frequencies."""
    if rotary is None or not hasattr(rotary, "original_inv_freq"):
        return
    if "dynamic" not in str(getattr(rotary, "rope_type", "")) or rotary.max_seq_len_cached == rotary.original_max_seq_len:
        return
    rotary.register_buffer("inv_freq", rotary.original_inv_freq.to(rotary.inv_freq.device), persistent=False)
    rotary.max_seq_len_cached = rotary.original_max_seq_len
