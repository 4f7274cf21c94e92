"""A decode step's attention inputs and their float64 result: what the CPU decode kernel
(:mod:`dapo.rollout.cpu_kernels`) must compute, for its self-test at load and for the tests."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class DecodeCase:
    """A decode step's attention inputs (bf16) and what the kernel must make of them, in float64."""

    qkv: torch.Tensor  # (B, Hkv, G+2, d)
    rope: torch.Tensor  # (positions, 2, G+2, d)
    positions: torch.Tensor  # (B,)
    keys: torch.Tensor  # (B*Hkv, capacity, d)
    values: torch.Tensor
    bias: torch.Tensor  # (B*Hkv, capacity)
    slot: int
    scale: float

    def arguments(self) -> tuple:
        return self.qkv, self.rope, self.positions, self.keys, self.values, self.bias, self.slot, self.scale

    def _rotated(self, head: slice) -> torch.Tensor:
        """RoPE of the ``head`` heads of every pair, float64 rounded to bf16 (as the cache and the
        scores' matmul hold them): (B*Hkv, heads, d)."""
        table = self.rope[self.positions].double()[:, None, :, 0:1]  # (B, 1, 2, 1, d): query/key row
        x = self.qkv[:, :, head].double()
        rotated = x * table[:, :, 0] + x.roll(x.shape[-1] // 2, dims=-1) * table[:, :, 1]
        return rotated.bfloat16().double().flatten(0, 1)

    def rotated_key(self) -> torch.Tensor:
        groups = self.qkv.shape[2] - 2
        return self._rotated(slice(groups, groups + 1))[:, 0]

    def reference(self) -> torch.Tensor:
        """softmax(scale q k^T + bias) v over slots [0, slot], the new key and value in place."""
        groups, length = self.qkv.shape[2] - 2, self.slot + 1
        keys, values = self.keys.double().clone(), self.values.double().clone()
        keys[:, self.slot] = self.rotated_key()
        values[:, self.slot] = self.qkv[:, :, groups + 1].double().flatten(0, 1)
        scores = self.scale * self._rotated(slice(0, groups)) @ keys[:, :length].mT + self.bias[:, None, :length].double()
        return scores.softmax(dim=-1) @ values[:, :length]


def random_decode_case(rows: int, kv_heads: int, groups: int, head_dim: int, capacity: int, slot: int,
                       seed: int = 0) -> DecodeCase:
    """Random bf16 inputs: a RoPE table of random angles with its sign-folded sin (value head:
    cos 1, sin 0), rows at random positions up to ``slot``, up to 5 left-padding slots masked per
    row, and slots past ``slot`` filled with huge values (a kernel that reads them is wrong)."""
    generator = torch.Generator().manual_seed(seed)
    heads, pairs = groups + 2, rows * kv_heads
    angles = torch.rand(slot + 1, head_dim // 2, generator=generator, dtype=torch.float64) * 6.3
    cos, sin = angles.cos().repeat(1, 2), angles.sin().repeat(1, 2)
    sin[:, : head_dim // 2] *= -1
    rope = torch.stack([torch.stack([cos] * (heads - 1) + [torch.ones_like(cos)], dim=1),
                        torch.stack([sin] * (heads - 1) + [torch.zeros_like(sin)], dim=1)], dim=1).bfloat16()
    padding = torch.randint(0, 6, (rows,), generator=generator).clamp(max=slot)
    keys, values = (torch.randn(pairs, capacity, head_dim, generator=generator).bfloat16() for _ in range(2))
    keys[:, slot + 1 :] = 1e4
    values[:, slot + 1 :] = 1e4
    bias = torch.zeros(rows, kv_heads, capacity, dtype=torch.bfloat16)
    bias.masked_fill_((torch.arange(capacity) < padding[:, None])[:, None], float("-inf"))
    return DecodeCase(qkv=torch.randn(rows, kv_heads, heads, head_dim, generator=generator).mul(2).bfloat16(),
                      rope=rope, positions=slot - padding, keys=keys, values=values, bias=bias.flatten(0, 1),
                      slot=slot, scale=head_dim**-0.5)
