"""Next-token sampling with the log-prob of the distribution actually sampled from.

The behaviour policy of a rollout is not the model's raw softmax: it is

    pi_b(. | s) = renormalise( top_p( top_k( softmax(logits / T) ) ) )

and the importance ratio / truncated-importance-sampling correction needs log pi_b of each
sampled token. ``sample_next_tokens`` returns exactly that, computed from the same masked,
temperature-scaled logits it samples from.
"""

from __future__ import annotations

import torch

from dapo.algo.logprobs import row_chunks
from dapo.rollout.base import SamplingParams


def validate_sampling_params(params: SamplingParams) -> None:
    """Raise ValueError naming the field when ``params`` cannot be sampled with."""
    if params.n < 1:
        raise ValueError(f"SamplingParams.n={params.n}: need at least one sample per prompt")
    if not params.temperature > 0:
        raise ValueError(
            f"SamplingParams.temperature={params.temperature} must be > 0 "
            "(use a small value such as 1e-3 for near-greedy decoding)"
        )
    if not 0 < params.top_p <= 1:
        raise ValueError(f"SamplingParams.top_p={params.top_p} must be in (0, 1]")
    if params.top_k < 0:
        raise ValueError(f"SamplingParams.top_k={params.top_k} must be >= 0 (0 disables top-k)")
    if params.max_new_tokens < 1:
        raise ValueError(f"SamplingParams.max_new_tokens={params.max_new_tokens} must be >= 1")
    if any(not s for s in params.stop_strings):
        raise ValueError("SamplingParams.stop_strings contains an empty string, which matches anywhere")
    highest = (1 << 63) - params.n  # sample j draws from seed + j, an int64
    for index, seed in enumerate(params.request_seeds or ()):
        if not 0 <= seed <= highest:
            raise ValueError(f"SamplingParams.request_seeds[{index}]={seed} is outside [0, 2**63 - n]: a prompt's "
                             f"sample j draws from its seed + j, a 64-bit signed integer")


def validate_prompts(prompt_token_ids: list[list[int]], vocab_size: int) -> None:
    """Raise ValueError naming the prompt when one is empty or holds an out-of-vocabulary id."""
    for index, prompt in enumerate(prompt_token_ids):
        if len(prompt) == 0:
            raise ValueError(f"prompt {index} is empty: generation needs at least one prompt token")
        low, high = min(prompt), max(prompt)
        if low < 0 or high >= vocab_size:
            bad = low if low < 0 else high
            raise ValueError(f"prompt {index} holds token id {bad}, outside the vocabulary [0, {vocab_size})")


def random_seed() -> int:
    """A seed from torch's global RNG, for an unseeded call: ``torch.manual_seed`` alone then
    makes generation reproducible."""
    return int(torch.randint(0, 2**62, (1,)).item())


# SplitMix64 (Steele, Lea and Flood 2014) in int64 tensors, whose arithmetic wraps modulo 2^64
# as the generator's does; its constants as the int64s with the same bits.
_GOLDEN_GAMMA, _MIX_1, _MIX_2 = (c - (1 << 64) for c in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))
_DRAWS_PER_STEP = 2  # _sample's two levels


def _shifted_right(x: torch.Tensor, bits: int) -> torch.Tensor:
    """x >> bits of x's 64 bits as unsigned (torch shifts an int64 arithmetically)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def _splitmix64_mix(state: torch.Tensor) -> torch.Tensor:
    state = (state ^ _shifted_right(state, 30)) * _MIX_1
    state = (state ^ _shifted_right(state, 27)) * _MIX_2
    return state ^ _shifted_right(state, 31)


def counter_uniforms(row_seeds: torch.Tensor, first_step: int, steps: int = 1) -> torch.Tensor:
    """The (rows, steps, 2) uniform draws of decode steps ``first_step`` on for rows seeded
    ``row_seeds`` (int64), as :func:`_uniforms` bounds them: step t's are draws 2t and 2t + 1 of
    the SplitMix64 stream seeded with the row's seed, output i being mix(seed + (i + 1) * golden
    gamma). A row's draws depend on its seed and the step alone, never on the other rows of the
    batch: a prompt's samples are the same whichever prompts it is generated with, and however
    they are split, where its logits are (a batch of another size can round them otherwise: rarely
    in float32, more often in 16-bit). (Several steps at a time: a dozen tensor ops make a step's,
    30 us on the CPU.)"""
    dtype = _sum_dtype(row_seeds.device)
    first = _DRAWS_PER_STEP * first_step + 1
    counters = torch.arange(first, first + _DRAWS_PER_STEP * steps, device=row_seeds.device)
    mixed = _splitmix64_mix(row_seeds.unsqueeze(1) + counters * _GOLDEN_GAMMA)
    bits = 53 if dtype == torch.float64 else 24  # the significand's: [0, 1 - 2^-bits], as torch.rand
    uniform = _shifted_right(mixed, 64 - bits).to(dtype).mul_(2.0**-bits)
    return uniform.mul_(1.0 - torch.finfo(dtype).eps).unflatten(1, (steps, _DRAWS_PER_STEP))


class RowDraws:
    """The draws of decode rows each seeded on its own (:func:`counter_uniforms`), made STEPS
    decode steps at a time; :meth:`keep` follows the rows a batch keeps."""

    STEPS = 64

    def __init__(self, row_seeds: torch.Tensor, max_steps: int) -> None:
        self.row_seeds, self.max_steps = row_seeds, max_steps
        self.block: torch.Tensor | None = None  # (rows, steps, 2) from decode step self.first
        self.first = 0

    def at(self, step: int) -> torch.Tensor:
        """The (rows, 2) draws of decode step ``step`` (< max_steps)."""
        if self.block is None or not self.first <= step < self.first + self.block.shape[1]:
            steps = max(1, min(self.STEPS, self.max_steps - step))
            self.block, self.first = counter_uniforms(self.row_seeds, step, steps), step
        return self.block[:, step - self.first]

    def keep(self, rows: torch.Tensor) -> None:
        self.row_seeds = self.row_seeds[rows]
        if self.block is not None:
            self.block = self.block[rows]


def filter_logits(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """Temperature-scale and mask ``logits`` (B, V) to the behaviour distribution's support.

    Order as in Hugging Face and vLLM: logits / T, then keep the top_k largest, then keep the
    smallest prefix of the sorted distribution whose mass reaches top_p (nucleus sampling; the
    most likely token is always kept). Masked entries become -inf. top_k=0 and top_p=1 cost nothing.
    """
    if temperature != 1.0:
        logits = logits / temperature
    vocab_size = logits.shape[-1]
    if 0 < top_k < vocab_size:
        kth_largest = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth_largest, float("-inf"))
    if top_p < 1.0:
        sorted_logits, sorted_index = torch.sort(logits, dim=-1, descending=True)
        sorted_probs = sorted_logits.softmax(dim=-1)
        mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
        drop_sorted = mass_before >= top_p  # the token that crosses top_p is kept
        drop = drop_sorted.scatter(-1, sorted_index, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


# Tokens per block of the two-level draw (see _sample): one float64 cumulative sum over the block
# masses and one over the drawn block's tokens instead of over the whole vocabulary.
_BLOCK = 1024


def _sum_dtype(device: torch.device) -> torch.dtype:
    """float64 for the draws and cumulative sums; float32 on MPS, which has no float64 (a token's
    probability is then kept to about 1e-7 of its block's mass rather than to float32 precision)."""
    return torch.float32 if device.type == "mps" else torch.float64


def sample_next_tokens(
    logits: torch.Tensor,
    temperature: float,
    top_k: int,
    top_p: float,
    generator: torch.Generator | None,
    uniform: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one token per row of ``logits`` (B, V), any float dtype; return (tokens (B,),
    logprobs (B,)). The draws come from ``generator``, or are given: ``uniform`` (B, 2), as
    :func:`counter_uniforms` makes them.

    ``logprobs`` is log pi_b(token), pi_b the renormalised distribution after temperature,
    top-k and top-p (see :func:`filter_logits`), in float32; tokens are drawn from pi_b by
    inverse transform sampling (:func:`_sample`), with no host sync.

    Rows go through in the chunks of the loss's log-probs (:func:`dapo.algo.logprobs.row_chunks`:
    27 rows of a 152k vocabulary on CPU): a whole batch's float32 probabilities (64 rows: 39 MB)
    would be fresh allocations that glibc maps from the OS at every step, their page faults costing
    more than the softmax (a micro-benchmark: 12.8 ms freshly mapped, 3.6 ms in memory already
    mapped). The uniform draws are made for all rows first, so the tokens do not depend on the
    chunking.
    """
    if uniform is None:
        uniform = _uniforms(len(logits), generator, logits.device)
    tokens, logprobs = [], []
    for rows in row_chunks(logits) or [slice(0, 0)]:  # (no rows: empty results)
        probs = torch.softmax(filter_logits(logits[rows].float(), temperature, top_k, top_p), dim=-1)
        chunk_tokens = _sample(probs, uniform[rows])
        tokens.append(chunk_tokens)
        logprobs.append(probs.gather(-1, chunk_tokens.unsqueeze(-1)).squeeze(-1).log())
    if len(tokens) == 1:
        return tokens[0], logprobs[0]
    return torch.cat(tokens), torch.cat(logprobs)


def _uniforms(rows: int, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    """(rows, 2) uniform draws in [0, 1 - 3 ulp(1)/2] (float64: 1 - 3 * 2^-53; float32 on MPS:
    1 - 3 * 2^-24), the two levels of :func:`_sample`."""
    dtype = _sum_dtype(device)
    uniform = torch.rand(rows, 2, dtype=dtype, generator=generator, device=device)
    # at most 1 - 3 ulp/2 (torch.rand's largest is 1 - ulp/2): then u * total rounds to below
    # total (by at least one ulp), so some cumulative weight exceeds it (see _inverse_cdf)
    return uniform.mul_(1.0 - torch.finfo(dtype).eps)


def _sample(probs: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """Draw index v of each row of ``probs`` (B, V) with probability probs[v] / sum(probs), in two
    levels: a block of _BLOCK tokens by the blocks' masses (``uniform[:, 0]``), then a token of
    that block by its probability (``uniform[:, 1]``; ``uniform``: :func:`_uniforms`). Each
    level's cumulative sum is float64 (float32 on MPS: :func:`_sum_dtype`), so every token keeps its probability to float32 precision
    (relative), the tail's 1e-10s included; zero-probability (masked) tokens are never drawn. One
    pass over the vocabulary (the block sums) and two uniform draws per row: the exponential race,
    argmax p_v / E_v, draws V exponentials per row (with a 152k vocabulary on CPU, native decoding
    2-3x slower: docs/benchmarks.md, Generation speed, `bench_rollout.py --vocab-size`)."""
    vocab = probs.shape[1]
    if vocab <= _BLOCK:
        return _inverse_cdf(probs, uniform[:, :1])
    full_blocks = vocab // _BLOCK
    masses = probs[:, : full_blocks * _BLOCK].unflatten(-1, (full_blocks, _BLOCK)).sum(dim=-1)
    if vocab > full_blocks * _BLOCK:
        masses = torch.cat([masses, probs[:, full_blocks * _BLOCK :].sum(dim=-1, keepdim=True)], dim=-1)
    block = _inverse_cdf(masses, uniform[:, :1])
    token_ids = block.unsqueeze(1) * _BLOCK + torch.arange(_BLOCK, device=probs.device)
    in_block = probs.gather(1, token_ids.clamp_max(vocab - 1)).masked_fill_(token_ids >= vocab, 0.0)
    return (block * _BLOCK + _inverse_cdf(in_block, uniform[:, 1:])).clamp_max_(vocab - 1)


def _inverse_cdf(weights: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """Per row of ``weights`` (B, N), the first index whose cumulative weight exceeds
    uniform * total (``uniform`` (B, 1) in [0, 1 - 3 * 2^-53], so that u * total rounds to below
    total and some index exceeds it): index i with probability weights[i] / total. A zero weight
    adds nothing to the cumulative sum, so it is never the first to exceed it."""
    cumulative = torch.cumsum(weights, dim=-1, dtype=uniform.dtype)
    point = uniform * cumulative[:, -1:]
    # (clamped: NaN weights, which the caller reports, find no index)
    return torch.searchsorted(cumulative, point, right=True).squeeze(-1).clamp_max_(weights.shape[-1] - 1)
