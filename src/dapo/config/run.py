"""The run around the training loop: the ``eval``, ``checkpoint``, ``logging`` and ``resources``
sections (fields documented by the comment above each; ``dapo config --explain checkpoint``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dapo.config.checks import check, finite_numbers, one_of

# the held-out metrics checkpoint.keep_best can rank by, as dapo.trainer.evaluate names them: eval/avg@32,
# eval/<source>/pass@32, eval/score_mean, eval/reward/<function>/<key>, ...
# (a data_source may hold slashes: verl's preprocessed GSM8K and MATH are openai/gsm8k, lighteval/MATH)
BEST_METRIC = re.compile(r"^eval/(?:.+/)?(?:(?:avg|pass|maj)@(?P<k>[0-9]+)|score_mean)$|^eval/reward/[^/]+/[^/]+$")


@dataclass
class EvalConfig:
    # Evaluate every this many training (rollout) steps (0: only before and after training).
    every_steps: int = 0
    # Evaluate before the first step, giving the baseline.
    before_training: bool = True
    # Samples per problem (k of avg@k, pass@k, maj@k); DAPO: 32.
    k: int = 32
    # Sampling for evaluation (DAPO: temperature 1.0, top_p 0.7, no top-k); stop strings and the
    # length limit are the rollout's (rollout.stop_strings, rollout.max_response_length).
    temperature: float = 1.0
    top_p: float = 0.7
    # Top-k of evaluation's sampling (0: off; verl's val_kwargs.top_k); null: rollout.top_k's.
    top_k: int | None = None
    # Evaluate on at most this many problems (0: all): the first ones, in the order of
    # data.eval_files and their rows (eval/num_problems and eval/<source>/num_problems count them).
    max_problems: int = 0
    # Sampling seed of every evaluation; null derives it from trainer.seed. Pin it to compare runs
    # of different trainer seeds on the same evaluation samples (as `dapo ablate` does). Each
    # problem samples with a seed of this one and its (data_source, uid) (native and vLLM engines),
    # so its samples do not depend on the other problems evaluated (max_problems, other files) but
    # through the logits' rounding, which a batch of another size can change (16-bit mostly).
    seed: int | None = None

    def __post_init__(self) -> None:
        finite_numbers(self, "eval")
        check(self.every_steps >= 0, "eval.every_steps must be >= 0")
        check(self.k >= 1, "eval.k must be >= 1")
        check(self.max_problems >= 0, "eval.max_problems must be >= 0 (0: all)")
        check(self.temperature > 0, f"eval.temperature={self.temperature} must be > 0: for greedy decoding set "
              "eval.top_k=1 (each token the most likely one; eval.k=1 then, as its k samples are alike)")
        check(self.seed is None or 0 <= self.seed < 2**32, f"eval.seed={self.seed} must be in [0, 2**32) (or null)")
        check(0 < self.top_p <= 1, "eval.top_p must be in (0, 1]")
        check(self.top_k is None or self.top_k >= 0, "eval.top_k must be >= 0 (0 disables it; null: rollout.top_k)")


@dataclass
class CheckpointConfig:
    # Save a checkpoint every this many training (rollout) steps (0: only the final one). A config
    # file that leaves it out checkpoints every 20, as dapo_recipe does: a crash then loses at most
    # 20 steps, where 0 would lose the whole run.
    every_steps: int = 20
    # Save a checkpoint also at the end of the first step that ends this many minutes (wall clock) after
    # the last checkpoint, or the run's start (0: off): a preempted or killed run then loses at most about
    # this much training and a step, however long its steps (every_steps=20 of 30-minute steps: 10 hours).
    every_minutes: float = 0.0
    # A SIGTERM, SIGHUP or Ctrl-C during a training step (a scheduler's preemption, a time limit):
    # "finish_step" lets the step finish, checkpoints it (its periodic evaluation, when due, left to
    # the resume, which does it first) and then stops, so nothing trained is lost; a second signal
    # stops at once. Leave the scheduler's grace a step and a checkpoint (SLURM: --signal=B:TERM@<s>).
    # "stop": stop at once, the steps since the last checkpoint lost.
    on_signal: str = "finish_step"
    # Keep the newest K checkpoints (the final one is always written).
    keep_last: int = 2
    # Keep also the checkpoint with the highest value (higher is better; ties: the earlier) of this
    # held-out metric, as metrics.jsonl names it: eval/avg@32, eval/pass@32, eval/maj@32 (logged when
    # answers are extracted: the verifier's, or with it off a reward function's "pred"), eval/score_mean, eval/<data_source>/... of those (logged when
    # the held-out data has several sources), or eval/reward/<function>/<key>; out of keep_last's
    # rotation, linked as checkpoints/best (from_pretrained, dapo eval and checkpoint.resume read the
    # link). Every evaluated step is then checkpointed (step 0's baseline is not), so it needs periodic
    # evaluations (eval.every_steps > 0), and one more checkpoint's room on disk. Turned off, or set
    # to another metric, on a resume, or the evaluation changed (its problems, sampling or scoring;
    # said): the old best rotates out. null: off.
    keep_best: str | None = None
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
        finite_numbers(self, "checkpoint")
        check(self.every_steps >= 0, "checkpoint.every_steps must be >= 0")
        check(self.every_minutes >= 0, "checkpoint.every_minutes must be >= 0 (0: off)")
        check(self.keep_last >= 1, "checkpoint.keep_last must be >= 1")
        check(self.keep_best is None or BEST_METRIC.match(self.keep_best) is not None,
              f"checkpoint.keep_best={self.keep_best!r} is not a held-out metric that grows as the policy improves: "
              "eval/avg@K, eval/pass@K, eval/maj@K (K = eval.k), eval/score_mean, their eval/<data_source>/ forms "
              "or eval/reward/<function>/<key>; null keeps none")
        check(bool(self.resume.strip()), "checkpoint.resume is empty: use auto, never or a checkpoint directory")
        one_of("checkpoint.hf_export", self.hf_export, ("every", "final"))
        one_of("checkpoint.on_signal", self.on_signal, ("finish_step", "stop"))


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
    # score and shaped reward, group id, the group's outcome, advantage) to RUN_DIR/completions.jsonl,
    # TensorBoard text and a W&B table; 0 disables. Spread evenly over the step's first generation
    # round (Dynamic Sampling's later rounds are not sampled).
    completions_per_step: int = 4

    def __post_init__(self) -> None:
        finite_numbers(self, "logging")
        check(self.completions_per_step >= 0, "logging.completions_per_step must be >= 0 (0 disables)")


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
    # Times the policy ranks are started when one of them dies while they start (its process
    # crashed, was killed or ran out of memory; not an error it raised, such as a missing file,
    # which stops the run at once). They hold nothing yet, so a new start loses nothing but its
    # time; 1 starts them once.
    start_attempts: int = 2

    def __post_init__(self) -> None:
        finite_numbers(self, "resources")
        check(self.nnodes >= 1 and self.devices_per_node >= 1, "resources.nnodes and devices_per_node must be >= 1")
        check(self.cpus_per_rank > 0, "resources.cpus_per_rank must be > 0")
        check(self.start_attempts >= 1, "resources.start_attempts must be >= 1 (1: the ranks are started once)")
        check(self.ray_address is None or self.ray_address.strip() not in ("", "None", "none"),  # (see dapo.config.coerce)
              f"resources.ray_address={self.ray_address!r} is no Ray address: null (not the text None, nor an empty "
              "value) starts a local Ray; \"auto\" joins this machine's cluster")

    @property
    def world_size(self) -> int:
        return self.nnodes * self.devices_per_node
