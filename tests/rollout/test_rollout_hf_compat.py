"""transformers 5.24 renamed the forward's key/value cache keyword (``past_key_values`` ->
``cache``, the old name removed in 5.40): dapo-rl passes each model the name its forward takes."""

from __future__ import annotations

import torch
import transformers
from packaging.version import Version
from torch import nn

from dapo.rollout.hf_compat import cache_keyword


class _Renamed(nn.Module):
    def forward(self, input_ids: torch.Tensor, cache: object = None, **kwargs: object) -> None: ...


class _NotRenamed(nn.Module):  # transformers < 5.24, or a remote-code model
    def forward(self, input_ids: torch.Tensor, past_key_values: object = None, **kwargs: object) -> None: ...


def test_cache_keyword_is_the_one_the_forward_takes(qwen2: nn.Module) -> None:
    assert cache_keyword(_Renamed()) == "cache"
    assert cache_keyword(_NotRenamed()) == "past_key_values"
    # the installed transformers' own model (the deprecation wrapper is seen through)
    renamed = Version(transformers.__version__) >= Version("5.24.0.dev0")
    assert cache_keyword(qwen2) == ("cache" if renamed else "past_key_values")
