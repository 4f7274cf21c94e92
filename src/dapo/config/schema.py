"""Typed configuration for every component of a DAPO run.

One dataclass per component (section), each field documented once by the comment above it:
:class:`DAPOConfig`, the top level, here; the sections in ``model_data`` (model, data),
``generation`` (reward, rollout), ``training`` (algorithm, trainer) and ``run`` (eval,
checkpoint, logging, resources), all importable from here. Every dataclass validates itself in
``__post_init__`` and raises :class:`ConfigError` saying which field is wrong and why. Algorithm
defaults follow the DAPO reference run where one exists (see ``src/dapo/configs/dapo_qwen2.5_32b.yaml``),
with exceptions that a partial YAML file inherits: float32 compute (``trainer.param_dtype`` and
``trainer.autocast`` "none"; the reference computes in bf16, ``param_dtype: bf16``, which not
every device can), ``algorithm.keep_surplus_groups`` true (the reference, as verl, drops the
extra groups), ``trainer.decay_biases_and_norms`` false (the reference's AdamW, verl's, decays every
parameter), ``rollout.engine`` "native" (the reference rolls out with vLLM), ``reward.verifier`` "dapo-rl" (the reference scores with ``math_dapo``, an exact
string match of the last "Answer:" line), ``rollout.vllm_enforce_eager`` false (the reference
disables CUDA graphs) and ``rollout.vllm_dtype`` "auto" (the model's; the reference rolls out in bf16). The
embedded default (``src/dapo/configs/default.yaml``) sets its own for a laptop CPU.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from dapo.config.checks import ConfigError, check
from dapo.config.generation import RewardConfig, RewardFunctionSpec, RolloutConfig
from dapo.config.model_data import ATTENTION_KERNELS, DTYPE_BYTES, DataConfig, ModelConfig
from dapo.config.run import (
    BEST_METRIC,
    CheckpointConfig,
    EvalConfig,
    LoggingConfig,
    ResourcesConfig,
)
from dapo.config.training import TOKEN_SUM_AGGREGATIONS, AlgorithmConfig, TrainerConfig
from dapo.user_code import use_python_path

__all__ = [
    "ATTENTION_KERNELS", "DTYPE_BYTES", "AlgorithmConfig", "CheckpointConfig", "ConfigError", "DAPOConfig",
    "DataConfig", "EvalConfig", "LoggingConfig", "ModelConfig", "ResourcesConfig", "RewardConfig",
    "RewardFunctionSpec", "RolloutConfig", "TrainerConfig",
]


def token_level_policy_loss(name: str) -> bool:
    """Whether the policy loss registered as ``name`` is marked ``token_level`` (each token's term
    needs no other token of its sequence), as sequence parallelism needs."""
    from dapo.algo.policy_loss import POLICY_LOSSES  # torch: the config imports it with the plugins

    return getattr(POLICY_LOSSES.get(name), "token_level", False) is True


@dataclass
class DAPOConfig:
    # Directory of this run: resolved config, metrics.jsonl, TensorBoard logs, checkpoints.
    output_dir: str = "runs/dapo"
    # Directories appended to sys.path (after its entries: none shadows an installed package)
    # before any user code is imported, where reward.functions and algorithm.plugins given as
    # module names (my_rewards:fn, my_pkg.plugin) are also looked for; ~ and relative paths are
    # read from the working directory; a missing one is skipped, as on PYTHONPATH. A run's saved
    # config (RUN_DIR/config.yaml, every checkpoint's) adds the directory such a module was found
    # in when only the working directory held it (my_rewards.py there), so that `dapo eval
    # CHECKPOINT`, a resume or a Ray rank started elsewhere imports the same module. (A file,
    # rewards.py:fn, needs no entry: its directory is appended when it is imported, for its
    # imports of the modules beside it.)
    python_path: list[str] = field(default_factory=list)
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
        check(bool(self.output_dir.strip()), "output_dir is empty: name the run directory (e.g. output_dir=runs/exp1)")
        self.output_dir = os.path.expanduser(self.output_dir)  # a quoted ~ made a directory named ~
        check(all(entry.strip() for entry in self.python_path),
              f"python_path={self.python_path} holds an empty entry: name directories (or python_path=[] for none)")
        use_python_path(self.python_path)  # (the loaders put it there before the sections are built)
        check(self.data.answer_key is not None or self.reward.verifier_weight == 0,
              "data.answer_key=null reads rows without a ground truth, which the built-in verifier judges every "
              "response against: set reward.verifier_weight=0 (reward.functions alone judge, as TRL's reward_funcs "
              "do), or name the answer column")
        self._check_algorithm_with_rollout()
        self._check_parallelism()
        self._check_training_precision()
        if (best := self.checkpoint.keep_best) is not None:
            self._check_keep_best(best)

    def _check_algorithm_with_rollout(self) -> None:
        """The algorithm's settings that depend on how responses are sampled: the overlong buffer
        within the length limit, pi_old's source, groups that can carry signal, vLLM's temperatures."""
        a, r = self.algorithm, self.rollout
        if a.overlong_soft_punishment:
            check(
                a.overlong_buffer_len > 0,
                "algorithm.overlong_soft_punishment with algorithm.overlong_buffer_len=0 never punishes: the "
                "penalty ramps over the last overlong_buffer_len tokens before rollout.max_response_length, and "
                "no response is longer than that; give it a buffer (DAPO: 4096 of 20480) or set "
                "algorithm.overlong_soft_punishment=false",
            )
            check(
                a.overlong_buffer_len < r.max_response_length,
                f"algorithm.overlong_buffer_len={a.overlong_buffer_len} must be smaller than "
                f"rollout.max_response_length={r.max_response_length} (the soft overlong punishment's "
                f"buffer; set it too, e.g. algorithm.overlong_buffer_len={r.max_response_length // 4}, or "
                "algorithm.overlong_soft_punishment=false)",
            )
        check(
            a.old_logprobs == "recompute" or (r.top_p == 1 and r.top_k == 0),
            f"algorithm.old_logprobs=rollout takes pi_old from the engine, whose log-probs are of the "
            f"distribution it samples: truncated by rollout.top_p={r.top_p} / rollout.top_k={r.top_k} and "
            "renormalised, while the trainer's pi_theta is not, so the ratio would start below 1 (at the kept "
            "mass) and clip most negative-advantage tokens; use algorithm.old_logprobs=recompute (its "
            "algorithm.tis_cap, e.g. 2, corrects for the truncation) or rollout.top_p=1 rollout.top_k=0",
        )
        if a.dynamic_sampling:
            check(r.n >= 2, "algorithm.dynamic_sampling needs rollout.n >= 2: a group of one is always constant")
            t = self.trainer
            check(t.gen_prompts_per_round * a.max_gen_rounds >= t.prompts_per_step,
                  f"trainer.gen_prompts_per_round={t.gen_prompts_per_round} x algorithm.max_gen_rounds="
                  f"{a.max_gen_rounds} prompts can never fill trainer.prompts_per_step={t.prompts_per_step} groups")
        if r.engine == "vllm":  # vLLM raises a temperature below 0.01 to 0.01 and refuses one above 2
            for key, temperature in (("rollout.temperature", r.temperature), ("eval.temperature", self.eval.temperature)):
                check(0.01 <= temperature <= 2.0,
                      f"{key}={temperature} is outside what rollout.engine=vllm samples at ([0.01, 2]); at 0.01 "
                      "it would sample at another temperature than the trainer's log-probs assume")
        check(
            a.advantage != "rloo" or r.n >= 2,
            "algorithm.advantage=rloo needs rollout.n >= 2: its baseline is the mean of the other responses "
            "of a group, and a group of one gets the advantage 0 (every update would be zero)",
        )

    def _check_parallelism(self) -> None:
        """How the ranks are grouped: vLLM's tensor-parallel engines, sequence-parallel groups and
        what a loss over a chunk of each sequence needs."""
        a, r = self.algorithm, self.rollout
        tp, res = r.vllm_tensor_parallel_size, self.resources
        # (one process too: the native and hf engines do not split the model, and would ignore it)
        check(tp == 1 or r.engine == "vllm", f"rollout.vllm_tensor_parallel_size={tp} splits a vLLM engine over "
              f"{tp} devices: rollout.engine={r.engine} holds the whole model; set it to 1, or rollout.engine=vllm")
        if tp > 1 and res.world_size > 1:
            check(
                res.devices_per_node % tp == 0,
                f"rollout.vllm_tensor_parallel_size={tp} groups the policy ranks into vLLM engines of {tp} "
                f"devices each, within a node: it needs resources.devices_per_node ({res.devices_per_node}) "
                "divisible by it",
            )
        sp = self.trainer.sequence_parallel_size
        check(res.world_size % sp == 0,
              f"trainer.sequence_parallel_size={sp} groups the policy ranks: their number, resources.nnodes x "
              f"resources.devices_per_node ({res.nnodes} x {res.devices_per_node} = {res.world_size}), must be a "
              "multiple of it")
        check(sp == 1 or a.loss_agg_mode in TOKEN_SUM_AGGREGATIONS,
              f"trainer.sequence_parallel_size={sp} sums each rank's chunk of the tokens: "
              f"algorithm.loss_agg_mode={a.loss_agg_mode} is not a sum over tokens (one of "
              f"{', '.join(TOKEN_SUM_AGGREGATIONS)})")
        check(sp == 1 or self.model.attn_implementation in (None, "eager", "sdpa"),
              f"trainer.sequence_parallel_size={sp} runs attention per sequence with sdpa (eager models switch to "
              f"it), not model.attn_implementation={self.model.attn_implementation}: set it to sdpa (or leave it "
              "unset)")
        check(sp == 1 or token_level_policy_loss(a.policy_loss),
              f"trainer.sequence_parallel_size={sp} gives each rank a chunk of every sequence's tokens, and "
              f"algorithm.policy_loss={a.policy_loss} is not marked token-level: a loss that reads other tokens "
              "of a sequence (a sequence-level ratio, as GSPO's) would be taken over a chunk. If each token's "
              f"term needs only its own token, set `token_level = True` on the function registered as "
              f"{a.policy_loss!r} (docs/extending.md); else use trainer.sequence_parallel_size=1")

    def _check_training_precision(self) -> None:
        """The forward and the weights' dtypes the trainer can train with."""
        check(self.model.lora_rank == 0 or self.trainer.forward != "native",
              "trainer.forward=native reads the policy's weights and cannot train LoRA adapters: use "
              "trainer.forward=auto (Hugging Face's forward) with model.lora_rank > 0")
        check(self.trainer.param_dtype == "none" or self.model.dtype == "float32",
              f"trainer.param_dtype=bf16 keeps float32 master weights: model.dtype={self.model.dtype} "
              "must be float32")

    def _check_keep_best(self, metric: str) -> None:
        """checkpoint.keep_best ranks the evaluated steps' checkpoints: it needs evaluations during
        training, and a metric this run's evaluations log (maj@k with the verifier off only where the
        reward function returns a "pred", which the first evaluation tells: :mod:`dapo.trainer.loop_state`)."""
        check(bool(self.data.eval_files),
              f"checkpoint.keep_best={metric} ranks the checkpoints of evaluated steps: it needs held-out data, "
              "and data.eval_files is empty; give data.eval_files=[FILE,...]")
        check(self.eval.every_steps > 0,
              f"checkpoint.keep_best={metric} ranks the checkpoints of evaluated steps: it needs evaluations "
              f"during training (eval.every_steps > 0, now {self.eval.every_steps}), "
              f"e.g. eval.every_steps={self.checkpoint.every_steps or 10}")
        check(self.resources.world_size == 1 or self.checkpoint.hf_export == "every",
              f"checkpoint.keep_best={metric} keeps a checkpoint to use, and with checkpoint.hf_export=final the "
              "checkpoints of a multi-rank run before the last hold the ranks' shards only, which neither dapo eval "
              "nor from_pretrained reads: set checkpoint.hf_export=every")
        k = BEST_METRIC.match(metric).group("k")
        check(k is None or int(k) == self.eval.k,
              f"checkpoint.keep_best={metric}: the evaluations log @{self.eval.k} metrics (eval.k={self.eval.k}), "
              f"not @{k}; name {metric.replace(f'@{k}', f'@{self.eval.k}')} or set eval.k={k}")
