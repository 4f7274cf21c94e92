"""The policy's optimizer: AdamW, its learning-rate schedule, float16 dynamic loss scaling (kept
in the optimizer's first param group, so every checkpoint carries it), and applying a resumed
run's settings over a checkpoint's."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from torch import nn
from torch.distributed.tensor import DTensor

from dapo.config import TrainerConfig
from dapo.trainer.fsdp import all_ranks_true


def build_optimizer(model: torch.nn.Module, cfg: TrainerConfig) -> torch.optim.Optimizer:
    """AdamW with weight decay on matrices only (no decay on biases and norm weights), or on every
    parameter with trainer.decay_biases_and_norms (verl's)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": params, **settings} for params, settings in zip((decay, no_decay), group_settings(cfg))]
    return torch.optim.AdamW(groups, foreach=True)


def group_settings(cfg: TrainerConfig) -> list[dict]:
    """The config's AdamW settings of the two param groups (matrices; biases and norm weights)."""
    shared = {"lr": cfg.lr, "betas": tuple(cfg.betas)}
    vectors = cfg.weight_decay if cfg.decay_biases_and_norms else 0.0
    return [{**shared, "weight_decay": cfg.weight_decay}, {**shared, "weight_decay": vectors}]


def lr_factor(cfg: TrainerConfig, total_steps: int, step: int) -> float:
    """The multiplier of ``cfg.lr`` for training step ``step`` (0-based, the steps done before
    it): linear warm-up over ``warmup_steps`` TRAINING (rollout) steps, then constant or cosine
    decay to the last step, down to ``min_lr_ratio``. The warm-up is (step + 1) / (warmup_steps + 1):
    the first step already learns, at 1/(W + 1) of the lr, where transformers' and verl's
    ``get_constant_schedule_with_warmup`` (min(1, step / W)) spend their first update at lr 0."""
    if step < cfg.warmup_steps:
        return (step + 1) / (cfg.warmup_steps + 1)
    if cfg.lr_schedule == "constant":
        return 1.0
    progress = (step - cfg.warmup_steps) / max(1, total_steps - cfg.warmup_steps)
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    return cfg.min_lr_ratio + (1.0 - cfg.min_lr_ratio) * cosine


# The trainer settings the learning-rate schedule is made of (build_scheduler).
SCHEDULE_SETTINGS = ("lr", "warmup_steps", "lr_schedule", "min_lr_ratio", "total_steps")


def scheduled_lr(trainer: TrainerConfig, done_steps: int) -> float:
    """The learning rate ``trainer``'s schedule gives the step after ``done_steps`` (the one a
    run resumed there trains next), as :func:`build_scheduler` makes it."""
    return trainer.lr * lr_factor(trainer, trainer.total_steps, done_steps)


def schedule_change(saved: dict[str, Any], trainer: TrainerConfig, done_steps: int) -> str:
    """What a resume after ``done_steps`` with ``trainer`` does to the learning rate, where the
    checkpoint's schedule settings (``saved``: its run config's trainer section) gave another:
    a clause for the changed-settings warning, "" when the rate is the same or no step is left to
    train. (The policy's optimizer is set to this run's schedule at the resumed step: apply_config.)"""
    if done_steps >= trainer.total_steps:  # (a resume that only finishes the run: no step goes on)
        return ""
    try:
        before = scheduled_lr(dataclasses.replace(trainer, **{key: saved[key] for key in SCHEDULE_SETTINGS
                                                              if key in saved}), done_steps)
    except (TypeError, ValueError):  # a saved value this version does not take: nothing to compare
        return ""
    now = scheduled_lr(trainer, done_steps)
    if math.isclose(before, now, rel_tol=1e-9, abs_tol=0.0):
        return ""
    return (f"; the learning-rate schedule goes on from step {done_steps + 1} with this run's settings: its "
            f"learning rate {before:.4g} -> {now:.4g}")


def build_scheduler(optimizer: torch.optim.Optimizer, cfg: TrainerConfig, total_steps: int):
    """The :func:`lr_factor` schedule. As in verl, it moves once per training step, not per
    optimizer update: every update of training step s uses lr * factor(s)."""
    # (a function, which LambdaLR's state_dict leaves out: checkpoints hold no copy of the config)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(cfg, total_steps, step))


# Dynamic loss scaling in float16 (trainer.autocast=fp16). The token-mean
# divides the loss by the mini-batch's token count, so a long-response batch's per-token gradients
# (about |A| / num_tokens, 1e-6 at 1M tokens) fall below float16's range in the backward pass and
# flush to zero. The loss is multiplied by the scale before backward and the gradients divided by
# it before clipping; an overflow (a non-finite gradient) halves the scale and skips the update,
# and the scale doubles after LOSS_SCALE_GROWTH_INTERVAL updates without one (torch's GradScaler
# defaults).
LOSS_SCALE_INIT = 2.0**16
LOSS_SCALE_GROWTH_INTERVAL = 2000


def set_up_loss_scaling(optimizer: torch.optim.Optimizer, float16: bool) -> None:
    """Dynamic loss scaling when computing in float16 (a resume keeps a saved scale); none otherwise."""
    group = optimizer.param_groups[0]
    if float16:
        group.setdefault("loss_scale", LOSS_SCALE_INIT)
        group.setdefault("updates_since_overflow", 0)
    else:
        group.pop("loss_scale", None)
        group.pop("updates_since_overflow", None)


def loss_scale(optimizer: torch.optim.Optimizer) -> float:
    """The factor the loss is multiplied by before backward (1 unless computing in float16)."""
    return optimizer.param_groups[0].get("loss_scale", 1.0)


def rescale_after(optimizer: torch.optim.Optimizer, overflow: bool) -> str:
    """Dynamic loss scaling's move after an update (float16 only): halve the scale on an
    overflow, double it after a long run without one. A note for the skip warning."""
    group = optimizer.param_groups[0]
    if "loss_scale" not in group:
        return ""
    if overflow:
        group["loss_scale"], group["updates_since_overflow"] = group["loss_scale"] / 2, 0
        return f" (a float16 overflow: loss scale halved to {group['loss_scale']:g})"
    group["updates_since_overflow"] += 1
    if group["updates_since_overflow"] >= LOSS_SCALE_GROWTH_INTERVAL:
        group["loss_scale"], group["updates_since_overflow"] = group["loss_scale"] * 2, 0
    return ""


def apply_config(optimizer: torch.optim.Optimizer, scheduler, cfg: TrainerConfig) -> list[str]:
    """After a resume: the run's trainer.lr, weight_decay and betas, not those the checkpoint's
    optimizer state was saved with (it carries them, and loading it restores them); the
    learning rate is set from the schedule at the resumed step, so a changed schedule applies
    from the first step, not one step late. Returns what changed, for the caller's warning."""
    changed = []
    saved_lrs = [group["lr"] for group in optimizer.param_groups]  # the checkpoint's next lr
    for group, settings in zip(optimizer.param_groups, group_settings(cfg)):
        wanted = {"initial_lr": settings["lr"], "weight_decay": settings["weight_decay"], "betas": settings["betas"]}
        saved = {key: tuple(v) if isinstance(v, list) else v for key, v in group.items() if key in wanted}
        changed += [f"{key} {saved[key]} -> {value}" for key, value in wanted.items() if saved.get(key, value) != value]
        group.update(wanted)
    scheduler.base_lrs = [cfg.lr] * len(optimizer.param_groups)
    lrs = [base * schedule(scheduler.last_epoch) for base, schedule in zip(scheduler.base_lrs, scheduler.lr_lambdas)]
    for group, lr in zip(optimizer.param_groups, lrs):
        group["lr"] = lr
    scheduler._last_lr = lrs  # what get_last_lr() reports
    if not math.isclose(saved_lrs[0], lrs[0], rel_tol=1e-9, abs_tol=0.0):  # a schedule that moved too
        changed.append(f"learning rate at step {scheduler.last_epoch} {saved_lrs[0]:.4g} -> {lrs[0]:.4g} "
                       "(trainer.lr, lr_schedule, warmup_steps, total_steps, min_lr_ratio)")
    return changed


def stop_if_weights_not_finite(model: nn.Module, update: int) -> None:
    """Stop the run when optimizer step number ``update`` left a weight non-finite (from finite,
    clipped gradients: an lr far too large, or a precision the step overflows), before a checkpoint
    can hold the weights or a rotation delete the last good one. All ranks decide together, each on
    its shard (its least and largest values: NaN or inf, never an overflow of a sum of squares; a
    max-norm, torch._foreach_norm(.., inf), took 25 ms where this takes 1 ms on the built-in model)."""
    shards = [(name, p.to_local() if isinstance(p, DTensor) else p) for name, p in model.named_parameters()]
    shards = [(name, shard.detach()) for name, shard in shards if shard.numel()]  # (an FSDP2 rank's may be empty)
    ends = [torch.stack(torch.aminmax(shard)) for _, shard in shards]
    finite = bool(torch.stack(ends).isfinite().all()) if ends else True
    if not all_ranks_true(finite):
        where = "" if finite else ": " + ", ".join(
            name for (name, _), pair in zip(shards, ends) if not bool(pair.isfinite().all()))[:300]
        raise FloatingPointError(
            f"the optimizer step at update {update} made the policy's weights non-finite{where} (on "
            f"{'another rank' if finite else 'this rank'}); the run stops before they reach a checkpoint (the "
            "last one holds finite weights). Lower trainer.lr or trainer.grad_clip")
