"""One rank of a one-process checkpoint resumed by two (run by tests/trainer/test_trainer_dcp.py
under ``torch.distributed.run``): rank 0 trains two steps in one process, before any process group;
after its first, the policy and AdamW a one-process checkpoint holds, which
:func:`shard_whole_policy` sends every rank its shard of; the ranks then take the second step.
Rank 0 saves the full (gathered) states for the test to compare."""

from __future__ import annotations

import copy
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict
from torch.distributed.device_mesh import init_device_mesh
from transformers import AutoModelForCausalLM

from dapo.config import AlgorithmConfig
from dapo.trainer.optim import build_optimizer
from dapo.trainer.policy import PolicyWorker
from dapo.trainer.sharded_checkpoint import shard_whole_policy
from dapo.trainer.surplus import sample_from_state
from tests.torchrun_rank import end_rank
from tests.trainer.dcp_checkpoint_worker import TRAINER, build, snapshot, step


def one_process(model_dir: str) -> PolicyWorker:
    """The policy as one process trains it (no mesh), with the sharded ranks' settings."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    return PolicyWorker(model, AlgorithmConfig(), TRAINER, pad_token_id=0, temperature=1.0, total_steps=8,
                        norm_const=16.0)


def whole_state(worker: PolicyWorker) -> dict:
    """One process's state, as :func:`snapshot` gathers the ranks': AdamW's keyed by name."""
    return copy.deepcopy({"model": worker.model.state_dict(),
                          "optimizer": get_optimizer_state_dict(worker.model, worker.optimizer),
                          "scheduler": worker.scheduler.state_dict()})


def as_checkpoint_holds(worker: PolicyWorker) -> tuple:
    """What rank 0 builds from a one-process checkpoint (:meth:`PolicyRank._whole_policy`): a copy
    of the model, and AdamW built as one process builds it with the saved state dict (ids, not names)."""
    model = copy.deepcopy(worker.model)
    optimizer = build_optimizer(model, TRAINER)
    optimizer.load_state_dict(copy.deepcopy(worker.optimizer.state_dict()))  # (as read from a file: not shared)
    return model, optimizer, worker.scheduler.state_dict()


def main(model_dir: str, samples_path: str, out_path: str) -> None:
    samples = [sample_from_state(fields) for fields in torch.load(samples_path, weights_only=True)]
    if int(os.environ["RANK"]) == 0:  # the one-process run, before any process group (no collectives)
        one = one_process(model_dir)
        before_update = as_checkpoint_holds(one)
        step(one, samples, 0, 1)  # its step 1: what its checkpoint holds
        del one.optimizer.state[one.model.model.norm.weight]  # as if never given a gradient (a vision tower)
        saved, after_update = whole_state(one), as_checkpoint_holds(one)
        step(one, samples, 0, 1)  # and its step 2
        next_one = whole_state(one)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    # saved before the first update: AdamW has no state, and the ranks' stays fresh
    early = build(model_dir, mesh)
    shard_whole_policy(early.model, early.optimizer, early.scheduler, before_update if rank == 0 else None)
    fresh_after_early = not early.optimizer.state
    ranks = build(model_dir, mesh)  # the resume: new ranks, initial weights, no optimizer state yet
    shard_whole_policy(ranks.model, ranks.optimizer, ranks.scheduler, after_update if rank == 0 else None)
    resumed = snapshot(ranks)
    step(ranks, samples, rank, world)  # step 2 on two ranks
    next_ranks = snapshot(ranks)
    if rank == 0:
        torch.save({"saved": saved, "resumed": resumed, "next_ranks": next_ranks, "next_one": next_one,
                    "fresh_after_early": fresh_after_early}, out_path)
    end_rank()


if __name__ == "__main__":
    main(*sys.argv[1:4])
