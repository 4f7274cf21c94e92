"""Build the rollout engine named by ``rollout.engine``."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dapo.config.schema import RolloutConfig
from dapo.rollout.base import RolloutEngine
from dapo.rollout.hf_generate import HFGenerateEngine
from dapo.rollout.native import NativeEngine


def _pad_token_id(tokenizer: Any, model: nn.Module) -> int:
    """The tokenizer's pad id, else its EOS id, else the model config's, else 0 (padding is masked)."""
    for source in (tokenizer, getattr(model, "config", None)):
        for name in ("pad_token_id", "eos_token_id"):
            value = getattr(source, name, None)
            if isinstance(value, list):
                value = value[0] if value else None
            if value is not None:
                return int(value)
    return 0


def create_engine(
    cfg: RolloutConfig, model: nn.Module, tokenizer: Any, model_path: str | None = None, **vllm_kwargs: Any
) -> RolloutEngine:
    """The engine for ``cfg.engine``: "native" and "hf" share ``model`` with the trainer; "vllm"
    loads ``model_path`` into a colocated vLLM that holds its own copy of the weights, kept
    current by ``sync_weights`` (extra keyword arguments go to :class:`VLLMEngine`)."""
    if cfg.engine == "native":
        dtype = None if cfg.native_dtype == "model" else getattr(torch, cfg.native_dtype)
        return NativeEngine(model, _pad_token_id(tokenizer, model), tokenizer, compute_dtype=dtype,
                            cpu_kernels=cfg.native_cpu_kernels, max_kv_cache_bytes=cfg.native_kv_cache_gib * 2**30)
    if cfg.engine == "hf":
        return HFGenerateEngine(model, _pad_token_id(tokenizer, model), tokenizer)
    if cfg.engine == "vllm":
        if model_path is None:
            raise ValueError("rollout.engine=vllm needs model_path: the model directory vLLM loads")
        from dapo.rollout.vllm_engine import VLLMEngine  # lazy: vllm is an optional extra

        return VLLMEngine(model_path, cfg, dtype=cfg.vllm_dtype, **vllm_kwargs)
    raise ValueError(f"rollout.engine={cfg.engine!r} is not one of ['native', 'hf', 'vllm']")
