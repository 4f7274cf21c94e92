"""Dropout off in the trained policy (``model.disable_dropout``, as TRL's), whatever its config says.

The update runs in train mode and the old log-probs in eval mode, so with dropout pi_old and pi_theta
would differ before any update (ratio != 1, spurious clipping and KL). Models hold their rates in
three places, all zeroed: ``nn.Dropout`` modules (GPT-2), float attributes of modules read by
functional dropout (``dropout``, ``attention_dropout``, ``*_dropout``, ``*_pdrop``, ``layerdrop``:
Llama, Qwen, OPT), and the config itself, read in forward (Falcon's ``hidden_dropout``, Persimmon's
``attention_dropout``). The config's own values are kept aside and put back while a checkpoint is
written (:func:`config_dropout_restored`), so a saved model carries the rates it came with.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from transformers import PretrainedConfig

_KEPT = "_dapo_config_dropout"  # on the model: [(config, name, rate)] that disable_dropout zeroed


def _is_dropout_rate(name: str, value: Any) -> bool:
    return isinstance(value, float) and (name.endswith(("dropout", "_pdrop")) or name == "layerdrop")


def disable_dropout(model: torch.nn.Module) -> None:
    """Zero every dropout rate of ``model``: its modules' and its config's (see the module doc)."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        for name, value in vars(module).items():
            if _is_dropout_rate(name, value):
                setattr(module, name, 0.0)
    kept = model.__dict__.setdefault(_KEPT, [])
    for config in _configs(getattr(model, "config", None)):
        for name, value in list(vars(config).items()):
            if _is_dropout_rate(name, value) and value != 0.0:
                kept.append((config, name, value))
                setattr(config, name, 0.0)


@contextlib.contextmanager
def config_dropout_restored(model: torch.nn.Module) -> Iterator[None]:
    """``model``'s config with the dropout rates :func:`disable_dropout` zeroed put back (to save it)."""
    kept = model.__dict__.get(_KEPT, [])
    for config, name, rate in kept:
        setattr(config, name, rate)
    try:
        yield
    finally:
        for config, name, _ in kept:
            setattr(config, name, 0.0)


def _configs(config: Any) -> list[Any]:
    """A model's config and the sub-configs it holds (a multimodal model's ``text_config``)."""
    if not isinstance(config, PretrainedConfig):
        return []
    return [config, *(value for value in vars(config).values() if isinstance(value, PretrainedConfig))]
