"""The before/after table of `dapo train`'s summary (dapo.trainer.summary.print_summary): the
rows either column has, and for a resumed run the evaluations it reads back from metrics.jsonl
(the baseline is step 0's scored evaluation; "after" the one at the run's last step)."""

from __future__ import annotations

import json
from pathlib import Path

from dapo.trainer.loop import TrainSummary
from dapo.trainer.summary import print_summary


def table(capsys, summary: TrainSummary) -> str:
    print_summary(summary)
    return " ".join(capsys.readouterr().out.replace("│", " ").split())


def logged(run_dir: Path, *rows: dict) -> str:
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(run_dir)


def test_a_metric_only_the_baseline_has_keeps_its_row(capsys, tmp_path):
    before, after = {"eval/avg@4": 0.25, "eval/maj@4": 0.5}, {"eval/avg@4": 0.5}
    out = table(capsys, TrainSummary(2, before, after, str(tmp_path), 3.0, updates=2))
    assert "eval/maj@4 50.0% -" in out and "eval/avg@4 25.0% 50.0%" in out


def test_a_resumed_run_s_baseline_is_step_0_s_scored_evaluation_only(capsys, tmp_path):
    # a run that evaluated first at step 1 has no baseline: its step 1 is no "before"
    run = logged(tmp_path, {"step": 1, "eval/avg@4": 0.3})
    assert "eval/avg@4 - 60.0%" in table(capsys, TrainSummary(3, None, {"eval/avg@4": 0.6}, run, 3.0, resumed_at=1,
                                                                 updates=2))
    # an unscored evaluation's counts (a judge down) at step 0 first: the scored one is the baseline
    run = logged(tmp_path, {"step": 0, "eval/reward_failures/judge": 8.0}, {"step": 0, "eval/avg@4": 0.25},
                 {"step": 2, "rollout/acc": 0.5})
    assert "eval/avg@4 25.0% 60.0%" in table(capsys, TrainSummary(3, None, {"eval/avg@4": 0.6}, run, 3.0,
                                                                  resumed_at=2, updates=1))


def test_a_run_resumed_from_its_final_checkpoint_shows_the_evaluation_of_its_last_step(capsys, tmp_path):
    """It trains and evaluates nothing: "after" is the last evaluation logged at that step, or none."""
    run = logged(tmp_path, {"step": 0, "eval/avg@4": 0.25}, {"step": 1, "eval/avg@4": 0.3})
    assert "eval/avg@4 25.0% -" in table(capsys, TrainSummary(2, None, None, run, 0.5, resumed_at=2, updates=0))
    run = logged(tmp_path, {"step": 0, "eval/avg@4": 0.25}, {"step": 2, "eval/avg@4": 0.4},
                 {"step": 2, "eval/avg@4": 0.45})  # (an attempt killed after its final evaluation, then redone)
    assert "eval/avg@4 25.0% 45.0%" in table(capsys, TrainSummary(2, None, None, run, 0.5, resumed_at=2, updates=0))
