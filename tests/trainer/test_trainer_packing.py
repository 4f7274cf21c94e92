"""Padding-free packing (trainer.packing) gives the padded computation's log-probs, loss and
gradients: positions restart per sequence and attention stays inside each sequence."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import AutoModelForCausalLM

from dapo.config import AlgorithmConfig, TrainerConfig
from dapo.trainer.batch import Sample, collate, count_loss_tokens
from dapo.trainer.policy import PolicyWorker
from tests.trainer.test_trainer_policy import make_samples


def worker(model, packing: bool, micro_batch_tokens: int) -> PolicyWorker:
    trainer = TrainerConfig(prompts_per_step=3, mini_batch_prompts=3, micro_batch_tokens=micro_batch_tokens,
                            packing=packing, lr=1e-2, warmup_steps=0, grad_clip=1e9)
    return PolicyWorker(model, AlgorithmConfig(), trainer, pad_token_id=0, temperature=0.9, total_steps=10,
                        norm_const=16.0)


def test_packed_layout_by_hand():
    samples = [Sample(0, "a", [5, 6, 7], [8, 9, 10], [0.0] * 3, False), Sample(0, "a", [11, 12], [13, 14], [0.0] * 2, False)]
    t = collate(samples, pad_token_id=0, layout="packed")
    assert t["packed_input_ids"].tolist() == [[5, 6, 7, 8, 9, 10, 11, 12, 13, 14]]
    assert t["packed_position_ids"].tolist() == [[0, 1, 2, 3, 4, 5, 0, 1, 2, 3]]
    assert t["packed_logits_index"].tolist() == [2, 3, 4, 7, 8]  # the tokens before 8 9 10 | 13 14
    assert t["packed_labels"].tolist() == [[8, 9, 10, 13, 14]]
    assert "input_ids" not in t  # the padded input is not built for a packed micro-batch
    assert t["packed_rows"].tolist() == [0, 0, 0, 1, 1] and t["packed_cols"].tolist() == [0, 1, 2, 0, 1]
    assert t["packed_cu_seq_lens"].tolist() == [0, 6, 10]  # where each sequence starts, then the row's end


# float64 with sdpa: equal to rounding; eager in float32 (the default config's kernel; its padded
# path is NaN in float64, left-padding rows attend to nothing), to float32 rounding.
@pytest.mark.parametrize(("attn", "dtype", "tol"), [("sdpa", torch.float64, 1e-10), ("eager", torch.float32, 2e-5)])
def test_packed_logprobs_loss_and_gradients_equal_the_padded_ones(tiny_model_dir, attn, dtype, tol, monkeypatch):
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation=attn).to(dtype)
    layouts: list[tuple[bool, int]] = []  # (packed?, tokens) of every micro-batch the workers build
    real_collate = PolicyWorker._collate

    def recording_collate(self, micro_batch):
        tensors = real_collate(self, micro_batch)
        layouts.append(("packed_input_ids" in tensors, sum(s.num_tokens for s in micro_batch)))
        return tensors

    monkeypatch.setattr(PolicyWorker, "_collate", recording_collate)
    samples = make_samples(torch.Generator().manual_seed(1))
    num_tokens, num_seqs = count_loss_tokens(samples)
    outcomes = {}
    for packing, budget in ((False, 100_000), (True, 100_000), (True, 40)):  # padded; one packed row; several
        model = copy.deepcopy(base)
        w = worker(model, packing, budget)
        layouts.clear()
        logprobs = w.compute_logprobs(samples).logprobs
        if not packing:
            for s, lp in zip(samples, logprobs):
                s.old_logprobs = [x - 0.05 for x in lp]  # ratio != 1: clipping paths exercised
        stats = w.accumulate_gradients(samples, num_tokens, num_seqs)
        # the packed runs really took the packed layout, within the token budget (several rows at 40)
        assert layouts and all(packed == packing for packed, _ in layouts)
        if packing and budget == 40:
            assert len(layouts) > 2 and all(tokens <= 40 for _, tokens in layouts)
        outcomes[(packing, budget)] = (logprobs, stats.loss, [p.grad.clone() for p in model.parameters()])
    padded_logprobs, padded_loss, padded_grads = outcomes[(False, 100_000)]
    for key in ((True, 100_000), (True, 40)):
        logprobs, loss, grads = outcomes[key]
        for a, b in zip(padded_logprobs, logprobs):
            torch.testing.assert_close(torch.tensor(a), torch.tensor(b), rtol=0, atol=tol)
        assert loss == pytest.approx(padded_loss, rel=tol, abs=tol)
        for a, b in zip(padded_grads, grads):
            torch.testing.assert_close(a, b, rtol=tol * 10, atol=tol)
    assert any(g.abs().sum() > 0 for g in padded_grads)
