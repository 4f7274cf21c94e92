"""The native decoder's weights: cast to the compute dtype, fused, norm-folded and pre-packed.

Preparing them reads every weight of the model and writes a copy (a bf16 cast of a float32
policy, LoRA adapters merged in (:func:`dapo.lora.merged_linear`), the fused Q/K/V and gate/up
matrices, the RMSNorm weights folded into the projections after them, oneDNN/MKL packing;
``benchmarks/bench_rollout.py`` times a generate() with and without it). :class:`dapo.rollout.native.NativeEngine` therefore keeps one
prepared set while the model's weights stay what they were (see :func:`weights_key`) and rebuilds
it otherwise, like a serving engine that holds its own copy of the weights between weight syncs.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import torch
from torch import nn

from dapo.lora import merged_linear
from dapo.rollout.hf_compat import reset_dynamic_rope
from dapo.rollout.projections import GatedUp, Projection, biases_or_zeros, scaled_to


def weights_key(tensors: list[torch.Tensor], compute_dtype: torch.dtype | None, rows: int) -> Hashable | None:
    """What a prepared set of a model's weights depends on: the storage and in-place-write counter
    of each of its ``tensors`` (:func:`model_tensors`: parameters, and buffers such as the RoPE
    frequencies; optimizer steps, ``load_state_dict``, ``param.copy_``/``add_`` move the counter),
    the compute dtype, and the decode rows the packing was chosen for. Writes the counter does not
    see (through ``param.data``, or a fused optimizer's kernel) need the engine's ``sync_weights``,
    as every rollout engine does: until then the prepared set is an inconsistent mix (where a dtype
    needs no cast it holds the live tensors). None where a tensor has no counter (made under
    ``torch.inference_mode``): its writes cannot be told, so no prepared set is kept."""
    if any(t.is_inference() for t in tensors):
        return None
    return compute_dtype, rows, tuple((t.data_ptr(), t._version) for t in tensors)


def model_tensors(model: nn.Module) -> list[torch.Tensor]:
    """Every parameter and buffer of ``model`` (tied ones once)."""
    return [*model.parameters(), *model.buffers()]


@dataclass
class LayerWeights:
    input_norm: torch.Tensor | None  # None: folded into qkv (see LlamaWeights.fold_norms)
    qkv: Projection
    o_proj: Projection
    post_norm: torch.Tensor | None
    gate_up: GatedUp
    down_proj: Projection


class LlamaWeights:
    """A Llama-family model's weights as the decoder runs them, and its shape constants."""

    def __init__(self, model: nn.Module, rows: int, compute_dtype: torch.dtype | None = None) -> None:
        """``rows``: the decode batch size (prompts x samples), a hint for packing weights.
        ``compute_dtype``: decode in this dtype (e.g. bfloat16 on a float32 policy, about 2x
        faster on CPUs with bf16 units); None: the model's."""
        config, decoder = model.config, model.model
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.groups = self.num_heads // self.num_kv_heads  # G: query heads per KV head
        attn0 = decoder.layers[0].self_attn
        self.head_dim = attn0.head_dim
        self.scaling = attn0.scaling
        self.eps = config.rms_norm_eps
        self.dtype = compute_dtype or decoder.embed_tokens.weight.dtype
        # rows are looked up, then cast: no compute-dtype copy of the whole table
        self.embed = decoder.embed_tokens.weight
        # RMSNorm(x) * w followed by W is (x @ (W * w)^T) / rms(x): fold w into W and apply
        # 1/rms(x) to the product, in float32 only (in low precision the rounding would differ from
        # the trainer's forward, so a bf16 model keeps its norms as they are).
        self.fold_norms = decoder.embed_tokens.weight.dtype == torch.float32
        self.sqrt_hidden = config.hidden_size**0.5
        self.norm_floor = torch.tensor((config.hidden_size * self.eps) ** 0.5, dtype=self.dtype, device=self.embed.device)
        self.layers = [self._layer_weights(layer, rows) for layer in decoder.layers]
        final_norm, head = decoder.norm.weight, merged_linear(model.lm_head)
        self.final_norm = None if self.fold_norms else final_norm.to(self.dtype)
        head_scale = final_norm * self.sqrt_hidden if self.fold_norms else None
        self.lm_head = self._projection(scaled_to(head.weight, head_scale, self.dtype), head.bias, rows)
        self.rotary_emb = decoder.rotary_emb
        self._rope = torch.empty(0)

    def _layer_weights(self, layer: nn.Module, rows: int) -> LayerWeights:
        attn, mlp = layer.self_attn, layer.mlp
        o_proj, gate_proj, up_proj, down_proj = (merged_linear(m) for m in (attn.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj))
        input_norm, post_norm = layer.input_layernorm.weight, layer.post_attention_layernorm.weight
        qkv_weight, qkv_bias = self._grouped_qkv(attn)
        qkv_weight = scaled_to(qkv_weight, input_norm * self.sqrt_hidden if self.fold_norms else None, self.dtype)
        post_scale = post_norm * self.sqrt_hidden if self.fold_norms else None
        gate_up = GatedUp(
            gate_proj, up_proj, post_scale, self.dtype, lambda w, b: self._projection(w, b, rows)
        )
        return LayerWeights(
            None if self.fold_norms else input_norm.to(self.dtype),
            self._projection(qkv_weight, qkv_bias, rows),
            self._projection(o_proj.weight, o_proj.bias, rows),
            None if self.fold_norms else post_norm.to(self.dtype),
            gate_up,
            self._projection(down_proj.weight, down_proj.bias, rows),
        )

    def _grouped_qkv(self, attn: nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Q, K and V projections fused, their output rows ordered by KV head: for each KV head,
        its G = H/Hkv query heads, then its key head, then its value head. A token's projection
        viewed as (Hkv, G+2, d) then holds each attention pair's queries, key and value together,
        so one strided view of it is the (B*Hkv, G, d) query batch of a decode step, and K and V go
        to the cache in one copy."""
        groups = self.groups

        def by_kv_head(tensor: torch.Tensor, heads_per_kv: int) -> torch.Tensor:
            return tensor.reshape(self.num_kv_heads, heads_per_kv, self.head_dim, *tensor.shape[1:])

        def layout(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            parts = [by_kv_head(q, groups), by_kv_head(k, 1), by_kv_head(v, 1)]
            return torch.cat(parts, dim=1).flatten(0, 2)

        projections = tuple(merged_linear(m) for m in (attn.q_proj, attn.k_proj, attn.v_proj))
        biases = biases_or_zeros(projections)
        return layout(*(p.weight for p in projections)), None if biases is None else layout(*biases)

    def _projection(self, weight: torch.Tensor, bias: torch.Tensor | None, rows: int) -> Projection:
        return Projection(weight.to(self.dtype), None if bias is None else bias.to(self.dtype), rows)

    def rope_tables(self, max_length: int) -> torch.Tensor:
        """cos and sign-folded sin for a token's whole Q/K/V projection, (max_length, 2, G+2,
        head_dim) (one gather per step for both): rotate_half(x) * sin equals roll(x, d/2) *
        [-sin_1, sin_2], which saves the negate-and-concatenate; the value head's cos is 1 and
        its sin 0, so RoPE runs on the whole contiguous projection (see the decoder's _rotate).
        Built for the longest length asked so far (a position's entries do not depend on the
        length: RoPE whose frequencies do is accepted only up to the length where they change,
        llama_support.unsupported_reason, so every table holds the short sequences' frequencies)."""
        if len(self._rope) < max_length:
            self._rope = self._build_rope_tables(max_length)
        return self._rope[:max_length]

    def _build_rope_tables(self, max_length: int) -> torch.Tensor:
        positions = torch.arange(max_length, device=self.embed.device).unsqueeze(0)
        reset_dynamic_rope(self.rotary_emb)  # a dynamic RoPE's own frequencies, not those a longer call grew
        # (the module returns its input's dtype: the compute dtype's, as when it read a cast table)
        cos, sin = self.rotary_emb(self.embed[:1].to(self.dtype).unsqueeze(0), positions)
        cos, sin = cos[0].to(self.dtype), sin[0].to(self.dtype)
        half, groups = self.head_dim // 2, self.groups
        sin = torch.cat([-sin[:, :half], sin[:, half:]], dim=-1)
        value_cos, value_sin = torch.ones_like(cos), torch.zeros_like(sin)
        cos = torch.stack([cos] * (groups + 1) + [value_cos], dim=1)
        return torch.stack([cos, torch.stack([sin] * (groups + 1) + [value_sin], dim=1)], dim=1)
