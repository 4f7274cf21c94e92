"""Attention confined to each sequence of a packed row, without a row-wide mask (sdpa and eager).

A packed micro-batch (trainer.packing) is one row of sequences back to back. flash_attention_2
confines attention to each sequence by the row's cumulative sequence lengths (varlen). sdpa and
eager are instead given a block-diagonal causal mask over the whole row: each of the row's N
queries scores all N keys, N^2 products where the sequences need sum(n_i^2)/2, and no kernel
skips the masked blocks (16 sequences of 256 tokens: 32x the products), so packed rows had to
be kept short on CPU.

:data:`PACKED_SDPA` is an attention implementation registered with transformers'
AttentionInterface. Given a packed row's ``cu_seq_lens_q`` (the policy worker passes them with
every packed row, as flash_attention_2 takes them), it runs causal sdpa on each sequence's own
queries, keys and values,

    out[s:e] = softmax(q[s:e] k[s:e]^T * scaling + causal) v[s:e]    for each sequence [s, e),

the same softmax over the same keys as the block-diagonal mask. :func:`packed_logits` makes the
packed forward call: with the bounds, and without transformers building the row-wide mask (a
(N, N) bool tensor, 256 MB at 16k tokens, rebuilt every call). A call without them (a
padded batch, a generation) is transformers' sdpa, mask included.

Where a layer's mask is not causal within a sequence (a sliding window, Llama 4's chunked
attention), the window is not always among the attention's keyword arguments (Qwen2-MoE and
PhiMoE give it to the mask alone): so each mask transformers asks for in a packed call is
built for the row's longest sequence only, from the model's own mask function (n^2 for the
longest n; its top-left corner is a shorter sequence's, the mask depending on positions only),
and given to the layers that use it (None where it is causal, as before).

A RoPE whose frequencies follow a call's longest position (longrope past
``original_max_position_embeddings``, dynamic past ``max_position_embeddings``) would give every
sequence of a row the longest one's: :func:`packed_logits` has the rotary module compute each
set of sequences that rotate alike on its own positions, in the same single model call
(:mod:`dapo.rollout.rope_groups`).

:func:`use_packed_attention` switches a model to this attention where packing would otherwise
get the mask; a model without sdpa support keeps eager and the mask. Inside a packed call, a
layer the per-sequence path would compute wrongly raises instead (no bounds: the model drops its
forward's keyword arguments; softcapping, attention sinks, a position bias, non-causal attention,
a mask that depends on more than the positions).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from contextvars import ContextVar

import torch
import torch.nn.functional as F
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

from dapo.rollout.hf_compat import rope_length_threshold
from dapo.rollout.rope_groups import rope_per_sequence
from dapo.trainer.sequence_parallel import (
    GROUP_KWARG,
    SequenceGroup,
    heads_to_sequence,
    sequence_to_heads,
)

PACKED_SDPA = "dapo_packed_sdpa"
# the implementations whose packed rows get a row-wide mask (flash-attention kernels are varlen)
_MASKED_IMPLEMENTATIONS = ("sdpa", "eager")
# inside packed_logits' model call: the row's sequence bounds (on the CPU), None outside
_PACKED_ROW: ContextVar[torch.Tensor | None] = ContextVar("dapo_packed_row", default=None)
# inside a sequence-parallel rank's call: its input is a chunk of the row (the model's positions too)
_ROW_CHUNK: ContextVar[bool] = ContextVar("dapo_row_chunk", default=False)
# the attribute of a longest sequence's mask that says up to which length its corners are causal
_CAUSAL_UP_TO = "dapo_causal_up_to"


def packed_sdpa_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """query (1, H, N, d), key/value (1, Hkv, N, d) of a packed row -> (1, N, H, d); see the module doc.
    In a packed call ``attention_mask`` is None (causal) or the longest sequence's (1, 1, n, n)
    mask (:func:`_sdpa_mask_unless_packed`). A sequence-parallel rank's call (its group in
    ``kwargs``) holds a chunk of the row: the same attention on every token of H/S heads, between
    two all-to-alls (:mod:`dapo.trainer.sequence_parallel`)."""
    sequence: SequenceGroup | None = kwargs.pop(GROUP_KWARG, None)
    if sequence is not None:
        query, key, value = (sequence_to_heads(t, sequence) for t in (query, key, value))
        out, _ = packed_sdpa_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
        return heads_to_sequence(out, sequence), None
    bounds = kwargs.get("cu_seq_lens_q")
    # the bounds, not the flag, pick the path: a checkpointed layer's recompute in backward runs
    # after packed_logits' call has returned, with the call's arguments
    if bounds is None and _PACKED_ROW.get() is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    _check_packed_call(module, query, bounds, kwargs)
    window = kwargs.get("sliding_window")
    groups = query.shape[1] // key.shape[1]
    edges = bounds.tolist()
    # Runs of sequences of one length n (length-sorted micro-batches make them long) go through
    # sdpa as one batch of (count, heads, n, d); one split per tensor, so that backward assembles
    # each gradient once rather than a row-sized zero tensor per slice.
    runs = [(n, len(list(same))) for n, same in itertools.groupby(e - s for s, e in zip(edges, edges[1:]))]
    sizes = [n * count for n, count in runs]
    outputs = []
    for (n, count), q, k, v in zip(runs, query.split(sizes, dim=2), key.split(sizes, dim=2), value.split(sizes, dim=2)):
        q, k, v = (t[0].unflatten(1, (count, n)).transpose(0, 1) for t in (q, k, v))  # (count, heads, n, d)
        mask = _sequence_mask(attention_mask, window, n, query.device)
        # with a mask or wide heads, grouped-query sdpa falls back to CUDA's slow kernel: repeat K/V
        gqa = groups > 1 and mask is None and k.shape[-1] == v.shape[-1] <= 256
        if groups > 1 and not gqa:
            k, v = repeat_kv(k, groups), repeat_kv(v, groups)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=mask is None,
                                             scale=scaling, enable_gqa=gqa)
        outputs.append(out.transpose(1, 2).flatten(0, 1))  # (count * n, heads, d): sdpa's own layout, no copy
    return torch.cat(outputs).unsqueeze(0), None


def _sequence_mask(longest: torch.Tensor | None, window: int | None, n: int,
                   device: torch.device) -> torch.Tensor | None:
    """The boolean mask of a sequence of ``n`` tokens (True: seen), None where it is causal:
    the corner of the longest sequence's mask where the model made one, else causal within
    ``window`` (a key is seen by the next ``window`` queries only)."""
    if longest is not None:
        mask = longest[0, 0, :n, :n]
        causal_up_to = getattr(longest, _CAUSAL_UP_TO, None)
        if causal_up_to is None:  # (a model made a new tensor of it: a device sync per call, not wrong)
            causal_up_to = n if torch.equal(mask, torch.ones_like(mask).tril()) else 0
        return None if n <= causal_up_to else mask
    if window is None or n <= window:
        return None
    offset = torch.arange(n, device=device)
    return (offset[:, None] >= offset[None, :]) & (offset[:, None] - offset[None, :] < window)


def _check_packed_call(module: torch.nn.Module, query: torch.Tensor, bounds: torch.Tensor | None, kwargs: dict) -> None:
    """Raise where the per-sequence causal attention would not be this layer's attention: without
    the bounds nothing confines attention (no mask was built for the packed row)."""
    unsupported = [name for name in ("softcap", "s_aux", "position_bias") if kwargs.get(name) is not None]
    if kwargs.get("is_causal") is False or getattr(module, "is_causal", True) is False:
        unsupported.append("non-causal attention")
    if unsupported:
        raise ValueError(f"trainer.packing with sdpa/eager: {module.__class__.__name__} uses {unsupported[0]}, which "
                         "per-sequence sdpa does not compute; set trainer.packing=false")
    if bounds is None or query.shape[0] != 1 or int(bounds[-1]) != query.shape[2]:
        raise RuntimeError(f"a packed row reached {module.__class__.__name__}'s attention without its sequence "
                           "bounds (cu_seq_lens_q): the model does not pass its forward's keyword arguments to its "
                           "attention; set trainer.packing=false")


def _sdpa_mask_unless_packed(**kwargs) -> torch.Tensor | None:
    """sdpa's mask; for a packed row, the (1, 1, n, n) mask of its longest sequence where that is not
    causal, else None (no row-wide mask: its attention needs the sequence bounds only)."""
    bounds = _PACKED_ROW.get()
    if bounds is None:
        return sdpa_mask(**kwargs)
    if kwargs.get("use_vmap"):  # transformers' sign of a custom or_mask/and_mask function
        raise ValueError("trainer.packing with sdpa/eager: the model's attention mask depends on more than the "
                         "positions in a sequence (an or/and mask function, e.g. image tokens' bidirectional "
                         "attention), which per-sequence sdpa does not compute; set trainer.packing=false")
    if _ROW_CHUNK.get():  # a chunk's positions cannot make the row's masks: causal, as check_sequence_parallel_attention checked
        return None
    edges = bounds.tolist()
    start, end = max(zip(edges, edges[1:]), key=lambda edge: edge[1] - edge[0])
    n = end - start
    # the model's mask function over the packed row (positions remapped per sequence), at the longest's block
    block = {**kwargs, "batch_size": 1, "kv_length": n, "kv_offset": start, "attention_mask": None,
             "allow_is_causal_skip": False, "allow_is_bidirectional_skip": False}
    # first its last query's row alone (n values, not n^2: 400 MB at 20k tokens): a window or chunk
    # hides keys from the last query whenever it hides any, so a full row means a causal mask
    if bool(sdpa_mask(**{**block, "q_length": 1, "q_offset": end - 1}).all()):
        return None
    longest = sdpa_mask(**{**block, "q_length": n, "q_offset": start})
    causal = torch.ones(n, n, dtype=torch.bool, device=longest.device).tril()
    differs = (longest[0, 0] != causal).nonzero()  # (query, key) pairs; one device sync per mask and call
    if not len(differs):
        return None
    longest = longest[:1, :1]
    # a sequence of n tokens has the corner [:n, :n]: causal while n <= the nearest difference's max(query, key)
    setattr(longest, _CAUSAL_UP_TO, int(differs.max(dim=1).values.min()))
    return longest


AttentionInterface.register(PACKED_SDPA, packed_sdpa_forward)
ALL_MASK_ATTENTION_FUNCTIONS.register(PACKED_SDPA, _sdpa_mask_unless_packed)


@contextlib.contextmanager
def _packed_row(bounds: torch.Tensor, chunk: bool = False) -> Iterator[None]:
    token, chunk_token = _PACKED_ROW.set(bounds), _ROW_CHUNK.set(chunk)
    try:
        yield
    finally:
        _PACKED_ROW.reset(token)
        _ROW_CHUNK.reset(chunk_token)


def packed_logits(model: PreTrainedModel, tensors: dict[str, torch.Tensor],
                  sequence: SequenceGroup | None = None) -> torch.Tensor:
    """(1, N, V) logits of a packed row's N response positions (trainer.batch's packed layout);
    with a ``sequence`` group, of this rank's chunk of the row (:mod:`dapo.trainer.sequence_parallel`).
    The flag that skips the row-wide mask is read while the model makes its masks, before any
    layer runs; a checkpointed layer's recompute in backward reuses the call's mask (none) and
    bounds. A RoPE whose frequencies follow the call's longest sequence (longrope, dynamic) is
    computed for each sequence as it would be alone (:mod:`dapo.rollout.rope_groups`)."""
    rope = rope_length_threshold(model)
    if rope is None:
        return _packed_call(model, tensors, sequence)
    if sequence is not None:  # (refused at set-up: check_sequence_parallel_attention)
        raise ValueError("a RoPE whose frequencies follow the sequence's length, with sequence parallelism")
    edges = tensors["packed_cu_seq_lens"].tolist()
    with rope_per_sequence(model, [end - start for start, end in zip(edges, edges[1:])], rope):
        return _packed_call(model, tensors)


def _packed_call(model: PreTrainedModel, tensors: dict[str, torch.Tensor],
                 sequence: SequenceGroup | None = None) -> torch.Tensor:
    """The model's forward of one packed row: (1, N, V) logits at ``packed_logits_index``."""
    inputs = {"input_ids": tensors["packed_input_ids"], "position_ids": tensors["packed_position_ids"],
              "logits_to_keep": tensors["packed_logits_index"], "use_cache": False}
    if sequence is not None:  # to the attention of every layer, as the bounds (GROUP_KWARG)
        inputs[GROUP_KWARG] = sequence
    implementation = model.config._attn_implementation
    if is_flash_attention(implementation):  # varlen kernels: given the bounds, or every layer infers them again
        bounds = tensors["packed_cu_seq_lens"]  # int32, on the device, as the kernels take them
        longest = int(bounds.diff().max())  # one device sync per call, not a few per layer
        return model(**inputs, cu_seq_lens_q=bounds, cu_seq_lens_k=bounds, max_length_q=longest,
                     max_length_k=longest).logits
    if implementation != PACKED_SDPA:  # eager kept (no sdpa): its mask, from the positions
        return model(**inputs).logits
    bounds = tensors["packed_cu_seq_lens"].cpu()  # read by every layer: one device sync per call
    with _packed_row(bounds, chunk=sequence is not None):
        return model(**inputs, cu_seq_lens_q=bounds).logits


def is_flash_attention(implementation: str) -> bool:
    """Whether ``model.attn_implementation`` names a flash-attention kernel (flash_attention_2/3,
    a hub kernel such as kernels-community/flash-attn2): varlen, taking a packed row's bounds."""
    return "flash" in implementation


def use_packed_attention(model: PreTrainedModel) -> bool:
    """Switch ``model`` from sdpa/eager to :data:`PACKED_SDPA`; False where it keeps its own
    implementation (flash-attention is varlen already; a model without sdpa support keeps eager
    and its mask). An eager model's padded calls (a Hugging Face rollout in this process) then
    run sdpa, equal to float rounding."""
    if getattr(model.config, "_attn_implementation", None) not in _MASKED_IMPLEMENTATIONS:
        return False
    if not getattr(model, "_supports_sdpa", False):
        return False
    model.set_attn_implementation(PACKED_SDPA)
    return model.config._attn_implementation == PACKED_SDPA
