"""The training bar counts policy updates: those a step did not make (too few groups, empty or skipped
updates) come off its total, one or many, so that a finished run's bar reads full, not 6/8."""

from __future__ import annotations

from dapo.trainer import Trainer
from tests.trainer.conftest import tiny_config


def test_updates_not_made_come_off_the_bar_s_total(tiny_model_dir, reward_file, tmp_path) -> None:
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "trainer.total_steps=2",
                                  "logging.progress=true"))
    try:
        with trainer.state.progress(0):
            [bar] = trainer.state._progress.tasks
            total = bar.total
            trainer.state.bar_skip(1)  # one skipped update
            assert bar.total == total - 1
            trainer.state.bar_skip(3)
            assert bar.total == total - 4
            trainer.state.bar_skip(0)  # nothing skipped: unchanged
            assert bar.total == total - 4
            trainer.state.bar_advance(2)
            assert (bar.completed, bar.total) == (2, total - 4)
    finally:
        trainer.close()
