"""One rank of the mixed-dtype sharding check (run by tests/trainer/test_trainer_fsdp.py under
``torch.distributed.run``): rank 0 loads a bf16 model with ``from_pretrained`` (which keeps some
tensors in float32), the other rank builds it on the meta device, both shard it from rank 0; rank
0 saves every rank's dtype and value per tensor name. Arguments: model_dir out.pt."""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from transformers import AutoConfig, AutoModelForCausalLM

from dapo.trainer.fsdp import shard_from_rank0
from tests.torchrun_rank import end_rank


def main(model_dir: str, out_path: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if rank == 0:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    else:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir), dtype=torch.bfloat16)
    model = shard_from_rank0(model, init_device_mesh("cpu", (dist.get_world_size(),)), torch.device("cpu"))
    tensors = {name: t.full_tensor() if isinstance(t, DTensor) else t
               for name, t in [*model.named_parameters(), *model.named_buffers()]}
    ranks = [None] * dist.get_world_size()
    dist.all_gather_object(ranks, {name: (t.dtype, t.detach().clone()) for name, t in tensors.items()})
    if rank == 0:
        torch.save(ranks, out_path)
    end_rank()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
