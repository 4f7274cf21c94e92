"""The summary printed at the end of `dapo train`: what this attempt did."""

from __future__ import annotations

from dapo.trainer.loop import TrainSummary
from dapo.trainer.summary import print_summary

AFTER = {"eval/avg@4": 0.5}


def title(capsys, summary: TrainSummary) -> str:
    print_summary(summary)
    return " ".join(capsys.readouterr().out.split())


def test_a_run_whose_every_step_skipped_its_update_says_the_weights_did_not_move(capsys, tmp_path):
    """A reward that never varies within a group (a constant user reward): every step is skipped
    with a warning, and the summary must not read like a normal run."""
    skipped = TrainSummary(2, {}, AFTER, str(tmp_path), 21.0, resumed_at=0, updates=0)
    assert "2 steps in 21 s, no optimizer update (every step skipped its update" in title(capsys, skipped)
    trained = TrainSummary(2, {}, AFTER, str(tmp_path), 21.0, resumed_at=0, updates=2)
    assert "no optimizer update" not in title(capsys, trained)
    resumed_done = TrainSummary(2, {}, AFTER, str(tmp_path), 1.0, resumed_at=2, updates=0)  # nothing left to train
    assert "no optimizer update" not in title(capsys, resumed_done)


def test_a_run_without_held_out_data_prints_no_empty_table(capsys, tmp_path):
    out = title(capsys, TrainSummary(1, {}, {}, str(tmp_path), 3.0, updates=1))
    assert "1 step in 3 s" in out and "(no held-out evaluation)" in out and "held-out metric" not in out
