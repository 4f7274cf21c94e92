"""What a checkpoint records of where its run started (``started_from``: the checkpoint named by
checkpoint.resume=<another run's checkpoint>) is kept by every later checkpoint of the run, also after the
run resumed its own: a rerun of the same command then goes on from the run's newest checkpoint. Had a
resumed checkpoint dropped it, the next rerun would start from the other run's checkpoint again and set this
run's progress aside. A run started from another run's checkpoint records no ``went_back_to`` (it went
back nowhere in its own directory)."""

from __future__ import annotations

import pytest

from dapo.trainer import Trainer
from dapo.trainer.checkpoint import load_trainer_state
from tests.trainer.conftest import tiny_config


def test_a_run_started_from_another_runs_checkpoint_keeps_that_record_across_its_resumes(
        tiny_model_dir, reward_file, tmp_path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    Trainer(tiny_config(tiny_model_dir, first, reward_file, "eval.every_steps=0", "trainer.total_steps=1")).train()
    start = first / "checkpoints" / "step-000001"

    def command(total_steps: int) -> Trainer:
        return Trainer(tiny_config(tiny_model_dir, second, reward_file, "eval.every_steps=0", "checkpoint.every_steps=1",
                                   f"checkpoint.resume={start}", f"trainer.total_steps={total_steps}"))

    command(2).train()
    recorded = load_trainer_state(second / "checkpoints" / "step-000002")
    assert recorded["started_from"] and recorded.get("went_back_to") is None
    with pytest.warns(UserWarning, match=r"resuming its newest, .*step-000002"):
        command(3).train()  # the same command rerun: goes on from this run's step 2
    assert load_trainer_state(second / "checkpoints" / "step-000003")["started_from"] == recorded["started_from"]
    with pytest.warns(UserWarning, match=r"resuming its newest, .*step-000003"):
        assert command(4).train().steps == 4
    assert list((second / "checkpoints").glob("abandoned-*")) == []
