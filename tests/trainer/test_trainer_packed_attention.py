"""Per-sequence attention of a packed row (trainer.packing with sdpa/eager) against the
block-diagonal mask it replaces, in float64; and the models it is switched on for."""

from __future__ import annotations

import itertools
import json
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

from dapo.trainer.packed_attention import PACKED_SDPA, packed_sdpa_forward, use_packed_attention


def _block_diagonal_reference(query, key, value, lengths, window=None):
    """softmax(q k^T * scaling + mask) v with the row-wide mask transformers builds for a packed row."""
    sequence = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    position = torch.cat([torch.arange(n) for n in lengths])
    allowed = (sequence[:, None] == sequence[None, :]) & (position[:, None] >= position[None, :])
    if window is not None:
        allowed &= position[:, None] - position[None, :] < window
    groups = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    scores = query @ key.transpose(-1, -2) * 0.125 + torch.where(allowed, 0.0, float("-inf")).double()
    return (scores.softmax(-1) @ value).transpose(1, 2)


@pytest.mark.parametrize("window", [None, 3])  # a sliding window shorter than some sequences
# a one-token sequence among them; runs of equal lengths (computed as one batch)
@pytest.mark.parametrize("lengths", [[5, 1, 7, 4], [3, 3, 5, 1, 1, 4, 4, 4]])
def test_per_sequence_attention_equals_the_block_diagonal_mask(window, lengths):
    gen = torch.Generator().manual_seed(0)
    total = sum(lengths)
    query = torch.randn(1, 4, total, 8, generator=gen, dtype=torch.float64, requires_grad=True)
    key = torch.randn(1, 2, total, 8, generator=gen, dtype=torch.float64, requires_grad=True)  # GQA: 2 per KV head
    value = torch.randn(1, 2, total, 8, generator=gen, dtype=torch.float64, requires_grad=True)
    bounds = torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int32)
    ours, weights = packed_sdpa_forward(SimpleNamespace(), query, key, value, None, scaling=0.125,
                                        cu_seq_lens_q=bounds, sliding_window=window)
    assert weights is None and ours.shape == (1, total, 4, 8)
    reference = _block_diagonal_reference(query, key, value, lengths, window)
    torch.testing.assert_close(ours, reference, atol=1e-12, rtol=1e-12)
    upstream = torch.randn(ours.shape, generator=gen, dtype=torch.float64)
    ours_grads = torch.autograd.grad((ours * upstream).sum(), (query, key, value))
    reference_grads = torch.autograd.grad((reference * upstream).sum(), (query, key, value))
    for mine, theirs in zip(ours_grads, reference_grads):
        torch.testing.assert_close(mine, theirs, atol=1e-12, rtol=1e-12)


def test_calls_without_sequence_bounds_are_sdpa_with_the_mask():
    gen = torch.Generator().manual_seed(1)
    query, key, value = (torch.randn(2, 2, 5, 8, generator=gen, dtype=torch.float64) for _ in range(3))
    mask = torch.ones(2, 1, 5, 5, dtype=torch.bool).tril()
    mask[1, :, :, :2] = False  # the second row's first two keys are padding
    mask[1, :, :2, 0] = True  # (padding queries see something: no empty softmax row)
    module = SimpleNamespace(is_causal=True)
    ours, _ = packed_sdpa_forward(module, query, key, value, mask, scaling=0.125)
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=0.125).transpose(1, 2)
    torch.testing.assert_close(ours, expected, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_packing_models_switch_and_their_checkpoints_load_anywhere(tiny_model_dir, tmp_path, attn):
    """The switch is the model's own: a checkpoint saved after it names no implementation a fresh
    process would not know."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation=attn)
    assert use_packed_attention(model) and model.config._attn_implementation == PACKED_SDPA
    model.save_pretrained(tmp_path)
    assert PACKED_SDPA not in json.dumps(json.loads((tmp_path / "config.json").read_text()))
    model.config._attn_implementation_internal = "flash_attention_2"  # varlen already: left alone
    assert not use_packed_attention(model)
    assert model.config._attn_implementation == "flash_attention_2"


def test_a_packed_row_builds_no_row_wide_mask_and_padded_calls_keep_theirs(tiny_model_dir, monkeypatch):
    """The switched model computes a packed row without the (N, N) mask (its longest sequence's
    alone), and a padded batch (a generation, say) with its padding mask, as plain sdpa does."""
    import dapo.trainer.packed_attention as packed_attention
    from dapo.trainer.batch import Sample, collate

    built = []
    real_mask = packed_attention.sdpa_mask
    monkeypatch.setattr(packed_attention, "sdpa_mask", lambda **kw: built.append(kw) or real_mask(**kw))
    sdpa = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation="sdpa", dtype=torch.float64)
    switched = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation="sdpa", dtype=torch.float64)
    use_packed_attention(switched)
    samples = [Sample(0, "a", [5, 6, 7], [8, 9, 10], [0.0] * 3, False), Sample(1, "b", [11], [13, 14], [0.0] * 2, False),
               Sample(2, "c", [15, 16], [17], [0.0], False)]  # two of length 3 after each other: one batched run
    packed = collate(samples, pad_token_id=0, layout="packed")
    ours = packed_attention.packed_logits(switched, packed)
    # only the last row of the longest sequence's (6 x 6) mask, which is causal: no mask is passed on,
    # and neither the longest's whole mask nor the row's (12 x 12) is built
    assert built and all(kw["q_length"] == 1 and kw["kv_length"] == 6 for kw in built)
    built.clear()
    theirs = packed_attention.packed_logits(sdpa, packed)  # transformers' block-diagonal mask
    torch.testing.assert_close(ours, theirs, atol=1e-10, rtol=1e-10)
    padded = collate(samples, pad_token_id=0, layout="padded")
    inputs = {k: padded[k] for k in ("input_ids", "attention_mask", "position_ids")}
    torch.testing.assert_close(switched(**inputs).logits, sdpa(**inputs).logits, atol=1e-10, rtol=1e-10)
    assert built  # the padded call's mask


def test_checkpointed_layers_recompute_the_per_sequence_attention(tiny_model_dir):
    """Backward's recompute of a checkpointed layer reads the packed call's bounds and no mask,
    so the gradients are those of the run without checkpointing."""
    import copy

    from dapo.config import AlgorithmConfig, TrainerConfig
    from dapo.trainer.policy import PolicyWorker
    from tests.trainer.test_trainer_policy import make_samples

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation="sdpa", dtype=torch.float64)
    samples = make_samples(torch.Generator().manual_seed(5))
    for s in samples:
        s.old_logprobs = [-2.0] * len(s.response_ids)
    grads = []
    for checkpointing in (False, True):
        model = copy.deepcopy(base)
        if checkpointing:
            model.activation_checkpointing_enable()
        trainer = TrainerConfig(prompts_per_step=3, mini_batch_prompts=3, micro_batch_tokens=40, packing=True,
                                lr=1e-2, warmup_steps=0, grad_clip=1e9)
        worker = PolicyWorker(model, AlgorithmConfig(), trainer, pad_token_id=0, temperature=1.0, total_steps=1,
                              norm_const=16.0)
        worker.accumulate_gradients(samples)
        grads.append([p.grad.clone() for p in model.parameters()])
    for plain, recomputed in zip(*grads):
        torch.testing.assert_close(recomputed, plain, atol=1e-12, rtol=1e-10)


def test_what_per_sequence_sdpa_cannot_compute_is_refused_not_computed_wrong():
    """Inside a packed call (no row-wide mask was built), a layer without the bounds (a model that
    drops its forward's keyword arguments) or with softcapping/non-causal attention raises."""
    from dapo.trainer.packed_attention import _packed_row

    query = key = value = torch.zeros(1, 2, 6, 4)
    bounds = torch.tensor([0, 2, 6], dtype=torch.int32)
    with _packed_row(bounds):
        with pytest.raises(RuntimeError, match="without its sequence bounds"):
            packed_sdpa_forward(SimpleNamespace(), query, key, value, None)
        with pytest.raises(ValueError, match="softcap"):
            packed_sdpa_forward(SimpleNamespace(), query, key, value, None, cu_seq_lens_q=bounds, softcap=50.0)
        with pytest.raises(ValueError, match="non-causal"):
            packed_sdpa_forward(SimpleNamespace(is_causal=False), query, key, value, None, cu_seq_lens_q=bounds)


def test_a_model_without_sdpa_keeps_eager_and_its_mask():
    from transformers import Gemma2Config, Gemma2ForCausalLM

    config = Gemma2Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                          num_key_value_heads=1, head_dim=8, attn_implementation="eager")
    model = Gemma2ForCausalLM(config)
    assert not model._supports_sdpa  # transformers' own refusal (softcapping)
    assert not use_packed_attention(model) and model.config._attn_implementation == "eager"
