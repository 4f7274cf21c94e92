"""Metric sinks: JSONL always, TensorBoard by default, W&B when installed and enabled (what each
metric means: :mod:`dapo.trainer.metric_docs`)."""

from __future__ import annotations

import json
import math
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from dapo.durable import write_atomically
from dapo.errors import UserError
from dapo.trainer.jsonl_log import count_lines, cut_after, parse_row
from dapo.trainer.wandb_run import STEP_METRIC, open_wandb_run, retire_wandb_run


class MetricsLogger:
    """Writes each step's metrics to ``metrics.jsonl`` and the enabled dashboards."""

    def __init__(self, run_dir: str | Path, tensorboard: bool, wandb: bool, wandb_project: str, config: dict) -> None:
        self.path = Path(run_dir) / "metrics.jsonl"
        self.completions_path = Path(run_dir) / "completions.jsonl"
        self._tb = self._wandb = None
        self._tb_dir = str(Path(run_dir) / "tensorboard") if tensorboard else None
        # a purge a resume set up, until the event file holds it (not an event file: TensorBoard skips it)
        self._purge_marker = Path(run_dir) / "tensorboard" / "purge_pending.json"
        self._tb_purge_step: int | None = None  # set on resume: hide an earlier attempt's later points
        self._tb_replay: list[dict[str, Any]] = []  # kept lines from the purge step on, written again
        self._tb_replay_completions: list[dict[str, Any]] = []  # ... and its kept completions
        # lines of metrics.jsonl and completions.jsonl, counted as written (one read, here)
        self._lines = [count_lines(path) for path in (self.path, self.completions_path)]
        # W&B opens at first use, once a resume has said where the run goes on from
        self._wandb_settings = (Path(run_dir), wandb_project, config) if wandb else None
        self._resumed_at: int | None = None  # the step a resume goes on after (None: a fresh start)
        self._abandoned: list[int] = []  # steps of metrics lines the resume dropped (W&B still holds them)

    def line_counts(self) -> list[int]:
        """Lines of metrics.jsonl and completions.jsonl so far: a checkpoint records them, so that
        a resume from it drops what was logged later at the same step (a final evaluation)."""
        return list(self._lines)

    def truncate_after(self, step: int, line_counts: list[int] | None = None) -> None:
        """On resume, drop lines a killed run wrote after its last checkpoint: those of later
        steps, and past ``line_counts`` (what the checkpoint recorded) those of its own step
        logged after it (and a line torn by the kill), cutting each file back in place
        (:func:`~dapo.trainer.jsonl_log.cut_after`: neither is read whole); TensorBoard
        hides an earlier attempt's points after ``step`` (its purge_step), so the curves do not
        double back."""
        metrics_cut, completions_cut = (cut_after(path, step, count) for path, count in
                                        zip((self.path, self.completions_path), line_counts or [None, None]))
        self._lines = [metrics_cut.kept, completions_cut.kept]
        self._abandoned = metrics_cut.dropped_steps
        # lines of the resume step itself were dropped (a final evaluation logged after its
        # checkpoint): TensorBoard hides that step too, and gets its kept lines (and completions) again
        self._tb_replay = metrics_cut.last_step_rows if step in self._abandoned else []
        if self._tb_replay:  # the purge hides the step's completions too (every tag)
            self._tb_replay_completions = [{k: v for k, v in row.items() if k != "step"}
                                           for row in completions_cut.last_step_rows]
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        self._tb_purge_step = step if self._tb_replay else step + 1
        # An earlier attempt's events, set up to be purged also by an attempt without TensorBoard:
        # the next one with it must hide the points this one's rows replace
        if self._purge_marker.parent.is_dir():
            # a purge an earlier resume set up and never wrote (killed before its first point, or
            # logging without TensorBoard): its later points are still shown, and metrics.jsonl's rows
            # from its step on, which replace them, are not
            pending = self._pending_purge()
            if pending is not None and pending < self._tb_purge_step:
                self._tb_purge_step = pending
                self._tb_replay = [row for row in parse_metrics_lines(self.path) if row["step"] >= pending]
                self._tb_replay_completions = []  # (the resume step's: not this one's)
            write_atomically(self._purge_marker, json.dumps({"purge_step": self._tb_purge_step}) + "\n")
        if self._wandb_settings is None and self._abandoned:  # the run directory's W&B run may hold them
            retire_wandb_run(self.path.parent, self._abandoned)
        self._resumed_at = step if step >= 0 else None

    def _pending_purge(self) -> int | None:
        try:
            return int(json.loads(self._purge_marker.read_text())["purge_step"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def sync(self) -> None:
        """metrics.jsonl, completions.jsonl and the TensorBoard events on disk (fsync): a checkpoint
        records their line counts, and must not outlive (a power loss) the lines it counts."""
        for path in (self.path, self.completions_path):
            if path.exists():
                with path.open("rb") as handle:
                    os.fsync(handle.fileno())
        if self._tb is not None:
            self._tb.flush()

    def open_dashboards(self) -> None:
        """Open W&B (and TensorBoard) now, once a resume has said where the run goes on from and
        before anything is computed: a W&B that cannot start (not logged in, no network) stops the
        run here, not after the baseline evaluation, whose result it would lose."""
        self._board()
        self._wandb_run()

    def _wandb_run(self) -> Any:
        """The W&B run (opened at first use), or None when disabled or not installed."""
        if self._wandb is None and self._wandb_settings is not None:
            try:
                self._wandb = open_wandb_run(*self._wandb_settings, self._resumed_at, self._abandoned)
            except UserError:
                raise
            except Exception as error:  # wandb's own errors (UsageError, CommError) share no base of ours
                raise UserError(f"W&B could not start a run ({type(error).__name__}: {error}); log in (`wandb login` "
                                "or WANDB_API_KEY), set WANDB_MODE=offline, or logging.wandb=false") from error
            if self._wandb is None:
                self._wandb_settings = None
        return self._wandb

    def _board(self) -> Any:
        """The TensorBoard writer (opened at first use, after any resume), or None when disabled."""
        if self._tb is None and self._tb_dir is not None:
            from torch.utils.tensorboard import SummaryWriter

            # A run's first events open with a session start (purge_step 0): TensorBoard's server reads a
            # resume's own start (its purge_step) as a restart only after one, and otherwise showed both
            # attempts' points (its older EventAccumulator purged scalars by their step order alone)
            first = self._tb_purge_step is None and not any(Path(self._tb_dir).glob("events.out.tfevents.*"))
            self._tb = SummaryWriter(log_dir=self._tb_dir, purge_step=0 if first else self._tb_purge_step)
            replay, self._tb_replay = self._tb_replay, []
            for row in replay:
                self._write_scalars(self._tb, row["step"], row)
            completions, self._tb_replay_completions = self._tb_replay_completions, []
            if completions:
                self._tb.add_text("completions", completions_markdown(completions), self._tb_purge_step)
            self._tb.flush()  # the purge is in the event file now
            self._purge_marker.unlink(missing_ok=True)
        return self._tb

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        """One line of metrics.jsonl (a non-finite value as null: the file stays valid JSON for any
        reader), TensorBoard scalars (finite ones) and W&B."""
        clean = {k: (float(v) if isinstance(v, (int, float)) else v) for k, v in metrics.items()}
        as_json = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in clean.items()}
        with self.path.open("a") as handle:
            handle.write(json.dumps({"step": step, **as_json}, allow_nan=False) + "\n")
        self._lines[0] += 1
        if (board := self._board()) is not None:
            self._write_scalars(board, step, clean)
            board.flush()
        if (run := self._wandb_run()) is not None:
            run.log({**clean, STEP_METRIC: step})

    @staticmethod
    def _write_scalars(board: Any, step: int, metrics: dict[str, Any]) -> None:
        for key, value in metrics.items():
            if isinstance(value, float) and math.isfinite(value):  # (the step is an int)
                board.add_scalar(key, value, step)

    def log_completions(self, step: int, records: list[dict[str, Any]]) -> None:
        """Sampled completions (:func:`dapo.trainer.scoring.completion_records`: prompt, response,
        extracted answer, ground truth, score and reward, their group's outcome and advantage) to
        ``completions.jsonl``, TensorBoard text (``completions``) and a W&B table."""
        if not records:
            return
        with self.completions_path.open("a") as handle:
            handle.writelines(json.dumps({"step": step, **record}) + "\n" for record in records)
        self._lines[1] += len(records)
        if (board := self._board()) is not None:
            board.add_text("completions", completions_markdown(records), step)
            board.flush()
        if (run := self._wandb_run()) is not None:
            import wandb as wandb_module

            columns = record_columns(records)
            table = wandb_module.Table(columns=columns, data=[[r.get(c) for c in columns] for r in records])
            run.log({"completions": table, STEP_METRIC: step})

    def close(self) -> None:
        """Close the sinks; W&B marks the run failed when this is called while an exception (a
        crash, Ctrl-C) propagates, finished otherwise (wandb.finish()'s default said finished)."""
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish(exit_code=0 if sys.exc_info()[1] is None else 1)


def record_columns(records: list[dict[str, Any]]) -> list[str]:
    """Every key of the records, in the order they first appear (a sample a scorer failed on has
    ``failed_scorers``, which the others may lack)."""
    return list(dict.fromkeys(key for record in records for key in record))


def completions_markdown(records: list[dict[str, Any]]) -> str:
    """A markdown table of completion records for TensorBoard's text tab."""
    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", "<br>")

    columns = record_columns(records)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(c, "")) for c in columns) + " |" for r in records]
    return "\n".join(lines)


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: is {run_dir} a dapo-rl run directory?")
    return parse_metrics_lines(path)


def parse_metrics_lines(path: Path) -> list[dict[str, Any]]:
    """The rows of a metrics.jsonl; a torn line (a run killed mid-write) is skipped with a warning,
    as are the lines a damaged file's bytes that are not UTF-8 break."""
    rows, torn = [], []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        if (row := parse_row(line)) is None:
            torn.append(number)
        else:
            rows.append(row)
    if torn:
        warnings.warn(f"{path}: skipped {len(torn)} unreadable line(s) {torn[:5]} (a run killed mid-write)", stacklevel=2)
    return rows
