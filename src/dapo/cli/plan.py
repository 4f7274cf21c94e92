"""``dapo plan CONFIG``: where a run goes and what each device holds, without a cluster.

The parameter count comes from the model directory's config.json (a model built on the meta
device: no weights are read), or from ``--params`` when the directory is not on this machine.
Per policy rank (FSDP2 over W ranks, N parameters, L layers, hidden size H, vocabulary V):

    sharded training state  = N/W x (param bytes + grad bytes + 8 AdamW bytes)
    gathered layer          = 2 x N/L x compute bytes    (W > 1: the unit being used and the next,
                                                        prefetched; param bytes, or 2 with
                                                        trainer.param_dtype=bf16)
    bf16 weights + grads    = N x 2 x 2                  (W = 1 with trainer.param_dtype=bf16: the
                                                        whole model's bf16 copy and its gradient)
    activations             = T x H x 2 x L (model.gradient_checkpointing: the layer inputs, bf16)
                              or T x H x 34 x L (without it: every tensor a layer saves for backward,
                              16-bit, attention scores not stored, Korthikanti et al. 2022)
                              + T x V x 4 (logits)
    rollout engine          = vLLM: its memory share of the device, holding N/tp bf16 weights
                              (tp = rollout.vllm_tensor_parallel_size) + KV cache;
                              native: a full copy, N x bytes

with T = trainer.micro_batch_tokens. An estimate: allocator slack, attention workspaces and
the vLLM KV cache's use of its share are not modelled.
"""

from __future__ import annotations

import math
from pathlib import Path

from dapo.algo.logprobs import ACCELERATOR_CHUNK_ROWS
from dapo.config import DAPOConfig
from dapo.config.schema import DTYPE_BYTES

GIB = 1024**3


def model_shape(cfg: DAPOConfig, params: float | None) -> tuple[float, int, int, int, bool]:
    """(parameters, layers, hidden size, vocabulary, whether the shape is guessed) of
    ``cfg.model.path``."""
    config_file = Path(cfg.model.path).expanduser() / "config.json"
    builtin = cfg.model.path.partition(":")[0] == "builtin"
    if config_file.exists() or builtin:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM

        if builtin:  # its recipe's shape: nothing is built or installed
            from dapo.builtin import builtin_model_config

            config = builtin_model_config(cfg.model.path)
        else:
            config = AutoConfig.from_pretrained(config_file.parent)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        count = float(sum(p.numel() for p in model.parameters()))
        return count, config.num_hidden_layers, config.hidden_size, config.vocab_size, False
    if params is None:
        raise FileNotFoundError(
            f"{config_file} is not on this machine: give the model's size, e.g. dapo plan CONFIG --params 32.8e9"
        )
    # Without the config: the shape of the Qwen2.5 model nearest in size (layers, hidden, vocabulary)
    _, (layers, hidden, vocab) = min(QWEN25_SHAPES.items(), key=lambda item: abs(math.log(item[0] / params)))
    return params, layers, hidden, vocab, True


# Qwen2.5 base models by parameter count: (layers, hidden size, vocabulary), from their config.json
QWEN25_SHAPES = {
    0.49e9: (24, 896, 151936), 1.54e9: (28, 1536, 151936), 3.09e9: (36, 2048, 151936),
    7.62e9: (28, 3584, 152064), 14.7e9: (48, 5120, 152064), 32.8e9: (64, 5120, 152064),
    72.7e9: (80, 8192, 152064),
}


def logits_bytes(cfg: DAPOConfig, tokens: int, vocab: int) -> int:
    """A micro-batch's (tokens, vocabulary) logits in the compute dtype and their gradient, of the
    same size, plus the float32 buffers the log-prob and entropy passes work in, two chunks of
    dapo.algo.logprobs' accelerator chunk rows."""
    low_precision = cfg.trainer.param_dtype == "bf16" or cfg.trainer.autocast != "none"
    logit_bytes = 2 if low_precision else DTYPE_BYTES[cfg.model.dtype]
    return 2 * tokens * vocab * logit_bytes + 2 * min(tokens, ACCELERATOR_CHUNK_ROWS) * vocab * 4


def plan(cfg: DAPOConfig, params: float | None = None, device_gib: float = 80.0) -> str:
    n, layers, hidden, vocab, guessed = model_shape(cfg, params)
    res, world = cfg.resources, cfg.resources.world_size
    param_bytes = DTYPE_BYTES[cfg.model.dtype]
    bf16_weights = cfg.trainer.param_dtype == "bf16"
    compute_bytes = DTYPE_BYTES["bfloat16"] if bf16_weights else param_bytes
    tokens = cfg.trainer.micro_batch_tokens
    checkpointed = cfg.model.gradient_checkpointing
    layer_bytes_per_token = hidden * (2 if checkpointed else 34)
    rows = [(f"{'sharded ' if world > 1 else ''}weights + grads + AdamW", n / world * (2 * param_bytes + 8))]
    if world > 1:
        rows.append(("gathered layers (FSDP2 unit + prefetch)", 2 * n / layers * compute_bytes))
    elif bf16_weights:  # one process: the whole model's bf16 copy and its gradient
        rows.append(("bf16 weights + grads (trainer.param_dtype)", n * 2 * compute_bytes))
    rows += [
        (f"activations ({'checkpointed inputs' if checkpointed else 'no checkpointing'})",
         tokens * layer_bytes_per_token * layers),
        ("logits, their gradient, log-prob chunks", logits_bytes(cfg, tokens, vocab)),
    ]
    tp = cfg.rollout.vllm_tensor_parallel_size if cfg.rollout.engine == "vllm" else 1
    # bytes of this device's slice of the engine: rollout.vllm_dtype ("auto": the checkpoint's, bf16 for most)
    vllm_dtype = cfg.rollout.vllm_dtype if cfg.rollout.vllm_dtype in ("float32", "float16") else "bf16"
    vllm_weights = (4 if vllm_dtype == "float32" else 2) * n / tp
    if cfg.rollout.engine == "vllm":
        engine = (f"vLLM, {cfg.rollout.vllm_gpu_memory_utilization:.0%} of the device (weights {vllm_weights / GIB:.1f} GiB "
                  f"in {vllm_dtype} + KV cache)")
        if tp > 1:
            engine += (f"; every {tp} consecutive ranks form one tensor-parallel engine "
                       f"({world // tp if world > 1 else 1} engine(s))")
    else:  # one process: the engine reads the trainer's own weights; a rank: its own full copy
        engine = f"{cfg.rollout.engine}, " + ("the trainer's own weights" if world == 1 else "a full copy of the weights")
        if world > 1:
            rows.append(("rollout engine (full copy)", n * param_bytes))
        if cfg.rollout.engine == "native":  # its fast path fuses (on CPU packs) the projections, kept until it sleeps
            decode_dtype = cfg.model.dtype if cfg.rollout.native_dtype == "model" else cfg.rollout.native_dtype
            rows.append((f"native engine's {decode_dtype} working weights", n * DTYPE_BYTES[decode_dtype]))
    lines = [
        f"model: {cfg.model.path} ({n / 1e9:.2f}B parameters, {layers} layers, hidden {hidden}, vocabulary {vocab}"
        + (", the shape of the Qwen2.5 model nearest in size: its config.json is not on this machine" if guessed else "")
        + ")",
        f"placement: {res.nnodes} node(s) x {res.devices_per_node} device(s) = {world} policy rank(s)"
        + (" in this process (no Ray)" if world == 1 else
           f" on Ray ({res.ray_address or 'a local Ray started by dapo train'})"),
        ("each rank: an FSDP2 shard of the policy" if world > 1 else "the policy, whole")
        + f" ({cfg.model.dtype} weights, "
        + ("computing on bf16 copies (trainer.param_dtype=bf16)" if bf16_weights
           else f"autocast {cfg.trainer.autocast}") + f") and a rollout engine: {engine}",
        "the driver: the DAPO loop, rewards, its own part of each checkpoint (no weights: the model's structure "
        "on the meta device)" if world > 1 else "this process: the DAPO loop, rewards, checkpoints",
        "per-rank memory estimate:" if world > 1 else "memory estimate (this process's device):",
    ]
    lines += [f"  {name:44s} {size / GIB:9.2f} GiB" for name, size in rows]
    total = sum(size for _, size in rows) / GIB
    lines.append(f"  {'total, without the vLLM share' if cfg.rollout.engine == 'vllm' else 'total':44s} {total:9.2f} GiB")
    share = cfg.rollout.vllm_gpu_memory_utilization * device_gib if cfg.rollout.engine == "vllm" else 0.0
    if cfg.rollout.engine == "vllm" and share < vllm_weights / GIB:
        lines.append(f"DOES NOT FIT: vLLM's share ({share:.0f} GiB of a {device_gib:.0f} GiB device) is smaller than "
                     f"its {vllm_dtype} weights ({vllm_weights / GIB:.0f} GiB); raise rollout.vllm_gpu_memory_utilization "
                     "or rollout.vllm_tensor_parallel_size")
    if total + share > device_gib:
        lines.append(f"DOES NOT FIT: {total + share:.0f} GiB per rank on a {device_gib:.0f} GiB device; add ranks, "
                     "lower trainer.micro_batch_tokens, " + ("" if checkpointed else "set model.gradient_checkpointing=true, ")
                     + "or lower the vLLM share")
    return "\n".join(lines)
