"""``dapo plot RUN_DIR``: one PNG with the curves DAPO users read, against training step."""

from __future__ import annotations

import io
import math
import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: no display needed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.backend_bases import FigureCanvasBase  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from dapo.durable import write_atomically  # noqa: E402
from dapo.errors import UserError  # noqa: E402
from dapo.trainer.metrics import read_metrics  # noqa: E402

PANELS: list[tuple[str, list[str]]] = [
    ("reward", ["rollout/score_mean", "rollout/reward_mean"]),
    ("accuracy", ["rollout/acc", "eval/avg@*", "eval/pass@*"]),
    ("entropy", ["actor/entropy"]),
    ("response length", ["rollout/response_length_mean", "rollout/response_length_max"]),
    ("clip fractions", ["actor/clip_frac_low", "actor/clip_frac_high", "actor/clip_frac_dual"]),
    ("dynamic sampling", ["sampling/filtered_ratio", "sampling/all_correct_ratio", "sampling/all_wrong_ratio"]),
    ("generation rounds", ["sampling/gen_rounds"]),
    ("truncation rate", ["rollout/truncation_rate"]),
    ("loss", ["actor/pg_loss", "actor/loss"]),
    ("grad norm", ["actor/grad_norm"]),
    ("KL", ["actor/approx_kl", "actor/kl_ref"]),
    ("skipped updates", ["actor/skipped_updates", "actor/skipped_nonfinite_loss"]),
]


# eval/<data_source>/avg@k (a data_source may hold slashes): logged when the held-out data has
# several sources, the curves a reader of several benchmarks compares (the overall avg@k pools them)
PER_SOURCE_AVG = re.compile(r"^eval/.+/avg@[0-9]+$")


def report_panels(rows: list[dict]) -> list[tuple[str, list[str]]]:
    """PANELS, and a panel of avg@k per data_source when the run logged them."""
    per_source = sorted({key for row in rows for key in row if PER_SOURCE_AVG.match(key)})
    return PANELS + ([("held-out avg@k per data_source", per_source)] if per_source else [])


def _series(rows: list[dict], pattern: str) -> dict[str, tuple[list[int], list[float]]]:
    """(steps, values) per metric key matching ``pattern`` (a trailing * matches any suffix). A
    null (metrics.jsonl's non-finite value) is NaN: a gap in the line, not a line drawn across it."""
    out: dict[str, tuple[list[int], list[float]]] = {}
    for row in rows:
        for key, value in row.items():
            matches = key.startswith(pattern[:-1]) if pattern.endswith("*") else key == pattern
            if matches and (value is None or isinstance(value, (int, float))):
                steps, values = out.setdefault(key, ([], []))
                steps.append(row["step"])
                values.append(math.nan if value is None else float(value))
    return out


def _plot_panel(ax: Any, title: str, series: dict[str, tuple[list[int], list[float]]]) -> None:
    """One panel: a line per metric, and an x along the bottom at each step where it was not
    finite (a NaN loss or gradient norm), which a gap alone would hide between two points."""
    for key, (steps, values) in series.items():
        finite = [not math.isnan(v) for v in values]
        # a point between two gaps is a line of no length: a marker shows it
        isolated = [f and not (i > 0 and finite[i - 1]) and not (i + 1 < len(values) and finite[i + 1])
                    for i, f in enumerate(finite)]
        (line,) = ax.plot(steps, values, marker="o" if key.startswith("eval/") else None, markersize=3, label=key)
        if any(isolated) and not key.startswith("eval/"):
            ax.plot([s for s, i in zip(steps, isolated) if i], [v for v, i in zip(values, isolated) if i],
                    linestyle="none", marker="o", markersize=3, color=line.get_color())
        if not all(finite):
            ax.plot([s for s, f in zip(steps, finite) if not f], [0.0] * finite.count(False), linestyle="none",
                    marker="x", color=line.get_color(), transform=ax.get_xaxis_transform(), clip_on=False,
                    label=f"{key} not finite")
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # (a short run's axis read step 1.5, 2.5)
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=7)


def save_figure(fig: Any, path: Path) -> None:
    """Write a matplotlib figure to ``path`` in the format its suffix names, atomically: a crash
    mid-write leaves the previous file, not half of one."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format=path.suffix.lstrip(".").lower(), dpi=90)
    write_atomically(path, buffer.getvalue())


def plot_run(run_dir: str | Path, output: str | Path | None = None) -> Path:
    """The run's report (``RUN_DIR/report.png``, or ``output``: a file, or a folder to put report.png
    in). The run named by its metrics.jsonl is its folder."""
    if Path(run_dir).name == "metrics.jsonl" and Path(run_dir).is_file():
        run_dir = Path(run_dir).parent
    if not (Path(run_dir) / "metrics.jsonl").is_file():  # (before the output path, which is the run's by default)
        raise UserError(f"{Path(run_dir) / 'metrics.jsonl'} does not exist: is {run_dir} a dapo-rl run directory?")
    out = Path(output) if output else Path(run_dir) / "report.png"
    out = out / "report.png" if out.is_dir() else out if out.suffix else out.with_name(out.name + ".png")  # as savefig
    if not out.parent.is_dir():
        raise UserError(f"cannot write a plot to {out}: its folder {out.parent} does not exist")
    formats = FigureCanvasBase.get_supported_filetypes()
    if out.suffix.lstrip(".").lower() not in formats:
        raise UserError(f"cannot write a plot to {out}: name it with one of .{', .'.join(sorted(formats))}")
    rows = read_metrics(run_dir)
    if not rows:  # a run that has not logged its first row: a blank report would look like a plotting bug
        raise UserError(f"{Path(run_dir) / 'metrics.jsonl'} holds no metrics yet (a run logs its first row after "
                        "the data loads and the first evaluation, at step 0): nothing to plot")
    panels = report_panels(rows)
    rows_of_panels = -(-len(panels) // 4)
    fig, axes = plt.subplots(rows_of_panels, 4, figsize=(18, 4 * rows_of_panels))
    for ax, (title, patterns) in zip(axes.flat, panels):
        _plot_panel(ax, title, {key: points for pattern in patterns for key, points in _series(rows, pattern).items()})
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(f"dapo-rl run: {run_dir}")
    fig.tight_layout()
    save_figure(fig, out)
    plt.close(fig)
    return out
