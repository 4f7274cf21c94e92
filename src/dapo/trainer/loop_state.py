"""What the training loop keeps across steps, and its checkpoints: :class:`LoopState`, mixed into
:class:`dapo.trainer.loop.Trainer`, holds the loop's ``state_dict`` (step, next group id, the
sampler's cursor and surplus, RNG, the reward-failure streak, updates made), writes it with
the policy's state as a checkpoint, resumes from one, and checkpoints the trained steps when an
evaluation fails or is stopped (the final one, or a periodic one, which the resume then does).
Apart from :mod:`dapo.trainer.loop` so that the loop itself reads in one sitting."""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dapo.config.loading import config_to_dict, with_absolute_paths
from dapo.config.run import BEST_METRIC
from dapo.data.records import problems_digest
from dapo.errors import DamagedCheckpointError, NonFiniteError
from dapo.rewards.user_functions import RewardFunctionError
from dapo.trainer.checkpoint import (
    BEST_LINK,
    checkpoint_name,
    has_checkpoint,
    how_to_resume,
    link_best,
)
from dapo.trainer.dropout import config_dropout_restored
from dapo.trainer.ray_faults import signals_deferred
from dapo.trainer.resume import damaged_checkpoint_remedy
from dapo.trainer.rng import rng_state, set_rng_state
from dapo.trainer.run_dir import checkpoints_root
from dapo.trainer.sharded_checkpoint import is_sharded
from dapo.trainer.surplus import RENDERING_SETTINGS, SCORING_SETTINGS

# What a held-out metric's value depends on besides the policy (and the problems, digested): how the
# problems are rendered, sampled and scored. checkpoint.keep_best ranks afresh when a resume changes one.
_EVAL_SETTINGS = {
    "model": ("tokenizer_path",),
    "data": ("eval_prompt_key", "eval_answer_key", *RENDERING_SETTINGS),
    "eval": ("k", "temperature", "top_p", "top_k", "max_problems"),
    "rollout": ("max_response_length", "stop_strings"),
    "reward": SCORING_SETTINGS,
}
_EVAL_PROBLEMS = "the held-out problems"  # eval_settings' key of the problems' digest

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from dapo.config import DAPOConfig
    from dapo.trainer.loop import StepResult
    from dapo.trainer.policy import PolicyWorker
    from dapo.trainer.ray_policy import RayPolicyGroup
    from dapo.trainer.run_state import RunState
    from dapo.trainer.sampler import DynamicSampler
    from dapo.trainer.scoring import RewardFailureWatch
    from dapo.trainer.setup import RunSetup


class LoopState:
    """The :class:`~dapo.trainer.loop.Trainer` methods that save, restore and count the loop's
    state; the attributes they use are the trainer's (set in its ``__init__``)."""

    cfg: DAPOConfig
    state: RunState  # the run directory: checkpoints, logs, progress bar
    policy: PolicyWorker | RayPolicyGroup
    sampler: DynamicSampler
    reward_watch: RewardFailureWatch
    run: RunSetup
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    step: int
    next_group_id: int
    updates_made: int
    resumed_final: bool
    evaluation_owed: bool
    export_owed: bool
    # the step of this run directory's checkpoint the policy was last saved in or loaded from (in
    # this run's layout), which the final checkpoint of that step is built on
    checkpointed_at: int | None
    # time.monotonic() of the run's start or its last checkpoint (checkpoint.every_minutes's clock)
    last_checkpoint_time: float
    engine_version: int | None
    evaluate: Callable[[], dict[str, float]]

    # steps in a row whose every update was skipped as non-finite, and the step whose weights they
    # kept (_count_nonfinite)
    nonfinite_streak, nonfinite_since = 0, 0
    # checkpoint.keep_best's: the evaluated step with the highest value of its metric so far, and
    # that value (_rank_evaluated)
    best_checkpoint: tuple[int, float] | None = None

    def state_dict(self) -> dict[str, Any]:
        """The driver's part of a checkpoint: where the loop is, the sampler's cursor and surplus,
        and the RNG (the policy writes its own part: :meth:`PolicyWorker.save_checkpoint`)."""
        return {"step": self.step, "next_group_id": self.next_group_id, "sampler": self.sampler.state_dict(),
                "rng": rng_state(), "reward_failure_streak": dict(self.reward_watch.streak),
                "updates_made": self.updates_made, "nonfinite_streak": [self.nonfinite_streak, self.nonfinite_since],
                "best_checkpoint": self.best_checkpoint and [self.cfg.checkpoint.keep_best, *self.best_checkpoint],
                "best_eval_settings": self.best_checkpoint and self.eval_settings()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step, self.next_group_id = state["step"], state["next_group_id"]
        self.sampler.load_state_dict(state["sampler"])
        set_rng_state(state["rng"])
        self.reward_watch.streak = dict(state.get("reward_failure_streak", {}))  # older checkpoints: none
        self.nonfinite_streak, self.nonfinite_since = state.get("nonfinite_streak", [0, 0])
        metric, *best = state.get("best_checkpoint") or [None]
        # ranked by another metric (checkpoint.keep_best changed): not comparable, ranked afresh
        self.best_checkpoint = tuple(best) if metric is not None and metric == self.cfg.checkpoint.keep_best else None
        saved, now = state.get("best_eval_settings"), self.eval_settings()  # (older checkpoints: none, as now)
        if self.best_checkpoint and saved and (changed := sorted(key for key in now if saved.get(key) != now[key])):
            step, value = self.best_checkpoint
            warnings.warn(f"{', '.join(changed)} changed since this checkpoint: step {step}'s {metric} = {value:.4g} was "
                          "measured on another evaluation, so checkpoint.keep_best ranks afresh from the next one "
                          f"(step {step}'s checkpoint is no longer kept as the best)", stacklevel=2)
            self.best_checkpoint = None
        # (a checkpoint from before the count: its steps' planned updates less the skipped ones, at this
        # run's rate, not its own: approximate where the resume changed the updates per step)
        self.updates_made = state.get("updates_made", max(0, self.step * self.cfg.trainer.optimizer_steps_per_rollout
                                                          - state.get("updates_skipped", 0)))
        self.engine_version = None  # the engine may hold the initial weights: sync before its next use

    def eval_settings(self) -> dict[str, Any]:
        """What this run's held-out metrics depend on besides the policy (``_EVAL_SETTINGS``, the
        held-out problems' digest): a best value measured under others does not rank with its own."""
        config = with_absolute_paths(config_to_dict(self.cfg))
        if config["eval"]["top_k"] is None:  # (null: rollout.top_k's)
            config["eval"]["top_k"] = config["rollout"]["top_k"]
        held_out = self.run.data.eval
        return {**{f"{section}.{key}": config[section][key] for section, keys in _EVAL_SETTINGS.items() for key in keys},
                _EVAL_PROBLEMS: problems_digest(held_out.problems) if held_out is not None else None}

    def save_checkpoint(self, final: bool = False, evaluation_owed: bool = False, export_owed: bool = False) -> Path:
        """Checkpoint the run into ``output_dir/checkpoints/step-N`` (atomically); a multi-rank run
        writes the Hugging Face export into it unless ``checkpoint.hf_export`` keeps it for the final
        one, or it is owed (``export_owed``: :meth:`save_final_checkpoint` adds it next)."""
        hf_export = (final and not export_owed) or self.cfg.checkpoint.hf_export == "every"
        with config_dropout_restored(self.model):  # the rates the model came with, not training's zeros
            model_config_json = self.model.config.to_json_string()
        path = self.state.save(self.step, self._checkpoint_state(final, evaluation_owed, export_owed), self.policy,
                               self.tokenizer, model_config_json, hf_export, best_step=self._best_step())
        self.checkpointed_at, self.last_checkpoint_time = self.step, time.monotonic()
        return path

    def _checkpoint_state(self, final: bool, evaluation_owed: bool = False, export_owed: bool = False) -> dict[str, Any]:
        # "final": written after the final evaluation, so a run resumed from it has nothing left to do
        # but an owed export; "evaluation_owed": written when the step's periodic evaluation was
        # stopped, which a resume does first
        return {**self.state_dict(), "final": final, "evaluation_owed": evaluation_owed, "export_owed": export_owed}

    def _best_step(self) -> int | None:
        return self.best_checkpoint and self.best_checkpoint[0]

    def save_final_checkpoint(self) -> Path:
        """The final checkpoint, built on the files of this step's checkpoint when there is one (a
        periodic one just before the final evaluation): the weights are not written again, nor the
        ranks' shards, the whole AdamW state. Policy ranks publish it before its Hugging Face export
        where their periodic checkpoints hold none (``checkpoint.hf_export=final``; :meth:`add_export`), so that a
        run stopped in the export (131 GB at 32B float32) resumes from this step to write it alone,
        rather than from the last periodic checkpoint, training the steps since again."""
        # (one process: its checkpoint is its model, the export with it)
        owed = self.cfg.resources.world_size > 1 and self.cfg.checkpoint.hf_export != "every"
        if self.checkpointed_at == self.step:
            path = self.state.resave(self.step, self.policy, self._checkpoint_state(True, export_owed=owed),
                                     best_step=self._best_step())
        else:
            path = self.save_checkpoint(final=True, export_owed=owed)
        return self.add_export() if owed else path

    def add_export(self) -> Path:
        """The export the final checkpoint of this step owes (see :meth:`save_final_checkpoint`);
        one process that resumed it from the ranks' shards writes its own checkpoint of the step."""
        if self.cfg.resources.world_size > 1 and self.checkpointed_at == self.step:
            path = self.state.resave(self.step, self.policy, export=True, best_step=self._best_step())
        else:  # one process, or ranks that resumed another directory's checkpoint: a checkpoint of their own
            path = self.save_checkpoint(final=True)
        self.export_owed = False
        return path

    def resume(self) -> bool:
        """Restore policy and loop from ``checkpoint.resume``; True when a checkpoint was loaded."""
        try:
            found = self.state.find_checkpoint(self.model.config)
            if found is None:
                return False
            path, state = found
            self.policy.load_checkpoint(path, state["policy"])  # several ranks: each reads its own shard
        except DamagedCheckpointError as error:  # a copy cut short: which checkpoint, and what to do
            raise DamagedCheckpointError(f"{error}. {damaged_checkpoint_remedy(error.checkpoint, self.state.run_dir)}",
                                         error.checkpoint) from error
        self.load_state_dict(state)
        self.resumed_final = state.get("final", True)  # checkpoints from before the marker: as then
        self.evaluation_owed = state.get("evaluation_owed", False)
        self.export_owed = state.get("export_owed", False)
        # the final checkpoint may be built on it where it is this run directory's own, in this run's
        # layout (not another run's, nor one set aside, nor one process's for ranks or the reverse)
        own = path.resolve() == (checkpoints_root(self.state.run_dir) / checkpoint_name(self.step)).resolve()
        same_layout = is_sharded(state["policy"]) == (self.cfg.resources.world_size > 1)
        self.checkpointed_at = self.step if own and same_layout else None
        self.state.resumed_at(self.step, state.get("log_lines"))
        if self.best_checkpoint and not has_checkpoint(self.state.run_dir, self.best_checkpoint[0]):
            self.best_checkpoint = None  # another run's (its checkpoints are not here), or deleted since
        link_best(self.state.run_dir, self._best_step())
        print(f"resumed from {path} at step {self.step}")
        return True

    def record_start(self, evaluation: dict[str, float] | None) -> None:
        """Step 0 of a fresh run: what the data held (``data/*``) and the baseline evaluation."""
        self.state.log(0, {**self.run.data.counts(), **(evaluation or {})})

    def record_step(self, result: StepResult) -> None:
        """A finished step's metrics and completions logged, its rewards' failures and its skipped
        updates counted (either may stop the run: the rewards' first, the count taken either way)."""
        self.state.log(self.step, result.metrics)
        self.state.log_completions(self.step, result.completions)
        diverged = self._count_nonfinite(result.metrics)
        self.reward_watch.observe(result.reward_results)
        if diverged is not None:
            raise diverged

    def _count_nonfinite(self, metrics: dict[str, float]) -> NonFiniteError | None:
        """Count the steps in a row whose every optimizer update was skipped for a non-finite loss
        or gradient norm (a step with no update to try, no group with signal, neither extends the
        streak nor ends it); past trainer.max_nonfinite_steps, the error that stops the run: its
        weights no longer change. With trainer.autocast=fp16 only the updates skipped for a
        non-finite loss count: its loss scaling skips an update whose gradient overflows by design
        (and halves the scale), and such a step neither extends the streak nor ends it."""
        made, skipped = metrics.get("actor/updates", 0.0), metrics.get("actor/skipped_updates", 0.0)
        if self.cfg.trainer.autocast == "fp16":  # its loss scaling's skips not counted, a non-finite loss is
            skipped = metrics.get("actor/skipped_nonfinite_loss", 0.0)
        if made:
            self.nonfinite_streak = 0
        elif skipped:
            self.nonfinite_since = self.nonfinite_since if self.nonfinite_streak else self.step - 1
            self.nonfinite_streak += 1
        limit = self.cfg.trainer.max_nonfinite_steps
        if not limit or self.nonfinite_streak < limit:
            return None
        return NonFiniteError(
            f"every optimizer update of the last {self.nonfinite_streak} steps that tried one was skipped (the loss or "
            f"gradient norm was not finite: the warnings above say which; trainer.max_nonfinite_steps={limit}), so the "
            f"weights have not changed since step {self.nonfinite_since}. The policy has most likely diverged: resume "
            "from a checkpoint before the divergence (checkpoint.resume=PATH) with a lower trainer.lr or trainer.grad_clip")

    def _record_and_checkpoint(self, result: StepResult, evaluation_owed: bool = False, stopping: bool = False) -> None:
        """The step just trained recorded (:meth:`record_step`), then checkpointed when checkpoint.every_steps
        is due, ``evaluation_owed`` (its periodic evaluation was stopped, or not started) or
        ``stopping`` (a signal asked the run to stop after it). A reward scorer failing
        past reward.max_failing_steps (the record raises) stops the run with the step checkpointed
        whatever the schedule: it is complete, and a rerun, the scorer fixed, goes on after it
        rather than training the steps since the last checkpoint again."""
        evaluated = self._rank_evaluated(result.metrics)
        try:
            self.record_step(result)
        except RewardFunctionError as error:  # (a stopped evaluation is still owed by this checkpoint)
            path = self.save_checkpoint(evaluation_owed=evaluation_owed)
            raise RewardFunctionError(f"{error}. Step {self.step} is checkpointed ({path}): "
                                      f"{how_to_resume(self.cfg.checkpoint.resume)} after it") from error
        if evaluation_owed or stopping or evaluated or self._periodic_checkpoint_due():
            self.save_checkpoint(evaluation_owed=evaluation_owed)

    def _rank_evaluated(self, metrics: dict[str, float]) -> bool:
        """Whether checkpoint.keep_best ranks the step just done (it was evaluated: its checkpoint
        is then written whatever checkpoint.every_steps says), and if its value of the metric is the
        highest so far (ties: the earlier step), remember it as the best checkpoint's."""
        metric = self.cfg.checkpoint.keep_best
        if metric is None or not any(key.startswith("eval/") for key in metrics):
            return False
        value = metrics.get(metric)
        if value is None or not math.isfinite(value):
            if "keep_best" not in self.state.said:  # (a reward failing on every sample logs no @k)
                self.state.said.add("keep_best")
                logged = ", ".join(sorted(key for key in metrics if BEST_METRIC.match(key))) or "none of its kind"
                why = (" (maj@k votes on answers: with reward.verifier_weight=0, the \"pred\" of the reward function "
                       "correctness comes from, and it returned none)" if "maj@" in metric and not any(
                           "maj@" in key for key in metrics) and self.cfg.reward.verifier_weight == 0 else "")
                warnings.warn(f"checkpoint.keep_best={metric}: the evaluation of step {self.step} did not log a "
                              f"finite value of it (logged: {logged}){why}; steps without one are not ranked "
                              "(said once)", stacklevel=2)
        elif self.best_checkpoint is None or value > self.best_checkpoint[1]:
            self.best_checkpoint = (self.step, value)
        return True

    def best_note(self) -> str:
        """The best checkpoint, for the end-of-run summary ("" when checkpoint.keep_best is off)."""
        if self.best_checkpoint is None:
            return ""
        step, value = self.best_checkpoint
        return (f"best checkpoint ({self.cfg.checkpoint.keep_best} = {value:.4g}): step {step}, "
                f"{Path(self.cfg.output_dir) / 'checkpoints' / BEST_LINK}")

    @contextlib.contextmanager
    def stopping_after_step(self) -> Iterator[list[int]]:
        """checkpoint.on_signal=finish_step: a SIGTERM, SIGHUP or Ctrl-C inside is held (a second one
        is delivered at once); yields the signals held, which the block checkpoints the step for
        before leaving it delivers them. A stop inside a step otherwise loses it and the steps
        since the last checkpoint (up to checkpoint.every_steps - 1 of them)."""
        if self.cfg.checkpoint.on_signal != "finish_step":
            yield []
            return
        since = "the run's start" if self.checkpointed_at is None else f"step {self.checkpointed_at}'s checkpoint"
        with signals_deferred(notice=f"stopping after step {self.step + 1}, once it is checkpointed "
                                     f"(again: at once, losing the steps since {since})") as held:
            yield held

    def evaluation_due(self) -> bool:
        """Whether eval.every_steps evaluates the step just trained (the last is the final evaluation's)."""
        every = self.cfg.eval.every_steps
        return bool(every) and self.step % every == 0 and self.step < self.cfg.trainer.total_steps

    def _periodic_evaluation(self, result: StepResult) -> dict[str, float]:
        """The held-out evaluation of every eval.every_steps. Should it fail, or be stopped (Ctrl-C;
        SIGTERM in a long avg@32), the step just trained is recorded and checkpointed first, whether
        or not checkpoint.every_steps checkpoints it (as _final_evaluation does): every step is
        complete here, and a resume goes on after it rather than training the steps since the last
        checkpoint again; the checkpoint says the evaluation is owed, and the resume does it first
        (:meth:`_owed_evaluation`). Not where the failure left the policy ranks unusable (their
        checkpoint would never end)."""
        try:
            return self.evaluate()
        except BaseException:
            if not self.policy.broken:
                self._record_and_checkpoint(result, evaluation_owed=True)
            raise

    def _owed_evaluation(self) -> None:
        """The periodic evaluation of the step resumed at, which a stop or failure interrupted
        (:meth:`_periodic_evaluation`), logged as a second line of that step (as the final evaluation
        is); a stop in it again leaves it owed, by the same checkpoint. The final evaluation does it
        at the last step; a resume with eval.every_steps=0 (one stopped to skip a long evaluation) not."""
        owed = self.evaluation_owed and self.cfg.eval.every_steps and self.step < self.cfg.trainer.total_steps
        if owed and (metrics := self.evaluate()):
            self.state.log(self.step, metrics)
            # ranked when the checkpoint resumed from is this run's (not another run's, or one set aside)
            if has_checkpoint(self.state.run_dir, self.step) and self._rank_evaluated(metrics):
                link_best(self.state.run_dir, self._best_step())
        self.evaluation_owed = False

    def _final_evaluation(self) -> dict[str, float]:
        """The held-out evaluation after the last step (the final checkpoint follows it). Should it
        fail, or be stopped (Ctrl-C; SIGTERM, a scheduler's time limit landing in a long avg@32),
        the trained steps are checkpointed first when no periodic checkpoint holds them: a resume
        then has only the evaluation left to do (every step is complete here, unlike a stop inside
        one). Not where the failure left the policy ranks unusable (dead, or one blocked in a
        collective): their checkpoint would never end."""
        try:
            metrics = self.evaluate()
        except BaseException:
            written = self.checkpointed_at == self.step  # (a periodic checkpoint of this step, or the one resumed)
            if not written and self.policy.broken:
                warnings.warn(f"the final evaluation failed and left the policy ranks unusable ({self.policy.broken}): "
                              f"no checkpoint of step {self.step} could be written; a rerun resumes from the last "
                              "checkpoint", stacklevel=2)
            elif not written:
                self.save_checkpoint()
            raise
        self._rank_evaluated(metrics)  # the final checkpoint follows
        return metrics

    def _periodic_checkpoint_due(self) -> bool:
        """Whether checkpoint.every_steps, or checkpoint.every_minutes since the last checkpoint, checkpoints
        the step just done."""
        every, minutes = self.cfg.checkpoint.every_steps, self.cfg.checkpoint.every_minutes
        return (bool(every) and self.step % every == 0) or (
            minutes > 0 and time.monotonic() - self.last_checkpoint_time >= 60 * minutes)
