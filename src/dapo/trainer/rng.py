"""The random generators a checkpoint saves and a resume restores, so that a resumed run draws
the same numbers as one never stopped: the driver's (in its state file) and each policy rank's
(``policy/rng-rank<rank>.pt``: dropout draws from them)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dapo.trainer.checkpoint import load_checkpoint_file
from dapo.trainer.run_dir import SHARDED_DIR


def seed_process(seed: int) -> None:
    """Seed this process's torch (CPU and every GPU), Python ``random`` and NumPy global generators
    from ``seed``, as ``transformers.set_seed`` does: a user's advantage or loss plugin that draws
    from Python's or NumPy's makes the same draws in two runs of one config. (Reward functions run
    in worker processes, each call seeded from the call itself: dapo.rewards.worker.)"""
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)


def rng_state() -> dict[str, Any]:
    """This process's torch, Python, NumPy (its global generator: a user's advantage or loss plugin
    may draw from it) and (where it has used CUDA) CUDA generators. A process that never
    initialised CUDA, as the driver of policy ranks on Ray, has drawn nothing from it, and reading
    its states would open a context on every visible GPU, memory the ranks need."""
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": _numpy_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _numpy_state() -> dict[str, Any]:
    """NumPy's global Mersenne Twister as tensors and numbers (a checkpoint loads with weights_only)."""
    _, keys, position, has_gauss, cached_gauss = np.random.get_state()
    return {"keys": torch.from_numpy(keys.astype(np.int64)), "position": int(position), "has_gauss": int(has_gauss),
            "cached_gauss": float(cached_gauss)}


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore :func:`rng_state`'s generators (NumPy's where the checkpoint has it: older ones do
    not); a CUDA state per GPU visible now (a resume may see fewer or more GPUs than the save did:
    the others keep their seeds)."""
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "numpy" in state:
        saved = state["numpy"]
        np.random.set_state(("MT19937", saved["keys"].numpy().astype(np.uint32), saved["position"],
                             saved["has_gauss"], saved["cached_gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        for index, cuda_state in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(cuda_state, index)


def save_rank_rng(directory: str | Path, rank: int) -> None:
    """A policy rank's own generators (its process's torch, Python and CUDA RNG: dropout draws
    from them) into ``directory/policy/rng-rank<rank>.pt``; the driver's are in its state file."""
    torch.save(rng_state(), rank_rng_path(directory, rank))


def load_rank_rng(directory: str | Path, rank: int) -> bool:
    """Restore :func:`save_rank_rng`'s generators of ``rank``; False where the checkpoint holds
    none for it (saved by fewer ranks, or in one process): that rank keeps its seeded state."""
    path = rank_rng_path(directory, rank)
    if not path.exists():
        return False
    set_rng_state(load_checkpoint_file(path, directory))
    return True


def rank_rng_path(directory: str | Path, rank: int) -> Path:
    return Path(directory) / SHARDED_DIR / f"rng-rank{rank:05d}.pt"
