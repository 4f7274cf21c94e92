"""The built-in tiny base model: char-level tokenizer, small Qwen2, supervised warm start.

``ensure_base_model()`` returns a cached ``save_pretrained`` directory (built on first use);
``python -m dapo.builtin.report`` prints its build time and sampled held-out accuracy.
The names are imported on first use (PEP 562), so that the torch-free recipes
(:mod:`dapo.builtin.recipes`) load without torch and transformers.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "BUILTIN_RECIPES": "recipes",
    "BaseModelRecipe": "recipes",
    "recipe_for_model_path": "recipes",
    "build_base_model": "base_model",
    "builtin_model_config": "base_model",
    "ensure_base_model": "base_model",
    "build_tokenizer": "tokenizer",
    "save_tokenizer": "tokenizer",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'dapo.builtin' has no attribute {name!r}")
    return getattr(importlib.import_module(f"dapo.builtin.{_WHERE[name]}"), name)
