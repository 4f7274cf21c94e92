"""The policy's state in a multi-rank checkpoint: every rank's shard of the weights and AdamW
state, and the scheduler's state, written and read with ``torch.distributed.checkpoint`` (DCP) in
``policy/`` (:func:`save_sharded_policy`, :func:`load_sharded_policy`; DCP reshards, so another
number of ranks, one process included, can resume it), and the driver's record of it in
``trainer_state.pt`` (:func:`sharded_policy_state`, :func:`layout_mismatch`). The checkpoint
directory around it, atomic and a Hugging Face model directory: :mod:`dapo.trainer.checkpoint`."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from dapo.lora import adapter_names, has_lora
from dapo.rollout.base import tied_duplicates
from dapo.trainer.rng import rank_rng_path
from dapo.trainer.run_dir import SHARDED_DIR


def _policy_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                  scheduler: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """This rank's view of the policy's state, as DCP saves and loads it: the model's and the
    optimizer's DTensor shards (optimizer state keyed by parameter name), and the scheduler's state.
    Returned twice: whole, for ``set_state_dict``, and for DCP without a tied output layer's second
    name for the same weights (which it would otherwise write twice) and, for a LoRA policy, with
    the adapters alone of the model's weights (its frozen base weights are model.path's, read
    again on a resume as in one process: a checkpoint is not a copy of the base model)."""
    fresh = not optimizer.state
    model_state, optimizer_state = get_state_dict(model, optimizer)
    if fresh:
        # torch builds a fresh optimizer's state with a zero-lr step, which counts as AdamW's first:
        # the first real update would then use step 2's bias correction. Back to step 0 (as fresh;
        # the moments are zeros), in the live state and, as it shares the tensors, the saved one.
        for state in optimizer.state.values():
            if isinstance(state.get("step"), torch.Tensor):
                state["step"].zero_()
    whole = {"model": model_state, "optimizer": optimizer_state, "scheduler": scheduler.state_dict()}
    saved = adapter_names(model) if has_lora(model) else set(model_state) - tied_duplicates(model)
    return whole, {**whole, "model": {name: t for name, t in model_state.items() if name in saved}}


def save_sharded_policy(directory: str | Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                        scheduler: Any) -> None:
    """Every rank writes its shard of ``model`` and ``optimizer`` (and the scheduler's state, once)
    into ``directory/policy`` with DCP. Collective: every rank must call it."""
    _, unique = _policy_state(model, optimizer, scheduler)
    dcp.save(unique, checkpoint_id=Path(directory) / SHARDED_DIR)


def load_sharded_policy(directory: str | Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                        scheduler: Any) -> None:
    """Every rank reads its shard of model and optimizer state, and the scheduler's state, from
    ``directory/policy`` (written by :func:`save_sharded_policy`, by any number of ranks).
    Collective: every rank must call it."""
    path = Path(directory) / SHARDED_DIR
    if not (path / ".metadata").exists():
        raise FileNotFoundError(f"{directory} holds no sharded policy state ({SHARDED_DIR}/.metadata): name an "
                                "earlier checkpoint in checkpoint.resume, or set checkpoint.resume=never to start "
                                "from model.path")
    whole, unique = _policy_state(model, optimizer, scheduler)
    # Param-group entries the checkpoint does not hold (float16 loss scaling, off when it was
    # saved) are not asked for: the policy sets their defaults after the load.
    saved = dcp.FileSystemReader(str(path)).read_metadata().state_dict_metadata
    for index, group in enumerate(unique["optimizer"]["param_groups"]):
        for key in [k for k in group if k != "params"]:
            name = f"optimizer.param_groups.{index}.{key}"
            if not any(entry == name or entry.startswith(name + ".") for entry in saved):
                del group[key]
    # Parameters the checkpoint holds no AdamW state for (never given a gradient: a multimodal
    # class's vision tower in a text-only run) keep the fresh optimizer's (step 0, zero moments,
    # which AdamW treats as none): DCP is not asked for what it never saved.
    optimizer_state = unique["optimizer"]
    stated = {entry.removeprefix("optimizer.state.").rsplit(".", 1)[0] for entry in saved
              if entry.startswith("optimizer.state.")}
    asked = {**unique, "optimizer": {**optimizer_state, "state": {
        name: state for name, state in optimizer_state["state"].items() if name in stated}}}
    # in place, into the tensors ``whole`` shares with ``unique``; one process (no process group) reads it all
    with warnings.catch_warnings():  # DCP warns it then assumes one process: it is one, by design
        warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")
        dcp.load(asked, checkpoint_id=path, no_dist=not dist.is_initialized())
    set_state_dict(model, optimizer, model_state_dict=whole["model"], optim_state_dict=optimizer_state)
    scheduler.load_state_dict(unique["scheduler"])


SHARDED_FORMAT = "dcp"  # trainer_state.pt["policy"]["sharded"]: the ranks' state is in policy/


def missing_shards(directory: str | Path, world_size: int) -> list[str]:
    """What of ``world_size`` ranks' sharded policy is not visible in ``directory`` from this
    process: DCP's .metadata and each rank's RNG file. A multi-node run whose output_dir is not
    on a filesystem every node shares writes them on each rank's own node."""
    policy = Path(directory) / SHARDED_DIR
    expected = [policy / ".metadata", *(rank_rng_path(directory, rank) for rank in range(world_size))]
    return [str(path.relative_to(directory)) for path in expected if not path.is_file()]


def sharded_policy_state(world_size: int, num_nonfinite_skipped: int) -> dict[str, Any]:
    """The driver's part of a sharded policy's checkpoint (``trainer_state.pt["policy"]``): the
    weights, AdamW state and schedule are the ranks' DCP shards in policy/."""
    return {"sharded": SHARDED_FORMAT, "world_size": world_size, "num_nonfinite_skipped": num_nonfinite_skipped}


def is_sharded(policy_state: dict[str, Any]) -> bool:
    """Whether a checkpoint's policy state (``trainer_state.pt["policy"]``) was written as DCP shards."""
    return "sharded" in policy_state


def layout_mismatch(policy_state: dict[str, Any], world_size: int) -> str | None:
    """Why a checkpoint with this policy state cannot be resumed by ``world_size`` policy ranks,
    or None. Sharded state resumes with any number of ranks, one process included (DCP
    reshards); the whole-model state of one process resumes only in one process."""
    if world_size > 1 and not is_sharded(policy_state):
        return (f"it holds the optimizer state of one process, not {SHARDED_DIR}/ shards, and this run has "
                f"{world_size} policy ranks; resume it with one (resources.nnodes=1 resources.devices_per_node=1), "
                "or start a new run from its weights (model.path=<the checkpoint> in another output_dir)")
    return None
