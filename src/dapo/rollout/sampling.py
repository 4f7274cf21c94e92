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


def validate_prompts(prompt_token_ids: list[list[int]], vocab_size: int) -> None:
    """Raise ValueError naming the prompt when one is empty or holds an out-of-vocabulary id."""
    for index, prompt in enumerate(prompt_token_ids):
        if len(prompt) == 0:
            raise ValueError(f"prompt {index} is empty: generation needs at least one prompt token")
        low, high = min(prompt), max(prompt)
        if low < 0 or high >= vocab_size:
            bad = low if low < 0 else high
            raise ValueError(f"prompt {index} holds token id {bad}, outside the vocabulary [0, {vocab_size})")


def make_generator(seed: int | None, device: torch.device) -> torch.Generator:
    """A generator seeded by ``seed``, or from torch's global RNG when ``seed`` is None, so that
    ``torch.manual_seed`` alone also makes generation reproducible."""
    if seed is None:
        seed = int(torch.randint(0, 2**62, (1,)).item())
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


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
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one token per row of ``logits`` (B, V), any float dtype; return (tokens (B,),
    logprobs (B,)).

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
