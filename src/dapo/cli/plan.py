"""``dapo plan CONFIG``: where a run goes and what each device holds, without a cluster.

The model's shape comes from its directory's config.json, built on the meta device (no weights
are read), or, given only ``--params``, from the Qwen2.5 model nearest in size
(:mod:`dapo.cli.model_shape`). Per policy rank (FSDP2 over W ranks; N parameters, L layers, a
layer of N_l; p bytes a parameter in model.dtype, c in the dtype the passes compute in: 2 with
trainer.param_dtype=bf16, else p; T = trainer.micro_batch_tokens / trainer.sequence_parallel_size,
a rank's tokens; V the vocabulary):

    kept through the run:
      weights + grads + AdamW m, v   = N/W x 4p       (AdamW's states take the weights' dtype)
                                       (N + 4 N_a)/W x p (model.lora_rank > 0: frozen weights, and
                                       N_a adapter parameters, r x (in + out) per adapted layer)
    while updating:
      bf16 weights + grads           = N x 2 x 2      (W = 1 with param_dtype=bf16)
      autocast's weight copies       = N x 2          (W = 1 under autocast: its cast cache)
      root unit, gathered            = N_root x c     (W > 1: embeddings, final norm, output layer:
                                                       FSDP2 keeps the root gathered from forward
                                                       through backward)
      output layer's gradient        = N_out x c      (W > 1: unsharded until the backward ends; none
                                                       with LoRA: the output layer is frozen)
      gathered layers                = 2 N_l x c      (W > 1: the unit computing and the one prefetched)
      activations                    = T x L x a_in   (model.gradient_checkpointing: each layer's input)
                                       T x L x a      (without: all a layer saves for backward)
                                       + T x a_out    (embeddings' output, final norm)
      then the larger of two moments of the backward:
        the output layer's             = 2 x T x V x c + the log-prob pass's float32 chunks
                                         (logits and their gradient; dapo.algo.logprobs)
        one layer's                    = T x a (with checkpointing: the layer recomputed)
                                         + N_l x (c + r) (W > 1: its unsharded gradient and the
                                         copy reduce-scattered in r bytes: 4 with param_dtype=bf16;
                                         with LoRA, of the layer's adapters alone, N_a/L)
        the reference's forward        = (N_root + 2 N_l) x c (W > 1, algorithm.kl_coef > 0: its
                                         root and layers gathered; resharded before the backward;
                                         with LoRA, the policy's own forward: 2 N_l x c)
      reference model              = N/W x p        (algorithm.kl_coef > 0: frozen, no grads or AdamW;
                                                       one process, param_dtype=bf16: N x 2; none
                                                       with LoRA: the policy's base model is it)
    rollout engine: vLLM's share of the device (N/tp weights + KV cache), which it gives back
    while the trainer updates when rollout.vllm_sleep_between_rollouts (on GPU; the trainer's
    gradients are freed then, so the generation moment holds N/W x 3p and the share); native/hf:
    the trainer's own weights (W = 1) or a full copy (W > 1), and the native engine's working
    weights.

a, a_in, a_out (bytes per token) are measured by running two of the model's layers on fake
tensors at the run's precision (:mod:`dapo.trainer.activation_memory`): about 67 x hidden for a
Qwen2.5 layer in bf16, against the 34 of the rule of thumb. An estimate: the allocator's slack
and fragmentation, backward's short-lived gradients of activations, CUDA context and workspaces,
and vLLM's own memory while asleep are not modelled; leave 10-15% of the device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dapo.algo.logprobs import ACCELERATOR_CHUNK_ROWS
from dapo.cli.model_shape import ModelShape, model_shape
from dapo.config import DAPOConfig
from dapo.config.schema import DTYPE_BYTES
from dapo.context_checks import context_problems
from dapo.rollout.native import prompts_per_chunk
from dapo.trainer.activation_memory import ActivationBytes

GIB = 1024**3
ADAPTER_BYTES = DTYPE_BYTES["float32"]  # LoRA adapters are float32 over any base (dapo.lora)


def _logit_bytes(cfg: DAPOConfig) -> int:
    low_precision = cfg.trainer.param_dtype == "bf16" or cfg.trainer.autocast != "none"
    return 2 if low_precision else DTYPE_BYTES[cfg.model.dtype]


def fused_logprobs(cfg: DAPOConfig) -> bool:
    """Whether the loss's log-probs run in the fused GPU kernels (trainer.fused_logprobs: CUDA,
    "auto"'s choice on a GPU machine; not mps or xpu, nor float64 logits), which need no float32
    chunk buffers."""
    cuda = cfg.trainer.device == "auto" or cfg.trainer.device.startswith("cuda")
    return cfg.trainer.fused_logprobs and cuda and _logit_bytes(cfg) < 8


def logits_bytes(cfg: DAPOConfig, tokens: int, vocab: int) -> int:
    """A micro-batch's (tokens, vocabulary) logits in the compute dtype and their gradient, of the
    same size, plus, unless :func:`fused_logprobs`, the float32 buffers the log-prob and entropy
    passes work in: two chunks of dapo.algo.logprobs' accelerator chunk rows."""
    chunks = 0 if fused_logprobs(cfg) else 2 * min(tokens, ACCELERATOR_CHUNK_ROWS) * vocab * 4
    return 2 * tokens * vocab * _logit_bytes(cfg) + chunks


def _fallback_activations(cfg: DAPOConfig, shape: ModelShape, compute_bytes: int) -> ActivationBytes:
    """Korthikanti et al.'s 34 x hidden bytes per token in 16 bits, doubled as a margin (a
    Qwen2.5 layer measures 67), for a model that cannot be measured."""
    residual = 4 if cfg.trainer.autocast != "none" else compute_bytes
    return ActivationBytes(layer=68 * shape.hidden * compute_bytes / 2, layer_input=residual * shape.hidden,
                           outside_layers=3 * residual * shape.hidden, weight_copies=0.0)


def training_rows(cfg: DAPOConfig, shape: ModelShape) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """(rows held through the update, rows of the backward's two moments of which the larger counts)."""
    # trainer.sequence_parallel_size S: a rank computes 1/S of each micro-batch's tokens
    world, n = cfg.resources.world_size, shape.params
    # (a sample longer than the budget is a micro-batch of its own)
    longest = cfg.data.max_prompt_length + cfg.rollout.max_response_length
    tokens = math.ceil(max(cfg.trainer.micro_batch_tokens, longest) / cfg.trainer.sequence_parallel_size)
    param_bytes = DTYPE_BYTES[cfg.model.dtype]
    bf16_weights = cfg.trainer.param_dtype == "bf16"
    compute = 2 if bf16_weights else param_bytes
    act = shape.activations or _fallback_activations(cfg, shape, compute)
    adapters, lora, sharded = shape.adapter_params, cfg.model.lora_rank > 0, "sharded " if world > 1 else ""
    if lora:  # the frozen weights have no gradient or AdamW state
        rows = [(f"{sharded}weights (frozen: model.lora_rank)", n / world * param_bytes),
                (f"{sharded}LoRA adapters + grads + AdamW", adapters / world * 4 * ADAPTER_BYTES)]
    else:
        rows = [(f"{sharded}weights + grads + AdamW", n / world * 4 * param_bytes)]
    if world == 1 and bf16_weights:
        rows.append(("bf16 weights + grads (trainer.param_dtype)", (n + adapters) * 2 if lora else n * 2 * 2))
    if world == 1 and cfg.trainer.autocast != "none":
        rows.append(("autocast's weight copies (its cast cache)", n * 2))
    if (reference := _reference_bytes(cfg, shape)) > 0:
        rows.append((f"{sharded}reference model (algorithm.kl_coef)", reference))
    copies = act.weight_copies if world > 1 else 0.0  # one process: the cast cache, above
    if world > 1:
        rows += [("root unit, gathered (embeddings, output layer)", shape.root_params * compute),
                 *([] if lora else [("output layer's gradient (unsharded)", shape.output_params * compute)]),
                 ("gathered layers (FSDP2 unit + prefetch)", 2 * shape.layer_params * compute)]
    if cfg.model.gradient_checkpointing:
        rows.append(("activations: checkpointed layer inputs", tokens * shape.layers * act.layer_input))
    else:
        rows.append(("activations: every layer's (no checkpointing)",
                     shape.layers * (tokens * act.layer + copies)))
    rows.append(("activations outside the layers", tokens * act.outside_layers))
    layer_moment = tokens * act.layer + copies if cfg.model.gradient_checkpointing else 0.0
    if world > 1:  # the unsharded gradient and its reduce-scatter copy (float32 under param_dtype=bf16)
        layer_grads = adapters / shape.layers if lora else shape.layer_params  # LoRA: the adapters' alone
        layer_moment += layer_grads * (compute + (4 if bf16_weights else compute))
    what = [*(["recomputed"] if cfg.model.gradient_checkpointing else []),
            *(["gradient + reduce copy"] if world > 1 else [])]
    output = "backward at the output: logits, gradient" + ("" if fused_logprobs(cfg) else ", log-prob chunks")
    moments = [(output, logits_bytes(cfg, tokens, shape.vocab)),
               ("backward at a layer: " + ", ".join(what), layer_moment)]
    if cfg.algorithm.kl_coef > 0 and world > 1:  # between the policy's forward and its backward
        if lora:  # the reference is the policy with its adapters off: its root is gathered already
            moments.append(("the reference's forward (adapters off): its layers gathered",
                            2 * shape.layer_params * compute))
        else:
            moments.append(("the reference's forward: its root and layers gathered",
                            (shape.root_params + 2 * shape.layer_params) * compute))
    return rows, moments


def _reference_bytes(cfg: DAPOConfig, shape: ModelShape) -> float:
    """A rank's reference model under algorithm.kl_coef: frozen, so one process casts it to bf16
    under param_dtype=bf16 (shards stay as they are); none with LoRA (the base model is it)."""
    if cfg.algorithm.kl_coef <= 0 or cfg.model.lora_rank > 0:
        return 0.0
    world = cfg.resources.world_size
    per_param = 2 if world == 1 and cfg.trainer.param_dtype == "bf16" else DTYPE_BYTES[cfg.model.dtype]
    return shape.params / world * per_param


def _kept_between_updates(cfg: DAPOConfig, shape: ModelShape) -> float:
    """What a rank holds while it generates: its weights, AdamW's two states and the reference
    (gradients, bf16 compute copies, autocast's cast cache and gathered units are freed after
    each update)."""
    world, param_bytes = cfg.resources.world_size, DTYPE_BYTES[cfg.model.dtype]
    if cfg.model.lora_rank > 0:  # the frozen weights, and the adapters with their AdamW states
        weights = shape.params / world * param_bytes + 3 * shape.adapter_params / world * ADAPTER_BYTES
    else:
        weights = shape.params / world * 3 * param_bytes
    return weights + _reference_bytes(cfg, shape)


@dataclass
class _Engine:
    """The rollout engine as the plan shows it: what it is, what it adds to a rank's memory, and
    the rows of a generation round (the native engine's chunk) it decodes at once."""

    description: str
    rows: list[tuple[str, float]]  # its own copies of the weights (not vLLM's: its share holds them)
    kv_cache: tuple[str, float] | None  # None for vLLM (a paged cache inside its share)
    vllm_dtype: str = "bf16"
    vllm_weights: float = 0.0  # bytes of this device's slice of vLLM's weights
    sleeps: bool = False  # vLLM released while the trainer updates


def _round_prompts(cfg: DAPOConfig) -> tuple[int, str]:
    """A generation round's prompts and the key that sets them: dynamic sampling's rounds, else one
    round of the step's prompts."""
    if cfg.algorithm.dynamic_sampling:
        return cfg.trainer.gen_prompts_per_round, "trainer.gen_prompts_per_round"
    return cfg.trainer.prompts_per_step, "trainer.prompts_per_step"


def _engine(cfg: DAPOConfig, shape: ModelShape) -> _Engine:
    world, n = cfg.resources.world_size, shape.params
    if cfg.rollout.engine == "vllm":
        tp = cfg.rollout.vllm_tensor_parallel_size
        # bytes of this device's slice of the engine: rollout.vllm_dtype ("auto": the checkpoint's, bf16 for most)
        vllm_dtype = cfg.rollout.vllm_dtype if cfg.rollout.vllm_dtype in ("float32", "float16") else "bf16"
        vllm_weights = (4 if vllm_dtype == "float32" else 2) * n / tp
        sleeps = cfg.rollout.vllm_sleep_between_rollouts and cfg.trainer.device != "cpu"
        description = (f"vLLM, {cfg.rollout.vllm_gpu_memory_utilization:.0%} of the device (weights "
                       f"{vllm_weights / GIB:.1f} GiB in {vllm_dtype} + KV cache"
                       f"{', released while the trainer updates' if sleeps else ''})")
        if tp > 1:
            description += (f"; every {tp} consecutive ranks form one tensor-parallel engine "
                            f"({world // tp if world > 1 else 1} engine(s))")
        return _Engine(description, [], None, vllm_dtype, vllm_weights, sleeps)
    # one process: the engine reads the trainer's own weights; a rank: its own full copy
    description = f"{cfg.rollout.engine}, " + ("the trainer's own weights" if world == 1 else "a full copy of the weights")
    rows = [("rollout engine (full copy)", n * DTYPE_BYTES[cfg.model.dtype])] if world > 1 else []
    decode_dtype = cfg.model.dtype
    if cfg.rollout.engine == "native":  # its fast path fuses (on CPU packs) the projections, kept until it sleeps
        decode_dtype = cfg.model.dtype if cfg.rollout.native_dtype == "model" else cfg.rollout.native_dtype
        rows.append((f"native engine's {decode_dtype} working weights", n * DTYPE_BYTES[decode_dtype]))
    positions = cfg.data.max_prompt_length + cfg.rollout.max_response_length
    row_bytes = shape.kv_per_token * DTYPE_BYTES[decode_dtype] * positions
    prompts = math.ceil(_round_prompts(cfg)[0] / world)
    if cfg.rollout.engine == "native":  # its chunks (hf: a round at once)
        prompts = prompts_per_chunk(prompts, row_bytes, cfg.rollout.n, cfg.rollout.native_kv_cache_gib * GIB)
    kv_rows = prompts * cfg.rollout.n
    return _Engine(description, rows,
                   (f"KV cache, full: {kv_rows} rows x {positions} tokens, {decode_dtype}", float(row_bytes * kv_rows)))


def _placement_lines(cfg: DAPOConfig, shape: ModelShape, params: float | None, engine: _Engine) -> list[str]:
    """What runs where: the model, the ranks, what each holds, the driver, and whence the
    activation figures come."""
    res, world = cfg.resources, cfg.resources.world_size
    act_line = ("; activation bytes measured on two of its layers at this precision:" if shape.activations else
                f"; activation bytes from a rule of thumb, doubled: {shape.activation_note}:")
    return [
        f"model: {cfg.model.path} ({_parameters(shape.params)} parameters, {shape.layers} layers, hidden {shape.hidden}, "
        f"vocabulary {shape.vocab}"
        + (", the shape of the Qwen2.5 model nearest in size: its config.json is not on this machine"
           if shape.guessed else "") + ")"
        + (f"; --params {params:g} ignored: the model's own config is on this machine" if params and not shape.guessed
           else ""),
        f"placement: {res.nnodes} node(s) x {res.devices_per_node} device(s) = {world} policy rank(s)"
        + (" in this process (no Ray)" if world == 1 else
           f" on Ray ({res.ray_address or 'a local Ray started by dapo train'})"),
        ("each rank: an FSDP2 shard of the policy" if world > 1 else "the policy, whole")
        + (f", computing 1/{cfg.trainer.sequence_parallel_size} of each packed row in its sequence-parallel group"
           if cfg.trainer.sequence_parallel_size > 1 else "")
        + (f", with LoRA adapters ({_parameters(shape.adapter_params)} parameters, rank {cfg.model.lora_rank})"
           if cfg.model.lora_rank > 0 else "")
        + f" ({cfg.model.dtype} weights, "
        + ("computing on bf16 copies (trainer.param_dtype=bf16)" if cfg.trainer.param_dtype == "bf16"
           else f"autocast {cfg.trainer.autocast}") + f") and a rollout engine: {engine.description}",
        "the driver: the DAPO loop, rewards, its own part of each checkpoint (no weights: the model's structure "
        "on the meta device)" if world > 1 else "this process: the DAPO loop, rewards, checkpoints",
        ("per-rank memory estimate" if world > 1 else "memory estimate (this process's device)") + act_line,
    ]


def _fixes(cfg: DAPOConfig, engine: _Engine, generating_larger: bool) -> str:
    """What would make a rank's memory fit, as one sentence's end."""
    vllm = cfg.rollout.engine == "vllm"
    fixes = ["add ranks", "lower trainer.micro_batch_tokens"]
    fixes += [] if cfg.model.gradient_checkpointing else ["set model.gradient_checkpointing=true"]
    fixes += ["lower the vLLM share"] if vllm and not engine.sleeps else []
    if not vllm and generating_larger:  # the native engine decodes a round (or a chunk), hf a round
        round_key = _round_prompts(cfg)[1]
        cap = ("set rollout.native_kv_cache_gib (0: no limit; a cap decodes a round in chunks)"
               if cfg.rollout.native_kv_cache_gib == 0 else f"lower rollout.native_kv_cache_gib (or {round_key})")
        fixes = ["add ranks", cap if cfg.rollout.engine == "native"
                 else f"lower {round_key} (or use rollout.engine=native with rollout.native_kv_cache_gib)",
                 "use rollout.engine=vllm (a paged cache)"]
    return ", ".join(fixes[:-1]) + f" or {fixes[-1]}"


def plan(cfg: DAPOConfig, params: float | None = None, device_gib: float = 80.0) -> str:
    shape = model_shape(cfg, params)
    rows, moments = training_rows(cfg, shape)
    vllm = cfg.rollout.engine == "vllm"
    engine = _engine(cfg, shape)
    rows += engine.rows
    lines = _placement_lines(cfg, shape, params, engine)
    lines += [f"  {name:58s} {size / GIB:9.2f} GiB" for name, size in rows]
    moments = [(name, size) for name, size in moments if size > 0]  # a layer's backward adds nothing in one process
    if len(moments) > 1:
        lines += ["  the larger of:"] + [f"    {name:56s} {size / GIB:9.2f} GiB" for name, size in moments]
    else:
        lines += [f"  {name:58s} {size / GIB:9.2f} GiB" for name, size in moments]
    updating = (sum(size for _, size in rows) + max(size for _, size in moments)) / GIB
    generating = 0.0
    share = cfg.rollout.vllm_gpu_memory_utilization * device_gib if vllm else 0.0
    if vllm and engine.sleeps:  # gradients are freed after each update; weights, AdamW and the reference stay
        generating = _kept_between_updates(cfg, shape) / GIB + share
        lines.append(f"  {'total while updating (vLLM asleep)':58s} {updating:9.2f} GiB")
        lines.append(f"  {'total while generating (weights, AdamW, vLLM share)':58s} {generating:9.2f} GiB")
        need = max(updating, generating)
    elif engine.kv_cache is not None:  # the engine, its cache (a round's rows, or a chunk's) and what the update keeps
        kv_name, kv_bytes = engine.kv_cache
        generating = (_kept_between_updates(cfg, shape) + sum(size for _, size in engine.rows) + kv_bytes) / GIB
        lines.append(f"  {kv_name:58s} {kv_bytes / GIB:9.2f} GiB")
        lines.append(f"  {'total while updating':58s} {updating:9.2f} GiB")
        lines.append(f"  {'total while generating (weights, AdamW, the KV cache)':58s} {generating:9.2f} GiB")
        need = max(updating, generating)
    else:
        need = updating + share
        lines.append(f"  {'total with the vLLM share':58s} {need:9.2f} GiB")
    if vllm and share < engine.vllm_weights / GIB:
        lines.append(f"DOES NOT FIT: vLLM's share ({share:.0f} GiB of a {device_gib:.0f} GiB device) is smaller than "
                     f"its {engine.vllm_dtype} weights ({engine.vllm_weights / GIB:.0f} GiB); "
                     + ("raise rollout.vllm_gpu_memory_utilization or rollout.vllm_tensor_parallel_size"
                        if engine.vllm_weights / GIB < device_gib else  # no share of one device holds them
                        "raise rollout.vllm_tensor_parallel_size (the whole device cannot hold them)"))
    if shape.cannot_run:
        lines.append(f"DOES NOT RUN: {shape.cannot_run}")
    lines += [f"DOES NOT RUN: {problem}" for problem in context_problems(cfg)]  # as dapo train refuses it
    if need > device_gib:
        lines.append(f"DOES NOT FIT: {need:.0f} GiB per rank on a {device_gib:.0f} GiB device; "
                     + _fixes(cfg, engine, generating > updating))
    return "\n".join(lines)


def _parameters(count: float) -> str:
    """A parameter count as model names give it: 0.49B, 32.76B; 3.2M for the built-in model;
    8,192 for a tiny model's LoRA adapters."""
    if count >= 1e8:
        return f"{count / 1e9:.2f}B"
    return f"{count / 1e6:.1f}M" if count >= 1e5 else f"{count:,.0f}"
