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


def length_following_rope(model: nn.Module) -> str | None:
    """The type of ``model``'s RoPE if its frequencies follow a forward call's longest position
    (``longrope``, ``dynamic``), or None."""
    config = getattr(model, "config", None)
    if callable(getattr(config, "get_text_config", None)):  # a composite (vision-language) config
        config = config.get_text_config()
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    # one RoPE, or one per attention type (Gemma 3: {"full_attention": {...}, "sliding_attention": {...}})
    per_type = isinstance(rope, dict) and any(isinstance(v, dict) for v in rope.values())
    ropes = [v for v in rope.values() if isinstance(v, dict)] if per_type else [rope]
    types = [str(r.get("rope_type", r.get("type"))) for r in ropes if isinstance(r, dict)]
    # and the rotary module's own type, which the config may no longer say (edited after the build)
    types.append(str(getattr(getattr(getattr(model, "model", None), "rotary_emb", None), "rope_type", None)))
    # (transformers' own test for a dynamic RoPE is a substring one)
    return next((t for t in types if t == "longrope" or "dynamic" in t), None)
