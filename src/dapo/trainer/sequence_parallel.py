"""Ulysses sequence parallelism (Jacobs et al. 2023, "DeepSpeed Ulysses"): a packed row's tokens
split over the S ranks of a sequence-parallel group (trainer.sequence_parallel_size), so one
sequence longer than a device's activations allow still trains.

Each rank of a group holds the same micro-batch (the driver deals one share per group) and
computes the layers for its chunk of the packed row alone, tokens [r N/S, (r+1) N/S): embeddings,
projections, norms, MLP, output layer and loss. Attention needs every key of a sequence, so
around it two all-to-alls swap what a rank holds,

    q, k, v: (1, H, N/S, d) on each rank   --all-to-all-->   (1, H/S, N, d): all tokens, H/S heads
    attention of each sequence (the row's bounds, as one process's packed call computes it)
    out: (1, N, H/S, d)                    --all-to-all-->   (1, N/S, H, d): the rank's chunk again

(heads must divide by S, key/value heads too). Backward runs the same all-to-alls reversed
(torch's functional ``all_to_all_single_autograd``). The loss is a sum over
the chunk's response tokens under the mini-batch's GLOBAL normaliser, so the ranks' gradients
summed by FSDP2 over all ranks are one process's: every token counts once. That holds for the
loss aggregations that are token sums over a constant (token-mean, DAPO's; seq-mean-token-sum;
seq-mean-token-sum-norm: dapo.config.training.TOKEN_SUM_AGGREGATIONS), not for seq-mean-token-mean,
whose per-sequence means need whole sequences (refused by the config).

A chunk's last position predicts the next chunk's first token: the labels are the whole row's,
taken before the split (:func:`shard_packed`). The row is padded to a multiple of S with one
padding sequence of its own (attention confined to it, no loss).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed._functional_collectives import all_to_all_single_autograd, wait_tensor
from transformers import PreTrainedModel

from dapo.config.training import heads_split_problem
from dapo.errors import UserError
from dapo.rollout.hf_compat import rope_length_threshold, text_config

# the keyword argument a packed model call gives its attention (dapo.trainer.packed_attention), as
# it gives the row's bounds: a checkpointed layer's recompute in backward gets the call's arguments
GROUP_KWARG = "dapo_sequence_group"


@dataclass(frozen=True)
class SequenceGroup:
    """This rank's sequence-parallel group: its process group, its place in it and its size."""

    group: dist.ProcessGroup
    rank: int
    size: int


def new_sequence_groups(size: int) -> SequenceGroup | None:
    """The groups of ``size`` consecutive ranks (ranks 0..S-1, S..2S-1, ...), this rank's returned;
    None for size 1. Collective: every rank creates every group, in the same order."""
    if size == 1:
        return None
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = None
    for first in range(0, world, size):
        group = dist.new_group(list(range(first, first + size)))
        if first <= rank < first + size:
            mine = SequenceGroup(group, rank - first, size)
    return mine


def split_problem(model: PreTrainedModel, size: int) -> str | None:
    """Why ``model``'s attention cannot be split over ``size`` ranks, or None: heads and key/value
    heads that ``size`` does not divide (:func:`dapo.config.training.heads_split_problem`), or
    attention within windows or chunks, which a chunk's causal mask cannot express, or a RoPE that
    follows the sequence's length (a chunk holds other positions than its sequence's longest);
    ``dapo plan`` asks it too."""
    config = text_config(model)
    heads = getattr(config, "num_attention_heads", None)
    if not isinstance(heads, int):
        return f"trainer.sequence_parallel_size={size} splits attention by heads: the model's config has no num_attention_heads"
    if problem := heads_split_problem(size, heads, getattr(config, "num_key_value_heads", None) or heads, "the model"):
        return problem
    layer_types = set(getattr(config, "layer_types", None) or ["full_attention"])
    windowed = getattr(config, "sliding_window", None) is not None and getattr(config, "use_sliding_window", True)
    if layer_types != {"full_attention"} or windowed or getattr(config, "attention_chunk_size", None):
        kinds = sorted(layer_types - {"full_attention"}) or ["sliding_window"]
        return (f"trainer.sequence_parallel_size={size} needs attention that is causal over whole sequences; this "
                f"model's layers attend within windows or chunks ({', '.join(kinds)})")
    if (rope := rope_length_threshold(model)) is not None:
        return (f"trainer.sequence_parallel_size={size} with a {rope[0]} RoPE, whose frequencies follow the "
                "sequence's length, is not supported: a rank computes a chunk of the sequence")
    return None


def shard_packed(tensors: dict[str, torch.Tensor], sequence: SequenceGroup, pad_token_id: int) -> dict[str, torch.Tensor]:
    """This rank's chunk of a packed micro-batch (:func:`dapo.trainer.batch.pack`): the row padded
    to a multiple of the group's size with one padding sequence, its chunk of input ids and
    positions, the response positions inside the chunk (their labels from the whole row), and
    the row's bounds whole (attention runs on all tokens). ``response_mask`` keeps the chunk's
    tokens alone (the loss's sum), and ``sequence_chunk_mask`` (B, R) marks them for the sums a
    pass reports (their totals over the group's ranks are the micro-batch's)."""
    ids, positions, bounds = tensors["packed_input_ids"], tensors["packed_position_ids"], tensors["packed_cu_seq_lens"]
    length = ids.shape[1]
    padded = -(-length // sequence.size) * sequence.size
    if padded > length:  # a sequence of padding of its own: attention stays within it
        extra = padded - length
        ids = torch.cat([ids, ids.new_full((1, extra), pad_token_id)], dim=1)
        positions = torch.cat([positions, torch.arange(extra, dtype=positions.dtype)[None]], dim=1)
        bounds = torch.cat([bounds, bounds.new_tensor([padded])])
    chunk = padded // sequence.size
    start = sequence.rank * chunk
    index = tensors["packed_logits_index"]
    mine = (index >= start) & (index < start + chunk)
    rows, cols = tensors["packed_rows"][mine], tensors["packed_cols"][mine]
    in_chunk = torch.zeros_like(tensors["response_mask"], dtype=torch.bool).index_put((rows, cols), torch.tensor(True))
    return {
        **tensors,
        "packed_input_ids": ids[:, start:start + chunk],
        "packed_position_ids": positions[:, start:start + chunk],
        "packed_cu_seq_lens": bounds,
        "packed_logits_index": index[mine] - start,
        "packed_labels": tensors["packed_labels"][:, mine],
        "packed_rows": rows,
        "packed_cols": cols,
        "response_mask": torch.where(in_chunk, tensors["response_mask"], 0),
        "sequence_chunk_mask": in_chunk,
    }


def sequence_to_heads(x: torch.Tensor, sequence: SequenceGroup) -> torch.Tensor:
    """(1, H, n, d), this rank's n tokens of every head -> (1, H/S, S n, d), every token of its
    H/S heads (rank r's heads are [r H/S, (r+1) H/S), its tokens the r-th chunk)."""
    _, heads, n, d = x.shape
    send = x[0].reshape(sequence.size, heads // sequence.size, n, d).contiguous()  # block j goes to rank j
    received = _all_to_all(send, sequence)  # block j: rank j's tokens
    return received.permute(1, 0, 2, 3).reshape(1, heads // sequence.size, sequence.size * n, d)


def _all_to_all(send: torch.Tensor, sequence: SequenceGroup) -> torch.Tensor:
    """Block j of ``send`` (its first dimension cut in S) to rank j; block j of the result from
    rank j. Differentiable: the gradient goes back the same way."""
    return wait_tensor(all_to_all_single_autograd(send, None, None, sequence.group))


def heads_to_sequence(out: torch.Tensor, sequence: SequenceGroup) -> torch.Tensor:
    """(1, N, H/S, d), attention's output of every token for this rank's heads -> (1, N/S, H, d),
    its own chunk of tokens for every head (the inverse of :func:`sequence_to_heads`)."""
    _, length, heads, d = out.shape
    n = length // sequence.size
    send = out[0].reshape(sequence.size, n, heads, d).contiguous()  # chunk j goes to rank j
    received = _all_to_all(send, sequence)  # block j: rank j's heads
    return received.permute(1, 0, 2, 3).reshape(1, n, sequence.size * heads, d)


def check_sequence_parallel_attention(model: PreTrainedModel, size: int) -> None:
    """Raise (at a rank's set-up, before any rollout) where splitting ``model``'s packed rows over
    ``size`` ranks would not compute it: heads that do not split over them, attention within
    windows, a RoPE that follows the sequence's length (a chunk holds other positions than its
    sequence's longest), or attention other than dapo-rl's per-sequence sdpa, which runs the two
    all-to-alls of the module doc when a call carries its group
    (:func:`dapo.trainer.packed_attention.packed_sdpa_forward`): eager without sdpa support (a
    row-wide mask, which no chunk holds) and flash-attention (not built)."""
    from dapo.trainer.packed_attention import PACKED_SDPA

    if (problem := split_problem(model, size)) is not None:
        raise UserError(problem)
    if (inner := model.config._attn_implementation) != PACKED_SDPA:
        raise UserError(f"trainer.sequence_parallel_size={size} runs attention per sequence with sdpa; this model "
                        f"attends with {inner!r}: set model.attn_implementation=sdpa (or leave it unset)")
