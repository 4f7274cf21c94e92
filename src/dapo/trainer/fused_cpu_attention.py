"""Attention of dapo-rl's training forward as one fused CPU kernel forward and one backward
(``dapo/rollout/kernels/train_attention.c``), on the packed tokens of the shared-prompt layout:
no padded grids, no (queries x keys) scores kept for backward.

Each token t attends with each query head n to the keys its KV head h = n / G holds for the tokens
t sees (a prompt token: its prompt up to itself; a response token: its whole prompt, then its own
continuation up to itself):

    s_j = scale q_n . k_j,   p = softmax(s),   out_n = sum_j p_j v_j

in float32 (bf16 values read exactly, the output rounded once, in the values' dtype). Backward
recomputes p from the saved log-sum-exp, as FlashAttention's does. Against torch's eager grouped
attention under bf16 autocast, which rounds q, k, the scores and p to bf16 before its products,
this is closer to float64, not bit for bit (tests/trainer/test_trainer_fused_cpu_attention.py).

Why: on the grids (dapo.trainer.native_forward's torch path) the built-in model's attention took
about a quarter of its bf16 update: scatters into zero-filled grids, copies for the batched
matmuls, masks and softmax over every padded cell, a gather back, and all of their backwards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch.autograd.function import once_differentiable

if TYPE_CHECKING:
    from dapo.trainer.fused_cpu_ops import FusedCpuOps


@dataclass(frozen=True)
class AttentionSegments:
    """Where each segment of the packed tokens starts and how long it is: the distinct prompts
    first (U), then the response rows (B), each after its prompt ``row_prompt``. int64, CPU.
    ``rows_by_prompt`` lists the rows grouped by prompt, prompt u's at ``prompt_rows[u]:prompt_rows[u + 1]``."""

    prompt_start: torch.Tensor
    prompt_length: torch.Tensor
    row_start: torch.Tensor
    row_length: torch.Tensor
    row_prompt: torch.Tensor
    rows_by_prompt: torch.Tensor
    prompt_rows: torch.Tensor
    max_prompt: int
    max_row: int
    num_tokens: int


def attention_segments(prompt_mask: torch.Tensor, continuation_mask: torch.Tensor,
                       prompt_index: torch.Tensor) -> AttentionSegments:
    """The segments of tokens packed as dapo.trainer.native_forward packs them: the real slots of
    the prompt grid (U, P) row by row, then those of the continuation grid (B, C)."""
    prompt_length = prompt_mask.sum(dim=1).long().cpu()
    row_length = continuation_mask.sum(dim=1).long().cpu()
    row_prompt = prompt_index.long().cpu().contiguous()
    prompt_start = torch.cumsum(prompt_length, 0) - prompt_length
    row_start = int(prompt_length.sum()) + torch.cumsum(row_length, 0) - row_length
    rows_by_prompt = torch.sort(row_prompt, stable=True).indices
    counts = torch.bincount(row_prompt, minlength=len(prompt_length))
    prompt_rows = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
    return AttentionSegments(prompt_start, prompt_length, row_start, row_length, row_prompt, rows_by_prompt,
                             prompt_rows, max(prompt_length.tolist(), default=0), max(row_length.tolist(), default=0),
                             int(prompt_length.sum()) + int(row_length.sum()))


def sees(segments: AttentionSegments) -> torch.Tensor:
    """(N, N) boolean: whether token t (row) sees token j (column). For references and tests: N^2."""
    n = segments.num_tokens
    visible = torch.zeros(n, n, dtype=torch.bool)
    for start, length in zip(segments.prompt_start.tolist(), segments.prompt_length.tolist()):
        visible[start:start + length, start:start + length] = _causal(length)
    for start, length, prompt in zip(segments.row_start.tolist(), segments.row_length.tolist(),
                                     segments.row_prompt.tolist()):
        prompt_start, prompt_length = int(segments.prompt_start[prompt]), int(segments.prompt_length[prompt])
        visible[start:start + length, prompt_start:prompt_start + prompt_length] = True
        visible[start:start + length, start:start + length] = _causal(length)
    return visible


def _causal(length: int) -> torch.Tensor:
    return torch.ones(length, length, dtype=torch.bool).tril()


def attention_reference(queries_keys: torch.Tensor, values: torch.Tensor, segments: AttentionSegments,
                        heads: tuple[int, int, int, float]) -> torch.Tensor:
    """The kernel's attention with torch's ops on a dense (N, N) mask, in the inputs' dtype
    (float64 for a reference): (N, H + Hkv, d) rotated queries and keys, (N, Hkv * d) values -> (N, H * d)."""
    query_heads, kv_heads, head_dim, scaling = heads
    n = queries_keys.shape[0]
    queries = queries_keys[:, :query_heads].transpose(0, 1)  # (H, N, d)
    keys = queries_keys[:, query_heads:].transpose(0, 1).repeat_interleave(query_heads // kv_heads, dim=0)
    vals = values.reshape(n, kv_heads, head_dim).transpose(0, 1).repeat_interleave(query_heads // kv_heads, dim=0)
    scores = (queries @ keys.transpose(1, 2) * scaling).masked_fill(~sees(segments), -math.inf)
    return (torch.softmax(scores, dim=-1) @ vals).transpose(0, 1).reshape(n, query_heads * head_dim)


def fused_attention(ops: FusedCpuOps, queries_keys: torch.Tensor, values: torch.Tensor, segments: AttentionSegments,
                    heads: tuple[int, int, int, float]) -> torch.Tensor | None:
    """(N, H * d) attention output in ``values``' dtype, for (N, H + Hkv, d) float32 rotated queries
    and keys (rows contiguous within) and (N, Hkv * d) float32 or bf16 values (a row-strided view:
    the Q/K/V matmul's columns); None where the kernel does not apply (a head size that is not a
    multiple of 16: the kernel reads 16 floats at a time)."""
    query_heads, kv_heads, head_dim, _ = heads
    if (head_dim % 16 or query_heads % kv_heads or queries_keys.dtype != torch.float32
            or values.dtype not in (torch.float32, torch.bfloat16) or queries_keys.device.type != "cpu"
            or queries_keys.shape[1:] != (query_heads + kv_heads, head_dim) or queries_keys.stride()[1:] != (head_dim, 1)
            or values.shape != (queries_keys.shape[0], kv_heads * head_dim) or values.stride(1) != 1
            or queries_keys.shape[0] != segments.num_tokens):
        return None
    return _PackedAttention.apply(queries_keys, values, segments, heads, ops)


def _scratch(ops: FusedCpuOps, segments: AttentionSegments, heads: tuple[int, int, int, float],
             backward: bool) -> tuple[torch.Tensor, int]:
    """Each thread's working memory, as the kernel sizes it, for no more threads than there are
    (segment or, in backward, prompt) x KV-head items. Backward holds p and ds of a block of at most
    64 query tokens against their segment's keys, G * 64 x (prefix + length) floats twice, and the
    keys' and values' gradient sums of a prompt and a row, per thread, for the time of the call
    (O(keys) memory, not O(queries x keys) as the grids' scores are, which are kept between layers)."""
    query_heads, kv_heads, head_dim, _ = heads
    segments_count = len(segments.prompt_length) + (0 if backward else len(segments.row_length))
    threads = max(1, min(torch.get_num_threads(), segments_count * kv_heads))
    per_thread = ops.functions["packed_attention_scratch"](segments.max_prompt, segments.max_row,
                                                           query_heads // kv_heads, head_dim, backward)
    return torch.empty(threads * per_thread, dtype=torch.float32, device="cpu"), threads


class _PackedAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, queries_keys: torch.Tensor, values: torch.Tensor, segments: AttentionSegments,
                heads: tuple[int, int, int, float], ops: FusedCpuOps) -> torch.Tensor:
        query_heads, kv_heads, head_dim, scaling = heads
        tokens = queries_keys.shape[0]
        out = torch.empty(tokens, query_heads * head_dim, dtype=values.dtype, device="cpu")
        lse = torch.empty(tokens, query_heads, dtype=torch.float32, device="cpu")
        scratch, threads = _scratch(ops, segments, heads, backward=False)
        ops.functions["packed_attention_forward"](
            queries_keys.data_ptr(), queries_keys.stride(0), values.data_ptr(), values.stride(0),
            values.dtype == torch.bfloat16, segments.prompt_start.data_ptr(), segments.prompt_length.data_ptr(),
            len(segments.prompt_length), segments.row_start.data_ptr(), segments.row_length.data_ptr(),
            segments.row_prompt.data_ptr(), len(segments.row_length), query_heads, kv_heads, head_dim,
            scaling, segments.max_prompt, segments.max_row, out.data_ptr(), lse.data_ptr(), scratch.data_ptr(), threads)
        ctx.save_for_backward(queries_keys, values, lse)
        ctx.segments, ctx.heads, ctx.ops = segments, heads, ops
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        queries_keys, values, lse = ctx.saved_tensors
        segments, heads = ctx.segments, ctx.heads
        query_heads, kv_heads, head_dim, scaling = heads
        grad_out = grad_out.to(values.dtype).contiguous()
        tokens = queries_keys.shape[0]
        # every element is written: each token's queries by its segment, its keys and values by its prompt's thread
        grad_queries_keys = torch.empty(tokens, query_heads + kv_heads, head_dim, dtype=torch.float32, device="cpu")
        grad_values = torch.empty(tokens, kv_heads * head_dim, dtype=values.dtype, device="cpu")
        scratch, threads = _scratch(ctx.ops, segments, heads, backward=True)
        ctx.ops.functions["packed_attention_backward"](
            grad_out.data_ptr(), queries_keys.data_ptr(), queries_keys.stride(0), values.data_ptr(), values.stride(0),
            values.dtype == torch.bfloat16, lse.data_ptr(), segments.prompt_start.data_ptr(),
            segments.prompt_length.data_ptr(), len(segments.prompt_length), segments.row_start.data_ptr(),
            segments.row_length.data_ptr(), segments.row_prompt.data_ptr(), segments.rows_by_prompt.data_ptr(),
            segments.prompt_rows.data_ptr(),
            query_heads, kv_heads, head_dim, scaling, segments.max_prompt, segments.max_row,
            grad_queries_keys.data_ptr(), grad_values.data_ptr(), scratch.data_ptr(), threads)
        return grad_queries_keys, grad_values, None, None, None
