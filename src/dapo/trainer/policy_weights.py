"""The policy's weights in a one-process checkpoint, with or without LoRA adapters.

Full fine-tuning: the checkpoint is the model's Hugging Face directory, and a resume loads its
weights back. With LoRA (``model.lora_rank > 0``, :mod:`dapo.lora`) the checkpoint holds

* the merged weights, W + (alpha / r) B A, under the base model's names, as the Hugging Face
  directory (``from_pretrained`` loads the trained policy with no PEFT), and
* the adapters alone, in PEFT's format, in ``adapter/`` (``PeftModel.from_pretrained(base,
  CHECKPOINT/adapter)``), which is what a resume reads: it continues A and B (and their AdamW
  state, in ``trainer_state.pt``) on the base weights of ``model.path``, frozen as before.

Several ranks: their DCP shards hold the adapters alone (:mod:`dapo.trainer.checkpoint`), rank 0
writes ``adapter/`` from them (:func:`gather_adapters`, :func:`save_adapter_of_shards`) and, when
exporting, the merged Hugging Face directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from dapo.errors import UserError
from dapo.lora import (
    ADAPTER_DIR,
    adapter_config_mismatch,
    adapter_names,
    has_lora,
    load_adapter,
    merged_weights,
    save_adapter,
)
from dapo.rollout.base import tied_duplicates
from dapo.trainer.checkpoint import load_model_weights
from dapo.trainer.fsdp import gathered_weights
from dapo.trainer.hf_export import save_hf_model, save_hf_model_streamed


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
    check_adapters_match(model, directory)
    if has_lora(model):
        try:
            load_adapter(model, Path(directory) / ADAPTER_DIR)
        except ValueError as error:
            raise AdapterMismatchError(f"cannot resume {directory}: {error}") from error
        except RuntimeError as error:  # torch's size mismatch: the same layers of a base model of another width
            raise AdapterMismatchError(f"cannot resume {directory}: its adapters do not fit this model.path's layers "
                                       f"(trained on another base model?): {' '.join(str(error).split())}") from error
        return
    load_model_weights(model, directory)


def check_adapters_match(model: torch.nn.Module, directory: str | Path) -> None:
    """Refuse to resume checkpoint ``directory`` (one process's or several ranks') trained with
    LoRA into ``model`` without adapters, the other way round, or with adapters of another rank,
    alpha or targets (their shapes alone would not tell another alpha)."""
    adapter = Path(directory) / ADAPTER_DIR
    if has_lora(model):
        if not adapter.is_dir():
            raise AdapterMismatchError(
                f"{directory} was trained without LoRA (it holds no {ADAPTER_DIR}/): resume it with model.lora_rank=0, "
                f"or start LoRA training from its weights with model.path={directory} checkpoint.resume=never")
        if (mismatch := adapter_config_mismatch(model, adapter)) is not None:
            raise AdapterMismatchError(f"cannot resume {directory}: {mismatch}")
    elif adapter.is_dir():
        saved = json.loads((adapter / "adapter_config.json").read_text())
        raise AdapterMismatchError(
            f"{directory} was trained with LoRA adapters ({ADAPTER_DIR}/): resume it with model.lora_rank={saved.get('r')} "
            f"(and its lora_alpha and lora_target_modules), or train every weight from its merged weights with "
            f"model.path={directory} checkpoint.resume=never")


def gather_adapters(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A sharded LoRA policy's adapter weights, whole, on every rank (a few MB: all at once), for
    :func:`save_adapter_of_shards`. Collective: every rank must call it."""
    adapters = adapter_names(model)
    return dict(gathered_weights(model, skip=set(model.state_dict()) - adapters))


def save_adapter_of_shards(directory: str | Path, model: torch.nn.Module, adapters: dict[str, torch.Tensor]) -> None:
    """The adapters :func:`gather_adapters` gathered, in PEFT's format into ``directory/adapter``
    (:func:`dapo.lora.save_adapter`): rank 0's to write, after every collective of the checkpoint,
    so a failed write leaves no other rank waiting in one."""
    save_adapter(model, Path(directory) / ADAPTER_DIR, base_model_path=str(model.config._name_or_path), state=adapters)
