"""One rank of the FSDP2 gradient check (run by tests/trainer/test_trainer_fsdp.py under
``torch.distributed.run``): shard the policy over a gloo mesh, take this rank's token-balanced
share of the mini-batch, backpropagate with the mini-batch's GLOBAL normalisers, and (rank 0)
save the full gradients; then again with FSDP's default averaging, to show what it would cost.
Arguments: model_dir samples.pt out.pt micro_batch_tokens layout param_dtype (layout: padded, packed,
shared_prompt, native or native-checkpointed: :func:`layout_settings`)."""

from __future__ import annotations

import sys
import warnings
from types import SimpleNamespace

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy
from torch.distributed.tensor import DTensor
from transformers import AutoConfig, AutoModelForCausalLM

from dapo.config import AlgorithmConfig, TrainerConfig
from dapo.trainer.batch import count_loss_tokens, iter_micro_batches, split_across_ranks
from dapo.trainer.fsdp import decoder_layers, shard_from_rank0
from dapo.trainer.packed_attention import PACKED_SDPA
from dapo.trainer.policy import PolicyWorker
from dapo.trainer.surplus import sample_from_state
from tests.torchrun_rank import end_rank


def layout_settings(layout: str) -> dict:
    """TrainerConfig fields of a layout: padded, packed, shared_prompt (Hugging Face's forward) or
    native (the shared-prompt layout through dapo-rl's forward; native-checkpointed: its layers
    recomputed in backward)."""
    native = layout.startswith("native")
    return {"packing": layout == "packed", "shared_prompt": native or layout == "shared_prompt",
            "forward": "native" if native else "hf", "fsdp_reshard_after_forward": layout != "native-kept"}


def full_gradients(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.full_tensor().clone() for name, p in model.named_parameters()}


def main(model_dir: str, samples_path: str, out_path: str, micro_batch_tokens: int, layout: str,
         param_dtype: str) -> None:
    # an FSDP2 unit's output that is a view loses its pre-backward hook to an in-place op: none is
    warnings.filterwarnings("error", message=".*returned a view tensor")
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    # as the policy ranks do: rank 0 reads the weights, rank 1 builds the structure on the meta
    # device and receives its shard (so the gradients also check that broadcast, RoPE buffers too)
    if rank == 0:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    else:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir), dtype=torch.float32)
    if layout == "native-checkpointed":  # before sharding, as the trainer's setup does
        model.activation_checkpointing_enable()
    trainer_layout = layout_settings(layout)
    model = shard_from_rank0(model, mesh, torch.device("cpu"), param_dtype, trainer_layout["fsdp_reshard_after_forward"])
    trainer = TrainerConfig(prompts_per_step=3, mini_batch_prompts=3, micro_batch_tokens=micro_batch_tokens,
                            lr=1e-2, warmup_steps=0, grad_clip=1e9, param_dtype=param_dtype,
                            **trainer_layout)
    worker = PolicyWorker(model, AlgorithmConfig(), trainer, pad_token_id=0, temperature=1.0, total_steps=1,
                          norm_const=16.0)
    assert worker.native_policy == layout.startswith("native")  # dapo-rl's forward on the sharded policy
    # trainer.autocast on a sharded policy: no cast cache, which kept a bf16 copy of every layer
    # FSDP2 gathered until the model call ended (the whole model on each rank)
    stand_in = SimpleNamespace(cfg=SimpleNamespace(autocast="bf16"), device=torch.device("cpu"), model=model)
    with PolicyWorker._autocast(stand_in):
        assert not torch.is_autocast_cache_enabled()
    # a packed row's attention runs per sequence on the sharded model too (not the row-wide mask)
    assert (model.config._attn_implementation == PACKED_SDPA) == (layout == "packed")
    compute_dtypes = []  # the dtype of the weights layer 0 computes on (FSDP2's unsharded ones), per call
    # (on the norm: dapo-rl's forward calls it, while it reads q_proj's weight without a call, and
    # refuses a model with hooks there)
    norm = next(m for m in decoder_layers(model)[0].modules() if "norm" in type(m).__name__.lower())
    norm.register_forward_pre_hook(lambda module, args: compute_dtypes.append(module.weight.dtype))
    samples = [sample_from_state(fields) for fields in torch.load(samples_path, weights_only=True)]
    num_tokens, num_seqs = count_loss_tokens(samples)  # the whole mini-batch, all ranks
    share = split_across_ranks(samples, world)[rank]
    gathers = []  # FSDP2's all-gathers of the update (a unit's weights each)
    all_gather_single = dist.all_gather_single
    dist.all_gather_single = lambda *args, **kwargs: gathers.append(1) or all_gather_single(*args, **kwargs)
    try:
        stats = worker.accumulate_gradients(share, num_tokens, num_seqs)
    finally:
        dist.all_gather_single = all_gather_single
    assert set(compute_dtypes) == {torch.bfloat16 if param_dtype == "bf16" else torch.float32}, compute_dtypes
    layer_calls = len(compute_dtypes)
    # bf16: gradients reduce-scattered in float32 (a bf16 reduction would hide in the test's tolerance)
    wanted = MixedPrecisionPolicy(torch.bfloat16, torch.float32) if param_dtype == "bf16" else MixedPrecisionPolicy()
    # (FSDP2 keeps the policy in a private attribute: a torch upgrade may move it)
    groups = [m._get_fsdp_state()._fsdp_param_group for m in model.modules() if isinstance(m, FSDPModule)]
    assert groups and all(group is not None and group.mp_policy == wanted for group in groups)
    # the shards (master weights) and their gradients stay float32
    assert {p.dtype for p in model.parameters()} == {p.grad.dtype for p in model.parameters()} == {torch.float32}
    summed = full_gradients(model)
    grad_norm = worker.clip_gradients()
    # each rank's own count, before the padding with empty micro-batches that evens them out
    own = torch.tensor([len(list(iter_micro_batches(sorted(share, key=lambda s: s.num_tokens), micro_batch_tokens,
                                                    trainer.layout)))])
    micro_batches = [torch.zeros_like(own) for _ in range(world)]
    dist.all_gather(micro_batches, own)
    # each micro-batch (the empty ones evening the ranks out too) ran layer 0 once, twice in Hugging
    # Face's shared-prompt layout (prompts, then continuations: gathered twice), twice recomputed
    calls = {"shared_prompt": 2, "native-checkpointed": 2}.get(layout, 1)
    assert layer_calls == calls * max(int(n) for n in micro_batches), (layer_calls, micro_batches)
    if layout.startswith("native"):  # per micro-batch: each layer gathered for forward and again for
        # backward, once under trainer.fsdp_reshard_after_forward=false (native-kept), and the root once
        layers = len(decoder_layers(model))
        per_micro_batch = 1 + layers * (1 if layout == "native-kept" else 2)
        assert len(gathers) == per_micro_batch * max(int(n) for n in micro_batches), (len(gathers), layers)
    for module in model.modules():  # FSDP's default: divide by the world size (averaging)
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(float(world))
    worker.accumulate_gradients(share, num_tokens, num_seqs)
    averaged = full_gradients(model)
    # a no-grad pass leaves no unit gathered: FSDP2 would keep the root's full embedding (and
    # output layer) until the next backward
    worker.compute_logprobs(share)
    unsharded = [name for name, p in model.named_parameters() if not isinstance(p, DTensor)]
    assert not unsharded, f"full weights held after compute_logprobs: {unsharded}"
    tokens = torch.tensor([float(stats.policy.token_count) if stats.policy is not None else 0.0])
    dist.all_reduce(tokens)
    if rank == 0:
        torch.save({"summed": summed, "averaged": averaged, "grad_norm": grad_norm,
                    "loss_tokens": float(tokens.item()), "micro_batches": [int(n) for n in micro_batches]}, out_path)
    end_rank()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6])
