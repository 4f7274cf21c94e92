"""Atomic checkpoints that are also plain Hugging Face model directories.

A checkpoint ``<run>/checkpoints/step-000012/`` holds the weights (safetensors), model config
and tokenizer written by ``save_pretrained`` (so ``AutoModelForCausalLM.from_pretrained`` loads it
with no conversion), ``trainer_state.pt`` (optimizer, scheduler, RNG states, data cursor,
dynamic-sampling carry-over, counters) and the run's resolved ``dapo_config.yaml``.

It is built in a hidden temporary directory, fsynced, and renamed into place, so a run killed at
any moment (or a machine that loses power) leaves either the previous checkpoints or a complete
new one, never a half-written one; the next run removes the temporary directory.
"""

from __future__ import annotations

import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import torch

from dapo.trainer.run_dir import fsync_dir, fsync_tree

CHECKPOINT_PATTERN = re.compile(r"^step-(\d+)$")
STATE_FILE = "trainer_state.pt"


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := CHECKPOINT_PATTERN.match(p.name))]
    return [p for _, p in sorted(found) if (p / STATE_FILE).exists()]


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    model: Any,
    tokenizer: Any,
    trainer_state: dict[str, Any],
    config_yaml: str,
    keep_last: int,
) -> Path:
    """Write checkpoint ``step`` atomically, then delete all but the newest ``keep_last``."""
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:06d}"
    tmp = root / f".tmp-step-{step:06d}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    (tmp / "dapo_config.yaml").write_text(config_yaml)
    with open(tmp / STATE_FILE, "wb") as handle:
        torch.save(trainer_state, handle)
    fsync_tree(tmp)  # every file on disk before the rename publishes the checkpoint
    if final.exists():  # re-saving a step (e.g. final == last periodic): swap, then drop the old
        stale = root / f".old-step-{step:06d}-{os.getpid()}"
        final.rename(stale)
        tmp.rename(final)
        shutil.rmtree(stale, ignore_errors=True)
    else:
        tmp.rename(final)
    fsync_dir(root)
    for old in list_checkpoints(run_dir)[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_model_weights(model: torch.nn.Module, checkpoint_dir: str | Path) -> None:
    """Load the safetensors weights of a checkpoint (single file or sharded) into ``model``."""
    from safetensors.torch import load_file

    root = Path(checkpoint_dir)
    files = sorted(root.glob("model*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{root} holds no model*.safetensors weights")
    device = str(next(model.parameters()).device)
    weights: dict[str, torch.Tensor] = {}
    for file in files:
        weights.update(load_file(str(file), device=device))
    load_full_weights(model, weights, f"checkpoint {root}")


def load_full_weights(model: torch.nn.Module, weights: dict[str, torch.Tensor], source: str) -> None:
    """Load a full (unsharded) state dict into ``model``: every key must match, except a tied
    output layer that the weights may omit."""
    missing, unexpected = model.load_state_dict(weights, strict=False)
    tied = getattr(model.config, "tie_word_embeddings", False)
    really_missing = [k for k in missing if not (tied and k.startswith("lm_head"))]
    if unexpected or really_missing:
        raise RuntimeError(f"{source} does not match the model: missing {really_missing}, unexpected {unexpected}")
    if tied:
        model.tie_weights()


def load_trainer_state(checkpoint_dir: str | Path) -> dict[str, Any]:
    path = Path(checkpoint_dir) / STATE_FILE
    if not path.exists():
        raise FileNotFoundError(f"{checkpoint_dir} is not a dapo-rl checkpoint (no {STATE_FILE})")
    return torch.load(path, map_location="cpu", weights_only=True)


def resolve_resume(resume: str, run_dir: str | Path) -> Path | None:
    """``checkpoint.resume``: "auto" -> newest checkpoint of the run (or None), "never" -> None,
    anything else -> that checkpoint directory, which must exist."""
    if resume == "never":
        return None
    if resume == "auto":
        found = list_checkpoints(run_dir)
        return found[-1] if found else None
    path = Path(resume)
    if not (path / STATE_FILE).exists():
        raise FileNotFoundError(f"checkpoint.resume={resume!r}: no {STATE_FILE} there")
    return path
