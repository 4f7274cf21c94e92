"""sample_next_tokens: samples from, and reports log-probs of, the filtered distribution."""

from __future__ import annotations

import pytest
import torch
from rollout_helpers import reference_filtered_logprobs

from dapo.rollout.base import SamplingParams
from dapo.rollout.sampling import filter_logits, sample_next_tokens, validate_sampling_params


@pytest.mark.parametrize(
    ("temperature", "top_k", "top_p"),
    [(1.0, 0, 1.0), (0.7, 0, 1.0), (1.3, 5, 1.0), (1.0, 0, 0.8), (0.7, 7, 0.6), (1.0, 0, 0.05)],
)
def test_logprobs_are_of_the_renormalised_filtered_distribution(temperature: float, top_k: int, top_p: float) -> None:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(32, 20, generator=generator) * 2
    tokens, logprobs = sample_next_tokens(logits, temperature, top_k, top_p, generator)
    for row in range(len(logits)):
        reference = reference_filtered_logprobs(logits[row], temperature, top_k, top_p)
        assert torch.isfinite(reference[tokens[row]]), "sampled a token outside the top-k/top-p support"
        assert logprobs[row].item() == pytest.approx(reference[tokens[row]].item(), abs=1e-5)


def test_no_filtering_is_plain_softmax_of_scaled_logits() -> None:
    logits = torch.randn(4, 30)
    filtered = filter_logits(logits, 0.5, top_k=0, top_p=1.0)
    assert torch.equal(filtered, logits / 0.5)


def test_empirical_frequencies_match_the_filtered_distribution() -> None:
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05])).expand(40000, 4)
    tokens, _ = sample_next_tokens(logits, 1.0, 0, 0.9, torch.Generator().manual_seed(1))
    frequencies = torch.bincount(tokens, minlength=4).double() / len(tokens)
    # top_p=0.9 keeps {0.5, 0.3, 0.15} (mass 0.95), renormalised by 0.95; token 3 never drawn
    expected = torch.tensor([0.5, 0.3, 0.15, 0.0], dtype=torch.float64) / 0.95
    assert torch.allclose(frequencies, expected, atol=0.01)


def test_same_generator_seed_gives_same_tokens() -> None:
    logits = torch.randn(16, 50)
    first, _ = sample_next_tokens(logits, 1.0, 0, 1.0, torch.Generator().manual_seed(3))
    second, _ = sample_next_tokens(logits, 1.0, 0, 1.0, torch.Generator().manual_seed(3))
    assert torch.equal(first, second)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("temperature", 0.0, "temperature"), ("top_p", 0.0, "top_p"), ("top_k", -1, "top_k"),
     ("max_new_tokens", 0, "max_new_tokens"), ("n", 0, "n="), ("stop_strings", [""], "empty string")],
)
def test_bad_sampling_params_are_rejected_with_the_field_named(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_sampling_params(SamplingParams(**{field: value}))


@pytest.mark.parametrize(("temperature", "top_k", "top_p"), [(1.0, 1, 1.0), (1.0, 0, 0.5), (1e-3, 0, 1.0)])
def test_a_uniform_draw_of_exactly_zero_still_samples_the_only_allowed_token(monkeypatch, temperature, top_k, top_p):
    # torch.rand draws an exact 0 once in 2^24: its race value was inf, every p/E of a
    # one-token support was 0, and argmax returned token 0, a masked one, with log-prob -inf
    logits = torch.zeros(2, 8)
    logits[:, 5] = 30.0  # token 5 is the only one top_k=1 / top_p=0.5 / a tiny temperature allows
    real_rand = torch.rand

    def rand_with_a_zero(*args, **kwargs):
        uniform = real_rand(*args, **kwargs)
        uniform[:, 5] = 0.0
        return uniform

    monkeypatch.setattr(torch, "rand", rand_with_a_zero)
    tokens, logprobs = sample_next_tokens(logits, temperature, top_k, top_p, torch.Generator().manual_seed(0))
    assert tokens.tolist() == [5, 5]
    assert torch.isfinite(logprobs).all() and logprobs.tolist() == pytest.approx([0.0, 0.0], abs=1e-6)
