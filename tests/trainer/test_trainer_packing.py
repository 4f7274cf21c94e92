"""Padding-free packing (trainer.packing) gives the padded computation's log-probs, loss and
gradients: positions restart per sequence and attention stays inside each sequence."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from transformers import AttentionInterface, AutoModelForCausalLM
from transformers.integrations.sdpa_attention import repeat_kv
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, flash_attention_mask

from dapo.config import AlgorithmConfig, TrainerConfig
from dapo.trainer import packed_attention
from dapo.trainer.batch import Sample, collate, count_loss_tokens
from dapo.trainer.policy import PolicyWorker
from tests.trainer.test_trainer_policy import make_samples

FAKE_FLASH = "dapo_test_varlen"  # (a name with "flash" in it makes transformers load a kernel)
varlen_calls: list[tuple[list[int], int]] = []  # (cu_seq_lens_q, max_length_q) of each packed call


def _fake_flash_varlen(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """What a varlen flash-attention kernel computes, in plain torch, from what it is given: per
    sequence of cu_seq_lens_q/k in a packed row (int32 bounds, int lengths, as flash_attn takes
    them), else causal attention under the 2-D padding mask (a padding query sees itself)."""
    key = repeat_kv(key, module.num_key_value_groups)
    value = repeat_kv(value, module.num_key_value_groups)
    bounds = kwargs.get("cu_seq_lens_q")
    if bounds is not None:
        assert bounds.dtype == torch.int32 and kwargs["cu_seq_lens_k"] is bounds
        assert type(kwargs["max_length_q"]) is int and kwargs["max_length_k"] == kwargs["max_length_q"]
        varlen_calls.append((bounds.tolist(), kwargs["max_length_q"]))
        edges = bounds.tolist()
        out = torch.cat([F.scaled_dot_product_attention(query[..., a:b, :], key[..., a:b, :], value[..., a:b, :],
                                                        is_causal=True, scale=scaling)
                         for a, b in zip(edges, edges[1:])], dim=2)
    else:
        length = query.shape[2]
        allowed = torch.ones(length, length, dtype=torch.bool).tril()
        if attention_mask is not None:
            allowed = (allowed & attention_mask.bool()[:, None, None, :]) | torch.eye(length, dtype=torch.bool)
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=allowed, scale=scaling)
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(FAKE_FLASH, _fake_flash_varlen)
ALL_MASK_ATTENTION_FUNCTIONS.register(FAKE_FLASH, flash_attention_mask)


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
# path is NaN in float64, left-padding rows attend to nothing), to float32 rounding; a varlen
# flash-attention kernel (played by _fake_flash_varlen) given the packed rows' bounds.
@pytest.mark.parametrize(("attn", "dtype", "tol"), [("sdpa", torch.float64, 1e-10), ("eager", torch.float32, 2e-5),
                                                    (FAKE_FLASH, torch.float64, 1e-10)])
def test_packed_logprobs_loss_and_gradients_equal_the_padded_ones(tiny_model_dir, attn, dtype, tol, monkeypatch):
    monkeypatch.setattr(packed_attention, "is_flash_attention", lambda name: name == FAKE_FLASH)
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
    if attn == FAKE_FLASH:  # every layer of every packed call got the row's bounds, as given
        assert varlen_calls and all(max_length == max(b - a for a, b in zip(edges, edges[1:]))
                                    for edges, max_length in varlen_calls)


def test_flash_attention_kernels_are_told_apart_from_masked_attention():
    assert all(packed_attention.is_flash_attention(name)
               for name in ("flash_attention_2", "flash_attention_3", "kernels-community/flash-attn2"))
    assert not any(packed_attention.is_flash_attention(name) for name in ("sdpa", "eager", packed_attention.PACKED_SDPA))
