"""Overlong Reward Shaping (DAPO, arXiv 2503.14476, Section 3.4).

Overlong Filtering: a response truncated at the generation limit is penalised for its length,
not for its reasoning, which injects reward noise; DAPO masks such responses out of the loss.
:func:`overlong_filter_mask` gives the per-response weight (0 for truncated, 1 otherwise), to be
multiplied into the response mask.

Soft Overlong Punishment (Eq. 13), with L_max the maximum response length and L_cache the
punishment buffer, added to the correctness reward:

    R_length(y) = 0                                   if |y| <= L_max - L_cache
                = ((L_max - L_cache) - |y|) / L_cache   if L_max - L_cache < |y| <= L_max
                = -1                                  if L_max < |y|

scaled by ``penalty_factor`` (1.0 in the reference run; L_max = 20480, L_cache = 4096, so the
penalty starts after 16384 tokens). Our rollout engines stop at L_max, so a truncated response
has exactly |y| = L_max tokens and the ramp already reaches -L_cache / L_cache * factor = -factor
there; the third branch only matters for lengths coming from elsewhere. The three branches are
one expression: clamp(((L_max - L_cache) - |y|) / L_cache, -1, 0) * factor.
With L_cache = 0 there is no ramp: 0 up to L_max, -factor beyond.
"""

from __future__ import annotations

import torch
from torch import Tensor


def soft_overlong_penalty(
    response_lengths: Tensor, max_response_length: int, buffer_len: int, penalty_factor: float = 1.0
) -> Tensor:
    """DAPO's Soft Overlong Punishment R_length(|y|) * penalty_factor, one float per response."""
    if max_response_length <= 0:
        raise ValueError(f"max_response_length must be > 0, got {max_response_length}")
    if not 0 <= buffer_len <= max_response_length:
        raise ValueError(f"buffer_len (L_cache) must be in [0, max_response_length={max_response_length}], got {buffer_len}")
    if penalty_factor < 0:
        raise ValueError(f"penalty_factor must be >= 0 (it scales a penalty), got {penalty_factor}")
    dtype = response_lengths.dtype if response_lengths.is_floating_point() else torch.float32
    lengths = response_lengths.to(dtype)
    if buffer_len == 0:
        penalty = torch.where(lengths > max_response_length, -1.0, 0.0).to(dtype)
    else:
        free_length = max_response_length - buffer_len
        penalty = torch.clamp((free_length - lengths) / buffer_len, min=-1.0, max=0.0)
    return penalty * penalty_factor


def overlong_filter_mask(truncated: Tensor) -> Tensor:
    """Overlong Filtering weight per response: 0.0 where ``truncated``, 1.0 otherwise (float32)."""
    if truncated.dtype != torch.bool:
        raise ValueError(f"truncated must be a bool tensor (True = hit the length limit), got {truncated.dtype}")
    return (~truncated).to(torch.float32)
