"""The run directory around the loop: resolved config, metrics, progress bar, checkpoints, resume.

It holds no reference to the trainer: the loop hands it values (its ``state_dict()``, the policy
that writes its own part of a checkpoint, the step), and takes back what a checkpoint held.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import math
import os
import re
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from dapo.config import DAPOConfig
from dapo.config.loading import (
    absolute_local_path,
    config_to_dict,
    config_yaml,
    user_code_locations,
    with_absolute_paths,
)
from dapo.durable import write_atomically
from dapo.rewards.types import RewardResult
from dapo.trainer import optim
from dapo.trainer.base_weights import weights_fingerprint, write_base_weights
from dapo.trainer.checkpoint import (
    abandoned_folder,
    begin_checkpoint,
    checkpoint_name,
    link_checkpoint,
    load_trainer_state,
    publish_checkpoint,
    set_aside_checkpoints_after,
)
from dapo.trainer.eval_warnings import unread_answers_note
from dapo.trainer.evaluate import ProgressCallback
from dapo.trainer.metrics import MetricsLogger
from dapo.trainer.ray_faults import signals_deferred
from dapo.trainer.resume import (
    checkpoint_record,
    is_own_checkpoint,
    is_set_aside,
    named_path,
    resolve_resume,
)
from dapo.trainer.run_dir import (
    MODEL_CONFIG_FILE,
    SHARDED_DIR,
    STATE_FILE,
    RunDirError,
    RunDirLock,
    changed_settings,
    checkpoint_mismatch,
    checkpoints_root,
    remove_stale_checkpoint_temps,
    saved_section,
)
from dapo.trainer.sharded_checkpoint import is_sharded
from dapo.user_code import edited_sources, source_digests

TRUNCATION_WARNING_RATE = 0.5
UNREAD_ANSWERS_TRAIN = "unread answers (training)"  # the kind of note warn_if_answers_unread says once a run
BAR_COLUMNS = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[unit]}"),
               TimeElapsedColumn())


class CheckpointingPolicy(Protocol):
    """What a checkpoint needs of the policy (PolicyWorker, RayPolicyGroup)."""

    def save_checkpoint(self, directory: Path, tokenizer: Any, hf_export: bool = True) -> dict[str, Any]: ...


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


def os_error_behind(error: BaseException) -> OSError | None:
    """The operating system's error behind a failed write, or None: ``error`` itself, the one it
    was raised while handling (torch.save's zip writer, stopped by a full disk, raises a
    RuntimeError of its own over the OSError), or the one a safetensors error names ("I/O error:
    No space left on device (os error 28)": it keeps no OSError)."""
    for _ in range(8):  # a short chain
        if isinstance(error, OSError):
            return error
        if (found := re.search(r"\(os error (\d+)\)", str(error))) is not None:
            code = int(found.group(1))
            return OSError(code, os.strerror(code)) if code in errno.errorcode else None
        if (error := error.__cause__ or error.__context__) is None:  # type: ignore[assignment]
            return None
    return None


class RunState:
    def __init__(self, cfg: DAPOConfig) -> None:
        self.cfg = cfg
        self.run_dir = Path(cfg.output_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.lock = RunDirLock(self.run_dir)  # before anything is written: one run per directory
        remove_stale_checkpoint_temps(self.run_dir)
        # with absolute paths: the saved config means the same files from any directory
        absolute_config = with_absolute_paths(config_to_dict(cfg))
        self.config_yaml = config_yaml(absolute_config)
        # digests of the run's reward-function and plugin sources at its start: a resume says
        # which changed since a checkpoint, which the config alone cannot show
        self.user_code = source_digests(user_code_locations(absolute_config))
        self._config_written = False
        # the checkpoint of another run this run started from (checkpoint.resume=PATH), if any:
        # recorded in every checkpoint, so that rerunning the command goes on (resolve_resume)
        self.started_from: str | None = None
        # the checkpoint of this run it went back to (checkpoint.resume=PATH of its own), if any:
        # recorded likewise, so that rerunning that command (a requeued job) does not go back again;
        # relative to the run directory (resume.checkpoint_record), which may be moved or copied
        self.went_back_to: str | None = None
        self._resuming_another_lineage = False  # see find_checkpoint
        self.logger = MetricsLogger(
            self.run_dir, cfg.logging.tensorboard, cfg.logging.wandb, cfg.logging.wandb_project, config_to_dict(cfg)
        )
        self._progress: Progress | None = None
        self._task: Any = None
        self._last_step_note = ""  # the bar's tail: the last finished step's accuracy and rounds
        self._warned_truncation = False
        # kinds of note said once a run, the evaluations' among them (evaluate.evaluate's ``said``)
        self.said: set[str] = set()

    # ------------------------------------------------------------------ checkpoints
    def save(self, step: int, loop_state: dict[str, Any], policy: CheckpointingPolicy, tokenizer: Any,
             model_config_json: str, hf_export: bool = True, best_step: int | None = None) -> Path:
        """Checkpoint step ``step`` (layout: :mod:`dapo.trainer.checkpoint`): the policy writes the
        model (one process: its Hugging Face directory; several ranks: their shards and, with
        ``hf_export``, rank 0's export) into the checkpoint being built; ``loop_state`` (the
        trainer's ``state_dict()``) and what the policy returned go into ``trainer_state.pt``; then
        it is published. Without the export, ``model_config_json`` goes into ``model_config.json``, so
        that a resume can still check the checkpoint is of this run's model. Checkpoint ``best_step``
        (checkpoint.keep_best) is kept out of checkpoint.keep_last's rotation."""
        with self._building(step) as tmp:
            self.logger.sync()  # the lines it counts are on disk before it is
            state = self._driver_state(loop_state, policy.save_checkpoint(tmp, tokenizer, hf_export))
            if not (tmp / "config.json").is_file():
                (tmp / MODEL_CONFIG_FILE).write_text(model_config_json)
            if (base := self._base_weights) is not None:
                write_base_weights(tmp, *base)
            return publish_checkpoint(self.run_dir, step, tmp, state, self.config_yaml, self.cfg.checkpoint.keep_last,
                                      best_step)

    def resave(self, step: int, policy: Any, loop_state: dict[str, Any] | None = None, export: bool = False,
               best_step: int | None = None) -> Path:
        """Checkpoint ``step`` again, built on hard links to its published files (the weights, policy
        ranks' shards: not written again), then published in its place: with ``loop_state``, the
        loop's state now (the final flag, the lines logged since, the generators: every rank's written
        anew, as an evaluation since drew from them; one process's AdamW state, which its
        ``trainer_state.pt`` holds, as it is); with ``export``, rank 0's Hugging Face export
        added (and ``export_owed`` cleared). A run stopped in it keeps the checkpoint as it was."""
        source = checkpoints_root(self.run_dir) / checkpoint_name(step)
        # the ranks' state is small: read whole (nothing left mapped from a file about to be replaced);
        # one process's holds its AdamW state, which is not read: the policy's own is written
        sharded = is_sharded(load_trainer_state(source, peek=True)["policy"])
        state = load_trainer_state(source) if sharded else {}
        leave_out = {STATE_FILE, "dapo_config.yaml"} | ({MODEL_CONFIG_FILE} if export else set())
        if loop_state is not None:  # (written anew: never through a link, which would change the published file)
            leave_out.add(f"{SHARDED_DIR}/rng-rank*.pt")
        with self._building(step) as tmp:
            link_checkpoint(source, tmp, leave_out)
            if loop_state is not None:
                self.logger.sync()
                if sharded:
                    policy.save_rng(tmp)
                    state = self._driver_state(loop_state, state["policy"])
                else:  # one process: its optimizer state as it is now, its generators in loop_state's
                    state = self._driver_state(loop_state, policy.state_dict())
            if export:
                policy.export_checkpoint(tmp)
                state = {**state, "export_owed": False}
            return publish_checkpoint(self.run_dir, step, tmp, state, self.config_yaml, self.cfg.checkpoint.keep_last,
                                      best_step)

    @functools.cached_property  # read once, at the first checkpoint
    def _base_weights(self) -> tuple[str, str] | None:
        """(model.path, the fingerprint of its weights) of a base model in a local directory, which
        each checkpoint records (:mod:`dapo.trainer.base_weights`); None for a built-in one."""
        path = absolute_local_path(self.cfg.model.path)
        fingerprint = weights_fingerprint(path) if Path(path).is_dir() else None
        return (path, fingerprint) if fingerprint is not None else None

    def _driver_state(self, loop_state: dict[str, Any], policy_state: dict[str, Any]) -> dict[str, Any]:
        """``trainer_state.pt``: the loop's state, the policy's part, and the run directory's."""
        return {**loop_state, "policy": policy_state, "log_lines": self.logger.line_counts(),
                "started_from": self.started_from, "went_back_to": self.went_back_to, "user_code": self.user_code}

    @contextlib.contextmanager
    def _building(self, step: int) -> Iterator[Path]:
        """A temporary directory to build checkpoint ``step`` in, removed with what a failed write
        left (a full disk: the room it took) now, not at the next start; the OSError behind a
        failure (a rank's own too, as it raised it; the directory's own creation's) says which
        checkpoint was not written. A SIGTERM, SIGINT or SIGHUP meanwhile (a scheduler's preemption)
        stops the run once the checkpoint is published, not with it half written (a second: at once,
        the directory removed)."""
        tmp: Path | None = None
        with signals_deferred(notice=f"stopping once checkpoint step {step} is written (again: at once, without it)"):
            try:
                tmp = begin_checkpoint(self.run_dir, step)
                yield tmp
            except BaseException as error:  # (a second stop signal too: what it left goes with it)
                if tmp is not None:
                    shutil.rmtree(tmp, ignore_errors=True)
                if isinstance(error, Exception) and (cause := os_error_behind(error)) is not None:
                    raise OSError(cause.errno, f"{cause.strerror} (checkpoint step {step} not written; the earlier "
                                  "ones are kept)", cause.filename or str(checkpoints_root(self.run_dir))) from error
                raise

    def _resumable_when_named(self, path: Path, model_config: Any) -> bool:
        """Whether ``checkpoint.resume=<path>`` would resume what a rerun refused: a named checkpoint
        is checked against the model only, not the run's data and settings (a moved dataset)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (its note on another model.path is for a named resume)
            return checkpoint_mismatch(path, model_config, config_to_dict(self.cfg), automatic=False) is None

    def find_checkpoint(self, model_config: Any) -> tuple[Path, dict[str, Any]] | None:
        """The checkpoint ``checkpoint.resume`` names and its ``trainer_state.pt``, after checking
        it belongs to this run (model, settings); None for a fresh start. What an
        earlier attempt wrote after the point this run starts from is dropped (metrics) or set
        aside (checkpoints: :func:`set_aside_checkpoints_after`) once it has loaded
        (:meth:`resumed_at`)."""
        point = resolve_resume(self.cfg.checkpoint.resume, self.run_dir)
        if point is None:  # checkpoint.resume=never in a used directory (in resumed_at's order)
            self._set_aside_logs(set_aside_checkpoints_after(self.run_dir, -1), "checkpoint.resume=never")
            self.logger.truncate_after(-1)
            self._write_config()
            return None
        path, own = point.path, is_own_checkpoint(point.path, self.run_dir)
        # another run's checkpoint, or one set aside (the logs have since been rewritten by the
        # attempt that went back): nothing in this directory continues it
        self._resuming_another_lineage = not own or is_set_aside(path, self.run_dir)
        # the run's settings are checked when the run resumes itself (auto, or a rerun redirected)
        mismatch = checkpoint_mismatch(path, model_config, config_to_dict(self.cfg), point.automatic)
        state = load_trainer_state(path, complete=True)
        self.started_from = state.get("started_from") if own else str(named_path(path))
        if not own:
            self.went_back_to = None
        else:
            self.went_back_to = (state.get("went_back_to") if point.automatic
                                 else checkpoint_record(path, self.run_dir))
        if mismatch:
            # found by itself in output_dir, or named (checkpoint.resume=PATH): another output_dir helps only the first
            remedy = ("Give this run a new output_dir, or set checkpoint.resume=never to start over in this one"
                      if point.automatic else "Name another checkpoint in checkpoint.resume, or set "
                      "checkpoint.resume=never to start this run from model.path")
            if point.automatic and self._resumable_when_named(path, model_config):
                remedy += f", or name it to go on from it with this run's settings (checkpoint.resume={path})"
            raise RunDirError(f"cannot resume from {path}: {mismatch}. {remedy}")
        if changes := changed_settings(path, with_absolute_paths(config_to_dict(self.cfg))):  # as checkpoints save it
            more = f" and {len(changes) - 12} more" if len(changes) > 12 else ""
            # the one report of them: the policy's optimizer, loaded next, says nothing of its own
            warnings.warn(f"resuming {path.name} with other settings than it was saved with, which apply from the "
                          f"resumed step: {'; '.join(changes[:12])}{more}"
                          f"{optim.schedule_change(saved_section(path, 'trainer'), self.cfg.trainer, state['step'])}",
                          stacklevel=2)
        if edited := edited_sources(state.get("user_code") or {}, self.user_code):  # (older checkpoints: none)
            warnings.warn(f"resuming {path.name} with other code than it was saved with: the source of "
                          f"{', '.join(edited)} changed since, and the resumed run runs it as it is now", stacklevel=2)
        return path, state

    def _set_aside_logs(self, folder: Path | None, why: str) -> None:
        """Before the logs lose an attempt this run does not continue (``why``: checkpoint.resume=never
        starts them over; going back, or to another attempt's checkpoint, cuts them back), the whole of
        metrics.jsonl and completions.jsonl is copied beside its checkpoints (``folder``, or a new
        abandoned-* folder where it had none), and said."""
        logs = [path for path in (self.logger.path, self.logger.completions_path) if path.is_file() and path.stat().st_size]
        if not logs:
            return
        folder = folder or abandoned_folder(self.run_dir)
        for path in logs:
            shutil.copy2(path, folder / path.name)
        warnings.warn(f"{why}: the lines of {' and '.join(path.name for path in logs)} this run does not continue "
                      f"are dropped; the files as they were are copied to {folder}", stacklevel=3)

    def _write_config(self) -> None:
        """The run's resolved config as ``config.yaml``, once it is settled that this config runs
        here (the resume decision, or the first metrics of a driver that steps without one): a
        refused resume leaves the directory's config as it was."""
        if not self._config_written:
            write_atomically(self.run_dir / "config.yaml", self.config_yaml)
            self._config_written = True

    def resumed_at(self, step: int, log_lines: list[int] | None = None) -> None:
        """The run goes on after ``step``, its checkpoint loaded (written when the logs had
        ``log_lines`` lines): metrics and completions logged after it are dropped, checkpoints
        after it set aside (resumed from an earlier one). From another run's checkpoint, or a
        set-aside one, every checkpoint is set aside and the logs emptied: they are another
        attempt's, whatever their steps. Not before the load: a checkpoint that fails to load
        leaves the directory as it was."""
        kept_up_to = -1 if self._resuming_another_lineage else step
        # the checkpoints first: stopped in between, resume=auto then goes back to this one again
        folder = set_aside_checkpoints_after(self.run_dir, kept_up_to)
        if folder is not None or kept_up_to == -1:  # (not a killed run's lines after its last checkpoint)
            self._set_aside_logs(folder, "resuming " + ("another attempt's checkpoint" if kept_up_to == -1
                                                        else f"step {step}"))
        self.logger.truncate_after(kept_up_to, log_lines)
        self._write_config()

    # ------------------------------------------------------------------ logging
    def open_dashboards(self) -> None:
        """W&B and TensorBoard, opened before the first step or evaluation (see MetricsLogger)."""
        self.logger.open_dashboards()

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self._write_config()
        self.logger.log(step, metrics)
        if "rollout/acc" in metrics:
            self._last_step_note = (f" | step {step} acc {metrics['rollout/acc']:.2f} "
                                    f"rounds {int(metrics.get('sampling/gen_rounds', 0))}")
            self.bar_step(step)  # the finished step's own line until the next starts (the last step's stays)

    def log_completions(self, step: int, records: list[dict[str, Any]]) -> None:
        self.logger.log_completions(step, records)

    def warn_if_truncating(self, metrics: dict[str, float]) -> None:
        """Warn when most responses hit the length limit: the first step it happens (the rate is
        in rollout/truncation_rate every step; a warning a step would bury the log)."""
        rate = metrics.get("rollout/truncation_rate", 0.0)
        if rate > TRUNCATION_WARNING_RATE and not self._warned_truncation:
            self._warned_truncation = True
            warnings.warn(
                f"{_percent_down(rate)} of responses hit rollout.max_response_length={self.cfg.rollout.max_response_length}: "
                "truncated responses rarely contain a final answer, so most of them score as wrong (or overlong "
                "filtering masks them) and learning stalls. Raise rollout.max_response_length or shorten the task "
                "(said once; rollout/truncation_rate has the rate of every step).",
                stacklevel=2,
            )

    def warn_if_answers_unread(self, data_sources: list[str], texts: list[str], results: list[RewardResult]) -> None:
        """Warn when most responses of a generation round (its ``data_sources``, decoded ``texts`` and
        scored ``results``) hold an answer in a form the verifier's extractor does not read (a
        ``\\boxed{...}`` under the ``Answer:``-line extractor, an ``<answer>`` tag under the boxed one:
        :func:`~dapo.trainer.eval_warnings.unread_answers_note`): the first round it happens (such a model
        scores wrong on all of them, every step; a warning a step would bury the log)."""
        if UNREAD_ANSWERS_TRAIN in self.said:
            return
        note = unread_answers_note(self.cfg.reward, data_sources, texts, results, "training")
        if note is not None:
            self.said.add(UNREAD_ANSWERS_TRAIN)
            warnings.warn(f"{note} (said once; rollout/acc has every step's accuracy)", stacklevel=2)

    # ------------------------------------------------------------------ progress bar
    @contextlib.contextmanager
    def progress(self, start_step: int, updates_made: int = 0) -> Iterator[None]:
        """A bar over optimizer updates, from ``start_step``, whose steps made ``updates_made``: those,
        and the updates the steps left plan (steps that make fewer shrink its total). Counted, not
        derived from the steps: a resume may plan another number of updates per step."""
        if not self.cfg.logging.progress:
            yield
            return
        updates_per_step = self.cfg.trainer.optimizer_steps_per_rollout
        done = updates_made
        total = done + max(0, self.cfg.trainer.total_steps - start_step) * updates_per_step
        with Progress(*BAR_COLUMNS, TimeRemainingColumn()) as progress:
            self._progress = progress
            self._task = progress.add_task("training", total=total, completed=done, unit="updates")
            try:
                yield
            finally:
                self._progress = None

    def bar_step(self, step: int) -> None:
        """Label the bar with ``step``, the one now running or just finished (and the last finished
        one's accuracy)."""
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
        """Updates a step did not make (too few groups, empty or skipped ones): remove them from the bar's total."""
        if self._progress is not None and updates > 0:
            task = next(t for t in self._progress.tasks if t.id == self._task)
            self._progress.update(self._task, total=(task.total or 0) - updates)

    def close(self) -> None:
        self.logger.close()
        self.lock.release()


def _percent_down(rate: float) -> str:
    """``rate`` as a percentage rounded down to a tenth (383 of 384 is 99.7%, not 100%)."""
    return f"{math.floor(rate * 1000 + 1e-9) / 10:g}%"
