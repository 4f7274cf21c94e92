"""verl's names for the settings a DAPO run shares with dapo-rl (those of verl's DAPO recipe
scripts), and TRL's GRPOConfig names, so that a key a verl or TRL user writes out of habit is
answered with this project's name for it in the unknown key's "did you mean" (a spelling guess
named ``data.builtin_eval_size`` for ``data.train_batch_size``, and nothing for
``learning_rate``)."""

from __future__ import annotations

import re
from typing import Any

_DECOUPLED_CLIP = "algorithm.clip_ratio_low and algorithm.clip_ratio_high (DAPO's decoupled clip: 0.2 and 0.28)"
_VERL_REWARD_FUNCTION = "reward.functions (path: FILE:compute_score; verl's signature is understood)"
# dapo-rl's truncated IS is per token (verl's rollout_is=token); verl's sequence level has no equivalent
_NO_OFFLOAD = ("resources.devices_per_node and resources.nnodes (dapo-rl offloads no parameters or optimizer state to "
               "the CPU: FSDP2 shards them over the ranks; `dapo plan` says whether a layout fits)")
_TOKEN_TIS = "algorithm.tis_cap (per-token truncated IS, verl's rollout_is=token; sequence level has no equivalent)"
# verl's DAPO reward manager's keys, under reward_model (recipe/dapo/*.sh) and under reward (verl-recipe's later spelling)
_REWARD_KWARGS = {
    "reward_kwargs.overlong_buffer_cfg.enable": "algorithm.overlong_soft_punishment",
    "reward_kwargs.overlong_buffer_cfg.len": "algorithm.overlong_buffer_len",
    "reward_kwargs.overlong_buffer_cfg.penalty_factor": "algorithm.overlong_penalty_factor",
    "reward_kwargs.max_resp_len": "rollout.max_response_length (the overlong shaping reads it there)",
}
_REWARD_MANAGER = "reward.verifier (math_dapo: verl's DAPO reward manager's scorer) and algorithm.overlong_soft_punishment"

VERL_NAMES: dict[str, str] = {
    "actor_rollout_ref.model.path": "model.path",
    "data.apply_chat_template_kwargs": "data.chat_template_kwargs",
    "actor_rollout_ref.model.enable_gradient_checkpointing": "model.gradient_checkpointing",
    # verl's fuses the output layer with the log-probs; dapo-rl's fuses the log-probs and entropy
    "actor_rollout_ref.model.use_fused_kernels": "trainer.fused_logprobs",
    # Liger's Triton RMSNorm/SwiGLU/RoPE in Hugging Face's forward; dapo-rl's own in its forward
    "actor_rollout_ref.model.use_liger": "trainer.native_gpu_kernels",
    "actor_rollout_ref.actor.optim.lr": "trainer.lr",
    # verl's AdamW decays every parameter; dapo-rl's leaves biases and norms out unless told
    "actor_rollout_ref.actor.optim.weight_decay": "trainer.weight_decay (with trainer.decay_biases_and_norms=true "
                                                  "as verl decays every parameter)",
    "actor_rollout_ref.actor.optim.lr_warmup_steps": "trainer.warmup_steps",
    "actor_rollout_ref.actor.grad_clip": "trainer.grad_clip",
    "actor_rollout_ref.actor.ppo_epochs": "trainer.ppo_epochs",
    "actor_rollout_ref.actor.ppo_mini_batch_size": "trainer.mini_batch_prompts",
    # verl's budget is one GPU's, multiplied by its Ulysses size; dapo-rl's is a sequence-parallel group's
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": "trainer.micro_batch_tokens (a sequence-parallel group's "
                                                         "budget: verl's times trainer.sequence_parallel_size)",
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size": "trainer.sequence_parallel_size",
    "actor_rollout_ref.actor.fsdp_config.reshard_after_forward": "trainer.fsdp_reshard_after_forward",
    "actor_rollout_ref.actor.clip_ratio_low": "algorithm.clip_ratio_low",
    "actor_rollout_ref.actor.clip_ratio_high": "algorithm.clip_ratio_high",
    "actor_rollout_ref.actor.clip_ratio_c": "algorithm.clip_ratio_c",
    # verl's symmetric clip, not the dual-clip bound clip_ratio_c (a spelling guess would say that)
    "actor_rollout_ref.actor.clip_ratio": _DECOUPLED_CLIP,
    "algorithm.clip_ratio": _DECOUPLED_CLIP,
    "actor_rollout_ref.actor.entropy_coeff": "algorithm.entropy_coef",
    # the same modes by name; verl's seq-mean-token-sum-norm leaves the number of responses out
    "actor_rollout_ref.actor.loss_agg_mode": "algorithm.loss_agg_mode (its seq-mean-token-sum-norm is Dr.GRPO's "
                                             "here: also divided by the number of responses, which verl's is not)",
    "actor_rollout_ref.actor.use_kl_loss": "algorithm.kl_coef (verl's kl_loss_coef defaults to 0.001)",
    "actor_rollout_ref.actor.kl_loss_type": "algorithm.kl_estimator (verl's low_var_kl is k3, kl k1, abs abs, mse k2)",
    "algorithm.norm_adv_by_std_in_grpo": "algorithm.advantage (dr_grpo: not divided by the group's std)",
    # verl divides the summed token losses by this constant alone, then by its gradient accumulation
    "actor_rollout_ref.actor.loss_scale_factor": "algorithm.loss_agg_norm_const (dapo-rl also divides by the responses)",
    "actor_rollout_ref.actor.kl_loss_coef": "algorithm.kl_coef",
    "actor_rollout_ref.rollout.name": "rollout.engine",
    "actor_rollout_ref.rollout.n": "rollout.n",
    "actor_rollout_ref.rollout.response_length": "rollout.max_response_length",
    "actor_rollout_ref.rollout.prompt_length": "data.max_prompt_length",
    # no CPU offload here: what a 32B model needs on its ranks is dapo plan's to say
    **{f"actor_rollout_ref.{role}.fsdp_config.{what}_offload": _NO_OFFLOAD
       for role in ("actor", "ref") for what in ("param", "optimizer")},
    "actor_rollout_ref.rollout.temperature": "rollout.temperature",
    "actor_rollout_ref.rollout.top_p": "rollout.top_p",
    "actor_rollout_ref.rollout.top_k": "rollout.top_k",
    "actor_rollout_ref.rollout.gpu_memory_utilization": "rollout.vllm_gpu_memory_utilization",
    "actor_rollout_ref.rollout.tensor_model_parallel_size": "rollout.vllm_tensor_parallel_size",
    "actor_rollout_ref.rollout.enforce_eager": "rollout.vllm_enforce_eager",
    "actor_rollout_ref.rollout.val_kwargs.n": "eval.k",
    "actor_rollout_ref.rollout.val_kwargs.temperature": "eval.temperature",
    "actor_rollout_ref.rollout.val_kwargs.top_p": "eval.top_p",
    "actor_rollout_ref.rollout.val_kwargs.top_k": "eval.top_k",
    "algorithm.adv_estimator": "algorithm.advantage",
    "actor_rollout_ref.actor.policy_loss.loss_mode": "algorithm.policy_loss (verl's vanilla: decoupled_clip)",
    "algorithm.filter_groups.enable": "algorithm.dynamic_sampling",
    "algorithm.filter_groups.metric": "algorithm.filter_metric",
    # verl's 0 is no limit, and its limit raises; dapo-rl's trains on what the rounds collected
    "algorithm.filter_groups.max_num_gen_batches": "algorithm.max_gen_rounds (at least 1, no 'unlimited' 0; a step "
                                                   "that reaches it trains on the groups collected, with a warning, "
                                                   "where verl raises)",
    "data.train_batch_size": "trainer.prompts_per_step",
    "data.gen_batch_size": "trainer.gen_prompts_per_round (with algorithm.dynamic_sampling=false a step trains on "
                           "trainer.prompts_per_step prompts, where verl trains on gen_batch_size)",
    "data.max_response_length": "rollout.max_response_length",
    "data.val_files": "data.eval_files",
    "reward_model.overlong_buffer.enable": "algorithm.overlong_soft_punishment",
    "reward_model.overlong_buffer.len": "algorithm.overlong_buffer_len",
    "reward_model.overlong_buffer.penalty_factor": "algorithm.overlong_penalty_factor",
    # (older verl scripts' spelling of the same three)
    "custom_reward_function.overlong_buffer.enable": "algorithm.overlong_soft_punishment",
    "custom_reward_function.overlong_buffer.len": "algorithm.overlong_buffer_len",
    "custom_reward_function.overlong_buffer.penalty_factor": "algorithm.overlong_penalty_factor",
    # (a compute_score written to verl's contract, data_source first, is called as verl calls it)
    "custom_reward_function.path": _VERL_REWARD_FUNCTION,
    "custom_reward_function.name": _VERL_REWARD_FUNCTION,
    "trainer.n_gpus_per_node": "resources.devices_per_node",
    "trainer.nnodes": "resources.nnodes",
    "trainer.total_training_steps": "trainer.total_steps",
    "trainer.save_freq": "checkpoint.every_steps",
    "trainer.test_freq": "eval.every_steps",
    "trainer.val_before_train": "eval.before_training",
    "trainer.resume_mode": "checkpoint.resume (auto, never, or a checkpoint's path; verl's disable is never)",
    "trainer.max_actor_ckpt_to_keep": "checkpoint.keep_last",
    "trainer.default_local_dir": "output_dir",
    "trainer.project_name": "logging.wandb_project",
    # the rest of verl's DAPO recipe scripts' keys (recipe/dapo/*.sh) that have an answer here
    **{f"{section}.{key}": ours for section in ("reward_model", "reward") for key, ours in _REWARD_KWARGS.items()},
    "reward_model.reward_manager": _REWARD_MANAGER,
    "reward.reward_manager.name": _REWARD_MANAGER,
    "algorithm.kl_ctrl.kl_coef": "algorithm.kl_coef (a KL loss term: dapo-rl puts no KL in the reward)",
    "algorithm.use_kl_in_reward": "algorithm.kl_coef (a KL loss term: dapo-rl puts no KL in the reward)",
    "trainer.total_epochs": "trainer.total_steps (training steps, not epochs)",
    "actor_rollout_ref.actor.optim.clip_grad": "trainer.grad_clip",
    "actor_rollout_ref.actor.optim.lr_decay_style": "trainer.lr_schedule",
    "actor_rollout_ref.actor.optim.lr_scheduler_type": "trainer.lr_schedule",
    "actor_rollout_ref.model.lora_rank": "model.lora_rank",
    "actor_rollout_ref.model.lora_alpha": "model.lora_alpha",
    "actor_rollout_ref.model.target_modules": "model.lora_target_modules",
    "actor_rollout_ref.model.use_remove_padding": "trainer.packing",
    "actor_rollout_ref.rollout.dtype": "rollout.vllm_dtype",
    "actor_rollout_ref.rollout.free_cache_engine": "rollout.vllm_sleep_between_rollouts",
    # verl's switch records the engine's log-probs, which dapo-rl always does; taking them as pi_old
    # (algorithm.old_logprobs=rollout) is verl's rollout_correction.bypass_mode instead
    "actor_rollout_ref.rollout.calculate_log_probs": "algorithm.tis_cap (nothing to switch on: the engine's "
                                                    "log-probs are always recorded, and tis_cap corrects with them)",
    "algorithm.rollout_correction.bypass_mode": "algorithm.old_logprobs (rollout: the engine's log-probs as pi_old)",
    "algorithm.rollout_correction.rollout_is": _TOKEN_TIS,
    "algorithm.rollout_correction.rollout_is_threshold": _TOKEN_TIS,
    "actor_rollout_ref.ref.ulysses_sequence_parallel_size": "trainer.sequence_parallel_size",
    # verl's micro-batches by count or by a per-GPU token budget: here always a token budget
    "actor_rollout_ref.actor.use_dynamic_bsz": "trainer.micro_batch_tokens (micro-batches are always token budgets)",
    "actor_rollout_ref.actor.ppo_micro_batch_size": "trainer.micro_batch_tokens (a token budget, not a count)",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": "trainer.micro_batch_tokens (a token budget, not a count)",
    "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu": "trainer.micro_batch_tokens",
    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": "trainer.micro_batch_tokens",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": "trainer.micro_batch_tokens (a token budget, not a count)",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": "trainer.micro_batch_tokens (a token budget, not a count)",
    "data.truncation": "data.overlong_prompts (drop or error: prompts are not truncated)",
    # verl's scripts zero the model's dropout through its config; here one switch (on by default)
    **{f"actor_rollout_ref.model.override_config.{name}": "model.disable_dropout (true by default)"
       for name in ("attention_dropout", "hidden_dropout", "embd_pdrop", "resid_pdrop", "attn_pdrop")},
    "trainer.logger": "logging.tensorboard and logging.wandb",
}


# TRL's GRPOConfig fields (top-level keys, or under any section), by their last name
TRL_NAMES: dict[str, str] = {
    "learning_rate": "trainer.lr",
    "chat_template_kwargs": "data.chat_template_kwargs",
    "num_generations": "rollout.n",
    "max_completion_length": "rollout.max_response_length",
    "max_prompt_length": "data.max_prompt_length (a longer prompt is dropped, data.overlong_prompts, not truncated "
                         "as TRL truncates it: a cut problem is another problem, its answer no longer the ground truth)",
    "beta": "algorithm.kl_coef",
    # TRL's epsilon_high defaults to epsilon: epsilon alone is a symmetric clip
    "epsilon": "algorithm.clip_ratio_low and algorithm.clip_ratio_high (TRL's epsilon_high defaults to epsilon: "
               "set both for its symmetric clip)",
    "epsilon_high": "algorithm.clip_ratio_high",
    "loss_type": "algorithm.loss_agg_mode",
    "num_iterations": "trainer.ppo_epochs",
    # TRL counts optimizer steps; a dapo-rl step is a rollout, of several optimizer steps
    **{name: f"{target} (rollout steps, each of trainer.ppo_epochs x prompts_per_step / mini_batch_prompts "
             f"optimizer steps; TRL's {name} counts optimizer steps)"
       for name, target in (("max_steps", "trainer.total_steps"), ("save_steps", "checkpoint.every_steps"),
                            ("eval_steps", "eval.every_steps"))},
    "max_grad_norm": "trainer.grad_clip",
    "lr_scheduler_type": "trainer.lr_schedule",
    "bf16": "trainer.autocast",
    "use_vllm": "rollout.engine",
    "use_liger_kernel": "trainer.fused_logprobs and trainer.native_gpu_kernels (dapo-rl's own Triton log-probs, "
                        "RMSNorm, SwiGLU and RoPE; on by default)",
    "scale_rewards": "algorithm.advantage (dr_grpo: advantages not divided by the group's std)",
    "delta": "algorithm.clip_ratio_c (the dual-clip bound on negative advantages' ratios)",
    "gradient_checkpointing": "model.gradient_checkpointing",
    "vllm_gpu_memory_utilization": "rollout.vllm_gpu_memory_utilization",
    "mask_truncated_completions": "algorithm.overlong_filtering",
    "reward_weights": "reward.functions (each entry's weight)",
    "reward_funcs": "reward.functions (path: FILE:function; TRL's reward functions are called as TRL calls them)",
    "report_to": "logging.wandb",
    "per_device_train_batch_size": "trainer.prompts_per_step with trainer.mini_batch_prompts and trainer.micro_batch_tokens "
                                   "(prompts and tokens, not completions per device)",
    "gradient_accumulation_steps": "trainer.micro_batch_tokens (micro-batches of that many tokens accumulate into each "
                                   "optimizer step of trainer.mini_batch_prompts prompts)",
    "steps_per_generation": "trainer.mini_batch_prompts (a rollout of trainer.prompts_per_step prompts makes "
                            "prompts_per_step / mini_batch_prompts optimizer steps, times trainer.ppo_epochs)",
    "generation_batch_size": "trainer.gen_prompts_per_round (prompts per generation round, not completions)",
    "warmup_ratio": "trainer.warmup_steps (rollout steps, not a share of the run)",
    "logging_steps": "logging (dapo-rl logs every step's metrics; logging.completions_per_step the samples shown)",
    "vllm_mode": "rollout.engine (vllm: colocated with the policy, TRL's vllm_mode=colocate; no server mode)",
    **{name: "algorithm.tis_cap (truncated importance sampling against the rollout engine's log-probs, capped at "
             "tis_cap; null: off)"
       for name in ("vllm_importance_sampling_correction", "vllm_importance_sampling_cap")},
    "importance_sampling_level": "algorithm.policy_loss (the ratio is per token, TRL's importance_sampling_level=token; "
                                 "GSPO's sequence-level ratio would be a policy loss of your own, registered by a plugin)",
    "repetition_penalty": "rollout.temperature with rollout.top_p and rollout.top_k, the sampling settings there are (no "
                          "repetition penalty: it samples from a distribution other than the policy's, which the loss's "
                          "ratio to the sampling policy takes it to be)",
}

# A peer's name for a value of an algorithm setting, and what dapo-rl calls it (TRL's loss_type is
# algorithm.loss_agg_mode, verl's adv_estimator algorithm.advantage, policy_loss.loss_mode policy_loss)
PEER_VALUES: dict[str, dict[str, str]] = {
    "loss_agg_mode": {
        "dapo": "token-mean (TRL's loss_type=dapo: every token of the step weighs the same)",
        "bnpo": "token-mean (TRL's loss_type=bnpo normalises by a local batch's tokens; token-mean by the "
                "mini-batch's, across ranks)",
        "grpo": "seq-mean-token-mean (TRL's loss_type=grpo: each completion's token mean, then their mean)",
        "dr_grpo": "seq-mean-token-sum-norm (TRL's loss_type=dr_grpo: token sums over a constant, "
                   "algorithm.loss_agg_norm_const, the response length by default)",
    },
    "advantage": {
        "reinforce_plus_plus_baseline": "reinforce_pp_baseline (verl's adv_estimator name)",
        "gae": "none: dapo-rl trains no critic (GRPO-family estimators, or a registered one)",
    },
    "filter_metric": {
        "seq_reward": "reward (verl's seq_reward: the reward after overlong shaping)",
        "seq_final_reward": "reward (verl's seq_final_reward: the reward after overlong shaping; dapo-rl adds no KL "
                            "penalty to it)",
    },
    "policy_loss": {
        "vanilla": "decoupled_clip (verl's loss_mode=vanilla: the PPO clip with clip_ratio_low and clip_ratio_high, "
                   "and clip_ratio_c's dual clip)",
    },
}


def peer_value_note(key: str, name: str) -> str:
    """What dapo-rl calls a peer's name ``name`` for algorithm.``key``, as a message's clause
    (``""`` where it is no peer's name)."""
    said = PEER_VALUES.get(key, {}).get(name)
    return f"; for {name!r} set algorithm.{key}={said}" if said else ""


# a count of GPUs, as launchers and other trainers name it: gpus, num_gpus, n_gpus_per_node, ...
GPU_COUNT = re.compile(r"(n_|num_|number_of_)?gpus?(_per_node)?", re.IGNORECASE)


def verl_guess(key: str, value: Any) -> str | None:
    """This project's name for verl's dotted ``key``; for a section of verl's given as a mapping,
    for every key in it that has one, saying which (a verl config is translated in one go, not one
    key a run). None when none has."""
    verl = dict.fromkeys(named for leaf in _leaves(key, value) if (named := _named(leaf, VERL_NAMES)) is not None)
    names = [VERL_NAMES[name] if name == key else f"{VERL_NAMES[name]} (verl's {name})" for name in verl]
    if not names:  # a GRPOConfig field, at the top or one section down (trl: {max_steps: 10})
        trl = dict.fromkeys(name for leaf in _leaves(key, value) if (name := _trl_field(leaf)) is not None)
        names = [f"{TRL_NAMES[name]} (TRL's {name})" for name in trl]
    if not names and GPU_COUNT.fullmatch(key.rpartition(".")[2]):  # no spelling guess finds "devices"
        names = ["resources.devices_per_node (GPUs per node; resources.nnodes the nodes)"]
    return ", ".join(names) or None


def _named(leaf: str, names: dict[str, str]) -> str | None:
    """The key of ``names`` that dotted ``leaf`` is, or lies under (a mapping's own key:
    data.apply_chat_template_kwargs.enable_thinking); None where none."""
    parts = leaf.split(".")
    return next((name for end in range(len(parts), 0, -1) if (name := ".".join(parts[:end])) in names), None)


def _trl_field(leaf: str) -> str | None:
    """The GRPOConfig field that dotted ``leaf`` is, at the top or one section down, or lies under
    (chat_template_kwargs.enable_thinking); None where none."""
    parts = leaf.split(".")
    return next((part for part in parts[:2] if part in TRL_NAMES), None)


def _leaves(key: str, value: Any) -> list[str]:
    """The dotted keys of ``value``'s leaves under ``key`` (``key`` itself for a value)."""
    if not isinstance(value, dict):
        return [key]
    return [leaf for name, inner in value.items() if isinstance(name, str) for leaf in _leaves(f"{key}.{name}", inner)]
