"""The native engine on an accelerator (tests/accelerator.py: CUDA unless DAPO_TEST_DEVICE says
otherwise; skipped without one): exact behaviour log-probs on both forwards, top-k/top-p,
seeding, a bf16 decode of a float32 policy, and prepared weights that follow an optimizer step."""

from __future__ import annotations

import pytest
import torch
from conftest import PAD_ID, tiny_llama, tiny_qwen2
from rollout_helpers import reference_filtered_logprobs
from tests.accelerator import DEVICE, needs_accelerator

from dapo.rollout import NativeEngine, SamplingParams
from dapo.rollout.base import Completion

pytestmark = needs_accelerator

PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15], [3], [20, 21, 22, 23]]


def on_device(model: torch.nn.Module) -> torch.nn.Module:
    return model.to(DEVICE)


def forward_logits(model: torch.nn.Module, prompt: list[int], completion: Completion) -> torch.Tensor:
    """Logits (float64, on the CPU) that predict each response token: one unpadded forward."""
    ids = torch.tensor([prompt + completion.token_ids], device=DEVICE)
    with torch.no_grad():
        return model(ids).logits[0, len(prompt) - 1 : -1].double().cpu()


def max_logprob_error(model: torch.nn.Module, completions: list[Completion], temperature: float) -> float:
    errors = []
    for completion in completions:
        logprobs = torch.log_softmax(forward_logits(model, PROMPTS[completion.prompt_index], completion) / temperature, -1)
        exact = logprobs.gather(-1, torch.tensor(completion.token_ids)[:, None])[:, 0]
        errors.append((exact - torch.tensor(completion.logprobs, dtype=torch.float64)).abs().max().item())
    return max(errors)


@pytest.mark.parametrize("fast_forward", [True, False])
@pytest.mark.parametrize("make_model", [tiny_qwen2, tiny_llama], ids=["qwen2", "llama"])
def test_logprobs_on_the_device_match_its_teacher_forced_forward(make_model, fast_forward):
    model = on_device(make_model())
    engine = NativeEngine(model, PAD_ID, fast_forward=fast_forward)
    # stop tokens end rows at different steps: finished rows are dropped from the device batch.
    # Which rows stop depends on the device's random stream: seeds until both outcomes were seen.
    reasons: set[str] = set()
    for seed in range(8):
        params = SamplingParams(n=3, temperature=0.7, max_new_tokens=16, stop_token_ids=[1, 2], seed=seed)
        result = engine.generate(PROMPTS, params)
        assert engine.last_path == ("llama" if fast_forward else "hf")
        assert max_logprob_error(model, result.completions, 0.7) < 1e-4
        reasons |= {c.finish_reason for c in result.completions}
        if reasons == {"stop", "length"}:
            break
    assert reasons == {"stop", "length"}, "test needs both outcomes"


def test_top_k_top_p_logprobs_are_renormalised_on_the_device():
    model = on_device(tiny_qwen2())
    params = SamplingParams(n=2, temperature=0.8, top_k=8, top_p=0.5, max_new_tokens=6, seed=2)
    for completion in NativeEngine(model, PAD_ID).generate(PROMPTS, params).completions:
        logits = forward_logits(model, PROMPTS[completion.prompt_index], completion)
        for step, token in enumerate(completion.token_ids):
            reference = reference_filtered_logprobs(logits[step], 0.8, 8, 0.5)[token].item()
            assert completion.logprobs[step] == pytest.approx(reference, abs=1e-4)


def test_a_seed_fixes_the_samples_on_the_device():
    engine = NativeEngine(on_device(tiny_qwen2()), PAD_ID)

    def tokens(seed: int) -> list[list[int]]:
        params = SamplingParams(n=4, temperature=1.0, max_new_tokens=10, seed=seed)
        return [c.token_ids for c in engine.generate(PROMPTS, params).completions]

    assert tokens(3) == tokens(3) and tokens(3) != tokens(4)


def test_a_bf16_decode_of_a_float32_policy_stays_close_on_the_device():
    model = on_device(tiny_qwen2())
    params = SamplingParams(n=3, temperature=1.0, max_new_tokens=12, seed=5)
    engine = NativeEngine(model, PAD_ID, compute_dtype=torch.bfloat16)
    result = engine.generate(PROMPTS, params)
    assert engine.last_path == "llama" and next(model.parameters()).dtype == torch.float32
    assert max_logprob_error(model, result.completions, 1.0) < 0.1
    exact = NativeEngine(model, PAD_ID).generate(PROMPTS, params)  # a rounded model, not the float32 one
    assert any(a.logprobs != b.logprobs for a, b in zip(result.completions, exact.completions))


def test_prepared_weights_follow_an_optimizer_step_on_the_device():
    """The fast path keeps its cast and packed weights between generate() calls while the
    parameters are unchanged; an AdamW step on the device must be seen by the next call."""
    model = on_device(tiny_qwen2())
    engine = NativeEngine(model, PAD_ID)
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=8, seed=1)
    engine.generate(PROMPTS, params)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
    model(torch.tensor([PROMPTS[1]], device=DEVICE)).logits.square().mean().backward()
    optimizer.step()
    result = engine.generate(PROMPTS, params)
    assert max_logprob_error(model, result.completions, 1.0) < 1e-4
