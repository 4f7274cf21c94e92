"""The DAPO training loop. Read ``Trainer.train`` and ``Trainer.step_once`` top to bottom.

One training step:
  1. Dynamic Sampling: draw prompts, sample G responses each, score them, shape overlong
     rewards; drop groups with constant correctness; refill with further rounds (at most
     ``max_gen_rounds``); keep surplus groups for the next step (capped).
  2. Group-relative advantages from the shaped rewards.
  3. Recompute old log-probs with the trainer's model (and the rollout/trainer mismatch).
  4. ``ppo_epochs`` passes of optimizer updates over mini-batches of ``mini_batch_prompts``
     groups, each normalised by its GLOBAL token count (DAPO's token-level loss); then the
     learning-rate schedule moves one training step.
  5. The rollout engine is brought up to the new weights (a no-op for engines that share the
     trainer's model; an in-memory reload for vLLM), so the next rollout samples pi_theta.

State: what carries from step to step is the loop's ``state_dict()`` (step, next group id, the
sampler's cursor and surplus groups, RNG) and the policy's (weights, AdamW, schedule); a step's
own data (timings, scored responses, completions for the logs) travels in a :class:`StepResult`
that ``step_once`` returns. Checkpoints are these two states, written by ``save_checkpoint``
(the loop's state, its checkpoints and resume: :class:`dapo.trainer.loop_state.LoopState`).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import time
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from dapo.algo import compute_advantages
from dapo.config import DAPOConfig
from dapo.config.loading import config_to_dict
from dapo.data.records import Problem
from dapo.preflight import check_run
from dapo.rewards import RewardScorer
from dapo.rewards.types import RewardResult
from dapo.rollout import RolloutEngine
from dapo.trainer.allocator import apply_process_settings
from dapo.trainer.batch import Sample, count_loss_tokens, response_lengths, split_mini_batches
from dapo.trainer.evaluate import evaluate_held_out
from dapo.trainer.loop_state import LoopState
from dapo.trainer.old_logprobs import assign_old_logprobs
from dapo.trainer.policy import PolicyWorker
from dapo.trainer.rng import seed_process
from dapo.trainer.run_state import RunState
from dapo.trainer.sampler import DynamicSampler, PromptStream
from dapo.trainer.scoring import (
    RewardFailureWatch,
    add_group_outcomes,
    check_filter_metric,
    completion_records,
    data_samples,
    filter_value,
    score_completions,
    shape_rewards,
)
from dapo.trainer.setup import (
    RunSetup,
    build_run,
    load_reference_model,
    loss_norm_const,
    make_sampling_params,
    rehearse_plugins_of,
    start_lines,
)
from dapo.trainer.step_metrics import rollout_metrics, update_metrics
from dapo.trainer.surplus import surplus_settings
from dapo.trainer.update_stats import LogprobPass, UpdateStats

if TYPE_CHECKING:
    from dapo.trainer.ray_policy import RayPolicyGroup


PHASES = ("generate", "reward", "old_logprob", "update", "weight_sync")  # time/<phase> of every step


@dataclass
class StepResult:
    """What one training step produced, handed from round to round and back to the caller as a
    value (nothing of it stays on the trainer): its metrics, the seconds of each phase, every
    scored response, and the few completions the logs show."""

    metrics: dict[str, float] = field(default_factory=dict)
    timer: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    reward_results: list[RewardResult] = field(default_factory=list)
    completions: list[dict[str, Any]] = field(default_factory=list)
    completion_samples: list[Sample] = field(default_factory=list)  # the completions' samples
    group_outcomes: dict[int, str] = field(default_factory=dict)  # SamplingReport.group_outcomes


@dataclass
class TrainSummary:
    steps: int  # the run's, earlier attempts' included
    eval_before: dict[str, float] | None
    eval_after: dict[str, float] | None
    run_dir: str
    seconds: float  # this attempt's
    resumed_at: int = 0  # the step this attempt started from (0: a fresh run)
    updates: int = -1  # optimizer updates this attempt applied (-1: not counted)
    skipped: int = 0  # ... and skipped for a non-finite loss or gradient norm
    best: str = ""  # the best checkpoint (checkpoint.keep_best), said in a line of the summary


class Trainer(LoopState):
    """The DAPO training loop; its state across steps, checkpoints and resume are
    :class:`~dapo.trainer.loop_state.LoopState`'s (``state_dict``, ``save_checkpoint``, ``resume``)."""

    def __init__(self, cfg: DAPOConfig) -> None:
        self.cfg = cfg
        check_run(cfg)  # files, device, extras, output_dir: every problem at once, before loading
        rehearse_plugins_of(cfg)  # a plugin that breaks its contract: now, not after the first rollout
        apply_process_settings(cfg.trainer.num_threads, cfg.trainer.keep_freed_memory)
        seed_process(cfg.trainer.seed)
        self.state = RunState(cfg)  # first: takes the run directory's lock, before any loading
        self.policy: PolicyWorker | RayPolicyGroup | None = None
        run: RunSetup | None = None
        scorer: RewardScorer | None = None
        try:
            check_filter_metric(cfg)
            self.scorer = scorer = RewardScorer(cfg.reward)  # a reward function that fails its smoke test raises
            start_ranks = None
            if cfg.resources.world_size > 1:  # policy ranks on Ray actors hold the weights and engines
                from dapo.trainer.ray_policy import RayPolicyGroup, RayRolloutEngine

                def start_ranks() -> RolloutEngine:
                    self.policy = RayPolicyGroup(cfg)
                    return RayRolloutEngine(self.policy)
            # model (here only its structure when the ranks hold it), tokenizer, data, encoder, engine
            # (the reward functions tried on the data's columns and first rows before an engine starts)
            self.run = run = build_run(cfg, start_ranks,
                                       check_data=lambda data: scorer.check_data(data_samples(cfg, data.train, data.eval)))
            print("\n".join(start_lines(cfg, run, scorer.labels)))
            if self.policy is None:
                # (a LoRA policy's reference is its own base model: PolicyWorker._ref_logprobs)
                needs_ref = cfg.algorithm.kl_coef > 0 and cfg.model.lora_rank == 0
                ref = load_reference_model(run.model_path, cfg.model, run.device) if needs_ref else None
                self.policy = PolicyWorker(
                    self.model,
                    cfg.algorithm,
                    cfg.trainer,
                    pad_token_id=self.tokenizer.pad_token_id,
                    temperature=cfg.rollout.temperature,
                    total_steps=cfg.trainer.total_steps,
                    norm_const=loss_norm_const(cfg),
                    ref_model=ref,
                )
        except BaseException:  # a run that cannot start leaves its directory, workers and ranks free
            for started in (scorer, run.engine if run is not None else None, self.policy):
                if started is not None:
                    started.close()
            self.state.close()
            raise
        self.reward_watch = RewardFailureWatch(self.scorer, cfg.reward.max_failing_steps, cfg.reward.max_failure_rate)
        self.updates_per_step = cfg.trainer.optimizer_steps_per_rollout
        per_round, key = ((cfg.trainer.gen_prompts_per_round, "gen_prompts_per_round") if cfg.algorithm.dynamic_sampling
                          else (cfg.trainer.prompts_per_step, "prompts_per_step"))
        if (problems := len(run.data.train.problems)) < per_round:
            warnings.warn(f"the training data holds {problems} problem(s), fewer than a generation round's {per_round} "
                          f"prompts (trainer.{key}): each round draws some of them more than once", stacklevel=2)
        self.sampler = DynamicSampler(
            PromptStream(run.data.train.problems, seed=cfg.trainer.seed, shuffle=cfg.data.shuffle),
            prompts_per_step=cfg.trainer.prompts_per_step,
            gen_prompts_per_round=cfg.trainer.gen_prompts_per_round,
            max_gen_rounds=cfg.algorithm.max_gen_rounds,
            dynamic_sampling=cfg.algorithm.dynamic_sampling,
            filter_metric=cfg.resolved_filter_metric(),
            keep_surplus=cfg.algorithm.keep_surplus_groups,
            max_surplus_fraction=cfg.algorithm.max_surplus_fraction,
            surplus_settings=surplus_settings(config_to_dict(cfg), cfg.resolved_filter_metric(), self.state.user_code),
        )
        # the loop's own state (state_dict): steps done, the next round's first group id
        self.step, self.next_group_id = 0, 0
        self.updates_made = 0  # optimizer updates the run's steps made (not an empty or skipped one), for the bar of a resume
        self.resumed_final = False  # the checkpoint resumed from is the run's final one (see train)
        self.evaluation_owed = False  # ... was written when its step's periodic evaluation stopped
        self.export_owed = False  # ... was published before the Hugging Face export it needs
        self.checkpointed_at: int | None = None  # the step of the policy's last checkpoint (saved or loaded)
        self.last_checkpoint_time = time.monotonic()  # checkpoint.every_minutes's clock starts with the run
        # policy.version the engine's weights are at; None: unknown (resumed), sync before use
        self.engine_version: int | None = self.policy.version

    @property
    def model(self) -> PreTrainedModel:
        return self.run.model

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        return self.run.tokenizer

    @property
    def engine(self) -> RolloutEngine:
        return self.run.engine

    @engine.setter
    def engine(self, engine: RolloutEngine) -> None:
        """Swap the rollout engine (any object with RolloutEngine's methods); it gets the trainer's
        weights before its first generation (one built from model.path holds the initial ones)."""
        self.run.engine = engine
        self.engine_version = None

    def sync_engine(self) -> float:
        """Bring the rollout engine to the trainer's current weights, if it is behind, else wake
        it (after a step without an update, a sleeping vLLM would wake inside the timed
        generation: its weights back from CPU and its KV cache reallocated); the seconds it took."""
        started = time.perf_counter()
        if self.engine_version == self.policy.version:
            self.engine.wake_up()
            return time.perf_counter() - started
        self.engine.sync_weights(self.model)
        self.engine_version = self.policy.version
        return time.perf_counter() - started

    def close(self) -> None:
        """Release the run directory, the reward workers, the rollout engine and the policy (its
        ranks, if any), each also when one before it raised (a second Ctrl-C in wandb.finish must not
        leave the ranks holding their GPUs)."""
        with contextlib.ExitStack() as closing:  # run last pushed first: the run directory, ..., the policy
            for close in (self.policy.close, self.engine.close, self.scorer.close, self.state.close):
                closing.callback(close)

    # ---------------------------------------------------------------- generation + scoring
    def generate_round(self, record: StepResult, problems: list[Problem], round_index: int) -> list[Sample]:
        """Sample G responses per problem, score them and shape their rewards; the round's
        timings, results and (first round) completions go into ``record``."""
        encoded = self.run.encoder.encode(problems)
        seed = self.cfg.trainer.seed * 1_000_003 + self.step * 1_009 + round_index
        record.timer["weight_sync"] += self.sync_engine()
        started = time.perf_counter()
        generation = self.engine.generate(encoded.token_ids, make_sampling_params(self.cfg, self.run.stop_token_ids, seed))
        record.timer["generate"] += time.perf_counter() - started
        started = time.perf_counter()
        scored = score_completions(self.tokenizer, self.scorer, problems, generation, self.cfg.rollout.n,
                                   encoded.token_ids)
        results = scored.results
        record.timer["reward"] += time.perf_counter() - started
        self.state.warn_if_answers_unread([problems[c.prompt_index].data_source for c in generation.completions],
                                        scored.texts, results)
        samples = [
            Sample(
                group_id=self.next_group_id + c.prompt_index,
                uid=problems[c.prompt_index].uid,
                prompt_ids=encoded.token_ids[c.prompt_index],
                response_ids=c.token_ids,
                rollout_logprobs=c.logprobs,
                truncated=c.finish_reason == "length",
                score=result.score,
                acc=result.acc,
                policy_version=self.step,
                filter_value=filter_value(result, self.sampler.filter_metric),
            )
            for c, result in zip(generation.completions, results)
        ]
        self.next_group_id += len(problems)
        record.reward_results.extend(results)
        shape_rewards(samples, self.cfg)
        if round_index == 0:
            record.completions, record.completion_samples = completion_records(
                self.tokenizer, problems, encoded.token_ids, generation, scored, samples,
                self.cfg.logging.completions_per_step)
        return samples

    # ---------------------------------------------------------------------- the step
    def step_once(self) -> StepResult:
        """One DAPO training step; returns its metrics and what it scored."""
        record = StepResult()
        started = time.perf_counter()
        self.state.bar_step(self.step + 1)
        self.model.eval()
        batch, report = self.sampler.next_batch(functools.partial(self.generate_round, record), self.step)
        record.group_outcomes = report.group_outcomes
        self.engine.sleep()  # vLLM colocated: its memory to the update until the weight sync wakes it

        metrics = record.metrics
        metrics.update(rollout_metrics(report, batch, record.reward_results))
        if not batch:
            warnings.warn(f"no group with mixed outcomes this step{_failures_note(record.reward_results)}: "
                          "skipping the update", stacklevel=2)
            self.state.bar_skip(self.updates_per_step)
            return self._finish_step(record, [], started)

        group_ids = torch.tensor([s.group_id for s in batch])
        rewards = torch.tensor([s.reward for s in batch], dtype=torch.float64)
        advantages = compute_advantages(self.cfg.algorithm.advantage, rewards, group_ids,
                                        eps=self.cfg.algorithm.advantage_eps, response_lengths=response_lengths(batch))
        for sample, advantage in zip(batch, advantages.tolist()):
            sample.advantage = advantage

        # pi_old (see old_logprobs.py); the surplus the next step trains on gets this policy's
        from_rollout = self.cfg.algorithm.old_logprobs == "rollout"
        on_policy = self.updates_per_step == 1 and not from_rollout
        t0 = time.perf_counter()
        carry = [] if from_rollout else self.sampler.to_carry(self.step + 1)
        old = assign_old_logprobs(batch, carry, self.policy, from_rollout, on_policy)
        if not from_rollout:
            record.timer["old_logprob"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        stats: list[UpdateStats] = []
        mini_batches = split_mini_batches(batch, self.cfg.trainer.mini_batch_prompts)
        for _ in range(self.cfg.trainer.ppo_epochs):
            for mini_batch in mini_batches:
                num_tokens, num_seqs = count_loss_tokens(mini_batch)
                # without an old-log-prob pass, the first update (still on pi_old) reports
                # entropy and engine/trainer mismatch for its mini-batch, and so do the next ones
                # while none has stepped (one with no loss token has none; a skipped one drops its own)
                diagnose = (on_policy or from_rollout) and all(s.empty or s.skipped for s in stats)
                stats.append(self.policy.update(mini_batch, num_tokens, num_seqs, on_policy, diagnose))
                if stats[-1].skipped or stats[-1].empty:  # no update made (actor/updates): off the bar's total
                    self.state.bar_skip(1)
                else:
                    self.updates_made += 1
                    self.state.bar_advance(1)
        record.timer["update"] = time.perf_counter() - t0
        self.state.bar_skip(self.updates_per_step - len(stats))
        record.timer["weight_sync"] += self.sync_engine()
        diagnostics = old if old is not None else LogprobPass.sum_of([s.diagnostics for s in stats if s.diagnostics is not None])
        if diagnostics.tokens:  # none when every trained response was carried over
            metrics["actor/entropy"] = diagnostics.entropy_sum / diagnostics.tokens
        if diagnostics.mismatch_tokens:  # none when every measured response was carried over
            metrics["mismatch/rollout_trainer_logprob_diff"] = diagnostics.mismatch_abs_sum / diagnostics.mismatch_tokens
            metrics["mismatch/rollout_trainer_kl"] = diagnostics.mismatch_kl_sum / diagnostics.mismatch_tokens
        return self._finish_step(record, stats, started, batch)

    def _finish_step(self, record: StepResult, stats: list[UpdateStats], started: float,
                     batch: list[Sample] | tuple = ()) -> StepResult:
        metrics, timer = record.metrics, record.timer
        add_group_outcomes(record.completions, record.completion_samples, record.group_outcomes)
        metrics.update(update_metrics(stats, batch, self.policy.lr))
        self.policy.end_step()
        step_seconds = time.perf_counter() - started
        metrics.update({f"time/{k}": v for k, v in timer.items()})
        metrics["time/step"] = step_seconds
        metrics["perf/gen_tokens_per_s"] = metrics["rollout/response_tokens"] / max(timer["generate"], 1e-9)
        metrics["perf/tokens_per_s"] = sum(s.num_tokens for s in batch) / max(step_seconds, 1e-9)
        self.step += 1
        return record

    # --------------------------------------------------------------------- evaluation
    def evaluate(self) -> dict[str, float]:
        if self.run.data.eval is None:
            return {}
        self.sync_engine()
        with self.state.eval_progress() as on_progress:
            # a reward failing on every sample: warned, its counts logged, no @k (see evaluate_held_out)
            return evaluate_held_out(self.cfg, self.run, self.scorer, on_progress, said=self.state.said).metrics

    # ---------------------------------------------------------------------- the loop
    def train(self) -> TrainSummary:
        cfg, started = self.cfg, time.perf_counter()
        eval_before = eval_after = None
        try:
            resumed = self.resume()
            self.state.open_dashboards()
            first_step, first_version, first_skipped = self.step, self.policy.version, self.policy.num_nonfinite_skipped
            # A periodic checkpoint at the last step is not the end: a run killed during the final
            # evaluation or export resumes from it and does them.
            finished_before_start = resumed and self.step >= cfg.trainer.total_steps and self.resumed_final
            if self.step > cfg.trainer.total_steps or finished_before_start:
                where = "past" if self.step > cfg.trainer.total_steps else "from a final checkpoint, at"
                warnings.warn(f"the run resumed at step {self.step}, {where} trainer.total_steps={cfg.trainer.total_steps}: "
                              "nothing to train; raise total_steps to go on", stacklevel=2)
            if self.export_owed:  # stopped in the final checkpoint's export: the one thing left to do
                print(f"writing the Hugging Face export the final checkpoint of step {self.step} owes")
                self.add_export()
            if not resumed:  # step 0 of a fresh run: what the data held, and the baseline
                eval_before = self.evaluate() if cfg.eval.before_training else None
                self.record_start(eval_before)
            with self.state.progress(self.step, self.updates_made):
                self._owed_evaluation()
                while self.step < cfg.trainer.total_steps:
                    with self.stopping_after_step() as stop_signals:
                        result = self.step_once()
                        self.state.warn_if_truncating(result.metrics)
                        if stop_signals:  # the step is whole: checkpointed, then leaving the block stops the run
                            self._record_and_checkpoint(result, evaluation_owed=self.evaluation_due(), stopping=True)
                            continue
                    if self.evaluation_due():
                        result.metrics.update(self._periodic_evaluation(result))
                    self._record_and_checkpoint(result)
            if self.step == cfg.trainer.total_steps and not finished_before_start:
                eval_after = self._final_evaluation()
                if eval_after:  # no held-out data: no row holding the step alone
                    self.state.log(self.step, eval_after)
                self.save_final_checkpoint()
        finally:
            self.close()
        return TrainSummary(self.step, eval_before, eval_after, cfg.output_dir, time.perf_counter() - started,
                            resumed_at=first_step, updates=self.policy.version - first_version,
                            skipped=self.policy.num_nonfinite_skipped - first_skipped, best=self.best_note())


def _failures_note(results: list[RewardResult]) -> str:
    """Why a step's groups may have had no signal, where scorers failed: the responses whose verdict
    (acc) a failure left unmeasured, and what failed how often (a failing bonus function leaves the
    verdicts, and the filter, as they are)."""
    failed = collections.Counter(label for result in results for label in result.failed)
    if not failed:
        return ""
    unmeasured = sum(result.unmeasured_by is not None for result in results)
    names = ", ".join(f"{label} on {count}" for label, count in failed.most_common(3))
    return (f": {unmeasured} of {len(results)} responses could not be judged (rollout/reward_errors, "
            f"rollout/reward_timeouts; failed: {names})" if unmeasured else
            f" (every response judged; bonus scorers failed: {names} of {len(results)} responses)")
