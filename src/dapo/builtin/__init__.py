"""The built-in tiny base model: char-level tokenizer, small Qwen2, supervised warm start.

``ensure_base_model()`` returns a cached ``save_pretrained`` directory (built on first use);
``python -m dapo.builtin.report`` prints its build time and sampled held-out accuracy.
"""

from dapo.builtin.base_model import (
    BUILTIN_RECIPES,
    BaseModelRecipe,
    build_base_model,
    builtin_model_config,
    ensure_base_model,
    recipe_for_model_path,
)
from dapo.builtin.tokenizer import build_tokenizer, save_tokenizer

__all__ = [
    "BUILTIN_RECIPES",
    "BaseModelRecipe",
    "build_base_model",
    "builtin_model_config",
    "build_tokenizer",
    "ensure_base_model",
    "recipe_for_model_path",
    "save_tokenizer",
]
