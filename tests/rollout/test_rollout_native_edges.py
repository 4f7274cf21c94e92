"""NativeEngine at its edges (from a mutation audit of the rollout engine): a model whose weights are bf16
decodes on the fast path as Hugging Face's bf16 forward does (its norms are not folded into the weights, so
this is the path that applies them), a nucleus just under 1 still drops the tail, and a stop token id or a
request seed that cannot be used is a clear error, not a stop never matched or an integer overflow."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import PAD_ID, VOCAB_SIZE, tiny_llama, tiny_qwen2
from rollout_helpers import teacher_forced_logprobs

from dapo.rollout import NativeEngine, SamplingParams
from dapo.rollout.sampling import filter_logits

PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15], [3]]


@pytest.mark.parametrize("build", [tiny_qwen2, tiny_llama], ids=["qwen2", "llama"])
def test_a_bf16_model_decodes_on_the_fast_path_as_its_own_forward_does(build) -> None:
    """bf16 weights, decoded in bf16 (the usual GPU set-up): the behaviour log-probs are the bf16
    forward's within bf16's rounding (measured below 0.01; a decoder that skipped RMSNorm, or ran it
    with another epsilon, is off by 0.3 to 1)."""
    model = build().to(torch.bfloat16).eval()
    engine = NativeEngine(model, PAD_ID)
    result = engine.generate(PROMPTS, SamplingParams(n=2, max_new_tokens=10, seed=0))
    assert engine.last_path == "llama"
    for completion in result.completions:
        exact = teacher_forced_logprobs(model, PROMPTS[completion.prompt_index], completion, 1.0)
        assert (torch.tensor(completion.logprobs, dtype=torch.float64) - exact).abs().max() < 0.03


@pytest.mark.parametrize("top_p", [0.995, 0.9999])
def test_a_nucleus_just_under_one_still_drops_the_tail(top_p: float) -> None:
    """Token 1 holds e^-6 / (1 + e^-6) = 0.25% of the mass: outside any nucleus up to 99.75%."""
    logits = torch.tensor([[0.0, -6.0]])
    filtered = filter_logits(logits, 1.0, 0, top_p)
    tail_dropped = top_p <= 1 - math.exp(-6) / (1 + math.exp(-6))
    assert torch.isinf(filtered[0, 1]).item() is tail_dropped and filtered[0, 0].item() == 0.0


def test_a_stop_token_id_one_past_the_vocabulary_is_refused() -> None:
    with pytest.raises(ValueError, match=f"stop token id {VOCAB_SIZE} is outside the vocabulary"):
        NativeEngine(tiny_qwen2(), PAD_ID).generate(PROMPTS, SamplingParams(stop_token_ids=[2, VOCAB_SIZE]))


@pytest.mark.parametrize(("seed", "accepted"), [(2**63 - 2, True), (2**63 - 1, False), (-1, False)])
def test_a_request_seed_is_checked_against_the_seeds_its_samples_draw_from(seed: int, accepted: bool) -> None:
    """Sample j of a prompt draws from its seed + j: with n=2 the highest seed is 2**63 - 2."""
    params = SamplingParams(n=2, max_new_tokens=2, request_seeds=[7, seed, 9])
    engine = NativeEngine(tiny_qwen2(), PAD_ID)
    if accepted:
        assert len(engine.generate(PROMPTS, params).completions) == 6
    else:
        with pytest.raises(ValueError, match=r"request_seeds\[1\]=.* is outside \[0, 2\*\*63 - n\]"):
            engine.generate(PROMPTS, params)
