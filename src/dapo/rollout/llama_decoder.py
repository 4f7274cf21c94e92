"""A lean functional forward for the Llama family (Llama, Qwen2, Mistral) with a static KV cache.

Why: for small models, Hugging Face's forward spends most of a decode step in Python (mask
building, cache bookkeeping, module dispatch). This module computes the same function,

    h = h + W_o Attn(RoPE(W_q x), RoPE(W_k x), W_v x),  x = RMSNorm(h)
    h = h + W_down (SiLU(W_gate x) * W_up x),             x = RMSNorm(h)
    logits = W_lm RMSNorm(h)

with a handful of tensor ops per layer, on the model's weights as :mod:`dapo.rollout.llama_weights`
prepares them (the engine rebuilds them when the model's change). Q/K/V projections are fused
into one matmul, and so are gate/up, or their SiLU and product ride on two oneDNN matmuls as
post-ops (:mod:`dapo.rollout.projections`). The prefill packs out the prompts' left padding
everywhere but in attention. RoPE tables come from the model's own rotary module.
Unsupported configurations (:func:`dapo.rollout.llama_support.unsupported_reason`) use the generic Hugging Face path
instead.

Cache layout: one zero-initialised tensor (layers, 2, batch, kv_heads, slots, head_dim), grown in
chunks; prompts are left padded so all rows write the same cache slot each step; padded and
not-yet-written slots are masked out by an additive key bias, and each row's RoPE position is its
slot minus its padding. A decode step attends over all allocated slots rather than a slice of
them: a slice is not dense, and oneDNN's bf16 matmul would copy it (twice per layer per token).
Small decode batches on CPU keep the cache and attend in float32 (FLOAT32_ATTENTION_MAX_ROWS),
unless bf16 decoding runs the fused CPU kernels (:mod:`dapo.rollout.cpu_kernels`: RoPE, the cache
write and attention in one call per layer, over the filled slots only; the folded RMSNorm in one),
faster than both torch paths at every batch size.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from dapo.rollout.cpu_kernels import cpu_decode_kernels
from dapo.rollout.llama_weights import LayerWeights, LlamaWeights

# KV-cache slots added when the cache is full: at least this many, or a quarter of the length.
# Decode attends over every allocated slot, so small chunks waste little compute.
_MIN_GROWTH_SLOTS = 32
# A prefill's attention runs over blocks of queries whose scores (and softmax) take at most this many
# bytes: all queries at once took B x H x P^2 floats three times over, with an additive bias (16 prompts
# of 1024 tokens of Qwen2.5-0.5B's shape: 1.4 GB, 3x an sdpa forward), which max_kv_cache_bytes did not bound.
_PREFILL_SCORES_BYTES = 256 * 2**20
# On CPU, decode batches of at most this many rows attend in float32 (KV cache, scores,
# probabilities, values): oneDNN's bf16 bmm of these tiny matrices is about 2x slower than
# float32's at 16 rows (native bf16 decoding 4% faster), and faster at 64 rows (float32 8% slower).
# Float32 attention is at least as precise as bf16's.
FLOAT32_ATTENTION_MAX_ROWS = 32


class LlamaDecodeSession:
    """One generation's worth of state: RoPE tables, KV cache, per-row padding, on prepared weights."""

    def __init__(
        self, weights: LlamaWeights, max_length: int, rows: int, cpu_kernels: bool = False
    ) -> None:
        """``weights``: the model's, prepared for decoding in their compute dtype (norm statistics
        are accumulated in float32; logits come out in the compute dtype, and the sampler reads
        them in float32, a few rows at a time). ``rows``: the decode batch size (prompts x samples).
        ``cpu_kernels``: run the fused kernels (:func:`dapo.rollout.cpu_kernels.cpu_decode_kernels`,
        built on first use) for bf16 weights on the CPU where they build: decode steps' attention
        where they support the head layout, every folded RMSNorm where the hidden size is a
        multiple of 16."""
        self.weights = weights
        self.num_kv_heads, self.groups, self.head_dim = weights.num_kv_heads, weights.groups, weights.head_dim
        self.scaling, self.eps, self.norm_floor = weights.scaling, weights.eps, weights.norm_floor
        self.norm_floor_value = float(self.norm_floor)
        self.dtype, self.embed = weights.dtype, weights.embed
        self.layers, self.final_norm, self.lm_head = weights.layers, weights.final_norm, weights.lm_head
        self.max_length = max_length
        self.rope = weights.rope_tables(max_length)
        on_cpu = self.embed.device.type == "cpu"
        usable = cpu_decode_kernels() if cpu_kernels and on_cpu and self.dtype == torch.bfloat16 else None
        # the attention kernel for its head layouts, the norm's for rows of whole 16-lane vectors
        self.cpu_kernels = usable if usable and usable.supports(self.groups, self.head_dim) else None
        self.cpu_rms_scale = usable.rms_scale if usable and self.embed.shape[1] % 16 == 0 else None
        float32_attention = on_cpu and rows <= FLOAT32_ATTENTION_MAX_ROWS and self.cpu_kernels is None
        self.attention_dtype = torch.float32 if float32_attention else self.dtype
        self.cache = torch.empty(0)
        # (B, Hkv, capacity), attention dtype: 0 for real tokens, -inf for padding
        self.key_bias = torch.empty(0)
        self.capacity = 0  # cache slots allocated
        self.positions = torch.empty(0, dtype=torch.long)  # (B,) RoPE position of the next token
        self.length = 0  # cache slots filled
        self._views_of: torch.Tensor | None = None  # the cache that _views were made of
        self._views: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def _rotate(self, qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """RoPE of the queries and keys in ``qkv`` (..., G+2, d), a new tensor: three ops over the
        contiguous projection (the value head passes unchanged: v * 1 + roll(v) * 0), where four
        over the strided query and key heads took 20% longer (micro-benchmark, 128 rows)."""
        return qkv.roll(self.head_dim // 2, dims=-1).mul_(sin).addcmul_(qkv, cos)

    def _normed_projection(
        self, hidden: torch.Tensor, norm_weight: torch.Tensor | None, proj: Callable[[torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """proj(RMSNorm(hidden) * norm_weight).

        Folded (norm_weight None): the row divisor
        sqrt(mean(x^2) + eps) = sqrt(sum(x^2) + n eps) / sqrt(n) = hypot(||x||, sqrt(n eps)) / sqrt(n),
        with the sqrt(n) folded into the weights: two ops and the division, per norm per token.
        The norm is accumulated in float32 (inside vector_norm, for bf16 and float16 alike); a
        norm, unlike a sum of squares (65504 once rms(x) passes 8.5 at n = 896), does not
        overflow float16 before rms(x) passes 65504 / sqrt(n). Not folded (a low-precision model,
        whose trainer forward rounds as here): in float32 as Hugging Face does."""
        if norm_weight is None and self.cpu_rms_scale is not None:
            return proj(self.cpu_rms_scale(hidden.contiguous(), self.norm_floor_value))
        if norm_weight is None:
            return proj(hidden / torch.linalg.vector_norm(hidden, dim=-1, keepdim=True).hypot_(self.norm_floor))
        normed = F.rms_norm(hidden.float(), (hidden.shape[-1],), eps=self.eps).to(hidden.dtype)
        return proj(normed * norm_weight)

    def _attend(self, qkv: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, blocked: torch.Tensor) -> torch.Tensor:
        """Grouped-query attention of a prefill: qkv (B, Q, Hkv, G+2, d) (queries first, see _grouped_qkv),
        keys/values (B, Hkv, K, d), query q attending to key k unless ``blocked`` (B, Q, K) holds ->
        (B, Q, H*d) in the compute dtype. Each group of G = H/Hkv query heads shares one KV head,
        as in repeat_kv; the softmax accumulates in float32 (torch's does for bf16 too), its
        probabilities in the attention dtype.

        The batch and KV-head dimensions are flattened into one bmm batch (B*Hkv matrices): 20-25%
        faster than a 4-D matmul at decode shapes on CPU, bf16 and float32 (measured). Scaling rides
        on the scores' matmul; the mask is filled in through a broadcast view of ``blocked`` (an
        additive (B*Hkv, Q*G, K) bias was written out again for every layer and block)."""
        batch, num_queries, _, groups, _ = qkv.shape
        groups -= 2
        pairs, num_keys = batch * self.num_kv_heads, keys.shape[2]
        # (B*Hkv, Q*G, d), row q*G + g: a view when Q = 1 (a copy when converted)
        grouped = qkv[..., :groups, :].transpose(1, 2).reshape(pairs, num_queries * groups, self.head_dim)
        unused = keys.new_zeros(()).expand(pairs, num_queries * groups, num_keys)  # (beta=0: never read)
        scores = torch.baddbmm(
            unused, grouped.to(keys.dtype), keys.reshape(pairs, num_keys, self.head_dim).transpose(1, 2),
            beta=0, alpha=self.scaling,
        )
        scores.view(batch, self.num_kv_heads, num_queries, groups, num_keys).masked_fill_(
            blocked[:, None, :, None, :], float("-inf"))
        out = torch.bmm(scores.softmax(dim=-1), values.reshape(pairs, num_keys, self.head_dim))
        out = out.view(batch, self.num_kv_heads, num_queries, groups, self.head_dim).transpose(1, 2)
        return out.reshape(batch, num_queries, -1).to(self.dtype)

    def _prefill_forward(
        self, token_ids: torch.Tensor, is_real: torch.Tensor, positions: torch.Tensor, blocked: torch.Tensor
    ) -> torch.Tensor:
        """Encode left-padded prompts ``token_ids`` (B, P) at cache slots [0, P), query q attending to
        key k unless ``blocked`` (B, P, P) holds (made once for every layer); return each row's last-position logits (B, V), in the compute dtype
        (sample_next_tokens converts a few rows at a time). (Decode steps run
        _decode_forward, the same ops on one token per row.)

        Packed: the projections, norms, RoPE and MLP run on the T real tokens alone (T, hidden),
        not on the (B, P) grid with its padding (a quarter of the grid for prompts of 10-20
        tokens); only attention runs on the grid, its queries, keys and values scattered into it
        (padding stays zero: finite, masked keys; a padding query's output is dropped)."""
        batch, length = token_ids.shape
        real = is_real.flatten().nonzero().squeeze(1)  # (T,) grid index of each real token
        # each row's last token is real (left padding), and the last of its tokens in packed order
        last = is_real.sum(dim=1).cumsum(dim=0) - 1
        rope = self.rope[positions.flatten()[real]]  # (T, 2, G+2, d)
        cos, sin = rope[:, None, 0], rope[:, None, 1]  # (T, 1, G+2, d)
        groups = self.groups
        blocks = self._query_blocks(batch, length)
        hidden = F.embedding(token_ids.flatten()[real], self.embed).to(self.dtype)  # (T, hidden)
        grid = hidden.new_zeros(batch * length, self.num_kv_heads, groups + 2, self.head_dim)
        for index, w in enumerate(self.layers):
            qkv = self._normed_projection(hidden, w.input_norm, w.qkv).view(-1, *grid.shape[1:])
            grid[real] = self._rotate(qkv, cos, sin)
            padded = grid.view(batch, length, *grid.shape[1:])
            # K and V of every pair, (2, B, Hkv, P, d), in one copy
            self.cache[index, :, :, :, :length] = padded[..., groups:, :].permute(3, 0, 2, 1, 4)
            keys, values = self.cache[index, 0, :, :, :length], self.cache[index, 1, :, :, :length]
            if index == len(self.layers) - 1:
                # past the last layer's K and V only the last position counts (its logits): the
                # rest of the layer runs for it alone
                out = self._attend(padded[:, -1:], keys, values, blocked[:, -1:]).squeeze(1)
                hidden = hidden[last]
            else:
                parts = [self._attend(padded[:, start:end], keys, values, blocked[:, start:end]) for start, end in blocks]
                out = (parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)).flatten(0, 1)[real]
            hidden = self._after_attention(w, out, hidden)
        self.length = length
        return self._normed_projection(hidden, self.final_norm, self.lm_head)

    def _query_blocks(self, batch: int, length: int) -> list[tuple[int, int]]:
        """[start, end) blocks of a prefill's ``length`` queries whose scores fit _PREFILL_SCORES_BYTES."""
        per_query = 2 * batch * self.num_kv_heads * self.groups * length * 4  # scores, softmax (float32)
        size = max(1, _PREFILL_SCORES_BYTES // per_query)
        return [(start, min(start + size, length)) for start in range(0, length, size)]

    def _decode_forward(self, tokens: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """The next token of each row (B,), at slot ``length`` under ``bias`` (B*Hkv, 1, capacity):
        _prefill_forward's layers on 2-D activations, with each layer's cache views made once per
        cache (fewer view ops per step: at 16 rows a step is mostly per-op overhead). With the CPU
        kernels one call per layer does RoPE, this slot's K and V and attention over the filled
        slots, its arguments checked once per step."""
        if self._views_of is not self.cache:
            self._views_of, self._views = self.cache, [self._layer_views(index) for index in range(len(self.layers))]
        batch, slot, groups = len(tokens), self.length, self.groups
        pairs = batch * self.num_kv_heads
        step = None
        if self.cpu_kernels is not None:
            _, keys_t, values = self._views[0]
            step = self.cpu_kernels.attention_step(batch, self.rope, self.positions, keys_t.mT, values,
                                                   bias.view(pairs, self.capacity), slot, self.scaling)
        else:
            rope = self.rope[self.positions]  # (B, 2, G+2, d)
            cos, sin = rope[:, None, 0], rope[:, None, 1]  # (B, 1, G+2, d)
        hidden = F.embedding(tokens, self.embed).to(self.dtype)
        for w, (kv_slot, keys_t, values) in zip(self.layers, self._views):
            qkv = self._normed_projection(hidden, w.input_norm, w.qkv).view(batch, self.num_kv_heads, groups + 2, self.head_dim)
            if step is not None:
                out = step(qkv, keys_t.mT, values).view(batch, -1)
            else:
                qkv = self._rotate(qkv, cos, sin)
                kv_slot[slot] = qkv[:, :, groups:].permute(2, 0, 1, 3)  # K and V, one copy
                grouped = qkv[:, :, :groups].reshape(pairs, groups, self.head_dim)  # a view
                scores = torch.baddbmm(bias, grouped.to(keys_t.dtype), keys_t, alpha=self.scaling)
                out = torch.bmm(scores.softmax(dim=-1), values).view(batch, -1).to(self.dtype)
            hidden = self._after_attention(w, out, hidden)
        self.length = slot + 1
        return self._normed_projection(hidden, self.final_norm, self.lm_head)

    def _after_attention(self, w: LayerWeights, attention_out: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """The rest of a layer: h = h + W_o attn; h = h + W_down (SiLU(W_gate x) * W_up x), x = RMSNorm(h)."""
        hidden = w.o_proj.add_to(attention_out, hidden)
        return w.down_proj.add_to(self._normed_projection(hidden, w.post_norm, w.gate_up), hidden)

    def _layer_views(self, index: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Layer ``index``'s cache as (slots, 2, B, Hkv, d) (a slot's K and V, written per step),
        keys (B*Hkv, d, capacity) transposed for the scores' matmul, values (B*Hkv, capacity, d)."""
        cache = self.cache[index]  # (2, B, Hkv, S, d)
        pairs = cache.shape[1] * self.num_kv_heads
        return (
            cache.permute(3, 0, 1, 2, 4),
            cache[0].reshape(pairs, self.capacity, self.head_dim).transpose(1, 2),
            cache[1].reshape(pairs, self.capacity, self.head_dim),
        )

    def prefill(self, input_ids: torch.Tensor, pad_lengths: torch.Tensor) -> torch.Tensor:
        """Encode left-padded prompts (B, P); return the next-token logits (B, V)."""
        batch, prompt_length = input_ids.shape
        device = input_ids.device
        self.capacity = min(self.max_length, prompt_length + _MIN_GROWTH_SLOTS)
        self.cache = self.embed.new_zeros(  # zeros: masked slots must hold finite values
            len(self.layers), 2, batch, self.num_kv_heads, self.capacity, self.head_dim, dtype=self.attention_dtype
        )
        slots = torch.arange(self.capacity, device=device)
        is_real = (slots.unsqueeze(0) >= pad_lengths.unsqueeze(1)) & (slots < prompt_length)
        zero = torch.zeros((), device=device, dtype=self.attention_dtype)
        # decode() unmasks each new slot
        self.key_bias = torch.where(is_real, zero, float("-inf")).unsqueeze(1).repeat(1, self.num_kv_heads, 1)
        causal = torch.ones(prompt_length, prompt_length, dtype=torch.bool, device=device).tril()
        # A padding query attends to itself only, so no softmax row is empty (no NaN).
        blocked = ~((causal & is_real[:, None, :prompt_length]) | torch.eye(
            prompt_length, dtype=torch.bool, device=device
        ))
        positions = (slots[:prompt_length].unsqueeze(0) - pad_lengths.unsqueeze(1)).clamp(min=0)
        self.length = 0
        logits = self._prefill_forward(input_ids, is_real[:, :prompt_length], positions, blocked)
        self.positions = positions[:, -1] + 1
        return logits

    def expand(self, repeats: int) -> None:
        """Repeat every row ``repeats`` times (the n samples of one prompt share its prefill)."""
        self.cache = self.cache.repeat_interleave(repeats, dim=2)
        self.key_bias = self.key_bias.repeat_interleave(repeats, dim=0)
        self.positions = self.positions.repeat_interleave(repeats, dim=0)

    def decode(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per row (B,); return the next-token logits (B, V)."""
        if self.length >= self.max_length:
            raise RuntimeError(f"KV cache full at {self.max_length} tokens")
        if self.length >= self.capacity:
            self._grow()
        self.key_bias[:, :, self.length] = 0
        bias = self.key_bias.view(-1, 1, self.capacity)
        logits = self._decode_forward(tokens, bias)
        self.positions += 1
        return logits

    def _grow(self) -> None:
        """Add max(32, length/4) slots (up to max_length): long limits cost memory only when used,
        and the copies stay a small fraction of the attention reads."""
        self.capacity = min(self.max_length, self.length + max(_MIN_GROWTH_SLOTS, self.length // 4))
        self.cache = self._filled_cache(self.cache[..., : self.length, :], self.cache.shape[2])
        key_bias = self.key_bias.new_full((*self.key_bias.shape[:2], self.capacity), float("-inf"))
        key_bias[..., : self.length] = self.key_bias[..., : self.length]
        self.key_bias = key_bias

    def _filled_cache(self, filled: torch.Tensor, rows: int) -> torch.Tensor:
        """A cache of ``rows`` rows and ``self.capacity`` slots holding ``filled`` in its first
        slots and zeros after them (masked slots must hold finite values): each element is written
        once, not zeroed and then overwritten."""
        cache = self.cache.new_empty(*self.cache.shape[:2], rows, self.num_kv_heads, self.capacity, self.head_dim)
        cache[..., : self.length, :] = filled
        cache[..., self.length :, :] = 0
        return cache

    def keep_rows(self, keep: torch.Tensor) -> None:
        """Drop finished rows so they cost nothing in later steps. One gather of the kept rows'
        whole cache: its unwritten slots are zeros already, and gathering the filled slots, then
        copying them into a new cache and zeroing its tail, is three passes for a few slots less."""
        self.cache = self.cache.index_select(2, keep)
        self.key_bias = self.key_bias[keep]
        self.positions = self.positions[keep]
