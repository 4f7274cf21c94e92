"""dapo plot: the report's figure itself, read back from matplotlib (what each panel draws,
against which steps, with which legend), not only that a PNG was written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest

from dapo.cli import plot
from dapo.cli.plot import _plot_panel, _series, plot_run, report_panels

EVAL_STEPS = [0, 5, 10]  # evaluated every 5 steps; the rollout metrics every step


def _run_rows() -> list[dict]:
    rows = []
    for step in range(11):
        row: dict[str, Any] = {"step": step, "rollout/acc": 0.1 * step, "rollout/score_mean": step - 5.0,
                               "rollout/reward_mean": step - 4.0, "actor/entropy": 1.0 / (step + 1)}
        if step in EVAL_STEPS:
            row.update({"eval/avg@4": 0.05 * step, "eval/pass@4": 0.09 * step, "eval/aime/avg@4": 0.01 * step,
                        "eval/gsm8k/avg@4": 0.06 * step})
        rows.append(row)
    return rows


@pytest.fixture()
def report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The axes of the figure plot_run saves for _run_rows(), the visible ones by title."""
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in _run_rows()))
    saved = []
    monkeypatch.setattr(plot, "save_figure", lambda fig, path: saved.append(fig))
    monkeypatch.setattr(plot.plt, "close", lambda fig: None)  # (read after plot_run returns)
    plot_run(tmp_path)
    [fig] = saved
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_visible()}
    yield panels
    plt.close(fig)


def lines(ax: Any) -> dict[str, Any]:
    return {line.get_label(): line for line in ax.lines if not line.get_label().startswith("_")}


def test_every_panel_of_a_run_evaluated_on_several_sources_is_drawn_and_none_more(report):
    """13 panels on a grid of 4 columns: the last row's one panel is shown, its other cells hidden."""
    assert list(report) == [title for title, _ in report_panels(_run_rows())]
    assert len(report) == 13 and list(report)[-1] == "held-out avg@k per data_source"
    assert sorted(lines(report["held-out avg@k per data_source"])) == ["eval/aime/avg@4", "eval/gsm8k/avg@4"]


def test_the_accuracy_panel_draws_the_rollouts_and_each_held_out_metric_at_their_own_steps(report):
    accuracy = lines(report["accuracy"])
    assert list(accuracy) == ["rollout/acc", "eval/avg@4", "eval/pass@4"]
    assert list(accuracy["rollout/acc"].get_xdata()) == list(range(11))
    assert list(accuracy["eval/avg@4"].get_xdata()) == EVAL_STEPS  # (at the steps evaluated, not at 0, 1, 2)
    assert list(accuracy["eval/avg@4"].get_ydata()) == pytest.approx([0.0, 0.25, 0.5])
    # evaluations are points (one evaluation alone would be a line of no length), rollouts a line
    assert accuracy["eval/avg@4"].get_marker() == "o" and accuracy["rollout/acc"].get_marker() == "None"
    assert list(lines(report["reward"])) == ["rollout/score_mean", "rollout/reward_mean"]


def test_a_panel_of_one_curve_has_its_legend(report):
    legend = report["entropy"].get_legend()
    assert legend is not None and [text.get_text() for text in legend.get_texts()] == ["actor/entropy"]


def test_a_wildcard_matches_every_k_and_only_its_prefix():
    rows = [{"step": 3, "eval/avg@4": 0.5, "eval/avg@32": 0.4, "eval/avg_len": 7.0, "eval/pass@4": 0.9}]
    assert sorted(_series(rows, "eval/avg@*")) == ["eval/avg@32", "eval/avg@4"]
    assert _series(rows, "eval/avg@4") == {"eval/avg@4": ([3], [0.5])}


def test_a_not_finite_step_is_marked_on_the_axis_s_bottom_edge():
    fig, ax = plt.subplots()
    _plot_panel(ax, "loss", _series([{"step": 0, "actor/pg_loss": 1.0}, {"step": 1, "actor/pg_loss": None}],
                                    "actor/pg_loss"))
    marks = lines(ax)["actor/pg_loss not finite"]
    assert list(marks.get_xdata()) == [1] and list(marks.get_ydata()) == [0.0]
    assert marks.get_transform() == ax.get_xaxis_transform()  # (y in axes units: 0 is the bottom edge)
    plt.close(fig)
