"""What differs between the transformers versions dapo-rl supports (>= 5.0), in one place."""

from __future__ import annotations

import inspect

from torch import nn


def cache_keyword(model: nn.Module) -> str:
    """The keyword ``model``'s forward takes its key/value cache by: ``cache`` from transformers
    5.24 on (there ``past_key_values`` is deprecated, to be removed in 5.40), ``past_key_values``
    before, and in models (remote code included) that have not been renamed."""
    parameters = inspect.signature(model.forward).parameters  # follows the deprecation wrapper
    return "cache" if "cache" in parameters else "past_key_values"
