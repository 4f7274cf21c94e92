"""Rollout samples and how they become padded tensors, mini-batches and micro-batches.

Layout of a collated micro-batch (verl's): prompts are LEFT-padded to the micro-batch's longest
prompt and responses RIGHT-padded to its longest response, so every response starts at the same
column P. Then the logits that predict the response are the last R+1 positions minus the final
one, and the model only needs ``logits_to_keep=R+1``.

    input_ids:  [pad pad p0 p1 p2 | r0 r1 r2 pad]
    labels:                         r0 r1 r2 pad   (response_mask 1 1 1 0)

Packed (padding-free) layout, with ``collate(..., layout="packed")``: the model's input is instead ONE
row of the sequences back to back, positions restarting at 0 for each, no attention mask, so
attention is confined to each sequence (varlen flash-attention with flash_attention_2; with
sdpa/eager, causal sdpa on each sequence, :mod:`dapo.trainer.packed_attention`):

    packed_input_ids:    [p0 p1 p2 r0 r1 r2 | q0 q1 s0 s1]
    packed_position_ids: [ 0  1  2  3  4  5 |  0  1  2  3]
    packed_logits_index: the positions whose logits predict a response token (p2 r0 r1 | q1 s0),
    packed_labels:       those response tokens (r0 r1 r2 | s0 s1),
    packed_rows/cols:    where each of those lands in the padded (B, R) response layout,
    packed_cu_seq_lens:  where each sequence starts, and the row's length: [0, 6, 10].

Shared-prompt layout, with ``collate(..., layout="shared_prompt")``: a group's G responses share
one prompt, so each distinct prompt of the micro-batch is forwarded ONCE (left-padded rows,
recording every layer's keys and values; its last position's logits predict each response's
first token) and every response then continues from its prompt's keys and values:

    prompt_input_ids:       [pad p0 p1 p2]      (U distinct prompts)
    prompt_index:           the prompt row of each of the B responses
    continuation_input_ids: [r0 r1 | s0 pad]    (responses r0 r1 r2 and s0: the columns before
                                                 the last, whose logits would predict nothing)
    continuation_attention_mask over the prompt row, then the continuation; position ids
    3 4 | 3 3 (padding stays at the last real position, as in the padded layout).

The model's layers see U*P + B*(R-1) tokens instead of B*(P+R), and the same logits: the same
loss and gradients (backward sums the G responses' gradients into their prompt's pass).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields

import numpy as np
import torch

from dapo.rollout.batching import left_pad, left_pad_mask, within_lengths


def as_logprobs(values: Sequence[float] | np.ndarray | torch.Tensor | None = None) -> np.ndarray:
    """Per-token log-probs as a Sample holds them: a 1-D float32 array (no copy of one already
    is; None or nothing: empty). Ray then moves them as one buffer, not float by float, and a
    collate copies them with no Python float per token. A Python float is rounded to float32 as
    the collate's float32 tensors always rounded it (the engines report float32 values: exact)."""
    if values is None:
        return np.zeros(0, dtype=np.float32)
    if isinstance(values, torch.Tensor):
        values = values.detach().to("cpu", torch.float32).numpy()
    return np.asarray(values, dtype=np.float32).reshape(-1)


def has_logprobs(values: Sequence[float] | np.ndarray | None) -> bool:
    """Whether per-token log-probs are there (None or empty: absent)."""
    return values is not None and len(values) > 0


LOGPROB_FIELDS = ("rollout_logprobs", "old_logprobs")  # a Sample's per-token float fields


@dataclass(eq=False)
class Sample:
    """One response to one prompt, with everything the update needs. Its per-token log-probs are
    1-D float32 arrays (:func:`as_logprobs`; lists given are converted); ``old_logprobs`` empty
    when absent."""

    group_id: int  # responses to the same prompt in the same round share it
    uid: str  # the problem's uid
    prompt_ids: list[int]
    response_ids: list[int]
    rollout_logprobs: np.ndarray  # behaviour log-probs reported by the rollout engine
    truncated: bool  # cut at rollout.max_response_length
    score: float = 0.0  # verifier/user reward before overlong shaping
    acc: bool = False
    reward: float = 0.0  # score + soft overlong penalty: what advantages are computed from
    advantage: float = 0.0
    loss_weight: float = 1.0  # 0 when overlong filtering masks this response out
    old_logprobs: np.ndarray = field(default_factory=as_logprobs)  # pi_old's: recomputed, or the rollout's
    policy_version: int = 0  # training step whose policy generated it (>0 age = carried over)
    carried_over: bool = False  # dynamic sampling's surplus from an earlier step (an older policy)
    # algorithm.filter_metric=<function>/<key>: that reward function's value for this response (NaN: it gave none)
    filter_value: float = 0.0

    def __post_init__(self) -> None:
        same = self.old_logprobs is self.rollout_logprobs
        self.rollout_logprobs = as_logprobs(self.rollout_logprobs)
        self.old_logprobs = self.rollout_logprobs if same else as_logprobs(self.old_logprobs)

    def __eq__(self, other: object) -> bool:
        """Field by field, the log-probs' values compared (a generated ``==`` would ask an array's truth)."""
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(np.array_equal(getattr(self, f.name), getattr(other, f.name), equal_nan=f.name == "filter_value")
                   if f.name in LOGPROB_FIELDS or f.name == "filter_value"
                   else getattr(self, f.name) == getattr(other, f.name) for f in fields(self))

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.response_ids)


LAYOUTS = ("padded", "packed", "shared_prompt")


def collate(samples: list[Sample], pad_token_id: int, layout: str = "padded") -> dict[str, torch.Tensor]:
    """The tensors the policy worker consumes for ``samples``: the model's input in one of the
    ``LAYOUTS`` (see the module doc), and the loss's per-response-token tensors in the padded
    (B, R) layout whatever the layout."""
    response_len = max(max(len(s.response_ids) for s in samples), 1)
    batch = len(samples)
    responses = torch.full((batch, response_len), pad_token_id, dtype=torch.long)
    response_mask = torch.zeros((batch, response_len), dtype=torch.float32)
    old_logprobs = torch.zeros((batch, response_len), dtype=torch.float32)
    rollout_logprobs = torch.zeros((batch, response_len), dtype=torch.float32)
    # written through numpy views: a sample's arrays may be read-only (Ray's zero-copy buffers)
    old_rows, rollout_rows = old_logprobs.numpy(), rollout_logprobs.numpy()
    for row, sample in enumerate(samples):
        r = len(sample.response_ids)
        responses[row, :r] = torch.tensor(sample.response_ids, dtype=torch.long)
        response_mask[row, :r] = sample.loss_weight
        rollout_rows[row, :r] = as_logprobs(sample.rollout_logprobs)
        if sample.old_logprobs is sample.rollout_logprobs:  # old_logprobs=rollout: convert once
            old_rows[row, :r] = rollout_rows[row, :r]
        elif has_logprobs(sample.old_logprobs):
            old_rows[row, :r] = as_logprobs(sample.old_logprobs)
    return {
        **_model_inputs(samples, responses, pad_token_id, layout),
        "responses": responses,
        "response_mask": response_mask,
        "old_logprobs": old_logprobs,
        "rollout_logprobs": rollout_logprobs,
        "advantages": torch.tensor([s.advantage for s in samples], dtype=torch.float32),
        "response_lengths": torch.tensor([len(s.response_ids) for s in samples], dtype=torch.long),
        "sampled_this_step": torch.tensor([not s.carried_over for s in samples], dtype=torch.bool),
        "has_old_logprobs": torch.tensor([has_logprobs(s.old_logprobs) for s in samples], dtype=torch.bool),
    }


def _model_inputs(samples: list[Sample], responses: torch.Tensor, pad_token_id: int, layout: str) -> dict[str, torch.Tensor]:
    """The model's input tensors of ``samples`` in ``layout`` (the padded one built here)."""
    if layout == "packed":
        return pack(samples)
    if layout == "shared_prompt":
        return _shared_prompt_inputs(samples, responses, pad_token_id)
    if layout != "padded":
        raise ValueError(f"unknown micro-batch layout {layout!r}: one of {LAYOUTS}")
    prompts, prompt_mask = _left_padded([s.prompt_ids for s in samples], pad_token_id)
    response_mask = _within(responses.shape[1], [len(s.response_ids) for s in samples])
    attention_mask = torch.cat([prompt_mask, response_mask], dim=1)
    return {
        "input_ids": torch.cat([prompts, responses], dim=1),
        "attention_mask": attention_mask,
        "position_ids": _positions(attention_mask),
    }


def _shared_prompt_inputs(samples: list[Sample], responses: torch.Tensor, pad_token_id: int) -> dict[str, torch.Tensor]:
    """Each distinct prompt once, and the responses continuing them (see the module doc)."""
    if any(not s.prompt_ids for s in samples):
        raise ValueError("a response without prompt tokens has nothing to be predicted from")
    distinct: dict[tuple[int, ...], int] = {}
    prompt_index = torch.tensor([distinct.setdefault(tuple(s.prompt_ids), len(distinct)) for s in samples])
    prompts, prompt_mask = _left_padded(list(distinct), pad_token_id)
    # at least one column: every micro-batch calls the model twice (FSDP's collectives need the
    # same calls on every rank), all of them one-token responses included
    continuation = responses[:, : max(responses.shape[1] - 1, 1)]
    continuation_mask = _within(continuation.shape[1], [len(s.response_ids) for s in samples])
    prompt_lengths = prompt_mask.sum(dim=1)[prompt_index]
    return {
        "prompt_input_ids": prompts,
        "prompt_attention_mask": prompt_mask,
        "prompt_position_ids": _positions(prompt_mask),
        "prompt_index": prompt_index,
        "continuation_input_ids": continuation,
        "continuation_attention_mask": torch.cat([prompt_mask[prompt_index], continuation_mask], dim=1),
        # p + c for the real columns, the last real position for padding (as the padded layout)
        "continuation_position_ids": prompt_lengths[:, None] - 1 + continuation_mask.cumsum(dim=1),
    }


def _left_padded(sequences: list[list[int]] | list[tuple[int, ...]], pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``sequences`` left-padded to the longest (the rollout engines' :func:`left_pad`), and their
    attention mask (1 on real tokens)."""
    ids, pad_lengths = left_pad(sequences, pad_token_id, torch.device("cpu"))
    return ids, left_pad_mask(pad_lengths, ids.shape[1])


def _positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position ids 0, 1, ... over a row's real tokens; padding before them at 0, after them at the last."""
    return (attention_mask.cumsum(dim=1) - 1).clamp(min=0)


def _within(width: int, lengths: list[int]) -> torch.Tensor:
    """(len(lengths), width) long mask, 1 on the first lengths[i] columns of row i."""
    return within_lengths(torch.tensor(lengths), width).long()


def pack(samples: list[Sample]) -> dict[str, torch.Tensor]:
    """The padding-free layout of ``samples`` (see the module doc)."""
    input_ids: list[int] = []
    position_ids: list[int] = []
    logits_index: list[int] = []
    labels: list[int] = []
    rows: list[int] = []
    cols: list[int] = []
    bounds = [0]
    for row, sample in enumerate(samples):
        start, p, r = len(input_ids), len(sample.prompt_ids), len(sample.response_ids)
        input_ids += sample.prompt_ids + sample.response_ids
        position_ids += range(p + r)
        logits_index += range(start + p - 1, start + p + r - 1)
        labels += sample.response_ids
        rows += [row] * r
        cols += range(r)
        bounds.append(len(input_ids))
    as_long = {"dtype": torch.long}
    return {
        "packed_input_ids": torch.tensor([input_ids], **as_long),
        "packed_position_ids": torch.tensor([position_ids], **as_long),
        "packed_logits_index": torch.tensor(logits_index, **as_long),
        "packed_labels": torch.tensor([labels], **as_long),
        "packed_rows": torch.tensor(rows, **as_long),
        "packed_cols": torch.tensor(cols, **as_long),
        "packed_cu_seq_lens": torch.tensor(bounds, dtype=torch.int32),
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


def iter_micro_batches(samples: list[Sample], token_budget: int, layout: str = "padded") -> Iterator[list[Sample]]:
    """Consecutive micro-batches whose size fits the budget, counted in the tokens the model's
    layers see: rows x longest prompt+response when ``padded``; the sum of prompt+response tokens
    when ``packed``; distinct prompts x longest prompt + rows x longest response when
    ``shared_prompt``.

    A single sample longer than the budget still forms its own micro-batch.
    """
    current: list[Sample] = []
    prompts: set[tuple[int, ...]] = set()
    max_prompt = max_response = total = 0
    for sample in samples:
        new_prompt = max(max_prompt, len(sample.prompt_ids))
        new_response = max(max_response, len(sample.response_ids))
        if layout == "packed":
            size = total + sample.num_tokens
        elif layout == "shared_prompt":
            size = (len(prompts) + (tuple(sample.prompt_ids) not in prompts)) * new_prompt + (len(current) + 1) * new_response
        elif layout == "padded":
            size = (len(current) + 1) * (new_prompt + new_response)
        else:
            raise ValueError(f"unknown micro-batch layout {layout!r}: one of {LAYOUTS}")
        if current and size > token_budget:
            yield current
            current, prompts, new_prompt, new_response, total = [], set(), len(sample.prompt_ids), len(sample.response_ids), 0
        current.append(sample)
        prompts.add(tuple(sample.prompt_ids))
        max_prompt, max_response, total = new_prompt, new_response, total + sample.num_tokens
    if current:
        yield current


def response_lengths(samples: list[Sample]) -> torch.Tensor:
    """Each response's token count (N,) int64, as an advantage estimator that takes them is given them."""
    return torch.tensor([len(sample.response_ids) for sample in samples], dtype=torch.long)


def count_loss_tokens(samples: list[Sample]) -> tuple[float, float]:
    """Global normalisers of a mini-batch: (response tokens in the loss, responses in the loss).

    DAPO's token-level loss divides by the first, summed over ALL micro-batches (and, when
    sharded, all data-parallel ranks) of the optimizer mini-batch.
    """
    num_tokens = sum(len(s.response_ids) * s.loss_weight for s in samples)
    num_seqs = sum(1.0 for s in samples if s.loss_weight > 0 and s.response_ids)
    return float(num_tokens), float(num_seqs)


def fill_normalisers(samples: list[Sample], num_tokens: float | None,
                     num_seqs: float | None) -> tuple[float, float]:
    """``num_tokens`` and ``num_seqs`` as given, each one left None counted from ``samples``
    (:func:`count_loss_tokens`): a global token count passed alone (all the token-mean loss
    needs) must not be replaced by this share's own."""
    if num_tokens is None or num_seqs is None:
        counted_tokens, counted_seqs = count_loss_tokens(samples)
        num_tokens = counted_tokens if num_tokens is None else num_tokens
        num_seqs = counted_seqs if num_seqs is None else num_seqs
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


def check_update_inputs(share: list[Sample], num_tokens: float | None, num_seqs: float | None,
                        on_policy: bool) -> tuple[float, float]:
    """The normalisers an update of this rank's ``share`` uses (its own counts where not given);
    raises on inputs no update can take. The Ray driver checks every rank's share with it before
    calling any rank: one rank raising here would leave the others in the update's collectives."""
    local_tokens, local_seqs = count_loss_tokens(share)
    num_tokens = local_tokens if num_tokens is None else num_tokens
    num_seqs = local_seqs if num_seqs is None else num_seqs
    if local_tokens > num_tokens or local_seqs > num_seqs:  # a normaliser of another batch
        raise ValueError(f"the mini-batch's global counts ({num_tokens} loss tokens, {num_seqs} sequences) are "
                         f"below this rank's share ({local_tokens}, {local_seqs})")
    if not on_policy and not all(has_logprobs(s.old_logprobs) for s in share):  # zeros would be log pi_old
        raise ValueError("an off-policy update needs every sample's old_logprobs (pi_old): compute them first "
                         "(compute_logprobs), or update on_policy")
    return num_tokens, num_seqs


def split_rows(values: np.ndarray, lengths: list[int]) -> list[np.ndarray]:
    """Rows of the given ``lengths`` cut from ``values`` (the rows back to back) as float32
    arrays, as a Sample holds its log-probs: each its own copy, so none keeps ``values`` (a Ray
    reply's read-only buffer, or a whole pass's tensor) alive, and no Python float per token."""
    values = np.asarray(values, dtype=np.float32)
    ends = list(itertools.accumulate(lengths))
    return [values[end - length:end].copy() for end, length in zip(ends, lengths)]
