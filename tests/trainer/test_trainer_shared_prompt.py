"""The shared-prompt layout (trainer.shared_prompt) forwards each distinct prompt of a micro-batch
once and continues its responses from the prompt's cache: the padded computation's log-probs,
loss and gradients, with fewer tokens through the model."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from dapo.config import AlgorithmConfig, DAPOConfig, TrainerConfig
from dapo.config.loading import builtin_config_path, load_config
from dapo.trainer.batch import Sample, collate, count_loss_tokens, iter_micro_batches
from dapo.trainer.policy import PolicyWorker
from dapo.trainer.shared_prompt import check_shared_prompt, checkpointing


def make_group_samples(generator: torch.Generator, groups: int = 3, group_size: int = 4) -> list[Sample]:
    """Groups of responses to one prompt each (prompts of different lengths, responses of 1 to 10
    tokens; the last group has the first one's prompt, as a dataset's repeated problem does), and
    one response masked out by overlong filtering."""
    samples = []
    prompts = [torch.randint(3, 90, (2 + 2 * group,), generator=generator).tolist() for group in range(groups - 1)]
    for group, prompt in enumerate(prompts + prompts[:1]):
        for k in range(group_size):
            response = torch.randint(3, 90, (1 + (3 * k + group) % 10,), generator=generator).tolist()
            samples.append(Sample(group, str(group), prompt, response, [-1.0] * len(response), False,
                                  advantage=float(k) - 1.5))
    samples[5].loss_weight = 0.0
    return samples


def worker(model, layout: str, micro_batch_tokens: int, kl_coef: float = 0.0, ref_model=None,
           forward: str = "hf") -> PolicyWorker:
    """A policy worker; Hugging Face's forward unless told (dapo-rl's own: test_trainer_native_forward.py)."""
    trainer = TrainerConfig(prompts_per_step=3, mini_batch_prompts=3, micro_batch_tokens=micro_batch_tokens,
                            packing=layout == "packed", shared_prompt=layout == "shared_prompt",
                            forward=forward, lr=1e-2, warmup_steps=0, grad_clip=1e9)
    return PolicyWorker(model, AlgorithmConfig(kl_coef=kl_coef), trainer, pad_token_id=0, temperature=0.9,
                        total_steps=10, norm_const=16.0, ref_model=ref_model)


def test_shared_prompt_layout_by_hand():
    samples = [Sample(0, "a", [5, 6, 7], [8, 9, 10], [0.0] * 3, False),
               Sample(0, "a", [5, 6, 7], [13], [0.0], False),
               Sample(1, "b", [11, 12], [14, 15], [0.0] * 2, False)]
    t = collate(samples, pad_token_id=0, layout="shared_prompt")
    assert t["prompt_input_ids"].tolist() == [[5, 6, 7], [0, 11, 12]]  # each prompt once, left-padded
    assert t["prompt_attention_mask"].tolist() == [[1, 1, 1], [0, 1, 1]]
    assert t["prompt_position_ids"].tolist() == [[0, 1, 2], [0, 0, 1]]
    assert t["prompt_index"].tolist() == [0, 0, 1]
    # the responses but their last token; positions going on from the prompt's, padding at the last
    # real one (as in the padded layout)
    assert t["continuation_input_ids"].tolist() == [[8, 9], [13, 0], [14, 15]]
    assert t["continuation_position_ids"].tolist() == [[3, 4], [3, 3], [2, 3]]
    assert t["continuation_attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 1, 0], [0, 1, 1, 1, 1]]
    assert t["responses"].tolist() == [[8, 9, 10], [13, 0, 0], [14, 15, 0]]  # the loss's layout is unchanged
    assert "input_ids" not in t
    # an empty response's padding too stays at its prompt's last position, as in the padded layout
    empty = [Sample(0, "a", [5, 6, 7], [], [], False), Sample(0, "a", [5, 6, 7], [8, 9, 10], [0.0] * 3, False)]
    padded = collate(empty, 0)["position_ids"][0, -3:].tolist()
    assert collate(empty, 0, "shared_prompt")["continuation_position_ids"][0].tolist() == padded[:2] == [2, 2]
    with pytest.raises(ValueError, match="without prompt tokens"):
        collate([Sample(0, "a", [], [8], [0.0], False)], 0, "shared_prompt")


def test_shared_prompt_micro_batches_count_each_prompt_once():
    prompt = [1] * 10
    samples = [Sample(0, "a", prompt, [2] * 5, [0.0] * 5, False) for _ in range(8)]
    # 10 + 8 x 5 = 50 tokens with the prompt once; padded, 8 x 15 = 120
    assert [len(m) for m in iter_micro_batches(samples, 50, "shared_prompt")] == [8]
    assert [len(m) for m in iter_micro_batches(samples, 50, "padded")] == [3, 3, 2]
    other = [Sample(1, "b", [3] * 10, [2] * 5, [0.0] * 5, False)]
    assert [len(m) for m in iter_micro_batches(samples + other, 50, "shared_prompt")] == [8, 1]  # 60 > 50


# float64 with sdpa: log-probs and loss equal to rounding; eager in float32 (the default config's
# kernel), to float32 rounding. Gradients, relative to the tensor's largest: Qwen2's RMSNorm rounds
# to float32 even in a float64 model, and backward sums the G responses' gradients into their
# prompt before that rounding rather than after it (the padded layout), so they agree to float32's.
@pytest.mark.parametrize(("attn", "dtype", "tol", "grad_tol"),
                         [("sdpa", torch.float64, 1e-10, 1e-6), ("eager", torch.float32, 2e-5, 1e-4)])
@pytest.mark.filterwarnings("error:`past_key_values` is deprecated:FutureWarning")
def test_shared_prompt_logprobs_loss_and_gradients_equal_the_padded_ones(tiny_model_dir, attn, dtype, tol, grad_tol,
                                                                         monkeypatch):
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation=attn).to(dtype)
    prompt_rows: list[tuple[int, int]] = []  # (prompt rows, responses) of every shared-prompt micro-batch
    real_collate = PolicyWorker._collate

    def recording_collate(self, micro_batch):
        tensors = real_collate(self, micro_batch)
        if "prompt_input_ids" in tensors:
            prompt_rows.append((tensors["prompt_input_ids"].shape[0], len(micro_batch)))
        return tensors

    monkeypatch.setattr(PolicyWorker, "_collate", recording_collate)
    samples = make_group_samples(torch.Generator().manual_seed(1), groups=4)
    num_tokens, num_seqs = count_loss_tokens(samples)
    reference = copy.deepcopy(base).eval()
    with torch.no_grad():  # a reference policy other than the current one, so the KL term is not 0
        for p in reference.parameters():
            p.mul_(1.05)
    outcomes = {}
    for layout, budget in (("padded", 100_000), ("shared_prompt", 100_000), ("shared_prompt", 30)):
        model = copy.deepcopy(base)
        w = worker(model, layout, budget, kl_coef=0.1, ref_model=reference)
        prompt_rows.clear()
        logprobs = w.compute_logprobs(samples).logprobs
        if layout == "padded":
            for s, lp in zip(samples, logprobs):
                s.old_logprobs = [x - 0.05 for x in lp]  # ratio != 1: clipping paths exercised
        stats = w.accumulate_gradients(samples, num_tokens, num_seqs)
        if layout == "shared_prompt":  # each group's prompt went through the model once per micro-batch
            if budget == 100_000:  # one micro-batch per pass: the 3 distinct prompts of the 16 responses
                assert prompt_rows == [(3, 16)] * 2  # the log-prob pass, then the update
            else:
                assert len(prompt_rows) > 4 and sum(r for r, _ in prompt_rows) < sum(n for _, n in prompt_rows)
        kl_term = stats.loss - stats.pg_loss  # kl_coef x the KL penalty to the reference model
        outcomes[(layout, budget)] = (logprobs, stats.loss, kl_term, [p.grad.clone() for p in model.parameters()])
    padded_logprobs, padded_loss, padded_kl, padded_grads = outcomes[("padded", 100_000)]
    assert padded_kl > 0  # the reference model's log-probs (the same layout) entered the loss
    for key in (("shared_prompt", 100_000), ("shared_prompt", 30)):
        logprobs, loss, kl, grads = outcomes[key]
        for a, b in zip(padded_logprobs, logprobs):
            torch.testing.assert_close(torch.tensor(a), torch.tensor(b), rtol=0, atol=tol)
        assert loss == pytest.approx(padded_loss, rel=tol, abs=tol)
        assert kl == pytest.approx(padded_kl, rel=tol * 10, abs=tol)
        for a, b in zip(padded_grads, grads):
            assert (a - b).abs().max() <= grad_tol * a.abs().max()
    assert any(g.abs().sum() > 0 for g in padded_grads)


def test_one_token_responses_equal_the_padded_ones(tiny_model_dir):
    """Every response one token long: the continuation call still runs (on the responses' one
    token, so that every micro-batch calls the model twice on every FSDP rank); its logits predict
    nothing the loss needs and are dropped."""
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation="sdpa").double()
    samples = [Sample(0, "a", [5, 6, 7], [8], [-1.0], False, advantage=1.0),
               Sample(0, "a", [5, 6, 7], [9], [-1.0], False, advantage=-1.0)]
    assert collate(samples, 0, "shared_prompt")["continuation_input_ids"].tolist() == [[8], [9]]
    outcomes = {}
    for layout in ("padded", "shared_prompt"):
        model = copy.deepcopy(base)
        w = worker(model, layout, 1000)
        logprobs = w.compute_logprobs(samples).logprobs
        for sample, old in zip(samples, logprobs):
            sample.old_logprobs = old  # pi_old (the first layout's, for both)
        loss = w.accumulate_gradients(samples).loss
        outcomes[layout] = (torch.from_numpy(np.stack(logprobs)), loss, [p.grad.clone() for p in model.parameters()])
    assert outcomes["shared_prompt"][0].shape == (2, 1)
    torch.testing.assert_close(outcomes["shared_prompt"][0], outcomes["padded"][0], rtol=0, atol=1e-10)
    assert outcomes["shared_prompt"][1] == pytest.approx(outcomes["padded"][1], rel=1e-10)
    for a, b in zip(outcomes["padded"][2], outcomes["shared_prompt"][2]):
        assert (a - b).abs().max() <= 1e-6 * a.abs().max()


@pytest.mark.filterwarnings("error:`past_key_values` is deprecated:FutureWarning")
def test_gradient_checkpointing_keeps_the_prompt_cache(tiny_model_dir):
    """Hugging Face's checkpointed layers drop a cache unless told they may keep it: the recompute
    in backward must read the same prompt keys and values as the forward did."""
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation="sdpa").double()
    samples = make_group_samples(torch.Generator().manual_seed(2))
    for s in samples:
        s.old_logprobs = [-2.0] * len(s.response_ids)
    grads = {}
    for layout, recompute in (("padded", False), ("shared_prompt", True)):
        model = copy.deepcopy(base)
        if recompute:
            model.activation_checkpointing_enable()  # as model.gradient_checkpointing=true does
        stats = worker(model, layout, 100_000).accumulate_gradients(samples)
        assert checkpointing(model) == recompute
        grads[layout] = (stats.loss, [p.grad.clone() for p in model.parameters()])
    assert grads["shared_prompt"][0] == pytest.approx(grads["padded"][0], rel=1e-10)
    for a, b in zip(grads["padded"][1], grads["shared_prompt"][1]):
        assert (a - b).abs().max() <= 1e-6 * a.abs().max()
    assert not any("_can_checkpoint_with_cache" in vars(m) for m in model.modules())  # only for the two calls


def test_shared_prompt_refuses_what_it_cannot_compute_exactly(tiny_model_dir, monkeypatch):
    samples = make_group_samples(torch.Generator().manual_seed(3))
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).double()
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": True})
    with pytest.raises(RuntimeError, match="non-reentrant"):  # the prompt's keys would get no gradient
        worker(model, "shared_prompt", 1000).accumulate_gradients(samples, on_policy=True)
    # RoPE whose frequencies follow a call's longest position: refused when the worker is built
    config = LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
                         rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    with pytest.raises(ValueError, match="'dynamic'"):
        worker(LlamaForCausalLM(config), "shared_prompt", 1000)
    worker(LlamaForCausalLM(config), "padded", 1000)  # the padded layout computes it
    per_attention_type = LlamaForCausalLM(copy.deepcopy(config))  # one RoPE per attention type, as Gemma 3 has
    per_attention_type.config.rope_parameters = {"full_attention": {"rope_type": "default"},
                                                 "sliding_attention": {"rope_type": "longrope"}}
    with pytest.raises(ValueError, match="'longrope'"):
        check_shared_prompt(per_attention_type)
    class Transformers4Cache:  # a cache of whole-model tensors, no per-layer objects
        def __init__(self) -> None: ...
    monkeypatch.setattr("dapo.trainer.shared_prompt.Cache", Transformers4Cache)
    with pytest.raises(ValueError, match="needs transformers 5"):
        worker(LlamaForCausalLM(config), "shared_prompt", 1000)


def test_shared_prompt_and_packing_are_two_layouts():
    with pytest.raises(ValueError, match="two layouts of a micro-batch, and both are on"):
        TrainerConfig(packing=True, shared_prompt=True)
    assert DAPOConfig().trainer.layout == "padded"
    assert TrainerConfig(shared_prompt=True).layout == "shared_prompt"
    assert load_config([builtin_config_path("default")]).trainer.layout == "shared_prompt"  # the embedded default's
