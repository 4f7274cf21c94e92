"""The generic decode path: any Hugging Face causal LM's own forward with a DynamicCache.

Used for architectures the fast Llama-family forward does not cover. Same session interface as
:class:`dapo.rollout.llama_decoder.LlamaDecodeSession`: prefill left-padded prompts, expand rows
for n samples, decode one token per row, drop finished rows.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import DynamicCache

from dapo.rollout.batching import left_pad_mask
from dapo.rollout.hf_compat import (
    cache_keyword,
    reset_dynamic_rope,
    rope_length_threshold,
    rotary_module,
)
from dapo.rollout.rope_groups import rope_rows_alone


class HFDecodeSession:
    def __init__(self, model: nn.Module) -> None:
        self.model = model
        # a dynamic RoPE grown by an earlier, longer call would otherwise rotate this one's prefill
        # (of max_position_embeddings tokens or more) by that call's frequencies: the samples of
        # one seed and one batch would depend on what was generated before
        reset_dynamic_rope(rotary_module(model))
        self.cache = DynamicCache(config=model.config)
        self.cache_keyword = cache_keyword(model)
        self.rope = rope_length_threshold(model)  # (rope_rows_alone's, read once per generation)
        self.attention_mask = torch.empty(0)  # (B, tokens so far): 1 real, 0 padding
        self.positions = torch.empty(0, dtype=torch.long)  # (B,) position of the next token

    def _logits(self, input_ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        # a RoPE that follows length (longrope, dynamic) rotates each row as alone, as the trainer's
        # forward does: Hugging Face's rotates every row by the longest one's frequencies
        with rope_rows_alone(self.model, self.rope):
            output = self.model(
                input_ids=input_ids,
                attention_mask=self.attention_mask,
                position_ids=position_ids,
                use_cache=True,
                logits_to_keep=1,
                **{self.cache_keyword: self.cache},
            )
        return output.logits[:, -1]

    def prefill(self, input_ids: torch.Tensor, pad_lengths: torch.Tensor) -> torch.Tensor:
        prompt_length = input_ids.shape[1]
        slots = torch.arange(prompt_length, device=input_ids.device).unsqueeze(0)
        self.attention_mask = left_pad_mask(pad_lengths, prompt_length)
        position_ids = (slots - pad_lengths.unsqueeze(1)).clamp(min=0)
        logits = self._logits(input_ids, position_ids)
        self.positions = position_ids[:, -1] + 1
        return logits

    def expand(self, repeats: int) -> None:
        self.cache.batch_repeat_interleave(repeats)
        self.attention_mask = self.attention_mask.repeat_interleave(repeats, dim=0)
        self.positions = self.positions.repeat_interleave(repeats, dim=0)

    def decode(self, tokens: torch.Tensor) -> torch.Tensor:
        ones = self.attention_mask.new_ones(len(tokens), 1)
        self.attention_mask = torch.cat([self.attention_mask, ones], dim=1)
        logits = self._logits(tokens.unsqueeze(1), self.positions.unsqueeze(1))
        self.positions = self.positions + 1
        return logits

    def keep_rows(self, keep: torch.Tensor) -> None:
        self.cache.batch_select_indices(keep)
        self.attention_mask = self.attention_mask[keep]
        self.positions = self.positions[keep]
