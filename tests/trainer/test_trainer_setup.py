"""Model loading honours the model config (attention kernel, dtype); sampling seeds."""

import pytest
import torch

from dapo.config import DAPOConfig, ModelConfig, load_config
from dapo.trainer.setup import EVAL_SEED_OFFSET, load_model_and_tokenizer, make_sampling_params


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_attention_kernel_and_dtype_reach_the_model(tiny_model_dir, attn):
    cfg = ModelConfig(path=str(tiny_model_dir), attn_implementation=attn, dtype="bfloat16")
    model, tokenizer, _ = load_model_and_tokenizer(cfg, torch.device("cpu"))
    assert model.config._attn_implementation == attn
    assert next(model.parameters()).dtype == torch.bfloat16 and tokenizer.pad_token_id is not None


def test_eval_seed_is_pinned_by_eval_seed_or_derived_from_the_trainer_seed():
    def eval_seed(*overrides: str) -> int:
        cfg: DAPOConfig = load_config([], list(overrides))
        return make_sampling_params(cfg, eos_token_id=2, evaluation=True).seed

    assert eval_seed("trainer.seed=3") == EVAL_SEED_OFFSET + 3 != eval_seed("trainer.seed=4")
    assert eval_seed("trainer.seed=3", "eval.seed=11") == eval_seed("trainer.seed=4", "eval.seed=11") == 11
    assert make_sampling_params(load_config([], []), eos_token_id=2, seed=5).seed == 5
    with pytest.raises(ValueError, match="seed"):
        make_sampling_params(load_config([], []), eos_token_id=2)
