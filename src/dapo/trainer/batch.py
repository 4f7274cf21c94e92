"""Rollout samples and how they become padded tensors, mini-batches and micro-batches.

Layout of a collated micro-batch (verl's): prompts are LEFT-padded to the micro-batch's longest
prompt and responses RIGHT-padded to its longest response, so every response starts at the same
column P. Then the logits that predict the response are the last R+1 positions minus the final
one, and the model only needs ``logits_to_keep=R+1``.

    input_ids:  [pad pad p0 p1 p2 | r0 r1 r2 pad]
    labels:                         r0 r1 r2 pad   (response_mask 1 1 1 0)

Packed (padding-free) layout, with ``collate(..., packed=True)``: the model's input is instead ONE
row of the sequences back to back, positions restarting at 0 for each, no attention mask, so
transformers confines attention to each sequence (varlen flash-attention with
flash_attention_2, a block-diagonal causal mask with sdpa/eager):

    packed_input_ids:    [p0 p1 p2 r0 r1 r2 | q0 q1 s0 s1]
    packed_position_ids: [ 0  1  2  3  4  5 |  0  1  2  3]
    packed_logits_index: the positions whose logits predict a response token (p2 r0 r1 | q1 s0),
    packed_labels:       those response tokens (r0 r1 r2 | s0 s1),
    packed_rows/cols:    where each of those lands in the padded (B, R) response layout.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import torch


@dataclass
class Sample:
    """One response to one prompt, with everything the update needs."""

    group_id: int  # responses to the same prompt in the same round share it
    uid: str  # the problem's uid
    prompt_ids: list[int]
    response_ids: list[int]
    rollout_logprobs: list[float]  # behaviour log-probs reported by the rollout engine
    truncated: bool  # cut at rollout.max_response_length
    score: float = 0.0  # verifier/user reward before overlong shaping
    acc: bool = False
    reward: float = 0.0  # score + soft overlong penalty: what advantages are computed from
    advantage: float = 0.0
    loss_weight: float = 1.0  # 0 when overlong filtering masks this response out
    old_logprobs: list[float] = field(default_factory=list)  # trainer's recomputed log-probs
    policy_version: int = 0  # training step whose policy generated it (>0 age = carried over)
    carried_over: bool = False  # dynamic sampling's surplus from an earlier step (an older policy)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.response_ids)


def collate(samples: list[Sample], pad_token_id: int, packed: bool = False) -> dict[str, torch.Tensor]:
    """The tensors the policy worker consumes for ``samples``: the model's input in the padded
    layout, or with ``packed`` in the padding-free one (both in the module doc), and the loss's
    per-response-token tensors in the padded (B, R) layout either way."""
    response_len = max(max(len(s.response_ids) for s in samples), 1)
    batch = len(samples)
    responses = torch.full((batch, response_len), pad_token_id, dtype=torch.long)
    response_mask = torch.zeros((batch, response_len), dtype=torch.float32)
    old_logprobs = torch.zeros((batch, response_len), dtype=torch.float32)
    rollout_logprobs = torch.zeros((batch, response_len), dtype=torch.float32)
    for row, sample in enumerate(samples):
        r = len(sample.response_ids)
        responses[row, :r] = torch.tensor(sample.response_ids, dtype=torch.long)
        response_mask[row, :r] = sample.loss_weight
        rollout_logprobs[row, :r] = torch.tensor(sample.rollout_logprobs)
        if sample.old_logprobs is sample.rollout_logprobs:  # old_logprobs=rollout: convert once
            old_logprobs[row, :r] = rollout_logprobs[row, :r]
        elif sample.old_logprobs:
            old_logprobs[row, :r] = torch.tensor(sample.old_logprobs)
    return {
        **(pack(samples) if packed else _padded_inputs(samples, responses, pad_token_id)),
        "responses": responses,
        "response_mask": response_mask,
        "old_logprobs": old_logprobs,
        "rollout_logprobs": rollout_logprobs,
        "advantages": torch.tensor([s.advantage for s in samples], dtype=torch.float32),
        "response_lengths": torch.tensor([len(s.response_ids) for s in samples], dtype=torch.long),
        "sampled_this_step": torch.tensor([not s.carried_over for s in samples], dtype=torch.bool),
        "has_old_logprobs": torch.tensor([bool(s.old_logprobs) for s in samples], dtype=torch.bool),
    }


def _padded_inputs(samples: list[Sample], responses: torch.Tensor, pad_token_id: int) -> dict[str, torch.Tensor]:
    """Prompts left-padded to the longest, followed by the right-padded ``responses``."""
    prompt_len = max(len(s.prompt_ids) for s in samples)
    prompts = torch.full((len(samples), prompt_len), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(samples), prompt_len + responses.shape[1]), dtype=torch.long)
    for row, sample in enumerate(samples):
        p, r = len(sample.prompt_ids), len(sample.response_ids)
        prompts[row, prompt_len - p :] = torch.tensor(sample.prompt_ids, dtype=torch.long)
        attention_mask[row, prompt_len - p : prompt_len + r] = 1
    return {
        "input_ids": torch.cat([prompts, responses], dim=1),
        "attention_mask": attention_mask,
        "position_ids": (attention_mask.cumsum(dim=1) - 1).clamp(min=0),
    }


def pack(samples: list[Sample]) -> dict[str, torch.Tensor]:
    """The padding-free layout of ``samples`` (see the module doc)."""
    input_ids: list[int] = []
    position_ids: list[int] = []
    logits_index: list[int] = []
    labels: list[int] = []
    rows: list[int] = []
    cols: list[int] = []
    for row, sample in enumerate(samples):
        start, p, r = len(input_ids), len(sample.prompt_ids), len(sample.response_ids)
        input_ids += sample.prompt_ids + sample.response_ids
        position_ids += range(p + r)
        logits_index += range(start + p - 1, start + p + r - 1)
        labels += sample.response_ids
        rows += [row] * r
        cols += range(r)
    as_long = {"dtype": torch.long}
    return {
        "packed_input_ids": torch.tensor([input_ids], **as_long),
        "packed_position_ids": torch.tensor([position_ids], **as_long),
        "packed_logits_index": torch.tensor(logits_index, **as_long),
        "packed_labels": torch.tensor([labels], **as_long),
        "packed_rows": torch.tensor(rows, **as_long),
        "packed_cols": torch.tensor(cols, **as_long),
    }


def split_mini_batches(samples: list[Sample], mini_batch_prompts: int) -> list[list[Sample]]:
    """Split a rollout batch into optimizer mini-batches of ``mini_batch_prompts`` whole groups.

    Groups are never split, so every mini-batch holds complete groups in batch order.
    """
    groups: dict[int, list[Sample]] = {}
    for sample in samples:
        groups.setdefault(sample.group_id, []).append(sample)
    ordered = list(groups.values())
    return [
        [s for group in ordered[i : i + mini_batch_prompts] for s in group]
        for i in range(0, len(ordered), mini_batch_prompts)
    ]


def iter_micro_batches(samples: list[Sample], token_budget: int, packed: bool = False) -> Iterator[list[Sample]]:
    """Consecutive micro-batches whose size fits the budget: rows x longest prompt+response when
    padded, the sum of prompt+response tokens when ``packed``.

    A single sample longer than the budget still forms its own micro-batch.
    """
    current: list[Sample] = []
    max_prompt = max_response = total = 0
    for sample in samples:
        new_prompt = max(max_prompt, len(sample.prompt_ids))
        new_response = max(max_response, len(sample.response_ids))
        size = total + sample.num_tokens if packed else (len(current) + 1) * (new_prompt + new_response)
        if current and size > token_budget:
            yield current
            current, new_prompt, new_response, total = [], len(sample.prompt_ids), len(sample.response_ids), 0
        current.append(sample)
        max_prompt, max_response, total = new_prompt, new_response, total + sample.num_tokens
    if current:
        yield current


def count_loss_tokens(samples: list[Sample]) -> tuple[float, float]:
    """Global normalisers of a mini-batch: (response tokens in the loss, responses in the loss).

    DAPO's token-level loss divides by the first, summed over ALL micro-batches (and, when
    sharded, all data-parallel ranks) of the optimizer mini-batch.
    """
    num_tokens = sum(len(s.response_ids) * s.loss_weight for s in samples)
    num_seqs = sum(1.0 for s in samples if s.loss_weight > 0 and s.response_ids)
    return float(num_tokens), float(num_seqs)


def split_across_ranks(samples: list[Sample], world_size: int) -> list[list[Sample]]:
    """Deal ``samples`` to ``world_size`` ranks so that their token counts (prompt + response)
    are as even as possible: longest first, each to the rank with the fewest tokens so far
    (greedy LPT). Every sample goes to exactly one rank; a rank may get none."""
    shares: list[list[Sample]] = [[] for _ in range(world_size)]
    loads = [0] * world_size
    for sample in sorted(samples, key=lambda s: s.num_tokens, reverse=True):
        rank = loads.index(min(loads))
        shares[rank].append(sample)
        loads[rank] += sample.num_tokens
    return shares


def deal_prompts(prompt_lengths: list[int], world_size: int) -> list[list[int]]:
    """Indices of the prompts each rank's engine samples. Counts differ by at most one (every
    prompt gets the same n responses and response budget, which dominate generation's cost); within
    that, prompt tokens are as even as possible: longest first, each to the least-loaded rank with
    room (greedy LPT). Each rank's indices are in ascending order; a rank may get none."""
    base, extra = divmod(len(prompt_lengths), world_size)  # `extra` ranks take base + 1 prompts
    shares: list[list[int]] = [[] for _ in range(world_size)]
    loads = [0] * world_size

    def has_room(rank: int) -> bool:
        taken = len(shares[rank])
        return taken < base or (taken == base and sum(len(s) > base for s in shares) < extra)

    for index in sorted(range(len(prompt_lengths)), key=lambda i: prompt_lengths[i], reverse=True):
        rank = min((r for r in range(world_size) if has_room(r)), key=lambda r: loads[r])
        shares[rank].append(index)
        loads[rank] += prompt_lengths[index]
    return [sorted(share) for share in shares]
