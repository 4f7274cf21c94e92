"""What a loaded model and its tokenizer are checked for as a run starts, each problem said in
one line rather than as a traceback at the first step: a model that is no causal LM, special
tokens past the model's vocabulary, and sequences past where its RoPE changes its frequencies."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from transformers import AutoConfig, PreTrainedModel
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

from dapo.config import DAPOConfig
from dapo.errors import UserError
from dapo.rollout.batching import vocab_size_of
from dapo.rollout.hf_compat import rope_length_threshold


def check_causal_lm(path: Path) -> None:
    """Refuse in one line a model AutoModelForCausalLM has no class for (an encoder-decoder such as
    T5, a vision model): transformers' own error ends a traceback with every class it knows. (One
    whose config names its own code, ``auto_map``, is left to transformers to refuse.)"""
    config = AutoConfig.from_pretrained(path)
    if type(config) in MODEL_FOR_CAUSAL_LM_MAPPING or "AutoModelForCausalLM" in (getattr(config, "auto_map", None) or {}):
        return
    kind = "an encoder-decoder model" if getattr(config, "is_encoder_decoder", False) else "a model"
    classes = f" ({', '.join(config.architectures)})" if getattr(config, "architectures", None) else ""
    raise UserError(f"model.path={str(path)!r} holds {kind} of type {config.model_type!r}{classes}, which "
                    "transformers' AutoModelForCausalLM does not load: dapo-rl trains decoder-only causal language "
                    "models (Qwen, Llama, Mistral, Gemma, ...)")


def warn_about_length_following_rope(cfg: DAPOConfig, model: PreTrainedModel) -> None:
    """Say once that the run's sequences reach past the length where the model's RoPE (dynamic NTK,
    LongRoPE) changes its frequencies: a response decoded past it keeps the keys cached at the
    shorter length's rotation, the trainer rotates the whole sequence at its final one, and the
    rollout's log-probs differ from the trainer's by more than rounding (README, "Known limits")."""
    longest = cfg.data.max_prompt_length + cfg.rollout.max_response_length
    if (rope := rope_length_threshold(model)) is None or longest <= rope[1]:
        return
    algorithm = cfg.algorithm
    remedy = (" (old_logprobs=rollout: the ratio's clip bounds it)" if algorithm.old_logprobs == "rollout" else
              " (algorithm.tis_cap corrects the update for it)" if algorithm.tis_cap is not None else
              "; set algorithm.tis_cap (e.g. 2) to correct the update for it")
    warnings.warn(f"the model's {rope[0]} RoPE changes its frequencies past {rope[1]} tokens and this run's sequences "
                  f"reach {longest} (data.max_prompt_length + rollout.max_response_length): past it the rollout's "
                  "log-probs differ from the trainer's by more than rounding (mismatch/rollout_trainer_logprob_diff)"
                  f"{remedy}, or keep sequences within {rope[1]} tokens", stacklevel=2)


def check_special_tokens(model: PreTrainedModel, tokenizer: Any, stop_token_ids: list[int]) -> None:
    """Refuse a pad or stop token the model has no embedding for: a pad token added to the tokenizer
    without resizing the model's embeddings (a common way to give a Llama tokenizer one) failed at
    the first generation, in the engine's request check or the embedding lookup."""
    size = vocab_size_of(model)
    for kind, token in [("pad", tokenizer.pad_token_id)] + [("stop", token) for token in stop_token_ids]:
        if token is None or 0 <= token < size:
            continue
        name = tokenizer.convert_ids_to_tokens(token) if token < len(tokenizer) else None
        or_else = " or remove the pad token (dapo-rl then pads with EOS)" if kind == "pad" else ""
        raise UserError(f"the {kind} token {name!r} (id {token}) is outside the model's vocabulary of {size} ids: "
                        "resize the model's embeddings to the tokenizer (model.resize_token_embeddings(len(tokenizer)),"
                        f" then save both){or_else}")
