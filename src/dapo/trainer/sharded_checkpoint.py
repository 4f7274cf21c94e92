"""The policy's state in a multi-rank checkpoint: every rank's shard of the weights and AdamW
state, and the scheduler's state, written and read with ``torch.distributed.checkpoint`` (DCP) in
``policy/`` (:func:`save_sharded_policy`, :func:`load_sharded_policy`; DCP reshards, so another
number of ranks, one process included, can resume it), and the driver's record of it in
``trainer_state.pt`` (:func:`sharded_policy_state`). A one-process checkpoint resumes on several
ranks too: :func:`shard_whole_policy`. The checkpoint
directory around it, atomic and a Hugging Face model directory: :mod:`dapo.trainer.checkpoint`."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
    set_state_dict,
)

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


def shard_whole_policy(model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
                       whole: tuple[torch.nn.Module, torch.optim.Optimizer, dict[str, Any]] | None) -> None:
    """A one-process checkpoint's policy into the ranks' shards. Rank 0 passes ``whole``: the
    policy and its AdamW as one process resumed them (in CPU memory), and the scheduler's state;
    the other ranks None. Every rank receives its shard of the weights and of AdamW's state, keyed
    by parameter name (the two optimizers' parameter orders need not agree), and the schedule.
    Parameters the checkpoint holds no AdamW state for (never given a gradient; every one, saved
    before the first update) keep a fresh optimizer's (none: AdamW's first step is theirs). Collective."""
    rank0 = dist.get_rank() == 0
    full = StateDictOptions(full_state_dict=True)
    saved = get_optimizer_state_dict(*whole[:2], options=full) if rank0 and whole[1].state else {"state": {}}
    # (small: the schedule, and the names of the parameters with AdamW state)
    header = [whole[2], set(saved["state"])] if rank0 else [None, None]
    dist.broadcast_object_list(header, src=0)
    scheduler_state, stated = header
    sent = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    set_model_state_dict(model, get_model_state_dict(whole[0], options=full) if rank0 else {}, options=sent)
    if stated:
        set_optimizer_state_dict(model, optimizer, saved if rank0 else {},
                                 options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True, strict=False))
        for name, parameter in model.named_parameters():  # (strict=False left them the state it built them)
            if name not in stated:
                optimizer.state.pop(parameter, None)
    scheduler.load_state_dict(scheduler_state)


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


