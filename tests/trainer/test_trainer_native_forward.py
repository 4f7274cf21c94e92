"""dapo-rl's own training forward (trainer.forward=native, dapo.trainer.native_forward): the
logits, log-probs, loss and gradients of Hugging Face's forward, with the token-wise work on the
real tokens only, for the Llama family's variants; and the worker picks it only where it
computes the model."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)
from transformers.models.llama import modeling_llama
from transformers.models.qwen2 import modeling_qwen2

from dapo.config import TrainerConfig
from dapo.config.schema import ConfigError
from dapo.trainer import native_forward
from dapo.trainer.batch import Sample, collate, count_loss_tokens
from dapo.trainer.native_forward import native_forward_reason, native_shared_prompt_logits
from dapo.trainer.shared_prompt import shared_prompt_logits
from tests.trainer.test_trainer_shared_prompt import make_group_samples, worker

VOCAB = 96


def qwen2() -> Qwen2ForCausalLM:
    """Q/K/V biases, grouped-query attention (2 query heads per KV head), tied embeddings."""
    torch.manual_seed(0)
    return Qwen2ForCausalLM(Qwen2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                        tie_word_embeddings=True))


def llama() -> LlamaForCausalLM:
    """Attention and MLP biases (o_proj and down_proj too), one KV head, an explicit head_dim
    other than hidden/heads, an untied output layer, Llama 3's RoPE scaling."""
    torch.manual_seed(1)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=1, head_dim=16, max_position_embeddings=128, attention_bias=True, mlp_bias=True,
        tie_word_embeddings=False, rope_parameters={"rope_type": "llama3", "rope_theta": 500.0, "factor": 8.0,
                                                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                    "original_max_position_embeddings": 16}))
    with torch.no_grad():  # random init leaves biases at zero; make them matter
        for name, parameter in model.named_parameters():
            if name.endswith("bias"):
                parameter.normal_(0, 0.1)
    return model


def rms_norm_in_float64(self, hidden: torch.Tensor) -> torch.Tensor:
    """Llama's and Qwen2's RMSNorm without its float32 rounding, which would otherwise hide
    differences below float32's in a float64 comparison (both forwards call the norm modules)."""
    return self.weight * (hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


def with_attention(model: torch.nn.Module, attention: str) -> torch.nn.Module:
    model.set_attn_implementation(attention)
    return model


def logits_both_ways(model: torch.nn.Module, samples: list[Sample], autocast: bool) -> tuple[torch.Tensor, ...]:
    tensors = collate(samples, 0, "shared_prompt")
    within = torch.arange(tensors["responses"].shape[1])[None] < tensors["response_lengths"][:, None]
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        return shared_prompt_logits(model, tensors)[within], native_shared_prompt_logits(model, tensors)[within]


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
@pytest.mark.parametrize("make_model", [qwen2, llama])
def test_native_logits_equal_hugging_faces(make_model, attention, monkeypatch):
    """Either attention kernel, as the model's attn_implementation asks, against Hugging Face's."""
    samples = make_group_samples(torch.Generator().manual_seed(4), groups=4)
    samples.append(Sample(9, "x", [5, 6, 7, 8, 9, 10, 11], [12], [-1.0], False))  # a long prompt, a 1-token response
    model = with_attention(make_model().eval(), attention)
    assert model.model.rotary_emb.rope_type == ("llama3" if make_model is llama else "default")
    assert native_forward_reason(model) is None
    hf, native = logits_both_ways(model, samples, autocast=False)
    torch.testing.assert_close(native, hf, rtol=0, atol=2e-5)  # fused projections sum in another order
    assert hf.abs().max() > 0.1  # logits that matter
    hf, native = logits_both_ways(model, samples, autocast=True)  # the same bf16 matmul inputs as Hugging Face's
    # eager: the same ops in the same precision, bit for bit; sdpa: to bf16 rounding
    torch.testing.assert_close(native, hf, rtol=0, atol=0 if attention == "eager" else 2e-2)
    monkeypatch.setattr(modeling_llama.LlamaRMSNorm, "forward", rms_norm_in_float64)
    monkeypatch.setattr(modeling_qwen2.Qwen2RMSNorm, "forward", rms_norm_in_float64)
    # float64 against Hugging Face's sdpa: its eager attention is NaN in float64 here (a padding
    # query that sees no key: the float32 softmax of float64's min), dapo-rl's is not
    model.double()
    hf = logits_both_ways(with_attention(model, "sdpa"), samples, autocast=False)[0]
    native = logits_both_ways(with_attention(model, attention), samples, autocast=False)[1]
    assert native.isfinite().all()
    torch.testing.assert_close(native, hf, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("make_model", "attention"), [(qwen2, "eager"), (llama, "sdpa")])
def test_native_logprobs_loss_and_gradients_equal_hugging_faces(make_model, attention, monkeypatch):
    """Through the policy worker, with a KL term to a reference model (its forward native too)
    and micro-batches small enough to split groups: the update of Hugging Face's forward (with
    sdpa: its eager attention is NaN in float64, see above), dapo-rl's with ``attention``."""
    monkeypatch.setattr(modeling_llama.LlamaRMSNorm, "forward", rms_norm_in_float64)
    monkeypatch.setattr(modeling_qwen2.Qwen2RMSNorm, "forward", rms_norm_in_float64)
    base = with_attention(make_model().double(), "sdpa")
    reference = copy.deepcopy(base).eval()
    with torch.no_grad():
        for p in reference.parameters():
            p.mul_(1.05)
    samples = make_group_samples(torch.Generator().manual_seed(5), groups=4)
    num_tokens, num_seqs = count_loss_tokens(samples)
    outcomes = {}
    for forward, budget in (("hf", 100_000), ("native", 100_000), ("native", 30)):
        model = copy.deepcopy(base) if forward == "hf" else with_attention(copy.deepcopy(base), attention)
        w = worker(model, "shared_prompt", budget, kl_coef=0.1, ref_model=reference, forward=forward)
        assert (w.native_policy, w.native_ref) == ((forward == "native"),) * 2
        logprobs = w.compute_logprobs(samples).logprobs
        if forward == "hf":
            for s, lp in zip(samples, logprobs):
                s.old_logprobs = [x - 0.05 for x in lp]  # ratio != 1: clipping paths exercised
        stats = w.accumulate_gradients(samples, num_tokens, num_seqs)
        outcomes[(forward, budget)] = (logprobs, stats.loss, stats.loss - stats.pg_loss,
                                       [p.grad.clone() for p in model.parameters()])
    hf_logprobs, hf_loss, hf_kl, hf_grads = outcomes[("hf", 100_000)]
    assert hf_kl > 0
    for key in (("native", 100_000), ("native", 30)):
        logprobs, loss, kl, grads = outcomes[key]
        for a, b in zip(hf_logprobs, logprobs):
            torch.testing.assert_close(torch.tensor(b), torch.tensor(a), rtol=0, atol=1e-12)
        assert loss == pytest.approx(hf_loss, rel=1e-10, abs=1e-12)
        assert kl == pytest.approx(hf_kl, rel=1e-9, abs=1e-12)
        # relative to the largest gradient (the query and key projections' are 1e-4 of it in the Llama)
        largest = max(float(a.abs().max()) for a in hf_grads)
        for a, b in zip(hf_grads, grads):
            assert (a - b).abs().max() <= 1e-12 * largest
    assert all(g.abs().sum() > 0 for g in hf_grads)  # every parameter, biases included, gets a gradient


def test_native_forward_with_gradient_checkpointing_recomputes_the_same_gradients(monkeypatch):
    samples = make_group_samples(torch.Generator().manual_seed(6))
    for s in samples:
        s.old_logprobs = [-2.0] * len(s.response_ids)
    layer_runs = []
    real_layer_forward = native_forward._layer_forward
    monkeypatch.setattr(native_forward, "_layer_forward", lambda *args: layer_runs.append(1) or real_layer_forward(*args))
    grads, runs = [], []
    for recompute in (False, True):
        model = qwen2().double()
        if recompute:
            model.activation_checkpointing_enable()
        w = worker(model, "shared_prompt", 100_000, forward="native")
        layer_runs.clear()
        w.accumulate_gradients(samples)
        runs.append(len(layer_runs))
        grads.append([p.grad.clone() for p in model.parameters()])
    assert runs == [2, 4]  # two layers, one micro-batch; checkpointed: each layer again in backward
    for a, b in zip(*grads):
        torch.testing.assert_close(b, a, rtol=1e-12, atol=0)


def test_the_worker_runs_native_only_where_it_computes_the_model():
    assert worker(qwen2(), "shared_prompt", 1000, forward="auto").native_policy  # CPU, a supported model
    assert not worker(qwen2(), "shared_prompt", 1000, forward="hf").native_policy
    assert not worker(qwen2(), "padded", 1000, forward="auto").native_policy  # native computes one layout
    with pytest.raises(ConfigError, match="set trainer.shared_prompt=true"):
        TrainerConfig(forward="native")
    dropout = qwen2()
    dropout.model.layers[1].self_attn.attention_dropout = 0.1  # the module's rate (disable_dropout zeroes it)
    hooked = qwen2()
    hooked.model.layers[0].self_attn.k_proj.register_forward_hook(lambda module, args, out: out * 2)
    offloaded = qwen2()  # accelerate's hooks replace a module's forward
    offloaded.model.forward = lambda *args, **kwargs: None
    extra_norm = qwen2()  # as Qwen3's attention has (a per-head norm this forward would skip)
    extra_norm.model.layers[0].self_attn.k_norm = torch.nn.RMSNorm(8)
    dynamic = qwen2()
    dynamic.config.rope_parameters = {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=4, n_positions=64))
    refused = ((dropout, "attention dropout 0.1 in layer 1"), (hooked, r"forward hooks \(or a replaced forward"),
               (offloaded, r"forward hooks \(or a replaced forward\) on the model"),
               (extra_norm, r"layer 0.self_attn has submodules this forward does not compute \(k_norm\)"),
               (dynamic, "rope type 'dynamic'"), (gpt2, "model_type 'gpt2'"))
    for model, reason in refused:
        assert native_forward_reason(model) is not None
        if model is not dynamic:  # (the shared-prompt layout itself refuses a dynamic RoPE)
            assert not worker(model, "shared_prompt", 1000, forward="auto").native_policy  # Hugging Face's forward
            # a ConfigError: the command line's one line, not a traceback
            with pytest.raises(ConfigError, match=f"trainer.forward=native does not compute this model: {reason}"):
                worker(model, "shared_prompt", 1000, forward="native")
        tensors = collate(make_group_samples(torch.Generator().manual_seed(0)), 0, "shared_prompt")
        with pytest.raises(ValueError, match=f"does not compute this model: {reason}"):  # never wrong logits
            native_shared_prompt_logits(model, tensors)


def test_backward_hooks_and_global_hooks_are_refused():
    """A full backward hook on a projection this forward reads (it runs only when the module is
    called), and a global hook (it would run on the norms and o_proj/down_proj this forward calls,
    not on Q/K/V or gate/up), would be skipped in part, silently."""
    backward_hooked = qwen2()
    backward_hooked.model.layers[1].mlp.up_proj.register_full_backward_hook(lambda *args: None)
    assert "forward hooks (or a replaced forward" in native_forward_reason(backward_hooked)
    model = qwen2()
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda *args: None)
    try:
        assert "global forward hooks" in native_forward_reason(model)
    finally:
        handle.remove()
    assert native_forward_reason(model) is None
