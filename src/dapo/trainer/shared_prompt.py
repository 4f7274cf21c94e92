"""The shared-prompt forward (trainer.shared_prompt): a group's G responses share one prompt, so
each distinct prompt of a micro-batch goes through the model once and its responses continue
from the prompt's keys and values (the layout: module doc of dapo.trainer.batch).

Two calls of the model:
  1. the distinct prompts (U rows, left-padded), recording every layer's keys and values; the
     last position's logits predict each response's first token (and being in the loss, they
     send every layer of this call a gradient through its output, which is when FSDP2 gathers
     a layer's parameters for its backward);
  2. the continuations (B rows), each attending to its own prompt's keys and values (indexed
     from the recorded ones), then to itself.

Backward sums the G responses' gradients into their prompt's pass, as G copies of the prompt
would receive them. The continuation's cache is never written and the prompt's is only ever
(re)written with the same keys and values, so a layer recomputed under gradient checkpointing
reads what its first run read (Hugging Face drops the cache of a checkpointed layer unless the
layer says it may keep it: we say so for these two calls).

Refused where the two calls would not compute the padded layout's logits: RoPE variants that
pick their frequencies from a call's longest position (``longrope``, ``dynamic``), and reentrant
checkpointing (it runs the forward without autograd, so the recorded keys and values would carry
no gradient).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator

import torch
from transformers import PreTrainedModel
from transformers.cache_utils import Cache, DynamicLayer
from transformers.modeling_layers import GradientCheckpointingLayer

from dapo.rollout.hf_compat import cache_keyword, length_following_rope


def check_shared_prompt(model: torch.nn.Module) -> None:
    """Raise, naming the reason, where the shared-prompt layout cannot compute ``model``'s padded
    logits exactly (called when the policy worker is built, before any rollout)."""
    if "layer_class_to_replicate" not in inspect.signature(Cache.__init__).parameters:
        raise ValueError("trainer.shared_prompt needs transformers 5 (its per-layer key/value caches); "
                         "upgrade transformers or set trainer.shared_prompt=false")
    if refused := length_following_rope(model):
        raise ValueError(f"trainer.shared_prompt: this model's RoPE ({refused!r}) picks its frequencies from the "
                         "longest position of each forward call, so a prompt pass and a response pass would not "
                         "rotate as one sequence does; set trainer.shared_prompt=false")


def shared_prompt_logits(model: PreTrainedModel, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """(B, R, V) logits that predict each response token, from the shared-prompt layout."""
    recorded = Cache(layer_class_to_replicate=_RecordingLayer)
    keyword = cache_keyword(model)
    with _layers_may_keep_the_cache(model):
        prompts = model(
            input_ids=tensors["prompt_input_ids"],
            attention_mask=tensors["prompt_attention_mask"],
            position_ids=tensors["prompt_position_ids"],
            logits_to_keep=1,
            use_cache=True,
            **{keyword: recorded},
        )
        if not recorded.layers or not all(isinstance(layer, _RecordingLayer) and layer.is_initialized
                                          for layer in recorded.layers):
            raise ValueError(f"trainer.shared_prompt: {type(model).__name__}'s layers did not fill a key/value "
                             "cache (not a standard attention model?); set trainer.shared_prompt=false")
        index = tensors["prompt_index"]
        prefix = Cache(layers=[_PrefixLayer(layer.keys, layer.values, index) for layer in recorded.layers])
        continuations = model(
            input_ids=tensors["continuation_input_ids"],
            attention_mask=tensors["continuation_attention_mask"],
            position_ids=tensors["continuation_position_ids"],
            use_cache=True,
            **{keyword: prefix},
        )
    # (a one-token response's continuation column, there for the second call, predicts nothing)
    return torch.cat([prompts.logits[index], continuations.logits], dim=1)[:, : tensors["responses"].shape[1]]


@contextlib.contextmanager
def _layers_may_keep_the_cache(model: torch.nn.Module) -> Iterator[None]:
    """Let checkpointed layers keep our caches during these calls (see the module doc); fail,
    rather than compute without the prompt, where transformers cannot be told so."""
    layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    if model.training and checkpointing(model):
        if not (layers and hasattr(GradientCheckpointingLayer, "_can_checkpoint_with_cache")):
            raise RuntimeError(f"trainer.shared_prompt with model.gradient_checkpointing: {type(model).__name__}'s "
                               "checkpointed layers cannot be told to keep a key/value cache in this transformers "
                               "(_can_checkpoint_with_cache); set trainer.shared_prompt=false")
        checkpointed = [layer for layer in layers if layer.gradient_checkpointing] or layers
        checkpoint = getattr(checkpointed[0], "_gradient_checkpointing_func", None)
        if getattr(checkpoint, "keywords", {}).get("use_reentrant") is not False:
            raise RuntimeError("trainer.shared_prompt with model.gradient_checkpointing needs non-reentrant "
                               "checkpointing (use_reentrant=False, transformers' default): reentrant checkpointing "
                               "would give the prompt's keys and values no gradient")
    for layer in layers:  # an instance attribute over the class's False, for these two calls only
        layer._can_checkpoint_with_cache = True
    try:
        yield
    finally:
        for layer in layers:
            del layer._can_checkpoint_with_cache


def checkpointing(model: torch.nn.Module) -> bool:
    """Whether the model recomputes its layers in backward (transformers renamed the property)."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(model), name):
            return bool(getattr(model, name))
    return False


class _RecordingLayer(DynamicLayer):
    """The prompt call's cache layer: returns a layer's keys and values as they are and keeps
    them; a recompute (gradient checkpointing) keeps its own, equal ones instead of appending."""

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        self.dtype, self.device, self.is_initialized = key_states.dtype, key_states.device, True
        self.keys, self.values = key_states, value_states
        return key_states, value_states


class _PrefixLayer(DynamicLayer):
    """The continuation call's cache layer: each row's prompt keys and values (row ``index``
    of the distinct prompts') before the continuation's own, never written (a recompute reads
    the same). The rows are gathered at each call, so a checkpointed layer, which holds its
    cache until backward, keeps the distinct prompts' keys and values, not G copies."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, index: torch.Tensor) -> None:
        super().__init__()
        self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
        self.keys, self.values, self.index = keys, values, index

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        return (torch.cat([self.keys[self.index], key_states], dim=-2),
                torch.cat([self.values[self.index], value_states], dim=-2))
