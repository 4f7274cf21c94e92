"""Which models the native decoder's fast path takes, and what the engines read from a tokenizer and a
config (from a mutation audit of the rollout modules: each of these passed every test when broken). A
model the fast path would compute wrongly (another activation, a linear layer of another kind, a
submodule it would skip) is served by Hugging Face's forward with exact log-probs; one it computes
(a layer with some biases, a buffer made under inference mode) decodes on it; top_k=1 is greedy on
the hf engine; the padding id and the KV cache budget are the ones configured."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from conftest import PAD_ID, VOCAB_SIZE, tiny_llama, tiny_qwen2
from rollout_helpers import teacher_forced_logprobs
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

from dapo.config.schema import RolloutConfig
from dapo.rollout import NativeEngine, SamplingParams
from dapo.rollout.factory import _pad_token_id, create_engine
from dapo.rollout.hf_generate import HFGenerateEngine
from dapo.rollout.llama_support import unsupported_reason

PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12, 13], [3]]


def _max_logprob_error(model: nn.Module, engine: NativeEngine | HFGenerateEngine) -> float:
    result = engine.generate(PROMPTS, SamplingParams(n=2, max_new_tokens=8, seed=0))
    return max((teacher_forced_logprobs(model, PROMPTS[c.prompt_index], c, 1.0)
                - torch.tensor(c.logprobs, dtype=torch.float64)).abs().max().item() for c in result.completions)


class _QuantisedLinear(nn.Linear):
    """Stands for a quantised or wrapped layer (bitsandbytes' Linear8bitLt is an nn.Linear subclass)."""


def _gelu_llama() -> LlamaForCausalLM:
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB_SIZE, hidden_size=32, num_hidden_layers=1,
                                        num_attention_heads=2, intermediate_size=48, hidden_act="gelu")).eval()


def _subclassed_projection() -> LlamaForCausalLM:
    model = tiny_llama()
    model.model.layers[1].self_attn.q_proj.__class__ = _QuantisedLinear
    return model


def _extra_decoder_module() -> LlamaForCausalLM:
    model = tiny_llama()
    model.model.add_module("extra_norm", nn.LayerNorm(64))
    return model


@pytest.mark.parametrize(("build", "reason"), [
    (_gelu_llama, "hidden_act 'gelu' is not 'silu'"),
    (_subclassed_projection, "projections are not plain nn.Linear"),
    (_extra_decoder_module, "the decoder has submodules this forward does not compute (extra_norm)"),
], ids=["gelu", "linear-subclass", "extra-decoder-module"])
def test_a_model_the_fast_path_would_compute_wrongly_takes_the_generic_one(build, reason: str) -> None:
    model = build()
    assert reason in (unsupported_reason(model, 16) or "")
    engine = NativeEngine(model, PAD_ID)
    assert _max_logprob_error(model, engine) < 1e-4
    assert engine.last_path == "hf"


def test_a_projection_without_its_bias_beside_ones_with_biases_decodes_exactly() -> None:
    """q, k and v are fused into one product: a missing bias is zeros there, not all three dropped."""
    model = tiny_llama()
    model.model.layers[0].self_attn.k_proj.bias = None
    engine = NativeEngine(model, PAD_ID)
    assert _max_logprob_error(model, engine) < 1e-4
    assert engine.last_path == "llama"


def test_a_buffer_made_under_inference_mode_does_not_stop_the_fast_path() -> None:
    model = tiny_qwen2()
    rotary = model.model.rotary_emb
    with torch.inference_mode():  # e.g. a RoPE table rebuilt by user code under inference_mode
        rotary.register_buffer("inv_freq", rotary.inv_freq.clone(), persistent=False)
    engine = NativeEngine(model, PAD_ID)
    assert _max_logprob_error(model, engine) < 1e-4
    assert engine.last_path == "llama"


def test_top_k_one_is_greedy_on_the_hf_engine() -> None:
    result = HFGenerateEngine(tiny_qwen2(), PAD_ID).generate(PROMPTS, SamplingParams(n=4, top_k=1, max_new_tokens=6,
                                                                                     seed=0))
    for index in range(len(PROMPTS)):
        samples = [c for c in result.completions if c.prompt_index == index]
        assert len({tuple(c.token_ids) for c in samples}) == 1
        assert all(logprob == 0.0 for c in samples for logprob in c.logprobs)


@pytest.mark.parametrize(("tokenizer", "config", "pad"), [
    (SimpleNamespace(pad_token_id=7, eos_token_id=2), None, 7),  # the pad id before the EOS id
    (SimpleNamespace(pad_token_id=None, eos_token_id=2), None, 2),
    (None, SimpleNamespace(pad_token_id=None, eos_token_id=[5, 9]), 5),  # a list of EOS ids: the first
    (None, None, 0),
])
def test_the_padding_id_comes_from_the_tokenizer_then_the_config(tokenizer, config, pad: int) -> None:
    assert _pad_token_id(tokenizer, SimpleNamespace(config=config)) == pad


def test_the_native_kv_cache_budget_is_given_in_gib() -> None:
    engine = create_engine(RolloutConfig(engine="native", native_kv_cache_gib=0.5), tiny_qwen2(), None)
    assert engine.max_kv_cache_bytes == 0.5 * 2**30
