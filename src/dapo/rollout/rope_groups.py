"""RoPE computed for each sequence of a batch as it would be alone, where its frequencies follow a
call's longest position (longrope past ``original_max_position_embeddings``, dynamic NTK past
``max_position_embeddings``: :func:`dapo.rollout.hf_compat.rope_length_threshold`).

transformers' rotary modules pick such frequencies from ``max(position_ids) + 1`` over the whole
call: a sequence batched (padded rows) or packed (one row) with a longer one past the threshold
is rotated by the longer one's frequencies, unlike computed alone (a longrope model's 6-token
sequence in a padded batch with a 20-token one, threshold 12: logits off by 1.4). Within one
model call (FSDP2's collectives need the same calls on every rank), these context managers have
the model's rotary module compute each set of sequences that rotate alike on their own positions:
the short set first, then longer ones in order, so that a dynamic RoPE grows from its own
frequencies at each (and was put back to them before the call). The trainer's calls group whole
sequences (:func:`rope_per_sequence`, :func:`rope_per_row`); the rollout's, each row by the
positions it holds so far (:func:`rope_rows_alone`), as Hugging Face generates a sequence alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
from transformers import PreTrainedModel

from dapo.rollout.hf_compat import (
    reset_dynamic_rope,
    rope_frequency_group,
    rope_length_threshold,
    rotary_module,
)


@contextlib.contextmanager
def rope_per_sequence(model: PreTrainedModel, lengths: list[int], rope: tuple[str, int]) -> Iterator[None]:
    """For a packed row of sequences of ``lengths`` back to back (position ids restarting at 0),
    ``rope`` the model's :func:`rope_length_threshold` (read once by the caller, who tests it)."""
    groups = [rope_frequency_group(rope, n) for n in lengths]

    def members(position_ids: torch.Tensor) -> torch.Tensor | None:
        if position_ids.shape[-1] != sum(lengths):  # not the packed row's call
            return None
        return torch.repeat_interleave(torch.tensor(groups, device=position_ids.device),
                                       torch.tensor(lengths, device=position_ids.device))

    with _grouped_rotary(model, groups, members, dim=-1):
        yield


@contextlib.contextmanager
def rope_per_row(model: PreTrainedModel, attention_mask: torch.Tensor) -> Iterator[None]:
    """For padded rows (``attention_mask`` (B, T), 1 on real tokens), e.g. the padded layout's call."""
    rope = rope_length_threshold(model)
    groups = [] if rope is None else [rope_frequency_group(rope, n) for n in attention_mask.sum(dim=1).tolist()]

    def members(position_ids: torch.Tensor) -> torch.Tensor | None:
        if position_ids.shape[0] != len(groups):  # not the batch's call
            return None
        return torch.tensor(groups, device=position_ids.device)

    with _grouped_rotary(model, groups, members, dim=0):
        yield


@contextlib.contextmanager
def rope_rows_alone(model: PreTrainedModel, rope: tuple[str, int] | None) -> Iterator[None]:
    """For the calls of a generation (left-padded prefill, then one token per row and call): each
    row rotated by the frequencies it would get generated alone, from its own longest position
    (``max(position_ids) + 1`` of that row; a left pad's position is 0 or 1, below its row's real
    ones), not the batch's longest row's. ``rope``: the model's :func:`rope_length_threshold`,
    read once by the caller (a decode step's call costs nothing more where it is None)."""
    if rope is None:
        yield
        return

    def members(position_ids: torch.Tensor) -> torch.Tensor:
        lengths = position_ids.reshape(position_ids.shape[0], -1).amax(dim=1) + 1
        return torch.tensor([rope_frequency_group(rope, n) for n in lengths.tolist()], device=position_ids.device)

    with _grouped_rotary(model, None, members, dim=0):
        yield


@contextlib.contextmanager
def _grouped_rotary(model: PreTrainedModel, groups: list[int] | None,
                    member_groups: Callable[[torch.Tensor], torch.Tensor | None], dim: int) -> Iterator[None]:
    """The rotary module computes each group's members (along ``dim`` of the position ids: tokens
    of a packed row, or rows) alone. ``member_groups(position_ids)``: each member's group, or None
    for a call that is not the batch's. ``groups``: all of them, known before the calls (nothing
    changes where all are in one group), or None where each call's own decide."""
    rotary = rotary_module(model)
    reset_dynamic_rope(rotary)
    if groups is not None and len(set(groups)) <= 1:
        yield
        return
    if rotary is None:
        raise ValueError("this model's RoPE frequencies follow the longest sequence of a call and its rotary module "
                         "is not model.model.rotary_emb: a batch's sequences would rotate as the longest one")
    forward = rotary.forward

    def grouped(x: torch.Tensor, position_ids: torch.Tensor, *args, **kwargs) -> tuple[torch.Tensor, ...]:
        which = member_groups(position_ids)
        if which is None:
            return forward(x, position_ids, *args, **kwargs)
        # each call from the module's own frequencies, a dynamic one growing from them group by group:
        # grown by an earlier call (another row's), transformers keeps them for a call up to its threshold
        reset_dynamic_rope(rotary)
        if len(set(which.tolist())) <= 1:
            return forward(x, position_ids, *args, **kwargs)
        outputs = None
        for group in sorted(set(which.tolist())):
            index = (which == group).nonzero().squeeze(1)
            if dim == 0:
                part = forward(x[index] if x.shape[0] == len(which) else x, position_ids[index], *args, **kwargs)
            else:
                part = forward(x, position_ids[..., index], *args, **kwargs)
            if outputs is None:
                outputs = [t.new_empty(*position_ids.shape, t.shape[-1]) for t in part]
            for whole, piece in zip(outputs, part):
                if dim == 0:
                    whole[index] = piece
                else:
                    whole[..., index, :] = piece
        return tuple(outputs)

    own = vars(rotary).get("forward")  # an instance's own forward (a wrapper's), put back after
    rotary.forward = grouped
    try:
        yield
    finally:
        if own is None:
            del rotary.forward
        else:
            rotary.forward = own
