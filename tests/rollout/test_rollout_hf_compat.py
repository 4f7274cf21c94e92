"""transformers 5.24 renamed the forward's key/value cache keyword (``past_key_values`` ->
``cache``, the old name removed in 5.40): dapo-rl passes each model the name its forward takes."""

from __future__ import annotations

import torch
import transformers
from packaging.version import Version
from torch import nn

from dapo.rollout.hf_compat import (
    cache_keyword,
    reset_dynamic_rope,
    rope_frequency_group,
    rope_length_threshold,
)


class _Renamed(nn.Module):
    def forward(self, input_ids: torch.Tensor, cache: object = None, **kwargs: object) -> None: ...


class _NotRenamed(nn.Module):  # transformers < 5.24, or a remote-code model
    def forward(self, input_ids: torch.Tensor, past_key_values: object = None, **kwargs: object) -> None: ...


def test_cache_keyword_is_the_one_the_forward_takes(qwen2: nn.Module) -> None:
    assert cache_keyword(_Renamed()) == "cache"
    assert cache_keyword(_NotRenamed()) == "past_key_values"
    # the installed transformers' own model (the deprecation wrapper is seen through)
    renamed = Version(transformers.__version__) >= Version("5.24.0.dev0")
    assert cache_keyword(qwen2) == ("cache" if renamed else "past_key_values")


def test_a_dynamic_rope_is_put_back_to_its_own_frequencies() -> None:
    """transformers keeps the frequencies a longer call grew a dynamic RoPE to, for a later call
    of exactly max_position_embeddings tokens too: reset_dynamic_rope gives a fresh module's."""
    config = transformers.LlamaConfig(vocab_size=16, hidden_size=16, num_attention_heads=2, num_hidden_layers=1,
                                      intermediate_size=16, max_position_embeddings=16,
                                      rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 4.0})
    model = transformers.LlamaForCausalLM(config)
    rotary, x = model.model.rotary_emb, torch.zeros(1, 1, dtype=torch.float64)
    assert rope_length_threshold(model) == ("dynamic", 16)
    assert [rope_frequency_group(("dynamic", 16), n) for n in (3, 16, 17, 23)] == [0, 0, 17, 23]
    assert [rope_frequency_group(("longrope", 16), n) for n in (3, 16, 17, 23)] == [0, 0, 1, 1]
    positions = torch.arange(16)[None]
    fresh = rotary(x, positions)[0]
    rotary(x, torch.arange(23)[None])  # grows
    assert not torch.equal(rotary(x, positions)[0], fresh)  # transformers: the grown frequencies
    reset_dynamic_rope(rotary)
    assert torch.equal(rotary(x, positions)[0], fresh)
