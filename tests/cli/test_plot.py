"""dapo plot: what a run's report shows of steps whose metrics were not finite."""

import json
import math

import matplotlib.pyplot as plt

from dapo.cli.main import main
from dapo.cli.plot import PANELS, _plot_panel, _series, report_panels


def _rows() -> list[dict]:
    # step 2's loss and gradient norm were NaN (logged as null); step 4 the only finite point between two gaps
    losses = {0: 0.5, 1: 0.4, 2: None, 3: None, 4: 0.3, 5: None, 6: 0.2, 7: 0.1}
    return [{"step": step, "actor/pg_loss": loss, "actor/skipped_updates": float(loss is None)}
            for step, loss in losses.items()]


def test_a_null_metric_is_a_gap_in_its_line_not_a_line_drawn_across_it():
    steps, values = _series(_rows(), "actor/pg_loss")["actor/pg_loss"]
    assert steps == list(range(8))
    assert [math.isnan(v) for v in values] == [False, False, True, True, False, True, False, False]


def test_steps_that_were_not_finite_are_marked_and_an_isolated_point_is_drawn():
    fig, ax = plt.subplots()
    _plot_panel(ax, "loss", _series(_rows(), "actor/pg_loss"))
    by_label = {line.get_label(): line for line in ax.lines}
    marks = by_label["actor/pg_loss not finite"]
    assert list(marks.get_xdata()) == [2, 3, 5] and marks.get_marker() == "x"
    # the point at step 4 has gaps on both sides: a line shows nothing of it, a marker does
    isolated = [line for line in ax.lines if line.get_label().startswith("_")]
    assert len(isolated) == 1 and list(isolated[0].get_xdata()) == [4] and isolated[0].get_marker() == "o"
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend == ["actor/pg_loss", "actor/pg_loss not finite"]
    plt.close(fig)


def test_the_report_has_a_panel_for_the_loss_grad_norm_kl_and_skipped_updates(tmp_path):
    keys = {key for _, patterns in PANELS for key in patterns}
    assert {"actor/pg_loss", "actor/grad_norm", "actor/approx_kl", "actor/skipped_updates"} <= keys
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in _rows()))
    assert main(["plot", str(tmp_path)]) == 0
    assert (tmp_path / "report.png").read_bytes().startswith(b"\x89PNG")


def test_a_run_evaluated_on_several_sources_gets_a_panel_of_each_one_s_avg_at_k(tmp_path):
    """The overall avg@k pools the benchmarks; each data_source's (openai/gsm8k: verl's name, with
    a slash) is drawn in a panel of its own, which a run of one source does not get."""
    rows = [{"step": step, "eval/avg@4": 0.5, "eval/aime/avg@4": 0.1 * step, "eval/openai/gsm8k/avg@4": 0.7,
             "eval/aime/num_problems": 30.0, "eval/aime/pass@4": 0.4} for step in (0, 5, 10)]
    title, keys = report_panels(rows)[-1]
    assert len(report_panels(rows)) == len(PANELS) + 1 and title == "held-out avg@k per data_source"
    assert keys == ["eval/aime/avg@4", "eval/openai/gsm8k/avg@4"]
    assert report_panels([{"step": 0, "eval/avg@4": 0.5}]) == PANELS
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert main(["plot", str(tmp_path)]) == 0
    assert (tmp_path / "report.png").read_bytes().startswith(b"\x89PNG")


def test_a_short_run_s_step_axis_reads_whole_steps():
    """Four steps were ticked 1.0, 1.5, 2.0, ...: a step is a whole number."""
    fig, ax = plt.subplots()
    _plot_panel(ax, "loss", _series(_rows()[:4], "actor/pg_loss"))
    fig.canvas.draw()
    ticks = [tick for tick in ax.get_xticks() if ax.get_xlim()[0] <= tick <= ax.get_xlim()[1]]
    assert len(ticks) >= 2 and all(float(tick).is_integer() for tick in ticks)
    plt.close(fig)
