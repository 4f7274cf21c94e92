"""The run directory around the loop: resolved config, metrics, progress bar, checkpoints, resume."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from dapo.config import DAPOConfig
from dapo.config.loading import config_to_dict
from dapo.trainer.checkpoint import (
    begin_checkpoint,
    layout_mismatch,
    load_trainer_state,
    publish_checkpoint,
    resolve_resume,
    rng_state,
    set_rng_state,
)
from dapo.trainer.evaluate import ProgressCallback
from dapo.trainer.metrics import MetricsLogger
from dapo.trainer.run_dir import (
    RunDirError,
    RunDirLock,
    checkpoint_mismatch,
    remove_stale_checkpoint_temps,
)

if TYPE_CHECKING:
    from dapo.trainer.loop import Trainer

TRUNCATION_WARNING_RATE = 0.5
BAR_COLUMNS = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[unit]}"),
               TimeElapsedColumn())


@contextlib.contextmanager
def problem_progress(progress: Progress | None, enabled: bool = True) -> Iterator[ProgressCallback | None]:
    """A bar over evaluation's problems: a row of ``progress`` when given (training's bar), else a
    transient bar of its own. Yields the callback ``evaluate`` reports to (None when disabled)."""
    if not enabled:
        yield None
        return
    with contextlib.ExitStack() as stack:
        if progress is None:
            progress = stack.enter_context(Progress(*BAR_COLUMNS, transient=True))
        task = progress.add_task("evaluating", total=None, unit="problems")

        def on_progress(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        try:
            yield on_progress
        finally:
            progress.remove_task(task)


class RunState:
    def __init__(self, cfg: DAPOConfig, trainer: Trainer) -> None:
        self.cfg, self.trainer = cfg, trainer
        self.run_dir = Path(cfg.output_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.lock = RunDirLock(self.run_dir)  # before anything is written: one run per directory
        remove_stale_checkpoint_temps(self.run_dir)
        self.config_yaml = yaml.safe_dump(config_to_dict(cfg), sort_keys=False)
        (self.run_dir / "config.yaml").write_text(self.config_yaml)
        self.logger = MetricsLogger(
            self.run_dir, cfg.logging.tensorboard, cfg.logging.wandb, cfg.logging.wandb_project, config_to_dict(cfg)
        )
        self._progress: Progress | None = None
        self._task: Any = None
        self._last_step_note = ""  # the bar's tail: the last finished step's accuracy and rounds
        self.finished_before_start = False

    # ------------------------------------------------------------------ checkpoints
    def save(self) -> Path:
        """Checkpoint the run (layout: :mod:`dapo.trainer.checkpoint`): the policy writes the model
        (one process: its Hugging Face directory; several ranks: their shards and rank 0's export)
        into the checkpoint being built; then the driver adds its own state (step, sampler, RNG,
        counters) and publishes it."""
        t = self.trainer
        tmp = begin_checkpoint(self.run_dir, t.step)
        state = {
            "step": t.step,
            "next_group_id": t.next_group_id,
            "policy": t.policy.save_checkpoint(tmp, t.tokenizer),
            "sampler": t.sampler.state_dict(),
            "rng": rng_state(),
        }
        return publish_checkpoint(self.run_dir, t.step, tmp, state, self.config_yaml, self.cfg.checkpoint.keep_last)

    def resume(self) -> bool:
        """Restore everything from ``checkpoint.resume``; True when a checkpoint was loaded."""
        path = resolve_resume(self.cfg.checkpoint.resume, self.run_dir)
        if path is None:
            self.logger.truncate_after(-1)  # a fresh start: drop metrics of an earlier attempt
            return False
        t = self.trainer
        mismatch = checkpoint_mismatch(path, t.model.config, config_to_dict(self.cfg), self.cfg.checkpoint.resume == "auto")
        state = load_trainer_state(path)
        mismatch = mismatch or layout_mismatch(state["policy"], self.cfg.resources.world_size)
        if mismatch:
            raise RunDirError(
                f"cannot resume from {path}: {mismatch}. Give this run a new output_dir, or set "
                "checkpoint.resume=never to start over in this one"
            )
        t.policy.load_checkpoint(path, state["policy"])  # several ranks: each reads its own shard
        t.step, t.next_group_id = state["step"], state["next_group_id"]
        t.sampler.load_state_dict(state["sampler"])
        set_rng_state(state["rng"])
        t.engine_version = None  # the engine may hold the initial weights: sync before its next use
        self.logger.truncate_after(t.step)
        self.finished_before_start = t.step >= self.cfg.trainer.total_steps
        print(f"resumed from {path} at step {t.step}")
        return True

    # ------------------------------------------------------------------ logging
    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.logger.log(step, metrics)
        if "rollout/acc" in metrics:
            self._last_step_note = (f" | step {step} acc {metrics['rollout/acc']:.2f} "
                                    f"rounds {int(metrics.get('sampling/gen_rounds', 0))}")

    def log_completions(self, step: int, records: list[dict[str, Any]]) -> None:
        self.logger.log_completions(step, records)

    def warn_if_truncating(self, metrics: dict[str, float]) -> None:
        rate = metrics.get("rollout/truncation_rate", 0.0)
        if rate > TRUNCATION_WARNING_RATE:
            warnings.warn(
                f"{rate:.0%} of responses hit rollout.max_response_length={self.cfg.rollout.max_response_length}: "
                "truncated responses rarely contain a final answer, so rewards are mostly -1 (or masked by "
                "overlong filtering) and learning stalls. Raise rollout.max_response_length or shorten the task.",
                stacklevel=2,
            )

    # ------------------------------------------------------------------ progress bar
    @contextlib.contextmanager
    def progress(self) -> Iterator[None]:
        """A bar over optimizer updates; steps that make fewer updates shrink its total."""
        if not self.cfg.logging.progress:
            yield
            return
        total = self.cfg.trainer.total_steps * self.trainer.updates_per_step
        done = self.trainer.step * self.trainer.updates_per_step
        with Progress(*BAR_COLUMNS, TimeRemainingColumn()) as progress:
            self._progress = progress
            self._task = progress.add_task("training", total=total, completed=done, unit="updates")
            try:
                yield
            finally:
                self._progress = None

    def bar_step(self, step: int) -> None:
        """Label the bar with the step now running (and the last one's accuracy)."""
        if self._progress is not None:
            description = f"step {step}/{self.cfg.trainer.total_steps}{self._last_step_note}"
            self._progress.update(self._task, description=description)

    @contextlib.contextmanager
    def eval_progress(self) -> Iterator[ProgressCallback | None]:
        """Evaluation's progress: a row under the training bar, or a bar of its own before training."""
        with problem_progress(self._progress, self.cfg.logging.progress) as on_progress:
            yield on_progress

    def bar_advance(self, updates: int) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, updates)

    def bar_skip(self, updates: int) -> None:
        """Updates a step did not make (too few groups): remove them from the bar's total."""
        if self._progress is not None and updates > 0:
            task = next(t for t in self._progress.tasks if t.id == self._task)
            self._progress.update(self._task, total=(task.total or 0) - updates)

    def close(self) -> None:
        self.logger.close()
        self.lock.release()
