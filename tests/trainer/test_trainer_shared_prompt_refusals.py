"""The shared-prompt forward refuses what it cannot compute exactly (from a mutation audit:
each test kills a mutant the suite let through)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from dapo.trainer.batch import Sample, collate
from dapo.trainer.shared_prompt import shared_prompt_logits


def test_a_model_that_fills_no_key_value_cache_is_refused():
    class NoCacheModel(torch.nn.Module):
        def forward(self, input_ids, attention_mask=None, position_ids=None, logits_to_keep=None, use_cache=None,
                    past_key_values=None):
            return SimpleNamespace(logits=torch.zeros(*input_ids.shape, 7))

    tensors = collate([Sample(0, "a", [5, 6], [8, 9], [0.0, 0.0], False)], 0, "shared_prompt")
    with pytest.raises(ValueError, match="did not fill a key/value cache"):
        shared_prompt_logits(NoCacheModel(), tensors)

def _tiny_llama(layers: int = 2):
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = LlamaForCausalLM(config).double()
    model.activation_checkpointing_enable()  # non-reentrant, transformers' default
    return model.train()

def _tensors():
    return collate([Sample(0, "a", [5, 6, 7], [8, 9, 10], [0.0] * 3, False),
                    Sample(0, "a", [5, 6, 7], [11, 12], [0.0] * 2, False)], 0, "shared_prompt")

def test_checkpointed_layers_that_cannot_be_told_to_keep_the_cache_are_refused(monkeypatch):
    from transformers.modeling_layers import GradientCheckpointingLayer
    model = _tiny_llama()
    monkeypatch.delattr(GradientCheckpointingLayer, "_can_checkpoint_with_cache")
    with pytest.raises(RuntimeError, match="cannot be told to keep a key/value cache"):
        shared_prompt_logits(model, _tensors())

def test_the_checkpoint_function_is_read_from_a_checkpointed_layer():
    model = _tiny_llama()
    first = model.model.layers[0]
    first.gradient_checkpointing = False
    del first._gradient_checkpointing_func
    logits = shared_prompt_logits(model, _tensors())
    assert logits.shape == (2, 3, 96)
