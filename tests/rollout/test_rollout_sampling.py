"""sample_next_tokens: samples from, and reports log-probs of, the filtered distribution."""

from __future__ import annotations

import pytest
import torch
from rollout_helpers import reference_filtered_logprobs

from dapo.algo import logprobs as logprobs_module
from dapo.rollout import sampling
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


@pytest.mark.parametrize(("temperature", "top_k", "top_p"), [(1.0, 0, 1.0), (0.7, 50, 0.9)])
def test_chunks_of_rows_sample_what_the_whole_batch_would(monkeypatch, temperature, top_k, top_p) -> None:
    """Rows go through in chunks (bounded temporaries); the tokens and log-probs must not depend
    on the chunking, and bf16 logits sample as their float32 values do."""
    vocab = 3 * sampling._BLOCK + 11  # the two-level draw
    logits = (torch.randn(23, vocab, generator=torch.Generator().manual_seed(0)) * 3).bfloat16()

    def sample(chunk_bytes: int, batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        monkeypatch.setattr(logprobs_module, "_CPU_CHUNK_BYTES", chunk_bytes)
        return sample_next_tokens(batch, temperature, top_k, top_p, torch.Generator().manual_seed(4))

    whole_tokens, whole_logprobs = sample(2**40, logits.float())
    for chunk_rows in (1, 5, 23):
        tokens, logprobs = sample(chunk_rows * vocab * 4, logits)  # float32 rows
        assert torch.equal(tokens, whole_tokens), chunk_rows
        assert torch.equal(logprobs, whole_logprobs), chunk_rows
        assert logprobs.dtype == torch.float32
    assert len(set(whole_tokens.tolist())) > 10  # the rows drew different tokens (a shared draw would not)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("temperature", 0.0, "temperature"), ("top_p", 0.0, "top_p"), ("top_k", -1, "top_k"),
     ("max_new_tokens", 0, "max_new_tokens"), ("n", 0, "n="), ("stop_strings", [""], "empty string")],
)
def test_bad_sampling_params_are_rejected_with_the_field_named(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_sampling_params(SamplingParams(**{field: value}))


@pytest.mark.parametrize(("draw", "sum_dtype"), [(0.0, torch.float64), (1.0 - 2.0**-53, torch.float64),
                                               (1.0 - 2.0**-24, torch.float32)])
@pytest.mark.parametrize("vocab", [8, 3000])
@pytest.mark.parametrize(("temperature", "top_k", "top_p"), [(1.0, 1, 1.0), (1.0, 0, 0.5), (1e-3, 0, 1.0)])
def test_extreme_uniform_draws_still_sample_the_only_allowed_token(monkeypatch, draw, sum_dtype, vocab, temperature,
                                                                   top_k, top_p):
    # The inverse-CDF draw at its two ends: 0 must not pick a masked token before the allowed one,
    # and the largest draw below 1 (u * total can round up to total) must not run past the last;
    # float32: a device without float64 (MPS), its largest draw
    monkeypatch.setattr(sampling, "_sum_dtype", lambda device: sum_dtype)
    logits = torch.zeros(2, vocab)
    logits[:, 5] = logits[:, -3] = -1000.0  # masked by any of the filters below, either side of 5
    logits[:, 1500 % vocab] = 40.0  # the only token top_k=1 / top_p=0.5 / a tiny temperature allows
    monkeypatch.setattr(torch, "rand", lambda *args, **kwargs: torch.full(args, draw, **{
        k: v for k, v in kwargs.items() if k != "generator"}))
    tokens, logprobs = sample_next_tokens(logits, temperature, top_k, top_p, torch.Generator().manual_seed(0))
    assert tokens.tolist() == [1500 % vocab] * 2
    assert torch.isfinite(logprobs).all() and logprobs.tolist() == pytest.approx([0.0, 0.0], abs=1e-6)


@pytest.mark.parametrize("sum_dtype", [torch.float64, torch.float32])
def test_a_large_vocabulary_is_sampled_exactly_across_blocks_and_in_the_last_partial_block(monkeypatch,
                                                                                          sum_dtype) -> None:
    """The two-level draw (blocks of _BLOCK tokens, here 128): tokens either side of a block
    boundary, in the vocabulary's last, partial block, and of a tiny probability are drawn at
    their rates; a masked token in a block of mass is never drawn, nor is a block of masked tokens.
    float32: the draws and sums on a device without float64 (MPS; not run here, so its dtype is
    forced on the CPU)."""
    monkeypatch.setattr(sampling, "_BLOCK", 128)
    monkeypatch.setattr(sampling, "_sum_dtype", lambda device: sum_dtype)
    vocab = 8 * sampling._BLOCK + 37
    probs = torch.zeros(vocab, dtype=torch.float64)
    probs[384:1000] = 1e-3 / 616  # 616 tokens of 1.6e-6 (blocks 3-7); block 2 is all masked
    picks = {sampling._BLOCK - 1: 0.3, sampling._BLOCK: 0.2, vocab - 1: 0.25, 5: 0.25 - 1e-3}
    for token, p in picks.items():
        probs[token] = p
    generator = torch.Generator().manual_seed(2)
    uniform = sampling._uniforms(200_000, generator, probs.device)
    assert uniform.dtype == sum_dtype and uniform.max() < 1.0
    tokens = sampling._sample(probs.float().expand(200_000, vocab), uniform)  # a view of one row
    counts = torch.bincount(tokens, minlength=vocab).double()
    for token, p in picks.items():
        assert counts[token] / len(tokens) == pytest.approx(p, abs=0.005)
    tail = counts[384:1000].sum() / len(tokens)
    assert tail == pytest.approx(1e-3, abs=3e-4)  # 200 expected draws, sd 14
    assert counts[probs == 0].sum() == 0
    tokens, logprobs = sample_next_tokens(probs.log().float().expand(64, vocab), 1.0, 0, 1.0, generator)
    assert torch.allclose(logprobs.double(), probs.log()[tokens], atol=1e-5)


def test_the_last_partial_block_draws_its_tokens_by_their_own_probabilities() -> None:
    """Two tokens of 1/2 alone in the vocabulary's last, partial block (1026 = 1024 + 2): the
    in-block draw splits at 1/2. Positions past the vocabulary must weigh nothing: read as the last
    token's probability, that token took 2/3 of its block."""
    probs = torch.zeros(1, sampling._BLOCK + 2)
    probs[0, -2:] = 0.5
    for in_block, token in [(0.4, sampling._BLOCK), (0.6, sampling._BLOCK + 1)]:
        assert sampling._sample(probs, torch.tensor([[0.5, in_block]], dtype=torch.float64)).item() == token


def test_top_p_keeps_the_smallest_prefix_whose_mass_reaches_p() -> None:
    """Probabilities 0.5, 0.25, 0.25 at top_p 0.5: the first token alone reaches it (as HF and vLLM
    filter); keeping a second changes the behaviour policy the log-probs are of."""
    filtered = filter_logits(torch.tensor([[0.5, 0.25, 0.25]]).log(), 1.0, 0, 0.5)
    assert torch.isfinite(filtered).tolist() == [[True, False, False]]


def test_non_finite_logits_give_nan_log_probs_not_an_index_error() -> None:
    """A NaN logit (diverged weights) must reach the caller's finite check as a NaN log-prob."""
    logits = torch.zeros(3, 2000)
    logits[1, 7] = float("nan")
    tokens, logprobs = sample_next_tokens(logits, 1.0, 0, 1.0, torch.Generator().manual_seed(0))
    assert ((tokens >= 0) & (tokens < 2000)).all()
    assert torch.isnan(logprobs[1]) and torch.isfinite(logprobs[[0, 2]]).all()


def _splitmix64(seed: int, count: int) -> list[int]:
    """SplitMix64's first ``count`` outputs from ``seed``, in Python's exact integers (the reference
    of Steele, Lea and Flood 2014)."""
    mask, state, out = (1 << 64) - 1, seed & ((1 << 64) - 1), []
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        out.append(z ^ (z >> 31))
    return out


@pytest.mark.parametrize("sum_dtype", [torch.float64, torch.float32])
def test_counter_draws_are_splitmix64_s_stream_of_each_row_s_seed(monkeypatch, sum_dtype) -> None:
    """Row r's draws at decode step t are outputs 2t and 2t+1 of SplitMix64 seeded with its seed,
    in int64 arithmetic that wraps as the reference's (seeds past 2^62 and negative ones too), cut
    to the significand's top bits; the rows of a batch do not change each other's draws."""
    monkeypatch.setattr(sampling, "_sum_dtype", lambda device: sum_dtype)
    seeds = [0, 1, 7, 2**62 - 1, 2**62 + 12345, -1, -(2**63)]
    bits = 53 if sum_dtype == torch.float64 else 24
    for step in (0, 1, 5, 4095):
        draws = sampling.counter_uniforms(torch.tensor(seeds), step)[:, 0]
        assert draws.dtype == sum_dtype
        for row, seed in enumerate(seeds):
            outputs = _splitmix64(seed, 2 * step + 2)[-2:]
            expected = torch.tensor([(z >> (64 - bits)) * 2.0**-bits for z in outputs], dtype=sum_dtype)
            assert torch.equal(draws[row], expected.mul_(1.0 - torch.finfo(sum_dtype).eps)), (seed, step)
        alone = sampling.counter_uniforms(torch.tensor(seeds[3:4]), step)[:, 0]
        assert torch.equal(alone[0], draws[3])
        several = sampling.counter_uniforms(torch.tensor(seeds), step - 1, 3) if step else None
        assert several is None or (several.shape == (len(seeds), 3, 2) and torch.equal(several[:, 1], draws))


def test_counter_draws_are_uniform_and_neighbouring_seeds_independent() -> None:
    """200k rows seeded 0, 1, 2, ... (a prompt's samples are seeded seed + j): each level's draws
    are uniform on [0, 1) (Kolmogorov-Smirnov distance well under its 1% critical value, 0.0036),
    uncorrelated between neighbouring rows, between the two levels and between steps."""
    seeds = torch.arange(200_000, dtype=torch.int64)
    first, second = sampling.counter_uniforms(seeds, 0, 2).unbind(1)
    for draws in (first[:, 0], first[:, 1], second[:, 0]):
        ordered = draws.sort().values
        ecdf = torch.arange(1, len(ordered) + 1, dtype=torch.float64) / len(ordered)
        assert (ecdf - ordered).abs().max() < 0.0036
    pairs = [(first[:-1, 0], first[1:, 0]), (first[:, 0], first[:, 1]), (first[:, 0], second[:, 0])]
    for a, b in pairs:
        assert abs(torch.corrcoef(torch.stack([a, b]))[0, 1]) < 0.01  # sd of r: 1/sqrt(200k) = 0.0022


def test_row_draws_follow_the_rows_a_batch_keeps_across_blocks_of_steps() -> None:
    """The native engine's rows draw a block of steps at a time and drop finished rows: each kept
    row's draws stay those of its own seed, before and after a drop, in and across blocks."""
    seeds = torch.tensor([11, 12, 13, 14])
    draws = sampling.RowDraws(seeds, 3 * sampling.RowDraws.STEPS + 6)
    assert torch.equal(draws.at(0), sampling.counter_uniforms(seeds, 0)[:, 0])
    draws.keep(torch.tensor([1, 3]))
    for step in (1, sampling.RowDraws.STEPS - 1, sampling.RowDraws.STEPS, 3 * sampling.RowDraws.STEPS + 5):
        assert torch.equal(draws.at(step), sampling.counter_uniforms(seeds[[1, 3]], step)[:, 0]), step
    assert draws.block.shape[1] == 1  # the last block: no draws past max_steps


def test_a_negative_token_id_in_a_prompt_is_refused_naming_the_prompt():
    """It went on to the embedding lookup, which fails without saying which prompt."""
    with pytest.raises(ValueError, match="prompt 1 holds token id -3"):
        sampling.validate_prompts([[1, 2], [4, -3]], 10)
