"""The training forward's fast paths across architectures and config options, against each model's
own Hugging Face forward of every sequence alone (float64): dapo-rl's native forward for the
Llama-family variants it accepts (and its refusals), and the packed rows' per-sequence attention
(trainer.packing with sdpa/eager) for models whose masks are not causal within a sequence."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import pytest
import torch
import transformers
from transformers import AutoModelForCausalLM, PreTrainedConfig
from transformers.models.llama import modeling_llama
from transformers.models.mistral import modeling_mistral
from transformers.models.qwen2 import modeling_qwen2

from dapo.rollout.llama_support import unsupported_reason
from dapo.rollout.rope_groups import rope_per_row
from dapo.trainer.batch import Sample, collate
from dapo.trainer.native_forward import native_forward_reason, native_shared_prompt_logits
from dapo.trainer.packed_attention import (
    _packed_row,
    _sdpa_mask_unless_packed,
    packed_logits,
    packed_sdpa_forward,
    use_packed_attention,
)
from dapo.trainer.response_logits import response_logits
from tests.architecture_configs import (
    ACCEPTED,
    SLIDING_THEN_FULL,
    TINY,
    VOCAB,
)


def build(config: PreTrainedConfig, dtype: torch.dtype = torch.float64) -> torch.nn.Module:
    """A model whose every weight matters: biases and norm weights off their init."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=dtype)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 1:
                parameter.add_(torch.randn_like(parameter) * 0.2)
            else:
                parameter.normal_(0, 0.15)
    return model.eval()


def make_samples() -> list[Sample]:
    """Three prompts (3, 9 and 12 tokens), three responses each (1 to 11 tokens): sequences
    longer than the tests' windows and chunks (3 tokens), and shorter ones."""
    generator = torch.Generator().manual_seed(3)
    samples = []
    for group, length in enumerate((3, 9, 12)):
        prompt = torch.randint(3, VOCAB, (length,), generator=generator).tolist()
        for k in range(3):
            response = torch.randint(3, VOCAB, (1 + (4 * k + group) % 11,), generator=generator).tolist()
            samples.append(Sample(group, str(group), prompt, response, [-1.0] * len(response), False))
    return samples


def per_sequence_logits(model: torch.nn.Module, samples: list[Sample]) -> torch.Tensor:
    """The logits that predict each response token, from the model's own forward of each sequence alone."""
    rows = []
    for s in samples:
        logits = model(input_ids=torch.tensor([s.prompt_ids + s.response_ids])).logits[0]
        rows.append(logits[len(s.prompt_ids) - 1: -1])
    return torch.cat(rows)


def logits_and_grads(model: torch.nn.Module, forward: Callable, samples: list[Sample]) -> tuple[torch.Tensor, list]:
    model.zero_grad()
    logits = forward(model, samples)
    labels = torch.tensor([t for s in samples for t in s.response_ids])
    weights = torch.linspace(-1, 1, len(labels), dtype=logits.dtype)
    (logits.log_softmax(-1).gather(-1, labels[:, None])[:, 0] * weights).sum().backward()
    return logits.detach(), [p.grad.clone() for p in model.parameters()]


def assert_same(model: torch.nn.Module, forward: Callable, atol: float) -> None:
    samples = make_samples()
    reference, reference_grads = logits_and_grads(model, per_sequence_logits, samples)
    logits, grads = logits_and_grads(model, forward, samples)
    assert reference.abs().max() > 1  # logits that matter
    torch.testing.assert_close(logits, reference, rtol=0, atol=atol)
    largest = max(float(g.abs().max()) for g in reference_grads)
    for ours, theirs in zip(grads, reference_grads):
        assert (ours - theirs).abs().max() <= atol * largest


def native_logits(model: torch.nn.Module, samples: list[Sample]) -> torch.Tensor:
    tensors = collate(samples, 0, "shared_prompt")
    within = torch.arange(tensors["responses"].shape[1])[None] < tensors["response_lengths"][:, None]
    return native_shared_prompt_logits(model, tensors)[within]


def rms_norm_in_float64(self, hidden: torch.Tensor) -> torch.Tensor:
    """The RMSNorm without its float32 rounding, which would hide differences below float32's."""
    return self.weight * (hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


NATIVE = {
    **ACCEPTED,
    "mistral_without_window": lambda: transformers.MistralConfig(**TINY, sliding_window=None, head_dim=12),
    # Mistral's default window, longer than any sequence: causal attention, no window mask built
    "mistral_default_window": lambda: transformers.MistralConfig(**TINY, head_dim=12),
    # as long as the longest sequence (12 + 11 tokens): no key leaves it
    "mistral_window_as_long_as_the_longest_sequence": lambda: transformers.MistralConfig(**TINY, sliding_window=23),
    # shorter than most sequences: keys leave it, in the prompt pass and in the continuations'
    "mistral_window_shorter_than_the_sequences": lambda: transformers.MistralConfig(**TINY, sliding_window=3),
}


@pytest.mark.parametrize("name", sorted(NATIVE))
def test_native_forward_equals_each_sequences_own_forward(name, monkeypatch):
    for norm in (modeling_llama.LlamaRMSNorm, modeling_qwen2.Qwen2RMSNorm, modeling_mistral.MistralRMSNorm):
        monkeypatch.setattr(norm, "forward", rms_norm_in_float64)
    model = build(NATIVE[name]())
    assert native_forward_reason(model) is None
    assert_same(model, native_logits, atol=1e-11)


REFUSED = {
    "qwen2_sliding_layer": (lambda: transformers.Qwen2Config(**TINY, use_sliding_window=True, sliding_window=3,
                                                             max_window_layers=1), "sliding-window attention"),
    "llama_longrope": (lambda: transformers.LlamaConfig(**TINY, rope_parameters={
        "rope_type": "longrope", "rope_theta": 10000.0, "short_factor": [1.0] * 4, "long_factor": [2.0] * 4,
        "original_max_position_embeddings": 8}), "rope type 'longrope'"),
    "qwen3_qk_norm": (lambda: transformers.Qwen3Config(**TINY, head_dim=8), "model_type 'qwen3'"),
    "gemma3_softcapping": (lambda: transformers.Gemma3TextConfig(**TINY, head_dim=8, final_logit_softcapping=5.0),
                           "model_type 'gemma3_text'"),
    "granite_multipliers": (lambda: transformers.GraniteConfig(**TINY, residual_multiplier=0.5),
                            "model_type 'granite'"),
    "phi3_partial_rotary": (lambda: transformers.Phi3Config(**TINY, partial_rotary_factor=0.5, pad_token_id=0),
                            "model_type 'phi3'"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_the_native_forward_does_not_compute_is_refused(name):
    make_config, reason = REFUSED[name]
    model = build(make_config())
    assert reason in (native_forward_reason(model) or "")
    with pytest.raises(ValueError, match="does not compute this model"):
        native_logits(model, make_samples())


def test_a_submodule_neither_fast_path_reads_is_refused_by_both():
    """An extra module in a layer (a newer transformers' norm, say) would be skipped silently by
    the training forward and the rollout decoder alike, which read the layers' weights."""
    model = build(transformers.Qwen2Config(**TINY))
    model.model.layers[1].mlp.extra_norm = torch.nn.RMSNorm(32)
    reason = "layer 1.mlp has submodules this forward does not compute (extra_norm)"
    assert native_forward_reason(model) == reason
    assert unsupported_reason(model, 16) == reason


LONGROPE = {"rope_type": "longrope", "rope_theta": 10000.0, "factor": 2.0, "short_factor": [1.0, 1.5, 2.0, 1.0],
            "long_factor": [3.0, 2.0, 4.0, 8.0], "original_max_position_embeddings": 12}

PACKED = {
    # frequencies that follow the longest sequence of a call: sequences of 4 to 23 tokens, on both
    # sides of the threshold (12 tokens: the short factors; 16: dynamic's own frequencies)
    "llama_longrope_across_its_threshold": lambda: transformers.LlamaConfig(**TINY, rope_parameters=LONGROPE),
    "llama_dynamic_across_its_threshold": lambda: transformers.LlamaConfig(
        **TINY | {"max_position_embeddings": 16}, rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0,
                                                                   "factor": 4.0}),
    # the window reaches the attention as a keyword argument
    "mistral_window": lambda: transformers.MistralConfig(**TINY, sliding_window=3),
    # the window reaches the mask only (the attention gets no sliding_window argument)
    "qwen2_moe_sliding_layer": lambda: transformers.Qwen2MoeConfig(
        **TINY, moe_intermediate_size=16, shared_expert_intermediate_size=16, num_experts=4, num_experts_per_tok=2,
        use_sliding_window=True, sliding_window=3, max_window_layers=1),
    "phimoe_window": lambda: transformers.PhimoeConfig(**TINY, num_local_experts=4, num_experts_per_tok=2,
                                                       sliding_window=3),
    # chunked attention (a key seen only from its own chunk of 3 positions), on the first layer
    "llama4_chunked": lambda: transformers.Llama4TextConfig(
        **TINY, head_dim=8, intermediate_size_mlp=48, num_local_experts=2, attention_chunk_size=3,
        no_rope_layers=[1, 0], interleave_moe_layer_step=2),
    "gemma3_sliding_layer": lambda: transformers.Gemma3TextConfig(
        **TINY, head_dim=8, sliding_window=3, query_pre_attn_scalar=16, layer_types=SLIDING_THEN_FULL,
        final_logit_softcapping=5.0),
}


@pytest.mark.parametrize("name", sorted(PACKED))
def test_packed_rows_attend_as_each_sequences_own_forward(name):
    # float32 (the MoE models' grouped matmuls take no float64); a key seen or not is an O(1) difference
    model = build(PACKED[name](), torch.float32)
    assert use_packed_attention(model)
    assert_same(model, lambda m, samples: packed_logits(m, collate(samples, 0, "packed"))[0], atol=1e-5)


def test_a_mask_that_depends_on_more_than_positions_is_refused_in_a_packed_row():
    """transformers vmaps a custom or/and mask function (image tokens' bidirectional attention):
    not a function of the positions in a sequence, so no one sequence's mask stands for all."""
    bounds = torch.tensor([0, 4, 6], dtype=torch.int32)
    with _packed_row(bounds), pytest.raises(ValueError, match="set trainer.packing=false"):
        _sdpa_mask_unless_packed(batch_size=1, q_length=6, kv_length=6, use_vmap=True)


@pytest.mark.parametrize("marked", [True, False])
def test_a_sequences_mask_is_the_corner_of_the_longest_ones(marked):
    """The longest sequence's (1, 1, n, n) mask stands for every sequence's: its corner. Whether the
    mask still says up to which length its corners are causal (the model passed it on as made) or
    not (a model made a new tensor of it), the attention is the one of the window it came from."""
    gen = torch.Generator().manual_seed(0)
    lengths, window = [2, 6, 3, 3], 3
    query = torch.randn(1, 4, sum(lengths), 8, generator=gen, dtype=torch.float64)
    key, value = (torch.randn(1, 2, sum(lengths), 8, generator=gen, dtype=torch.float64) for _ in range(2))
    bounds = torch.tensor([0, 2, 8, 11, 14], dtype=torch.int32)
    offset = torch.arange(6)
    with _packed_row(bounds):
        mask = _sdpa_mask_unless_packed(batch_size=1, q_length=14, kv_length=14,
                                        mask_function=lambda b, h, q, kv: (kv <= q) & (q - kv < window))
    assert mask.shape == (1, 1, 6, 6)
    assert torch.equal(mask[0, 0], (offset[:, None] >= offset[None, :]) & (offset[:, None] - offset[None, :] < window))
    if not marked:
        mask = mask.clone()
    module = SimpleNamespace(is_causal=True)
    ours = packed_sdpa_forward(module, query, key, value, mask, scaling=0.125, cu_seq_lens_q=bounds)[0]
    by_window = packed_sdpa_forward(module, query, key, value, None, scaling=0.125, cu_seq_lens_q=bounds,
                                    sliding_window=window)[0]
    torch.testing.assert_close(ours, by_window, rtol=0, atol=0)
    causal = packed_sdpa_forward(module, query, key, value, None, scaling=0.125, cu_seq_lens_q=bounds)[0]
    assert not torch.allclose(ours, causal)


@pytest.mark.parametrize(("threshold", "rotations"), [(23, 1), (3, 1), (12, 2)])
def test_a_packed_rows_sequences_rotate_as_alone_in_one_call(threshold, rotations):
    """Sequences all on one side of a longrope threshold (at most 23 tokens: 23 is the longest's
    length, still short; past 3: every one long) share one rotation; mixed ones get one per side,
    in one model call still (FSDP2's collectives need the same calls on every rank)."""
    model = build(transformers.LlamaConfig(**TINY, rope_parameters=LONGROPE | {
        "original_max_position_embeddings": threshold}), torch.float32)
    use_packed_attention(model)
    calls = {"model": 0, "rotary": 0}
    model.model.register_forward_pre_hook(lambda *args: calls.__setitem__("model", calls["model"] + 1))
    forward = type(model.model.rotary_emb).forward
    model.model.rotary_emb.forward = lambda *args, **kwargs: (
        calls.__setitem__("rotary", calls["rotary"] + 1), forward(model.model.rotary_emb, *args, **kwargs))[1]
    assert_same(model, lambda m, samples: packed_logits(m, collate(samples, 0, "packed"))[0], atol=1e-5)
    # (the reference's forwards of each sequence alone: one call and one rotation each)
    samples = len(make_samples())
    assert calls == {"model": samples + 1, "rotary": samples + rotations}
    assert vars(model.model.rotary_emb)["forward"]  # the instance's own forward is put back


def test_transformers_own_inert_hooks_keep_both_fast_paths():
    """transformers hooks every layer for good at the first call that asks for hidden states
    (they record only inside such a call), and gradient_checkpointing_enable hooks the embedding
    (its output made to need a gradient): neither is a user's hook that a fast path would skip."""
    model = build(transformers.LlamaConfig(**TINY))
    model(input_ids=torch.tensor([[3, 4, 5]]), output_hidden_states=True)
    (getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable)()
    assert model.model.layers[0]._forward_hooks and model.model.embed_tokens._forward_hooks
    assert native_forward_reason(model) is None
    assert unsupported_reason(model, 16) is None


@pytest.mark.parametrize("name", ["llama_longrope_across_its_threshold", "llama_dynamic_across_its_threshold"])
def test_padded_rows_rotate_as_each_sequence_alone_under_rope_per_row(name):
    """The padded layout's call (a left-padded batch), as the policy would wrap it: each row
    rotated by its own length's frequencies, not the longest row's."""
    model = build(PACKED[name](), torch.float32)
    samples = make_samples()
    tensors = collate(samples, 0, "padded")
    with torch.no_grad(), rope_per_row(model, tensors["attention_mask"]):
        logits = model(input_ids=tensors["input_ids"], attention_mask=tensors["attention_mask"],
                       position_ids=tensors["position_ids"]).logits
    with torch.no_grad():
        for row, s in enumerate(samples):
            alone = model(input_ids=torch.tensor([s.prompt_ids + s.response_ids])).logits[0]
            length = len(s.prompt_ids) + len(s.response_ids)
            start = int(tensors["attention_mask"][row].nonzero().min())  # (the prompt's left padding)
            torch.testing.assert_close(logits[row, start:start + length], alone, rtol=0, atol=1e-5)
        # the policy's padded-layout forward is wrapped so (before, off by 1.4 for longrope)
        responses = tensors["responses"].shape[1]
        torch.testing.assert_close(response_logits(model, tensors, native=False),
                                   logits[:, -responses - 1:-1], rtol=0, atol=1e-6)
