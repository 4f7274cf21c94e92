"""One rank of the sharded-checkpoint round trip (run by tests/trainer/test_trainer_dcp.py under
``torch.distributed.run``): shard the policy over a gloo mesh, take an optimizer step, save a
sharded checkpoint (DCP shards + the Hugging Face export, also in small files), take another step, load; then load the
same checkpoint into freshly built ranks, and let both take the same next step. Rank 0 saves the
full (gathered) states at each point for the test to compare bit for bit."""

from __future__ import annotations

import copy
import sys
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
)
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from transformers import AutoModelForCausalLM, AutoTokenizer

from dapo.config import AlgorithmConfig, TrainerConfig
from dapo.trainer.batch import Sample, count_loss_tokens, split_across_ranks
from dapo.trainer.fsdp import shard_policy
from dapo.trainer.hf_export import export_hf_from_shards
from dapo.trainer.policy import PolicyWorker
from dapo.trainer.sharded_checkpoint import load_sharded_policy, save_sharded_policy
from dapo.trainer.surplus import sample_from_state
from tests.torchrun_rank import end_rank

FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


# AdamW and a warm-up schedule (lr moves per step)
TRAINER = TrainerConfig(prompts_per_step=3, mini_batch_prompts=3, micro_batch_tokens=40, lr=1e-2, warmup_steps=3,
                        grad_clip=1e9)


def build(model_dir: str, mesh: DeviceMesh) -> PolicyWorker:
    """A sharded policy at the initial weights, with :data:`TRAINER`'s AdamW and schedule."""
    model = shard_policy(AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32), mesh)
    return PolicyWorker(model, AlgorithmConfig(), TRAINER, pad_token_id=0, temperature=1.0, total_steps=8,
                        norm_const=16.0)


def step(worker: PolicyWorker, samples: list[Sample], rank: int, world: int) -> None:
    """One training step: an update on this rank's share (global normalisers), then the schedule."""
    num_tokens, num_seqs = count_loss_tokens(samples)
    worker.update(split_across_ranks(samples, world)[rank], num_tokens, num_seqs)
    worker.end_step()


def snapshot(worker: PolicyWorker) -> dict[str, Any]:
    """A copy of the full model and optimizer state (gathered to CPU; every rank calls) and of the
    scheduler's. A copy: the gathered dicts share tensors with the live state (AdamW's ``step``)."""
    return copy.deepcopy({
        "model": get_model_state_dict(worker.model, options=FULL),
        "optimizer": get_optimizer_state_dict(worker.model, worker.optimizer, options=FULL),
        "scheduler": worker.scheduler.state_dict(),
    })


def main(model_dir: str, samples_path: str, checkpoint_dir: str, out_path: str) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    samples = [sample_from_state(fields) for fields in torch.load(samples_path, weights_only=True)]
    worker = build(model_dir, mesh)
    step(worker, samples, rank, world)
    saved = snapshot(worker)
    save_sharded_policy(checkpoint_dir, worker.model, worker.optimizer, worker.scheduler)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    export_hf_from_shards(checkpoint_dir, worker.model, tokenizer, rank)
    # the same export in files of at most 16 kB: the embedding (33 kB) alone, the rest grouped
    export_hf_from_shards(f"{checkpoint_dir}-small-files", worker.model, tokenizer, rank, max_file_bytes=16_000)

    step(worker, samples, rank, world)  # moves weights, moments, step count and schedule
    moved = snapshot(worker)
    load_sharded_policy(checkpoint_dir, worker.model, worker.optimizer, worker.scheduler)
    reloaded = snapshot(worker)

    fresh = build(model_dir, mesh)  # a resume: new ranks, initial weights, no optimizer state yet
    load_sharded_policy(checkpoint_dir, fresh.model, fresh.optimizer, fresh.scheduler)
    resumed = snapshot(fresh)
    step(worker, samples, rank, world)  # the same next step from both: the same result
    step(fresh, samples, rank, world)
    next_steps = [snapshot(worker), snapshot(fresh)]
    if rank == 0:
        torch.save({"saved": saved, "moved": moved, "reloaded": reloaded, "resumed": resumed,
                    "next_steps": next_steps}, out_path)
    end_rank()


if __name__ == "__main__":
    main(*sys.argv[1:5])
