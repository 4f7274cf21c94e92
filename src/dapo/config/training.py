"""How the policy is updated: the ``algorithm`` (DAPO's losses, sampling and shaping) and
``trainer`` (batches, optimizer, precision, device) sections, fields documented by the comment
above each (``dapo config --explain algorithm``).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field

from dapo.config.checks import ConfigError, check, finite_numbers, one_of
from dapo.config.plugin_checks import check_callable, check_takes_importance_weights
from dapo.config.verl_names import peer_value_note
from dapo.user_code import import_user_code, shadowing_note

# The loss aggregations (dapo.algo.aggregation) that are sums over tokens under a constant: a
# sequence-parallel rank's sum over its chunk of the tokens is its share of the whole
# (trainer.sequence_parallel_size; seq-mean-token-mean's per-sequence means need whole sequences).
TOKEN_SUM_AGGREGATIONS = ("token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
FILTER_METRICS = ("auto", "acc", "score", "reward")  # algorithm.filter_metric, or a function's "<function>/<key>"
FUNCTION_METRIC = re.compile(r"[^/\s]+/\S+")  # "my_fn/format_ok": reward/<function>/<key>'s name


def heads_split_problem(size: int, heads: int, kv_heads: int, where: str) -> str | None:
    """Why trainer.sequence_parallel_size=``size`` cannot split attention by heads, ``where`` (a
    model, its config file, a recipe) having ``heads`` attention and ``kv_heads`` key/value heads:
    Ulysses gives each rank heads/size of both; None when ``size`` divides both. (The preflight
    asks it of config.json before Ray starts; the ranks of the loaded model.)"""
    if heads % size == 0 and kv_heads % size == 0:
        return None
    return (f"trainer.sequence_parallel_size={size} splits attention by heads: {where} has {heads} attention and "
            f"{kv_heads} key/value heads, which {size} must divide")


@dataclass
class AlgorithmConfig:
    # Python files ("my_algo.py") or modules ("my_pkg.my_algo") imported before this section is
    # validated, so that the advantage estimators, policy losses and loss aggregation modes they
    # register (dapo.algo.register_advantage, POLICY_LOSSES.register, LOSS_AGG_MODES.register)
    # can be selected by name below; see docs/extending.md.
    plugins: list[str] = field(default_factory=list)
    # Advantage estimator: "grpo", "dr_grpo", "rloo", "reinforce_pp_baseline", "opo" (a length-weighted group
    # baseline) or a registered name.
    advantage: str = "grpo"
    # Epsilon added to the group std in GRPO's normalisation.
    advantage_eps: float = 1e-6
    # Clip-Higher: ratio clipped to [1 - clip_ratio_low, 1 + clip_ratio_high].
    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.28
    # Dual-clip bound c (> 1) on the loss of negative-advantage tokens; null disables dual-clip.
    clip_ratio_c: float | None = 10.0
    # Policy-gradient loss: "decoupled_clip" (DAPO's clipped surrogate with Clip-Higher, dual-clip
    # and truncated importance sampling) or a registered name.
    policy_loss: str = "decoupled_clip"
    # Loss aggregation: "token-mean" (DAPO), "seq-mean-token-mean" (GRPO), "seq-mean-token-sum",
    # "seq-mean-token-sum-norm" (Dr.GRPO's: token sums over loss_agg_norm_const, then their mean over
    # the responses; verl's mode of that name does not divide by the responses' number), or a
    # registered name.
    loss_agg_mode: str = "token-mean"
    # Constant divisor for seq-mean-token-sum-norm; null means rollout.max_response_length.
    loss_agg_norm_const: float | None = None
    # KL penalty coefficient against a frozen reference model (DAPO: 0, no reference loaded).
    kl_coef: float = 0.0
    # KL estimator when kl_coef > 0: "k1", "abs", "k2" (mse) or "k3" (low variance).
    kl_estimator: str = "k3"
    # Entropy bonus coefficient (DAPO: 0): loss = pg_loss - entropy_coef x entropy, so a negative
    # one penalises entropy (as verl applies any non-zero coefficient).
    entropy_coef: float = 0.0
    # Truncated importance sampling: cap on the per-token weight pi_old_trainer / pi_rollout
    # correcting rollout-engine vs trainer log-prob mismatch; null disables the correction.
    tis_cap: float | None = None
    # Where pi_old comes from: "recompute" (a forward pass of the trainer's model before the
    # updates, as verl and the paper do) or "rollout" (the engine's behaviour log-probs: no extra
    # pass, and the ratio pi_theta / pi_rollout then carries the engine mismatch itself, bounded
    # by the clip; tis_cap has nothing left to correct; it needs rollout.top_p=1 and top_k=0, the
    # engine's log-probs being of the truncated distribution it samples, the trainer's not).
    old_logprobs: str = "recompute"
    # Dynamic Sampling: drop groups whose filter metric is constant and refill with new prompts.
    dynamic_sampling: bool = True
    # Per-response metric that dynamic sampling filters on (a group is dropped when it is the same
    # for all G responses): "acc" (correctness, the paper's filter), "score" (the reward before
    # overlong shaping, verl's "score": any spread gives non-zero advantages, for rewards that are
    # not right/wrong; a spread from the overlong penalty alone does not keep a group), "reward" (after
    # it: verl's seq_reward / seq_final_reward), a reward function's metric "<function>/<key>" (a key
    # of what it returns, as logged under reward/<function>/<key>: "my_fn/format_ok", "my_fn/score";
    # a response it gave none for is read as its group's others), or "auto": "acc"
    # when the built-in verifier scores (reward.verifier_weight != 0), else "score" (a user
    # function without the verifier, even one that returns "acc": its correctness would otherwise
    # be score > 0, which would drop a group scored [0.2, 0.5, 0.9, 0.9] as "all correct").
    filter_metric: str = "auto"
    # Most generation rounds per training step before training on what was collected.
    max_gen_rounds: int = 10
    # Keep accepted groups beyond the batch for the next step instead of discarding them. Their
    # pi_old is the policy that sampled them (with "recompute", taken in their own step, before its
    # update), so the clipped ratio covers the step of training since.
    keep_surplus_groups: bool = True
    # Largest fraction of a step's prompts_per_step groups that may be surplus carried over from the
    # step before (in [0, 1); the rest is sampled from the current policy); surplus beyond it is
    # dropped. A step that algorithm.max_gen_rounds leaves short holds fewer groups of its own: the
    # carried ones are then a larger share of it, all of it when no round found a group with signal.
    max_surplus_fraction: float = 0.5
    # Overlong filtering: mask truncated responses out of the loss.
    overlong_filtering: bool = False
    # Soft overlong punishment: length penalty in the last overlong_buffer_len tokens before L_max.
    overlong_soft_punishment: bool = True
    # L_cache, the punishment buffer in tokens (DAPO: 4096 with L_max 20480).
    overlong_buffer_len: int = 4096
    # Scale of the soft overlong penalty (DAPO: 1.0).
    overlong_penalty_factor: float = 1.0

    def __post_init__(self) -> None:
        finite_numbers(self, "algorithm")
        from dapo import algo  # the registries; imported here so that the config imports no torch
        from dapo.algo.advantages import ADVANTAGE_CALL, OPTIONAL_ADVANTAGE_ARGUMENTS
        from dapo.algo.aggregation import LOSS_AGG_CALL
        from dapo.algo.policy_loss import POLICY_LOSS_CALL

        shadowed = "".join(shadowing_note(location, import_user_code(location, f"algorithm.plugins entry {location!r}",
                                                                     ConfigError)) for location in self.plugins)
        for key, registry, call in (
            ("advantage", algo.ADVANTAGE_ESTIMATORS, ADVANTAGE_CALL),
            ("policy_loss", algo.POLICY_LOSSES, POLICY_LOSS_CALL),
            ("loss_agg_mode", algo.LOSS_AGG_MODES, LOSS_AGG_CALL),
        ):
            name = getattr(self, key)
            check(name in registry, f"algorithm.{key}={name!r} is not one of {sorted(registry)} (a plugin's name "
                  "needs its file or module in algorithm.plugins, which every dapo command that loads the config "
                  f"imports; docs/extending.md){peer_value_note(key, name)}{shadowed}")
            check_callable(f"algorithm.{key}={name!r}", registry[name], *call,
                           OPTIONAL_ADVANTAGE_ARGUMENTS if key == "advantage" else ())
        check(self.advantage_eps > 0, "algorithm.advantage_eps must be > 0 (a constant group's std is 0)")
        check(0 < self.clip_ratio_low < 1, "algorithm.clip_ratio_low must be in (0, 1)")
        check(self.clip_ratio_high > 0, "algorithm.clip_ratio_high must be > 0")
        if self.clip_ratio_high < self.clip_ratio_low:  # an ablation may want it (verl takes it): said, not refused
            warnings.warn(f"algorithm.clip_ratio_high={self.clip_ratio_high} < clip_ratio_low={self.clip_ratio_low}: "
                          "the ratio's upper bound is nearer 1 than its lower one, the opposite of DAPO's Clip-Higher "
                          "(eps_high >= eps_low keeps low-probability tokens' probability free to rise)",
                          stacklevel=1)  # (2 is the dataclass's generated __init__, "<string>", no dapo source)
        check(
            self.clip_ratio_c is None or self.clip_ratio_c > 1,
            f"algorithm.clip_ratio_c={self.clip_ratio_c} must be > 1 (dual-clip bounds -A*r by -A*c), or null",
        )
        check(
            self.loss_agg_norm_const is None or self.loss_agg_norm_const > 0,
            "algorithm.loss_agg_norm_const must be > 0 or null",
        )
        check(self.kl_coef >= 0, "algorithm.kl_coef must be >= 0")
        one_of("algorithm.kl_estimator", self.kl_estimator, algo.KL_ESTIMATORS)
        check(self.tis_cap is None or self.tis_cap >= 1, "algorithm.tis_cap must be >= 1 or null")
        check(self.filter_metric in FILTER_METRICS or bool(FUNCTION_METRIC.fullmatch(self.filter_metric)),
              f"algorithm.filter_metric={self.filter_metric!r} is not one of {list(FILTER_METRICS)} or a reward "
              f"function's metric '<function>/<key>'{peer_value_note('filter_metric', self.filter_metric)}")
        one_of("algorithm.old_logprobs", self.old_logprobs, ("recompute", "rollout"))
        check(
            self.old_logprobs == "recompute" or self.tis_cap is None,
            "algorithm.tis_cap has nothing to correct with algorithm.old_logprobs=rollout (pi_old is "
            "the rollout policy, so every TIS weight is 1): set tis_cap=null or old_logprobs=recompute",
        )
        if self.tis_cap is not None:
            check_takes_importance_weights(self.policy_loss, algo.POLICY_LOSSES[self.policy_loss], self.tis_cap)
        check(self.max_gen_rounds >= 1, "algorithm.max_gen_rounds must be >= 1")
        check(
            0 <= self.max_surplus_fraction < 1,
            "algorithm.max_surplus_fraction must be in [0, 1): a full step never trains only on carried-over groups",
        )
        check(self.overlong_buffer_len >= 0, "algorithm.overlong_buffer_len must be >= 0")
        check(self.overlong_penalty_factor >= 0, "algorithm.overlong_penalty_factor must be >= 0")


@dataclass
class TrainerConfig:
    # Training (rollout) steps to run; each makes ppo_epochs x prompts_per_step/mini_batch_prompts optimizer updates.
    total_steps: int = 100
    # Groups (prompts with mixed outcomes) per rollout step: DAPO's train batch of 512 prompts.
    prompts_per_step: int = 512
    # Prompts generated per generation round (DAPO: 1536 to fill 512 after filtering). Dynamic Sampling's
    # alone: with algorithm.dynamic_sampling=false a step is one round of prompts_per_step prompts.
    gen_prompts_per_round: int = 1536
    # Prompts per optimizer mini-batch (DAPO: 32, so 16 gradient steps per rollout step).
    mini_batch_prompts: int = 32
    # Passes over each rollout batch (DAPO: 1).
    ppo_epochs: int = 1
    # Token budget of one forward/backward micro-batch, in the tokens the model's layers see:
    # prompt + response tokens, padded ones counted (unless trainer.packing), each distinct prompt
    # once with trainer.shared_prompt.
    micro_batch_tokens: int = 16384
    # Padding-free micro-batches: each micro-batch's sequences back to back in one row, positions
    # restarting per sequence and attention confined to each (varlen flash-attention with
    # model.attn_implementation=flash_attention_2; with sdpa/eager, causal sdpa on each sequence,
    # no row-wide mask). Same loss and gradients as padding; pays off where sequences are long and
    # uneven, costs where they are short and many (an attention call per run of equal lengths).
    packing: bool = False
    # Ulysses sequence parallelism (verl's ulysses_sequence_parallel_size): groups of this many
    # consecutive policy ranks share each micro-batch, each computing a 1/S chunk of its packed row
    # (activations per rank / S), attention on all tokens of H/S heads between two all-to-alls
    # (dapo.trainer.sequence_parallel). For sequences whose activations do not fit one device;
    # trainer.micro_batch_tokens still counts a micro-batch's tokens, of which a rank computes 1/S.
    # Needs trainer.packing, resources.world_size divisible by it, heads and key/value heads
    # divisible by it, and a loss aggregation that sums tokens (not seq-mean-token-mean).
    sequence_parallel_size: int = 1
    # Forward each distinct prompt of a micro-batch once: its group's G responses continue from
    # the prompt's cached keys and values (a prompt pass, then a response pass), so the layers see
    # P + G*R tokens of a group instead of G*(P+R). Same loss and gradients as padding. Attention
    # still holds each response's copy of its prompt's keys and values (as padding does), for the
    # more responses a micro-batch then fits. Not with trainer.packing; needs transformers 5, a
    # standard key/value cache, and RoPE that is not longrope/dynamic (refused, with the reason).
    shared_prompt: bool = False
    # The training forward in the shared-prompt layout: "hf", Hugging Face's (every layer on
    # padded grids); "native", dapo-rl's own for the Llama family (Llama, Qwen2, Mistral with its
    # sliding window): the same logits (to rounding), with projections, norms, RoPE and MLP on the
    # real tokens only and attention alone on the grids, eager or sdpa as model.attn_implementation
    # says, FSDP2-sharded policies too (dapo.trainer.native_forward; refused, with the reason,
    # where it would not compute the model: other architectures, RoPE that follows a call's length,
    # attention dropout, forward hooks or submodules it would skip); "auto": native where it
    # computes the model on CPU and CUDA, where it was measured (1.2-1.3x the update's tokens/s on
    # the built-in model on CPU, 1.3-1.7x on a 93M one; 1.13-1.54x on an H200, where it resumes
    # bit for bit: docs/benchmarks.md, "On a GPU"), Hugging Face's elsewhere (mps, xpu: unmeasured).
    forward: str = "auto"
    # dapo-rl's forward (above) on a CPU: RMSNorm, SwiGLU, RoPE and attention each as one fused C
    # kernel forward and one backward (dapo.trainer.fused_cpu_ops; x86-64 Linux with AVX-512,
    # AVX512-BF16 not needed; built with the decode kernels, rollout.native_cpu_kernels), float32
    # weights with or without bf16 autocast. Torch's arithmetic in another summation order: the
    # same logits to float32 rounding, a bf16 value at most a rounding away (attention: float32
    # throughout, nearer float64 than torch's bf16 eager). Where they cannot run, torch's ops, as with false.
    native_cpu_kernels: bool = True
    # dapo-rl's forward (above) on a CUDA GPU: RMSNorm, SwiGLU and RoPE each as one fused Triton
    # kernel forward and one backward (dapo.trainer.fused_gpu_ops), attention torch's: on an H200
    # a 0.5B model's update 1.26-1.31x. Hugging Face's eager formulas and roundings in float32
    # arithmetic: bf16 values within a spacing or two of eager's (RoPE's bit for bit), float32
    # ones within a few float32 spacings; float64 always takes torch's ops. false: torch's ops.
    native_gpu_kernels: bool = True
    # The loss's token log-probs and entropies on a CUDA GPU in fused Triton kernels
    # (dapo.algo.logprobs_triton: each row of logits read once forward and once backward, float32
    # accumulation, no float32 chunk buffers): on an H200 10.9x the chunked torch path, a 0.5B
    # model's update 1.21-1.23x. false: the chunked torch path (the CPU's, and float64's, always).
    fused_logprobs: bool = True
    # AdamW: learning rate (in (0, 1]), betas, weight decay; gradient-norm clip (DAPO: 1e-6, 0.1,
    # 1.0). Weight decay applies to matrices only, not to biases and norm weights, unless
    # decay_biases_and_norms.
    lr: float = 1e-6
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    weight_decay: float = 0.1
    # true: weight decay on every parameter, biases and norm weights too, as verl's FSDP optimizer
    # (AdamW over all parameters) does: the same updates as the reference run's. false: matrices
    # only (Hugging Face Trainer's and nanoGPT's choice); at DAPO's lr 1e-6 and 0.1 the difference
    # is a factor (1 - 1e-7) a step on those weights.
    decay_biases_and_norms: bool = False
    # Clip the gradient's global norm (over every parameter, across the ranks' shards) to this before
    # each optimizer step (TRL's max_grad_norm, verl's actor.grad_clip); DAPO's reference run: 1.0.
    # A large value never clips; actor/grad_norm logs the norm before clipping.
    grad_clip: float = 1.0
    # Stop the run when every optimizer update of this many consecutive steps was skipped for a
    # non-finite loss or gradient norm (each skip leaves the weights as they were: a diverged policy
    # would only sample and skip); steps with no update to try are not counted, nor, with
    # autocast=fp16, the skips of its loss scaling (a gradient overflow, skipped by design; a
    # non-finite loss is counted). 0 never stops.
    max_nonfinite_steps: int = 3
    # Linear warm-up over this many training steps (rollout steps, as verl counts them: the
    # schedule moves once per step, not per optimizer update): step s of W runs at lr (s+1)/(W+1)
    # (verl's s/W spends its step 0 at lr 0, an update that does not move the weights but does
    # advance AdamW's moments); then lr_schedule: "constant" (DAPO)
    # or "cosine": lr * (r + (1 - r)(1 + cos(pi p)) / 2), r = min_lr_ratio, p = (step - warmup) /
    # (total_steps - warmup), as verl; the last step (total_steps - 1) is one step short of the floor.
    warmup_steps: int = 10
    lr_schedule: str = "constant"
    min_lr_ratio: float = 0.0
    # Seed for data order, sampling and initialisation; also seeds Python's `random` and NumPy's
    # global generator (which a user's plugin may draw from), as transformers.set_seed does.
    seed: int = 0
    # "auto" (CUDA when available), "cpu", "cuda", "cuda:1", ... (policy ranks on Ray each use
    # the GPU Ray gives them, whatever the index)
    device: str = "auto"
    # CPU threads for torch; 0 leaves torch's default.
    num_threads: int = 0
    # Keep freed memory in the process for reuse (glibc malloc; dapo.trainer.allocator): large
    # tensors are not mapped from the OS afresh and page-faulted in at every allocation, which on
    # CPU costs more than the arithmetic for 100k-vocabulary logits and the decoder's weight
    # copies. Resident memory then stays near its peak. False: glibc's defaults. No effect
    # outside glibc (macOS, musl).
    keep_freed_memory: bool = True
    # Mixed precision autocast for forward passes: "none", "bf16", "fp16" (with dynamic loss
    # scaling: see dapo.trainer.optim.LOSS_SCALE_INIT).
    autocast: str = "none"
    # "bf16": forward and backward on a bfloat16 copy of the float32 weights, as verl's FSDP
    # default (MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)). Activations are bf16,
    # the residual stream too (autocast keeps it in float32 and casts each matmul's input again);
    # each micro-batch's gradient is added (and, over FSDP ranks, reduced) in float32 and AdamW
    # updates the float32 weights (dapo.trainer.mixed_precision). FSDP2 ranks all-gather the bf16
    # copy: half the bytes of float32 weights under autocast. Needs autocast=none and
    # model.dtype=float32. "none": compute on the weights as stored, autocast choosing the
    # matmuls' precision.
    param_dtype: str = "none"
    # Policy ranks: whether each FSDP2 layer frees its gathered weights after its forward (verl's
    # fsdp_config.reshard_after_forward; ZeRO-3), to gather them again for its backward. false:
    # kept from forward to backward, and through a no-grad log-prob pass (ZeRO-2's memory: the
    # whole model's weights on every rank at the pass's peak, instead of one layer's), saving an
    # all-gather per layer and micro-batch: for a model many times smaller than a device, where
    # the collectives' latency counts (the embedded default on 2 CPU ranks: half the all-gathers,
    # the update a few percent faster). One process: no effect.
    fsdp_reshard_after_forward: bool = True

    def __post_init__(self) -> None:
        finite_numbers(self, "trainer")
        check(self.total_steps >= 1, "trainer.total_steps must be >= 1")
        check(self.prompts_per_step >= 1, "trainer.prompts_per_step must be >= 1")
        check(self.gen_prompts_per_round >= 1, "trainer.gen_prompts_per_round must be >= 1")
        check(self.mini_batch_prompts >= 1, "trainer.mini_batch_prompts must be >= 1")
        check(
            self.prompts_per_step % self.mini_batch_prompts == 0,
            f"trainer.mini_batch_prompts={self.mini_batch_prompts} does not divide "
            f"trainer.prompts_per_step={self.prompts_per_step}",
        )
        check(self.ppo_epochs >= 1, "trainer.ppo_epochs must be >= 1")
        check(self.micro_batch_tokens >= 1, "trainer.micro_batch_tokens must be >= 1")
        check(0 < self.lr <= 1, "trainer.lr must be in (0, 1]: AdamW moves every weight by about lr an update, so a "
                                "larger one only diverges (the DAPO recipe's is 1e-6)")
        check(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas), "trainer.betas must be two values in [0, 1)")
        check(self.grad_clip > 0, "trainer.grad_clip must be > 0")
        check(self.max_nonfinite_steps >= 0, "trainer.max_nonfinite_steps must be >= 0 (0 never stops)")
        check(self.weight_decay >= 0, "trainer.weight_decay must be >= 0")
        check(0 <= self.min_lr_ratio <= 1, "trainer.min_lr_ratio must be in [0, 1] (the cosine's floor, a share of trainer.lr)")
        check(self.num_threads >= 0, "trainer.num_threads must be >= 0 (0: torch's default)")
        # numpy (which vLLM seeds) takes [0, 2**32); the rounds' seeds (seed * 1_000_003 + ...) stay in int64
        check(0 <= self.seed < 2**32, f"trainer.seed={self.seed} must be in [0, 2**32)")
        check(self.warmup_steps >= 0, "trainer.warmup_steps must be >= 0")
        check(self.sequence_parallel_size >= 1, "trainer.sequence_parallel_size must be >= 1")
        missing = [setting for setting, needed in (("trainer.packing=true", not self.packing),
                                                   ("trainer.shared_prompt=false", self.shared_prompt)) if needed]
        check(self.sequence_parallel_size == 1 or not missing,
              f"trainer.sequence_parallel_size={self.sequence_parallel_size} splits a packed row's tokens over "
              f"ranks: set {' '.join(missing)}")
        check(not (self.packing and self.shared_prompt),
              "trainer.packing and trainer.shared_prompt are two layouts of a micro-batch, and both are on (the "
              "embedded default turns shared_prompt on): to pack, set trainer.shared_prompt=false too")
        one_of("trainer.forward", self.forward, ("auto", "native", "hf"))
        check(self.forward != "native" or self.shared_prompt,
              "trainer.forward=native computes the shared-prompt layout: set trainer.shared_prompt=true")
        one_of("trainer.lr_schedule", self.lr_schedule, ("constant", "cosine"))
        one_of("trainer.autocast", self.autocast, ("none", "bf16", "fp16"))
        one_of("trainer.param_dtype", self.param_dtype, ("none", "bf16"))
        check(self.param_dtype == "none" or self.autocast == "none",
              f"trainer.param_dtype=bf16 computes on bf16 weights, where trainer.autocast={self.autocast} would "
              "compute on float32 ones: choose one (set trainer.autocast=none)")
        check(re.fullmatch(r"auto|cpu|cuda(:[0-9]+)?|mps|xpu(:[0-9]+)?", self.device) is not None,
              f"trainer.device={self.device!r} is not a device: use auto, cpu, cuda or cuda:N")

    @property
    def layout(self) -> str:
        """The micro-batch layout (dapo.trainer.batch.LAYOUTS) these settings choose."""
        return "packed" if self.packing else "shared_prompt" if self.shared_prompt else "padded"

    @property
    def optimizer_steps_per_rollout(self) -> int:
        return self.ppo_epochs * (self.prompts_per_step // self.mini_batch_prompts)
