"""Tiny random causal LMs for the rollout tests (built from a config, never downloaded)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

VOCAB_SIZE = 50
PAD_ID = 0


def tiny_qwen2(seed: int = 0, rope: dict | None = None) -> Qwen2ForCausalLM:
    """``rope``: the config's rope_parameters (default: plain RoPE, theta 10000)."""
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=VOCAB_SIZE, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=128, max_position_embeddings=256,
        tie_word_embeddings=True, **({"rope_parameters": rope} if rope else {"rope_theta": 10000.0}),
    )
    return Qwen2ForCausalLM(config).eval()


def tiny_llama(seed: int = 0, rope: dict | None = None) -> LlamaForCausalLM:
    """Llama with o_proj/MLP biases and untied embeddings: covers the bias and lm_head paths.
    ``rope``: the config's rope_parameters (default: plain RoPE, theta 500)."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=VOCAB_SIZE, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=1, intermediate_size=96, max_position_embeddings=256,
        attention_bias=True, mlp_bias=True, tie_word_embeddings=False,
        **({"rope_parameters": rope} if rope else {"rope_theta": 500.0}),
    )
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # random init leaves biases at zero; make them matter
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.normal_(0, 0.1)
    return model


# Llama 3's scaled RoPE (its low frequencies divided by 8, a smooth band between), with an original
# context of 16 positions so that the scaling shows at the tests' lengths
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
# YaRN: interpolated frequencies and cos/sin scaled by its attention factor (1.14 here)
YARN_ROPE = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 8}


def tiny_qwen3_moe(seed: int = 0, vocab_size: int = VOCAB_SIZE) -> Qwen3MoeForCausalLM:
    """A Qwen3-MoE: transformers 5 fuses its experts in memory and writes them one by one."""
    torch.manual_seed(seed)
    config = Qwen3MoeConfig(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_experts=4,
        num_experts_per_tok=2, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        max_position_embeddings=64, tie_word_embeddings=True,
    )
    return Qwen3MoeForCausalLM(config).eval()


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny models run fastest on one thread, and a busy shared CPU makes more threads thrash."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def qwen2() -> Qwen2ForCausalLM:
    return tiny_qwen2()


@pytest.fixture
def llama() -> LlamaForCausalLM:
    return tiny_llama()


@pytest.fixture
def llama3_rope() -> LlamaForCausalLM:
    return tiny_llama(rope=LLAMA3_ROPE)


@pytest.fixture
def qwen2_yarn() -> Qwen2ForCausalLM:
    return tiny_qwen2(rope=YARN_ROPE)
