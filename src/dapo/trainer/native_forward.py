"""dapo-rl's own training forward for the Llama family (Llama, Qwen2, Mistral), in the
shared-prompt layout (trainer.forward; the layout: module doc of dapo.trainer.batch).

Hugging Face's forward runs every layer on padded grids: the distinct prompts left-padded to the
longest, the responses right-padded to the longest, every projection, norm, RoPE and MLP computed
on the padding too. This forward computes
the same logits,

    h = h + W_o Attn(RoPE(W_q x), RoPE(W_k x), W_v x),  x = RMSNorm(h)
    h = h + W_down (SiLU(W_gate x) * W_up x),             x = RMSNorm(h)
    logits = W_lm RMSNorm(h)    (at the positions that predict a response token only)

with the token-wise work on the real tokens alone, packed one after another (the prompts' tokens,
then the continuations'), Q/K/V as one matmul and gate/up as another. Attention (a prompt causally
to itself; a response to its prompt's keys and values, then causally to itself: the shared-prompt
layout's two calls in one layer) runs on the packed tokens too where the fused CPU kernels do
(:mod:`dapo.trainer.fused_cpu_attention`); elsewhere on the grids: each layer scatters its rotated
queries, keys and values into the padded prompt and continuation grids, attends there and gathers
the real positions back. Autograd differentiates it all (the fused CPU kernels with their own
backward: :mod:`dapo.trainer.fused_cpu_ops`; on CUDA, RMSNorm, SwiGLU and RoPE as fused Triton
kernels with theirs: :mod:`dapo.trainer.fused_gpu_ops`).

Attention follows the model's attn_implementation: eager is Hugging Face's eager arithmetic in the
same precision (autocast casts the same matmul inputs; the norms, the activation, the rotary
module and the output projections are the model's own modules), so bf16 logits agree with its
eager forward bit for bit on CPU (the tests assert it; with ``cpu_kernels``, the policy worker's
default on a CPU they run on, to rounding, and closer to float64 in bf16: their attention rounds less); anything else runs torch's
scaled_dot_product_attention, as its sdpa forward does. Float32 logits agree to ~1e-5 (a fused
matmul sums in another order), float64 ones to ~1e-12 (tests/trainer/test_trainer_native_forward.py).
Mistral's sliding window is masked in the grids where a sequence is longer than it (causal
attention where none is). Configurations it would not compute are refused, with the reason
(:func:`native_forward_reason`, checked at every call too); trainer.forward=auto then uses Hugging Face's. An FSDP2-sharded policy
is called through its units: the model's forward and each layer's stand in for their modules'
while this forward runs, so FSDP2's hooks gather each unit's weights once per call, cast its inputs
(mixed precision) and reduce-scatter its gradients in backward.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor
from torch.utils.checkpoint import checkpoint
from transformers import PreTrainedModel

from dapo.rollout.hf_compat import length_following_rope
from dapo.rollout.llama_support import architecture_reason, global_hooks, skipped_hooks
from dapo.rollout.projections import fused
from dapo.trainer.fused_cpu_attention import AttentionSegments, attention_segments
from dapo.trainer.fused_cpu_ops import FusedCpuOps, fused_cpu_ops
from dapo.trainer.fused_gpu_ops import FusedGpuOps, fused_gpu_ops
from dapo.trainer.shared_prompt import checkpointing

Ops = FusedCpuOps | FusedGpuOps | None  # the fused kernels the forward runs, if any


def native_forward_reason(model: nn.Module) -> str | None:
    """Why :func:`native_shared_prompt_logits` cannot compute ``model``'s logits, or None
    (:func:`architecture_reason` refuses the submodules it would skip)."""
    if reason := architecture_reason(model):
        return reason
    # RoPE comes from the model's own rotary module, so scaled variants are computed; only those
    # whose frequencies follow a call's longest position are not
    if rope_type := length_following_rope(model):
        return f"rope type {rope_type!r} (frequencies that follow the longest position of a call)"
    # (Mistral's sliding window is computed: _Grids masks the keys that leave it, where any do)
    if global_hooks():
        return ("global forward hooks (torch.nn.modules.module.register_module_forward_hook), which would run on "
                "the modules this forward calls and not on the projections it reads")
    if _skips_hooks(model, model.model):
        return "forward hooks (or a replaced forward) on the model, which this forward would skip"
    for index, layer in enumerate(model.model.layers):
        attn, mlp = layer.self_attn, layer.mlp
        if getattr(attn, "attention_dropout", 0.0):  # the module's rate, which disable_dropout zeroes
            return f"attention dropout {attn.attention_dropout} in layer {index} (dropout in training)"
        if _skips_hooks(layer, attn, mlp, attn.q_proj, attn.k_proj, attn.v_proj, mlp.gate_proj, mlp.up_proj):
            return (f"forward hooks (or a replaced forward, as accelerate's offloading installs) on layer {index} "
                    "(its layer, attention, MLP or Q/K/V/gate/up modules), which this forward would skip: it "
                    "reads those weights instead of calling the modules")
    if not isinstance(model, FSDPModule) and any(isinstance(p, DTensor) for p in model.parameters()):
        return "the model is sharded, but not by FSDP2 at its root (fully_shard(model))"
    return None


def _skips_hooks(*modules: nn.Module) -> bool:
    """Whether any of ``modules``, whose forward this one does not call, has hooks or an
    instance's own forward (accelerate's hooks replace it). FSDP2's own hooks do not count: an
    FSDP2 unit (the model, a layer) is called, its forward standing in for the module's."""
    return any(skipped_hooks(m) for m in modules)


@contextlib.contextmanager
def _forward_replaced(module: nn.Module, forward: Callable) -> Iterator[None]:
    """``module(...)`` runs ``forward`` (its hooks too: FSDP2's gather the unit's weights, cast
    its inputs in mixed precision, and reduce-scatter its gradients in backward)."""
    module.forward = forward
    try:
        yield
    finally:
        del module.forward


def _call_layer(layer: nn.Module, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                grids: _Grids, ops: Ops) -> torch.Tensor:
    """One layer through its FSDP2 unit, or as a function of its weights where it is not one."""
    if not isinstance(layer, FSDPModule):
        return _layer_forward(layer, hidden, cos, sin, grids, ops)
    with _forward_replaced(layer, functools.partial(_layer_forward, layer)):
        return layer(hidden, cos, sin, grids, ops)


def native_shared_prompt_logits(model: PreTrainedModel, tensors: dict[str, torch.Tensor],
                                cpu_kernels: bool = False, gpu_kernels: bool = False) -> torch.Tensor:
    """(B, R, V) logits that predict each response token (zeros past a response's length), from
    the shared-prompt layout's tensors: :func:`dapo.trainer.shared_prompt.shared_prompt_logits`'s.
    Attention as the model's attn_implementation asks: eager (scores materialised, Hugging Face's
    eager arithmetic) or, for any other, torch's scaled_dot_product_attention. ``cpu_kernels``:
    RMSNorm, SwiGLU, RoPE and attention (for either implementation, on the packed tokens) as fused
    kernels where they run (:mod:`dapo.trainer.fused_cpu_ops`; the same logits to float32 rounding,
    not bit for bit); ``gpu_kernels``: RMSNorm, SwiGLU and RoPE in Triton kernels on CUDA
    (:mod:`dapo.trainer.fused_gpu_ops`; bf16 within a spacing or two of eager's, float32 within a
    few float32 spacings)."""
    if reason := native_forward_reason(model):  # under a millisecond; without it, wrong logits, not an error
        raise ValueError(f"dapo-rl's training forward does not compute this model: {reason}")
    if not isinstance(model, FSDPModule):
        logits = _logits(model, tensors, cpu_kernels, gpu_kernels)
    else:
        # an FSDP2-sharded policy: through its root unit's hooks (the embedding, final norm and output
        # layer gathered, then reduce-scattered in backward), each layer through its own (_call_layer)
        with _forward_replaced(model, functools.partial(_logits, model, cpu_kernels=cpu_kernels,
                                                        gpu_kernels=gpu_kernels)):
            logits = model(tensors)
    # viewed outside the unit: FSDP2's backward hook on a unit's output is lost to an in-place op on a view
    return logits.view(*tensors["responses"].shape, -1)


def _logits(model: PreTrainedModel, tensors: dict[str, torch.Tensor], cpu_kernels: bool,
            gpu_kernels: bool) -> torch.Tensor:
    """(B * R, V) logits, zeros past each response's length."""
    decoder = model.model
    config = model.config
    # Mistral's window is every layer's; Qwen2's layer_types say where it applies (nowhere here: architecture_reason)
    window = getattr(config, "sliding_window", None) if config.model_type == "mistral" else None
    grids = _Grids(tensors, eager=getattr(config, "_attn_implementation", None) == "eager", window=window)
    tokens = torch.cat([tensors["prompt_input_ids"].flatten()[grids.prompt_slots],
                        tensors["continuation_input_ids"].flatten()[grids.continuation_slots]])
    positions = torch.cat([tensors["prompt_position_ids"].flatten()[grids.prompt_slots],
                           tensors["continuation_position_ids"].flatten()[grids.continuation_slots]])
    hidden = decoder.embed_tokens(tokens)  # (N, hidden): every real token once
    cos, sin = _rope_tables(decoder.rotary_emb, hidden, positions)
    ops: Ops = (fused_cpu_ops(hidden) if cpu_kernels else None) or (fused_gpu_ops(hidden) if gpu_kernels else None)
    if ops is not None and ops.attends_packed and not grids.window_reached():  # attention on the packed tokens, where the kernel applies
        grids.attend_packed()  # (it has no window: a Mistral whose window no sequence reaches is causal)
    recompute = model.training and checkpointing(model)
    for layer in decoder.layers:
        if recompute:  # non-reentrant: the grids and tables are read again in backward, unchanged
            hidden = checkpoint(_call_layer, layer, hidden, cos, sin, grids, ops, use_reentrant=False)
        else:
            hidden = _call_layer(layer, hidden, cos, sin, grids, ops)
    rows, width = tensors["responses"].shape
    predicting, wanted = grids.predicting_positions(tensors["response_lengths"], width)
    logits = model.lm_head(_norm(decoder.norm, _rows(hidden, predicting), ops))
    return logits.new_zeros(rows * width, logits.shape[-1]).index_copy(0, wanted, logits)


def _rows(tensor: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``tensor[index]`` for an ``index`` with repeats (a prompt's last position predicts token 0
    of each of its G responses), with a backward that sums the repeats' gradients in a fixed
    order: index_select's on CPU; on CUDA indexing's, which sorts them (index_select's adds them
    with atomics there, and indexing's is the unordered one on CPU: torch's reproducibility notes)."""
    return tensor[index] if tensor.is_cuda else tensor.index_select(0, index)


class _Grids:
    """Where each packed token sits in the padded prompt (U, P) and continuation (B, C) grids,
    and the additive attention biases over them (0 where a query sees a key, the dtype's min
    where not, as Hugging Face's eager mask). ``window``: Mistral's sliding window, where a query
    at position p sees keys at p - window + 1 .. p only (transformers' sliding_window_overlay)."""

    def __init__(self, tensors: dict[str, torch.Tensor], eager: bool, window: int | None = None) -> None:
        self.eager = eager
        self.window = window
        self.prompt_positions = tensors["prompt_position_ids"]
        self.continuation_positions = tensors["continuation_position_ids"]
        self.prompt_mask = tensors["prompt_attention_mask"].bool()
        self.prompt_rows, self.prompt_width = self.prompt_mask.shape
        self.continuation_mask = tensors["continuation_attention_mask"][:, self.prompt_width:].bool()
        self.rows, self.width = self.continuation_mask.shape
        self.prompt_index = tensors["prompt_index"].to(self.prompt_mask.device)
        self.prompt_slots = self.prompt_mask.flatten().nonzero().squeeze(1)
        self.continuation_slots = self.continuation_mask.flatten().nonzero().squeeze(1)
        self.num_prompt_tokens = self.prompt_slots.numel()
        self.prompt_bias: torch.Tensor | None = None  # made when first attended on (make_biases)
        self.continuation_bias: torch.Tensor | None = None
        self.segments: AttentionSegments | None = None  # the packed tokens' segments, where the fused kernel attends

    def attend_packed(self) -> None:
        """Attend on the packed tokens with the fused CPU kernel (dapo.trainer.fused_cpu_attention)
        rather than on the grids: the tokens' segments, which the kernel reads."""
        self.segments = attention_segments(self.prompt_mask, self.continuation_mask, self.prompt_index)

    def make_biases(self, dtype: torch.dtype) -> None:
        """The attention masks: additive biases in ``dtype`` (eager), or boolean ones (sdpa)."""
        device = self.prompt_mask.device
        prompt_causal = torch.ones(self.prompt_width, self.prompt_width, dtype=torch.bool, device=device).tril()
        sees = prompt_causal & self.prompt_mask[:, None, :]  # (U, P, P)
        continuation_causal = torch.ones(self.width, self.width, dtype=torch.bool, device=device).tril()
        continuation_sees = torch.cat([
            self.prompt_mask[self.prompt_index][:, None, :].expand(self.rows, self.width, self.prompt_width),
            continuation_causal & self.continuation_mask[:, None, :],
        ], dim=2)  # (B, C, P + C)
        if self.window is not None:
            self._apply_window(sees, continuation_sees)
        # A padding query sees itself too: its output is dropped, but a row that sees nothing can
        # be a softmax of -inf alone (float16's min plus a negative score overflows), which is NaN
        # and, times its zero gradient, NaN in backward.
        sees |= torch.eye(self.prompt_width, dtype=torch.bool, device=device)
        continuation_sees[:, :, self.prompt_width:] |= torch.eye(self.width, dtype=torch.bool, device=device)
        if not self.eager:  # scaled_dot_product_attention's boolean mask, (rows, 1 head, queries, keys)
            self.prompt_bias, self.continuation_bias = sees[:, None], continuation_sees[:, None]
            return
        lowest = torch.finfo(dtype).min
        # (rows, 1 KV head, 1 query of its group, queries, keys): broadcast over both
        self.prompt_bias = torch.zeros(sees.shape, dtype=dtype, device=device).masked_fill_(~sees, lowest)[:, None, None]
        self.continuation_bias = (torch.zeros(continuation_sees.shape, dtype=dtype, device=device)
                                  .masked_fill_(~continuation_sees, lowest)[:, None, None])

    def window_reached(self) -> bool:
        """Whether a key leaves some query's window: a sequence longer than the window (the
        longest's last position + 1; one device sync per call, windowed models only)."""
        return self.window is not None and int(self.continuation_positions.max()) + 1 > self.window

    def _apply_window(self, sees: torch.Tensor, continuation_sees: torch.Tensor) -> None:
        """Hide the keys that have left a query's window, in place; nothing where no sequence is
        longer than the window (the common case: causal attention then equals the window's).
        Positions, not grid columns: the padding between a prompt and its continuation is not
        between them in the sequence."""
        prompt_positions = self.prompt_positions.to(sees.device)
        continuation_positions = self.continuation_positions.to(sees.device)
        if not self.window_reached():
            return
        sees &= prompt_positions[:, :, None] - prompt_positions[:, None, :] < self.window
        keys = torch.cat([prompt_positions[self.prompt_index], continuation_positions], dim=1)
        continuation_sees &= continuation_positions[:, :, None] - keys[:, None, :] < self.window

    def scatter(self, packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, F) packed rows -> the prompt grid (U, P, F) and the continuation grid (B, C, F), zeros at padding."""
        features, split = packed.shape[1], self.num_prompt_tokens
        prompts = packed.new_zeros(self.prompt_rows * self.prompt_width, features).index_copy(
            0, self.prompt_slots, packed[:split])
        continuations = packed.new_zeros(self.rows * self.width, features).index_copy(
            0, self.continuation_slots, packed[split:])
        return (prompts.view(self.prompt_rows, self.prompt_width, features),
                continuations.view(self.rows, self.width, features))

    def gather(self, prompts: torch.Tensor, continuations: torch.Tensor) -> torch.Tensor:
        """The real positions of (U*P, F) and (B*C, F) grids, packed again: (N, F)."""
        return torch.cat([prompts.index_select(0, self.prompt_slots),
                          continuations.index_select(0, self.continuation_slots)])

    def predicting_positions(self, response_lengths: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(the packed positions whose logits predict a response token, where each lands in the
        flattened (B, R) response layout). Token 0 of a response is predicted by its prompt's
        last token, token j > 0 by continuation column j - 1."""
        device = self.prompt_mask.device
        last_prompt_token = torch.cumsum(self.prompt_mask.sum(dim=1), dim=0) - 1
        continuation_position = torch.full((self.rows * self.width,), -1, dtype=torch.long, device=device)
        continuation_position[self.continuation_slots] = torch.arange(
            self.num_prompt_tokens, self.num_prompt_tokens + self.continuation_slots.numel(), device=device)
        source = torch.cat([last_prompt_token[self.prompt_index][:, None],
                            continuation_position.view(self.rows, self.width)], dim=1)[:, :width]
        within = torch.arange(width, device=device)[None] < response_lengths.to(device)[:, None]
        wanted = within.flatten().nonzero().squeeze(1)
        return source.flatten()[wanted], wanted


def _rope_tables(rotary_emb: nn.Module, hidden: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sign-folded sin per packed token, (N, 1, head_dim), from the model's own rotary
    module (its dtype, as Hugging Face's): rotate_half(x) * sin = roll(x, d/2) * [-sin_1, sin_2]."""
    cos, sin = rotary_emb(hidden[None], positions[None])
    half = cos.shape[-1] // 2
    return cos[0, :, None], torch.cat([-sin[0, :, :half], sin[0, :, half:]], dim=-1)[:, None]


def _norm(norm: nn.Module, hidden: torch.Tensor, ops: Ops) -> torch.Tensor:
    return norm(hidden) if ops is None else ops.rms_norm(norm, hidden)


def _layer_forward(layer: nn.Module, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                   grids: _Grids, ops: Ops) -> torch.Tensor:
    attn, mlp = layer.self_attn, layer.mlp
    qkv = F.linear(_norm(layer.input_layernorm, hidden, ops), *fused([attn.q_proj, attn.k_proj, attn.v_proj]))
    head_dim = attn.head_dim
    query_heads, kv_heads = attn.q_proj.out_features // head_dim, attn.k_proj.out_features // head_dim
    rotated = (query_heads + kv_heads) * head_dim
    queries_keys = qkv[:, :rotated].view(len(qkv), query_heads + kv_heads, head_dim)
    fused_rope = None if ops is None else ops.rope(queries_keys, cos, sin)
    queries_keys = fused_rope if fused_rope is not None else (
        queries_keys * cos + queries_keys.roll(head_dim // 2, dims=-1) * sin)
    heads = (query_heads, kv_heads, head_dim, attn.scaling)
    attended = None if grids.segments is None else ops.attention(queries_keys, qkv[:, rotated:], grids.segments, heads)
    if attended is None:
        attended = _attend_on_grids(queries_keys.flatten(1), qkv[:, rotated:], grids, heads, hidden.dtype)
    hidden = hidden + attn.o_proj(attended)
    gate_up = F.linear(_norm(layer.post_attention_layernorm, hidden, ops), *fused([mlp.gate_proj, mlp.up_proj]))
    if ops is not None:
        return hidden + mlp.down_proj(ops.swiglu(mlp.act_fn, gate_up))
    gate, up = gate_up.chunk(2, dim=-1)
    return hidden + mlp.down_proj(mlp.act_fn(gate) * up)


def _attend_on_grids(queries_keys: torch.Tensor, values: torch.Tensor, grids: _Grids,
                     heads: tuple[int, int, int, float], bias_dtype: torch.dtype) -> torch.Tensor:
    """(N, H*d) attention of the packed tokens' (N, (H + Hkv) d) rotated queries and keys and
    (N, Hkv d) values, on the padded grids: a prompt causally to itself, a response to its prompt
    and then causally to itself."""
    if grids.prompt_bias is None:
        grids.make_biases(bias_dtype)
    prompt_qk, continuation_qk = grids.scatter(queries_keys)
    prompt_v, continuation_v = grids.scatter(values)
    split = heads[0] * heads[2]
    attend = _attend if grids.eager else _attend_sdpa
    prompt_out = attend(prompt_qk[..., :split], prompt_qk[..., split:], prompt_v, grids.prompt_bias, heads)
    keys = torch.cat([prompt_qk[..., split:][grids.prompt_index], continuation_qk[..., split:]], dim=1)
    values = torch.cat([prompt_v[grids.prompt_index], continuation_v], dim=1)
    continuation_out = attend(continuation_qk[..., :split], keys, values, grids.continuation_bias, heads)
    return grids.gather(prompt_out, continuation_out)


def _attend(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, bias: torch.Tensor,
            heads: tuple[int, int, int, float]) -> torch.Tensor:
    """Grouped-query attention on a grid, as Hugging Face's eager attention computes it: queries
    (R, Q, H*d), keys/values (R, K, Hkv*d), bias (R, 1, 1, Q, K) -> (R*Q, H*d). Each KV head
    serves G = H/Hkv query heads (repeat_kv's grouping); softmax in float32 (float64 in a float64 model)."""
    query_heads, kv_heads, head_dim, scaling = heads
    rows, num_queries, num_keys = queries.shape[0], queries.shape[1], keys.shape[1]
    group = query_heads // kv_heads
    # a KV head's G query heads as one (G*Q, d) matrix: one matmul per (row, KV head), keys never repeated
    grouped = queries.view(rows, num_queries, kv_heads, group, head_dim).permute(0, 2, 3, 1, 4)
    grouped = grouped.reshape(rows * kv_heads, group * num_queries, head_dim)
    keys = keys.view(rows, num_keys, kv_heads, head_dim).transpose(1, 2).reshape(rows * kv_heads, num_keys, head_dim)
    values = values.view(rows, num_keys, kv_heads, head_dim).transpose(1, 2).reshape(rows * kv_heads, num_keys, head_dim)
    scores = torch.bmm(grouped, keys.transpose(1, 2)).view(rows, kv_heads, group, num_queries, num_keys) * scaling + bias
    probs = torch.softmax(scores, dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32)).to(grouped.dtype)
    out = torch.bmm(probs.view(rows * kv_heads, group * num_queries, num_keys), values)  # (R*Hkv, G*Q, d)
    return out.view(rows, kv_heads, group, num_queries, head_dim).permute(0, 3, 1, 2, 4).reshape(
        rows * num_queries, query_heads * head_dim)


def _attend_sdpa(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor,
                 heads: tuple[int, int, int, float]) -> torch.Tensor:
    """:func:`_attend` through torch's scaled_dot_product_attention (boolean mask (R, 1, Q, K)),
    as Hugging Face's sdpa attention: no (R, H, Q, K) scores kept for backward on CPU, where its
    flash kernel runs, so long sequences take far less memory than eager attention."""
    query_heads, kv_heads, head_dim, scaling = heads
    rows, num_queries, num_keys = queries.shape[0], queries.shape[1], keys.shape[1]
    out = F.scaled_dot_product_attention(
        queries.view(rows, num_queries, query_heads, head_dim).transpose(1, 2),
        keys.view(rows, num_keys, kv_heads, head_dim).transpose(1, 2),
        values.view(rows, num_keys, kv_heads, head_dim).transpose(1, 2),
        attn_mask=mask, scale=scaling, enable_gqa=kv_heads != query_heads,
    )  # (R, H, Q, d)
    return out.transpose(1, 2).reshape(rows * num_queries, query_heads * head_dim)
