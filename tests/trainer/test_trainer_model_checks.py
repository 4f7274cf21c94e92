"""The checks of a loaded model and tokenizer as a run starts: a model that is no causal LM, special
tokens past the model's vocabulary, sequences past where a RoPE changes its frequencies."""

import warnings

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from dapo.builtin import build_tokenizer
from dapo.config import DAPOConfig, ModelConfig
from dapo.errors import UserError
from dapo.trainer.model_checks import check_special_tokens, warn_about_length_following_rope
from dapo.trainer.setup import load_model_and_tokenizer


def tiny_llama(vocab_size: int = 64, max_positions: int = 64, rope_scaling: dict | None = None) -> LlamaForCausalLM:
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, max_position_embeddings=max_positions, rope_scaling=rope_scaling)
    with torch.device("meta"):
        return LlamaForCausalLM(config)


def test_a_model_without_a_causal_lm_class_is_refused_in_one_line(tmp_path):
    """A T5 directory ended in transformers' traceback listing every causal-LM class it knows."""
    from transformers import T5Config

    T5Config(d_model=32, num_layers=1, num_heads=2).save_pretrained(tmp_path)
    with pytest.raises(UserError, match=r"holds an encoder-decoder model of type 't5', .* trains decoder-only causal"):
        load_model_and_tokenizer(ModelConfig(path=str(tmp_path)), torch.device("cpu"))


def test_sequences_past_where_a_dynamic_rope_changes_its_frequencies_are_warned_of():
    """Past max_position_embeddings a dynamic NTK RoPE's rollout and trainer log-probs differ by
    ~1e-4, 1000x rounding, which the run logged as mismatch alone."""
    def model(max_positions: int) -> LlamaForCausalLM:
        return tiny_llama(max_positions=max_positions, rope_scaling={"rope_type": "dynamic", "factor": 2.0})

    cfg = DAPOConfig()
    cfg.data.max_prompt_length, cfg.rollout.max_response_length = 16, 16
    with pytest.warns(UserWarning, match=r"dynamic RoPE changes its frequencies past 24 tokens .* reach 32 .* set "
                                         r"algorithm.tis_cap"):
        warn_about_length_following_rope(cfg, model(24))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_about_length_following_rope(cfg, model(32))  # within it: nothing to say


def test_a_pad_or_stop_token_past_the_model_s_vocabulary_is_refused_in_one_line():
    """A pad token added to a tokenizer without resizing the model failed at the first generation."""
    tokenizer = build_tokenizer()
    eos = tokenizer.eos_token_id
    check_special_tokens(tiny_llama(vocab_size=len(tokenizer)), tokenizer, [eos])
    small = tiny_llama(vocab_size=eos)  # the tokenizer's last ids have no embedding
    with pytest.raises(UserError, match=rf"the stop token .* \(id {eos}\) is outside the model's vocabulary of {eos} ids"):
        check_special_tokens(small, tokenizer, [eos])
    tokenizer.pad_token_id = eos
    with pytest.raises(UserError, match=r"the pad token .* or remove the pad token"):
        check_special_tokens(small, tokenizer, [])
