"""The shared-prompt forward (trainer.shared_prompt): a group's G responses share one prompt, so
each distinct prompt of a micro-batch goes through the model once and its responses continue
from the prompt's keys and values (the layout: module doc of dapo.trainer.batch).

Two calls of the model:
  1. the distinct prompts (U rows, left-padded), recording every layer's keys and values; its last
     position's logits predict each response's first token;
  2. the continuations (B rows), each attending to its own prompt's keys and values, indexed
     from the recorded ones, then to itself.

Backward sums the G responses' gradients into their prompt's pass, as G copies of the prompt
would receive them. Both caches are written only by the call that builds them and the
continuation's is never written, so a layer recomputed under gradient checkpointing reads the
same keys and values as its first run (Hugging Face drops the cache of a checkpointed layer
unless the layer says it may keep it: we say so for these two calls).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from transformers import PreTrainedModel

try:  # transformers >= 5: caches made of per-layer objects, layers that checkpoint themselves
    from transformers.cache_utils import Cache, DynamicLayer
    from transformers.modeling_layers import GradientCheckpointingLayer
except ImportError:  # pragma: no cover - transformers 4
    Cache = DynamicLayer = GradientCheckpointingLayer = None  # type: ignore[assignment,misc]


def shared_prompt_logits(model: PreTrainedModel, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """(B, R, V) logits that predict each response token, from the shared-prompt layout."""
    if Cache is None:
        raise RuntimeError("trainer.shared_prompt needs transformers >= 5 (its per-layer key/value caches)")
    index = tensors["prompt_index"]
    recorded = Cache(layer_class_to_replicate=_RecordingLayer)
    with _layers_may_keep_the_cache(model):
        prompts = model(
            input_ids=tensors["prompt_input_ids"],
            attention_mask=tensors["prompt_attention_mask"],
            position_ids=tensors["prompt_position_ids"],
            past_key_values=recorded,
            logits_to_keep=1,
            use_cache=True,
        )
        if not recorded.layers or not all(isinstance(layer, _RecordingLayer) and layer.is_initialized
                                          for layer in recorded.layers):
            raise ValueError(f"trainer.shared_prompt: {type(model).__name__}'s layers did not fill a key/value "
                             "cache (not a standard attention model?); set trainer.shared_prompt=false")
        prefix = Cache(layers=[_PrefixLayer(layer.keys[index], layer.values[index]) for layer in recorded.layers])
        continuations = model(
            input_ids=tensors["continuation_input_ids"],
            attention_mask=tensors["continuation_attention_mask"],
            position_ids=tensors["continuation_position_ids"],
            past_key_values=prefix,
            use_cache=True,
        )
    # the continuation has at least one column, so that every micro-batch calls the model twice on
    # every rank, as FSDP's collectives need (a pad column when R = 1, dropped here)
    return torch.cat([prompts.logits[index], continuations.logits], dim=1)[:, : tensors["responses"].shape[1]]


@contextlib.contextmanager
def _layers_may_keep_the_cache(model: torch.nn.Module) -> Iterator[None]:
    """Let checkpointed layers keep our caches during these calls (see the module doc); fail,
    rather than compute without the prompt, where transformers cannot be told so."""
    layers = [m for m in model.modules() if GradientCheckpointingLayer is not None and isinstance(m, GradientCheckpointingLayer)]
    if model.training and _checkpointing(model) and not (
        layers and hasattr(GradientCheckpointingLayer, "_can_checkpoint_with_cache")
    ):
        raise RuntimeError(f"trainer.shared_prompt with model.gradient_checkpointing: {type(model).__name__}'s "
                           "checkpointed layers cannot be told to keep a key/value cache in this transformers "
                           "(_can_checkpoint_with_cache); set trainer.shared_prompt=false")
    for layer in layers:  # an instance attribute over the class's False, for these two calls only
        layer._can_checkpoint_with_cache = True
    try:
        yield
    finally:
        for layer in layers:
            del layer._can_checkpoint_with_cache


def _checkpointing(model: torch.nn.Module) -> bool:
    """Whether the model recomputes its layers in backward (transformers renamed the property)."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(model), name):
            return bool(getattr(model, name))
    return False


if DynamicLayer is not None:

    class _RecordingLayer(DynamicLayer):
        """The prompt call's cache layer: returns a layer's keys and values as they are and keeps
        them; a recompute (gradient checkpointing) keeps its own, equal ones instead of appending."""

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
            self.dtype, self.device, self.is_initialized = key_states.dtype, key_states.device, True
            self.keys, self.values = key_states, value_states
            return key_states, value_states

    class _PrefixLayer(DynamicLayer):
        """The continuation call's cache layer: each row's prompt keys and values before the
        continuation's own, never written (a recompute reads the same)."""

        def __init__(self, keys: torch.Tensor, values: torch.Tensor) -> None:
            super().__init__()
            self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
            self.keys, self.values = keys, values

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
            return torch.cat([self.keys, key_states], dim=-2), torch.cat([self.values, value_states], dim=-2)
