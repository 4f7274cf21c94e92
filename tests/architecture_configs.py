"""Tiny configurations of the Llama-family variants both fast paths accept (the rollout decoder's
and the training forward's architecture tests), so that each checks the same variants."""

from __future__ import annotations

import transformers

VOCAB = 64
TINY = {"vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}
SLIDING_THEN_FULL = ["sliding_attention", "full_attention"]


def proportional_partial_rotary(**overrides) -> transformers.LlamaConfig:
    """Half the head's dimensions rotated (the rotary module's cos 1, sin 0 on the rest)."""
    return transformers.LlamaConfig(**TINY | overrides, rope_parameters={
        "rope_type": "proportional", "rope_theta": 10000.0, "partial_rotary_factor": 0.5})


ACCEPTED = {
    "llama_linear_rope_tied": lambda: transformers.LlamaConfig(
        **TINY, tie_word_embeddings=True, rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 3.0}),
    # YaRN's attention factor scales cos and sin; an explicit head_dim; one KV head; biases everywhere
    "llama_yarn_head_dim_biases": lambda: transformers.LlamaConfig(
        **TINY | {"num_key_value_heads": 1}, head_dim=12, attention_bias=True, mlp_bias=True,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 8, "attention_factor": 1.3}),
    "llama_proportional_partial_rotary": proportional_partial_rotary,
    # a sliding window asked for, on no layer (max_window_layers covers them all)
    "qwen2_no_sliding_layer": lambda: transformers.Qwen2Config(
        **TINY, use_sliding_window=True, sliding_window=3, max_window_layers=2),
}
