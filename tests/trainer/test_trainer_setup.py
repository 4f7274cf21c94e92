"""Model loading honours the model config (attention kernel, dtype)."""

import pytest
import torch

from dapo.config import ModelConfig
from dapo.trainer.setup import load_model_and_tokenizer


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_attention_kernel_and_dtype_reach_the_model(tiny_model_dir, attn):
    cfg = ModelConfig(path=str(tiny_model_dir), attn_implementation=attn, dtype="bfloat16")
    model, tokenizer, _ = load_model_and_tokenizer(cfg, torch.device("cpu"))
    assert model.config._attn_implementation == attn
    assert next(model.parameters()).dtype == torch.bfloat16 and tokenizer.pad_token_id is not None
