"""The native engine across architectures and config options: where its fast decoder accepts a
model, it generates greedily what Hugging Face's generate does and reports the log-probs of the
model's own forward; where it refuses one (a sliding window shorter than the call, other
architectures), the generic Hugging Face path does, its sliding-window caches repeated for n
samples and cut to the live rows."""

from __future__ import annotations

import pytest
import torch
import transformers
from tests.architecture_configs import (
    ACCEPTED,
    SLIDING_THEN_FULL,
    TINY,
    VOCAB,
    proportional_partial_rotary,
)
from transformers import AutoModelForCausalLM, PreTrainedConfig

from dapo.rollout.base import SamplingParams
from dapo.rollout.llama_support import unsupported_reason
from dapo.rollout.native import NativeEngine

PROMPT_LENGTHS = (3, 9, 12)  # left-padded to 12
NEW_TOKENS = 10  # a call of 12 + 10 positions
# the longest sequence the forward computes: the last sampled token is never fed back
LONGEST = max(PROMPT_LENGTHS) + NEW_TOKENS - 1
LONGROPE = {"rope_type": "longrope", "rope_theta": 10000.0, "factor": 2.0, "short_factor": [1.0, 1.5, 2.0, 1.0],
            "long_factor": [3.0, 2.0, 4.0, 8.0]}


def build(config: PreTrainedConfig) -> torch.nn.Module:
    """A float32 model whose every weight matters: biases and norm weights off their init."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch.float32)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 1:
                parameter.add_(torch.randn_like(parameter) * 0.2)
            else:
                parameter.normal_(0, 0.15)
    return model.eval()


def prompts() -> list[list[int]]:
    generator = torch.Generator().manual_seed(3)
    return [torch.randint(3, VOCAB, (n,), generator=generator).tolist() for n in PROMPT_LENGTHS]


def check_engine(model: torch.nn.Module, path: str) -> None:
    """Greedy tokens of each prompt as generate() gives them for that prompt alone; sampled
    responses (two per prompt, stop tokens ending some early: rows dropped) with the log-probs
    of one forward over prompt + response."""
    engine = NativeEngine(model, pad_token_id=0)
    greedy = engine.generate(prompts(), SamplingParams(top_k=1, max_new_tokens=NEW_TOKENS))
    assert engine.last_path == path
    for prompt, completion in zip(prompts(), greedy.completions):
        expected = model.generate(torch.tensor([prompt]), max_new_tokens=NEW_TOKENS, do_sample=False,
                                  pad_token_id=0, eos_token_id=None)[0, len(prompt):]
        assert completion.token_ids == expected.tolist()
    sampled = engine.generate(prompts(), SamplingParams(n=2, max_new_tokens=NEW_TOKENS, seed=2,
                                                        stop_token_ids=list(range(5, 12))))
    assert sorted({len(c.token_ids) for c in sampled.completions})[0] < NEW_TOKENS  # some stopped early
    for completion in sampled.completions:
        prompt = prompts()[completion.prompt_index]
        with torch.no_grad():
            logits = model(torch.tensor([prompt + completion.token_ids])).logits[0, len(prompt) - 1: -1]
        expected = logits.double().log_softmax(-1).gather(-1, torch.tensor(completion.token_ids)[:, None])[:, 0]
        torch.testing.assert_close(torch.tensor(completion.logprobs, dtype=torch.float64), expected,
                                   rtol=0, atol=2e-5)


FAST = {
    **ACCEPTED,
    # with every KV head its own and a large eps
    "llama_proportional_partial_rotary": lambda: proportional_partial_rotary(num_key_value_heads=4, rms_norm_eps=0.3),
    # prompt + max_new_tokens exactly max_position_embeddings (as Hugging Face, no limit there)
    "llama_call_as_long_as_max_position_embeddings": lambda: transformers.LlamaConfig(
        **TINY | {"max_position_embeddings": max(PROMPT_LENGTHS) + NEW_TOKENS}),
    # Mistral's default window (4096), longer than any call
    "mistral_default_window": lambda: transformers.MistralConfig(**TINY),
    # a window as long as the longest sequence computed: no key ever leaves it
    "mistral_window_as_long_as_the_longest_sequence": lambda: transformers.MistralConfig(
        **TINY, sliding_window=LONGEST),
    # frequencies that follow the longest position, which no sequence passes (the short ones
    # throughout), its last sampled token included: the trainer's forward rotates it with the rest
    "llama_longrope_up_to_its_threshold": lambda: transformers.LlamaConfig(
        **TINY, rope_parameters=LONGROPE | {"original_max_position_embeddings": LONGEST + 1}),
    "llama_dynamic_up_to_its_threshold": lambda: transformers.LlamaConfig(
        **TINY | {"max_position_embeddings": LONGEST + 1}, rope_parameters={"rope_type": "dynamic",
                                                                       "rope_theta": 10000.0, "factor": 4.0}),
}


@pytest.mark.parametrize("name", sorted(FAST))
def test_the_fast_decoder_generates_as_hugging_face(name: str) -> None:
    model = build(FAST[name]())
    assert unsupported_reason(model, LONGEST) is None
    check_engine(model, "llama")


GENERIC = {
    "mistral_window_shorter_than_the_call": (
        lambda: transformers.MistralConfig(**TINY, sliding_window=3), "exceeds Mistral's sliding window 3"),
    "mistral_window_one_short_of_the_longest_sequence": (
        lambda: transformers.MistralConfig(**TINY, sliding_window=LONGEST - 1),
        f"sequence length {LONGEST} exceeds Mistral's sliding window {LONGEST - 1}"),
    "qwen2_sliding_layer": (
        lambda: transformers.Qwen2Config(**TINY, use_sliding_window=True, sliding_window=3, max_window_layers=1),
        "sliding-window attention layers"),
    "gemma3_sliding_layer_softcapping": (
        lambda: transformers.Gemma3TextConfig(**TINY, head_dim=8, sliding_window=3, query_pre_attn_scalar=16,
                                              layer_types=SLIDING_THEN_FULL, final_logit_softcapping=5.0),
        "model_type 'gemma3_text'"),
    "llama4_chunked": (
        lambda: transformers.Llama4TextConfig(**TINY, head_dim=8, intermediate_size_mlp=48, num_local_experts=2,
                                              attention_chunk_size=3, no_rope_layers=[1, 0],
                                              interleave_moe_layer_step=2),
        "model_type 'llama4_text'"),
}


@pytest.mark.parametrize("name", sorted(GENERIC))
def test_what_the_fast_decoder_refuses_decodes_as_hugging_face(name: str) -> None:
    make_config, reason = GENERIC[name]
    model = build(make_config())
    assert reason in (unsupported_reason(model, LONGEST) or "")
    check_engine(model, "hf")


def test_a_submodule_the_decoder_does_not_read_sends_the_model_to_the_generic_path() -> None:
    """A layer's extra module (a newer transformers' norm, say) is not skipped silently."""
    model = build(transformers.LlamaConfig(**TINY))
    model.model.layers[0].self_attn.k_norm = torch.nn.RMSNorm(8)
    assert unsupported_reason(model, 16) == "layer 0.self_attn has submodules this forward does not compute (k_norm)"
    engine = NativeEngine(model, pad_token_id=0)
    engine.generate([[3, 4, 5]], SamplingParams(max_new_tokens=2))
    assert engine.last_path == "hf"


@pytest.mark.parametrize("rope", [
    LONGROPE | {"original_max_position_embeddings": LONGEST},
    {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 4.0},
])
def test_a_rope_whose_frequencies_change_within_the_generation_is_refused(rope: dict) -> None:
    """A sequence one token past the threshold (its last sampled token included) rotates by other
    frequencies in the trainer's forward, and Hugging Face's generate recomputes them for new
    tokens while the cache keeps its keys' rotation: one table follows neither."""
    config = transformers.LlamaConfig(**TINY | {"max_position_embeddings": LONGEST}, rope_parameters=rope)
    model = build(config)
    assert f"up to {LONGEST + 1} tokens (prompt and response) pass {LONGEST}, where rope type" in (
        unsupported_reason(model, LONGEST))
    engine = NativeEngine(model, pad_token_id=0)
    engine.generate(prompts(), SamplingParams(max_new_tokens=NEW_TOKENS))
    assert engine.last_path == "hf"


@pytest.mark.parametrize(("where", "pre"), [("", True), ("model.layers.1.mlp.down_proj", False),
                                            ("model.layers.0.self_attn", True), ("model.rotary_emb", False)])
def test_a_hook_on_a_module_the_decoder_replaces_sends_the_model_to_the_generic_path(where: str, pre: bool) -> None:
    """The decoder reads the weights and calls none of the modules: their hooks would never run."""
    model = build(transformers.LlamaConfig(**TINY))
    calls = []
    module = model.get_submodule(where)
    if pre:
        module.register_forward_pre_hook(lambda *args: calls.append(where))
    else:
        module.register_forward_hook(lambda *args: calls.append(where))
    assert f"forward hooks (or a replaced forward) on {where or 'the model'}," in unsupported_reason(model, 16)
    engine = NativeEngine(model, pad_token_id=0)
    engine.generate([[3, 4, 5]], SamplingParams(max_new_tokens=2))
    assert engine.last_path == "hf" and calls


def test_a_global_forward_hook_sends_the_model_to_the_generic_path() -> None:
    model = build(transformers.LlamaConfig(**TINY))
    calls = []
    handle = torch.nn.modules.module.register_module_forward_hook(lambda *args: calls.append(1))
    try:
        assert "global forward hooks" in unsupported_reason(model, 16)
        engine = NativeEngine(model, pad_token_id=0)
        engine.generate([[3, 4, 5]], SamplingParams(max_new_tokens=2))
    finally:
        handle.remove()
    assert engine.last_path == "hf" and calls
    assert unsupported_reason(model, 16) is None
