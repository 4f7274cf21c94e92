"""One rank of the FSDP2 memory check (run by tests/cli/test_cli_plan_measured.py under
``torch.distributed.run``, 2 gloo ranks): shard the policy as the trainer does, run two updates
with every tensor's bytes tracked (torch's MemTracker), and (rank 0) write this rank's peak and
the plan's estimate for the same config. Arguments: model_dir out.json."""

from __future__ import annotations

import json
import sys

import torch
import torch.distributed as dist
from torch.distributed._tools.mem_tracker import MemTracker
from torch.distributed.device_mesh import init_device_mesh
from transformers import AutoConfig, AutoModelForCausalLM

from dapo.cli.model_shape import model_shape
from dapo.cli.plan import training_rows
from dapo.config import builtin_config_path, load_config
from dapo.trainer.batch import Sample
from dapo.trainer.fsdp import shard_from_rank0
from dapo.trainer.policy import PolicyWorker
from tests.torchrun_rank import end_rank

TOKENS = 1024


def main(model_dir: str, out_path: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    cfg = load_config([builtin_config_path("qwen2.5_1.5b_1gpu")], [
        f"model.path={model_dir}", "model.dtype=float32", "model.gradient_checkpointing=true", "trainer.device=cpu",
        "rollout.engine=hf", "resources.devices_per_node=2", f"trainer.micro_batch_tokens={TOKENS}",
        "trainer.forward=hf", "trainer.packing=false", "trainer.shared_prompt=false", "trainer.autocast=none",
        "trainer.param_dtype=bf16",  # the 32B recipe's precision and checkpointing
        "data.max_prompt_length=8", f"rollout.max_response_length={TOKENS - 8}", "algorithm.overlong_buffer_len=16"])
    rows, moments = training_rows(cfg, model_shape(cfg, None))
    if rank == 0:  # as the policy ranks do: rank 0 reads the weights, the others get their shards
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    else:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir), dtype=torch.float32)
    model.activation_checkpointing_enable()
    model = shard_from_rank0(model, init_device_mesh("cpu", (2,)), torch.device("cpu"), "bf16")
    worker = PolicyWorker(model, cfg.algorithm, cfg.trainer, pad_token_id=0, temperature=1.0, total_steps=2,
                          norm_const=1.0)
    vocab = model.config.vocab_size
    ids = torch.randint(3, vocab, (TOKENS,), generator=torch.Generator().manual_seed(rank)).tolist()
    sample = Sample(group_id=rank, uid=str(rank), prompt_ids=ids[:8], response_ids=ids[8:], truncated=False,
                    rollout_logprobs=[-7.0] * (TOKENS - 8), advantage=1.0, old_logprobs=[-7.0] * (TOKENS - 8))
    tracker = MemTracker()
    tracker.track_external(model, worker.optimizer)
    for _ in range(2):  # the second holds AdamW's states from the start
        tracker.reset_mod_stats()
        with tracker:
            worker.update([sample], num_tokens=2 * (TOKENS - 8), num_seqs=2, on_policy=True)
    peak = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]
    if rank == 0:
        estimate = sum(size for _, size in rows) + max(size for _, size in moments)
        with open(out_path, "w") as f:
            json.dump({"peak": peak, "estimate": estimate}, f)
    end_rank()


if __name__ == "__main__":
    main(*sys.argv[1:])
