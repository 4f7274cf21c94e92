"""FSDP2 sharding of the policy for data-parallel training (NCCL on GPU, gloo on CPU).

DAPO's token-level loss needs the gradient of

    L = 1 / N_tokens(mini-batch) * sum over ALL ranks and micro-batches of sum_t loss_t

Each rank computes its share with the GLOBAL normaliser N_tokens (summed over ranks before the
update), so the per-rank gradients must be SUMMED, not averaged: FSDP2's reduce-scatter divides
by the world size unless ``set_gradient_divide_factor(1.0)``; gloo has no PREMUL_SUM, so it also
needs ``set_force_sum_reduction_for_comms(True)``. Every collective must be entered by every rank
the same number of times: :func:`same_count` gives all ranks the largest micro-batch count, and
ranks with fewer samples run empty micro-batches (a zero loss through pad tokens, with the model
calls of a real micro-batch).
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor


def distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The transformer blocks: the ``*DecoderLayer`` modules of Hugging Face causal LMs, or, for
    a model that names them otherwise (GPT-2's ``GPT2Block``, Bloom's ``BloomBlock``), the modules
    of the classes its ``_no_split_modules`` names (transformers' own unit of a device map)."""
    layers = [m for m in model.modules() if type(m).__name__.endswith("DecoderLayer")]
    if layers:
        return layers
    unsplit = set(getattr(model, "_no_split_modules", None) or ())
    # by class and base class: FSDP2's fully_shard renames a block's class (FSDPGPT2Block)
    named = [(name, m) for name, m in model.named_modules() if unsplit & {c.__name__ for c in type(m).__mro__}]
    # the outermost only: Mamba names its block and the mixer inside it
    return [m for name, m in named if not any(name.startswith(outer + ".") for outer, _ in named)]


def shard_policy(model: nn.Module, mesh: DeviceMesh, param_dtype: str = "none",
                 reshard_after_forward: bool = True) -> nn.Module:
    """Shard ``model`` in place: each decoder layer is an FSDP2 unit, the rest (embeddings, tied
    output layer, final norm) the root unit. Gradients are summed across ranks. ``param_dtype``
    (trainer.param_dtype) "bf16": units all-gather and compute on bf16 copies of the float32
    shards, and reduce-scatter and accumulate gradients in float32. ``reshard_after_forward``
    (trainer.fsdp_reshard_after_forward) False: a layer keeps its gathered weights from its forward
    to its backward (no second all-gather; the whole model's weights per rank meanwhile), and
    through a no-grad pass until :func:`reshard_all`."""
    layers = decoder_layers(model)
    if not layers:
        raise ValueError(f"{type(model).__name__} has no decoder layers to shard (*DecoderLayer modules, or those its "
                         "_no_split_modules names)")
    mp_policy = MixedPrecisionPolicy()  # FSDP2's default: compute on the shards' dtype
    if param_dtype == "bf16":
        mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp_policy, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, mp_policy=mp_policy)
    gloo = dist.get_backend(mesh.get_group()) == "gloo"
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(1.0)
            if gloo:
                module.set_force_sum_reduction_for_comms(True)
    return model


def shard_from_rank0(model: nn.Module, mesh: DeviceMesh, device: torch.device, param_dtype: str = "none",
                     reshard_after_forward: bool = True) -> nn.Module:
    """Shard a policy whose weights only rank 0 has read: rank 0 passes the loaded model (in CPU
    memory), the other ranks its structure on the meta device. After sharding, rank 0's weights are
    broadcast and every rank keeps only its shard, on ``device``: no device ever holds the whole
    model (a 32B float32 policy is 131 GB) and the files are read once per run, not once per rank.
    Non-persistent buffers (RoPE's inv_freq), which no state dict carries, are broadcast too.
    ``param_dtype``, ``reshard_after_forward``: as :func:`shard_policy`'s."""
    rank0 = dist.get_rank() == 0
    match_rank0_dtypes(model)
    full = model.state_dict() if rank0 else {}  # keeps rank 0's full tensors alive through the broadcast
    shard_policy(model, mesh, param_dtype, reshard_after_forward)
    if not rank0:  # storage for this rank's shards (and buffers), filled in place below: parameters
        model.to_empty(device=device)  # swapped in instead (assign) would not be the ones FSDP2 uses
    set_model_state_dict(model, full, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    del full
    for module in model.modules():
        for name, buffer in list(module.named_buffers(recurse=False)):
            if buffer.device != device:
                module._buffers[name] = buffer = buffer.to(device)
            dist.broadcast(buffer, src=0)
    return model


def match_rank0_dtypes(model: nn.Module) -> None:
    """Give this rank's ``model`` rank 0's dtype for every parameter and buffer. Collective.

    Rank 0 loads the weights with ``from_pretrained``, which keeps some tensors of a bf16 model in
    float32 (transformers' ``_keep_in_fp32_modules``: the expert-routing bias of DeepSeek-V3,
    GLM-4-MoE, dots1 and others); the other ranks build the structure with ``from_config`` on the
    meta device, which does not. Left so, the broadcast of rank 0's weights fails (gloo: a size
    mismatch) or corrupts them (NCCL), and a rank's own copy for rollout would route experts at
    another precision."""
    ours = {name: t.dtype for name, t in itertools.chain(model.named_parameters(remove_duplicate=False),
                                                           model.named_buffers(remove_duplicate=False))}
    sent = [ours if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(sent, src=0)
    wanted = sent[0]
    differ = sorted(wanted.keys() ^ ours.keys())
    if not all_ranks_true(not differ):  # all ranks stop, not one while the others wait in a broadcast
        raise RuntimeError(f"the ranks built other models than rank 0's: {len(differ)} tensor name(s) differ "
                           f"on rank {dist.get_rank()}{', e.g. ' + str(differ[:3]) if differ else ''}")
    cast: dict[int, torch.Tensor] = {}  # by the original's id: a buffer two modules share stays shared
    for module_name, module in model.named_modules():
        prefix = f"{module_name}." if module_name else ""
        for name, param in module.named_parameters(recurse=False):
            if param.dtype != wanted[prefix + name]:  # in place: a tied parameter is one object
                param.data = param.data.to(wanted[prefix + name])
        for name, buffer in module.named_buffers(recurse=False):
            if buffer.dtype != wanted[prefix + name]:
                module._buffers[name] = cast.setdefault(id(buffer), buffer.to(wanted[prefix + name]))


def reshard_all(model: nn.Module) -> None:
    """Free the full weights a sharded model's units still hold after a pass that runs no
    backward: FSDP2 keeps the root unit (embeddings, final norm, an untied output layer) unsharded
    after its forward for the backward that usually follows, and every layer under
    trainer.fsdp_reshard_after_forward=false, so a no-grad log-prob pass or a skipped update would
    otherwise hold them until the next backward (a 32B Qwen2.5's two 152k x 5120 matrices: 3 GB in
    bf16; all its layers: the whole model). No-op on a model that is not sharded."""
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


def process_group_backend(device_type: str) -> str:
    """The torch.distributed backend for ranks on ``device_type``: gloo on CPU; on CUDA, NCCL for
    CUDA tensors and gloo for CPU ones (:func:`same_count` and :func:`all_ranks_true` reduce small
    CPU tensors; NCCL alone has no CPU backend and would fail on them)."""
    return "cpu:gloo,cuda:nccl" if device_type == "cuda" else "gloo"


def same_count(count: int) -> int:
    """The largest ``count`` over all ranks (``count`` itself when not distributed)."""
    if not distributed():
        return count
    value = torch.tensor([count], dtype=torch.long)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return int(value.item())


def all_ranks_true(flag: bool) -> bool:
    """True only if ``flag`` holds on every rank."""
    if not distributed():
        return flag
    value = torch.tensor([1 if flag else 0], dtype=torch.long)
    dist.all_reduce(value, op=dist.ReduceOp.MIN)
    return bool(value.item())


def gathered_weights(model: nn.Module, skip: Collection[str] = ()) -> Iterator[tuple[str, torch.Tensor]]:
    """The full weights of a sharded ``model`` by name (but the names in ``skip``), one tensor at a
    time: each shard is all-gathered only when the consumer reaches it, so the peak is one full
    tensor rather than the whole model (a 32B policy's full float32 state would not fit a GPU).
    Every rank must consume the whole iterator, in the same order (each item is a collective)."""
    for name, tensor in model.state_dict().items():
        if name not in skip:
            yield name, tensor.full_tensor() if isinstance(tensor, DTensor) else tensor
