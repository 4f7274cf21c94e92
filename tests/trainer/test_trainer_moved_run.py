"""A run directory moved or copied (``cp -r run run-moved``) is the same run: a rerun of the command
that went back to one of its checkpoints goes on from the newest there too, rather than going back
again (the record of where it went back to is relative to the run directory)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from dapo.trainer import Trainer
from dapo.trainer.checkpoint import load_trainer_state
from dapo.trainer.metrics import read_metrics
from dapo.trainer.resume import ResumePoint, checkpoint_record, newest_descendant, resolve_resume
from dapo.trainer.run_dir import STATE_FILE
from tests.trainer.conftest import tiny_config
from tests.trainer.test_trainer_resume_lineage import stopping_after_step


def fake_checkpoint(folder: Path, step: int, **state: object) -> Path:
    """A checkpoint directory holding only a ``trainer_state.pt`` of ``state``: all resolve_resume reads."""
    path = folder / f"step-{step:06d}"
    path.mkdir(parents=True)
    torch.save(state, path / STATE_FILE)
    return path


def went_back_run(run: Path, went_back_to: str | None = None) -> None:
    """A run that went back to its step 3 (steps 4-6 set aside) and has checkpointed step 4 since."""
    checkpoints = run / "checkpoints"
    for step in (1, 2, 3):
        fake_checkpoint(checkpoints, step)
    for step in (4, 5, 6):
        fake_checkpoint(checkpoints / "abandoned-20260101-000000-x", step)
    fake_checkpoint(checkpoints, 4, went_back_to=went_back_to or checkpoint_record(checkpoints / "step-000003", run))


@pytest.mark.parametrize("how", ["relative", "absolute (older runs)"])
@pytest.mark.parametrize("original", ["kept", "removed"])
def test_a_moved_run_that_went_back_goes_on_instead_of_back_again(tmp_path, how, original):
    run, moved = tmp_path / "r6", tmp_path / "r6moved"
    record = str((run / "checkpoints" / "step-000003").resolve()) if how != "relative" else None
    went_back_run(run, record)
    if how == "relative":
        assert load_trainer_state(run / "checkpoints" / "step-000004")["went_back_to"] == "checkpoints/step-000003"
    named = run / "checkpoints" / "step-000003"
    with pytest.warns(UserWarning, match="went back to it and has checkpointed since"):
        assert resolve_resume(str(named), run) == ResumePoint(run / "checkpoints" / "step-000004", automatic=True)

    shutil.copytree(run, moved)
    if original == "removed":
        shutil.rmtree(run)
    named = moved / "checkpoints" / "step-000003"
    with pytest.warns(UserWarning, match="went back to it and has checkpointed since"):
        assert resolve_resume(str(named), moved) == ResumePoint(moved / "checkpoints" / "step-000004", automatic=True)
    # another checkpoint of the run is still a deliberate step back
    assert newest_descendant(moved / "checkpoints" / "step-000002", moved) is None
    assert resolve_resume(str(moved / "checkpoints" / "step-000002"), moved).automatic is False


def test_a_record_of_a_set_aside_checkpoint_matches_only_that_one(tmp_path):
    run = tmp_path / "run"
    went_back_run(run)
    [aside] = (run / "checkpoints").glob("abandoned-*")
    for record in (checkpoint_record(aside / "step-000005", run), str((aside / "step-000005").resolve())):
        shutil.rmtree(run / "checkpoints" / "step-000004")
        fake_checkpoint(run / "checkpoints", 4, went_back_to=record)
        moved = tmp_path / "moved"
        shutil.copytree(run, moved)
        [moved_aside] = (moved / "checkpoints").glob("abandoned-*")
        assert newest_descendant(moved_aside / "step-000005", moved) == moved / "checkpoints" / "step-000004"
        assert newest_descendant(moved_aside / "step-000006", moved) is None
        assert newest_descendant(moved / "checkpoints" / "step-000005", moved) is None  # not the set-aside one
        shutil.rmtree(moved)


def test_going_back_records_the_checkpoint_relative_to_the_run_and_a_copy_goes_on(tiny_model_dir, reward_file, tmp_path):
    """The audit's reproducer, shortened: went back to step 1 of 3, copied, rerun in the copy."""
    run, moved = tmp_path / "run", tmp_path / "moved"
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "eval.every_steps=0")).train()  # steps 1-3

    def command(where: Path):
        return tiny_config(tiny_model_dir, where, reward_file, "eval.every_steps=0", "trainer.total_steps=4",
                           f"checkpoint.resume={where / 'checkpoints' / 'step-000001'}")

    going_back = stopping_after_step(3, Trainer(command(run)))
    with pytest.warns(UserWarning, match="moved 2 checkpoint"), pytest.raises(KeyboardInterrupt):
        going_back.train()  # back to step 1, steps 2-3 again, then preempted
    assert load_trainer_state(run / "checkpoints" / "step-000003")["went_back_to"] == "checkpoints/step-000001"
    shutil.copytree(run, moved)
    with pytest.warns(UserWarning, match=r"went back to it and has checkpointed since .*: resuming its newest, "
                                         r".*step-000003"):
        summary = Trainer(command(moved)).train()
    assert summary.steps == 4 and summary.resumed_at == 3
    assert len(list((moved / "checkpoints").glob("abandoned-*"))) == 1  # not set aside again
    assert [row["step"] for row in read_metrics(moved) if "actor/loss" in row] == [1, 2, 3, 4]
