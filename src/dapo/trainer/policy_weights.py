"""The policy's weights in a one-process checkpoint, with or without LoRA adapters.

Full fine-tuning: the checkpoint is the model's Hugging Face directory, and a resume loads its
weights back. With LoRA (``model.lora_rank > 0``, :mod:`dapo.lora`) the checkpoint holds

* the merged weights, W + (alpha / r) B A, under the base model's names, as the Hugging Face
  directory (``from_pretrained`` loads the trained policy with no PEFT), and
* the adapters alone, in PEFT's format, in ``adapter/`` (``PeftModel.from_pretrained(base,
  CHECKPOINT/adapter)``), which is what a resume reads: it continues A and B (and their AdamW
  state, in ``trainer_state.pt``) on the base weights of ``model.path``, frozen as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from dapo.errors import UserError
from dapo.lora import ADAPTER_DIR, has_lora, load_adapter, merged_weights, save_adapter
from dapo.rollout.base import tied_duplicates
from dapo.trainer.checkpoint import load_model_weights, save_hf_model, save_hf_model_streamed


class AdapterMismatchError(UserError):
    """A checkpoint trained with LoRA resumed without it, or the other way round."""


def save_policy_weights(directory: str | Path, model: torch.nn.Module, tokenizer: Any) -> None:
    """Write ``model``'s weights into the checkpoint being built at ``directory``."""
    if not has_lora(model):
        save_hf_model(directory, model, tokenizer)
        return
    tied = tied_duplicates(model)
    merged = ((name, tensor) for name, tensor in merged_weights(model) if name not in tied)
    save_hf_model_streamed(directory, model, tokenizer, merged)
    save_adapter(model, Path(directory) / ADAPTER_DIR, base_model_path=str(model.config._name_or_path))


def load_policy_weights(model: torch.nn.Module, directory: str | Path) -> None:
    """Load a checkpoint's weights into ``model``: its adapters where ``model`` has LoRA adapters
    (its base weights are ``model.path``'s), its full weights otherwise."""
    adapter = Path(directory) / ADAPTER_DIR
    if has_lora(model):
        if not adapter.is_dir():
            raise AdapterMismatchError(
                f"{directory} was trained without LoRA (it holds no {ADAPTER_DIR}/): resume it with model.lora_rank=0, "
                f"or start LoRA training from its weights with model.path={directory} checkpoint.resume=never")
        try:
            load_adapter(model, adapter)
        except ValueError as error:
            raise AdapterMismatchError(f"cannot resume {directory}: {error}") from error
        return
    if adapter.is_dir():
        saved = json.loads((adapter / "adapter_config.json").read_text())
        raise AdapterMismatchError(
            f"{directory} was trained with LoRA adapters ({ADAPTER_DIR}/): resume it with model.lora_rank={saved.get('r')} "
            f"(and its lora_alpha and lora_target_modules), or train every weight from its merged weights with "
            f"model.path={directory} checkpoint.resume=never")
    load_model_weights(model, directory)
