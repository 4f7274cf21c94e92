"""What a preempted or damaged run keeps: a checkpoint every checkpoint.every_minutes whatever the
steps, a SIGTERM during a checkpoint's write held until it is published, and a checkpoint that cannot
be read named with the checkpoint to resume instead (the ops audit of stop 90 found each lost or unsaid)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from dapo.cli.main import exit_on_termination
from dapo.errors import DamagedCheckpointError
from dapo.trainer import Trainer
from dapo.trainer.checkpoint import list_checkpoints, load_trainer_state
from tests.trainer.conftest import tiny_config, tiny_overrides

QUIET = ("eval.every_steps=0", "eval.before_training=false", "checkpoint.keep_last=5")


def _train(*overrides: str, **kwargs) -> Trainer:
    trainer = Trainer(tiny_config(*kwargs["where"], *QUIET, *overrides))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    return trainer


def test_every_minutes_checkpoints_the_step_that_ends_past_it(tiny_model_dir, reward_file, tmp_path):
    where = (tiny_model_dir, tmp_path / "timed", reward_file)
    _train("checkpoint.every_steps=0", "checkpoint.every_minutes=1e-6", where=where)  # past it at every step's end
    assert [p.name for p in list_checkpoints(tmp_path / "timed")] == ["step-000001", "step-000002", "step-000003"]
    where = (tiny_model_dir, tmp_path / "untimed", reward_file)
    _train("checkpoint.every_steps=0", "checkpoint.every_minutes=600", where=where)  # not yet: the final one only
    assert [p.name for p in list_checkpoints(tmp_path / "untimed")] == ["step-000003"]


def test_the_minutes_are_counted_from_the_last_checkpoint(tiny_model_dir, reward_file, tmp_path, monkeypatch):
    """Each step takes 40 s of a fake clock: with every_minutes=1 a checkpoint at steps 2 and 4 (the first
    to end a minute after the last), not at 3 (the clock restarts at each) nor at every step (minutes)."""
    from types import SimpleNamespace

    from dapo.trainer import loop_state

    clock = [0.0]

    def fake_monotonic() -> float:
        return clock[0]

    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *QUIET, "trainer.total_steps=4",
                                  "checkpoint.every_steps=0", "checkpoint.every_minutes=1"))
    monkeypatch.setattr(loop_state, "time", SimpleNamespace(monotonic=fake_monotonic))  # (its clock alone)
    trainer.last_checkpoint_time = 0.0
    step_once = trainer.step_once

    def forty_seconds():
        clock[0] += 40.0
        return step_once()

    trainer.step_once = forty_seconds
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    assert [p.name for p in list_checkpoints(tmp_path / "run")] == ["step-000002", "step-000004"]


def test_a_sigterm_during_a_checkpoint_write_stops_the_run_once_it_is_published(tiny_model_dir, reward_file, tmp_path,
                                                                               capfd):
    """It aborted the write (steps since the last checkpoint lost); the scheduler's grace is for this."""
    run = tmp_path / "run"
    trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file, *QUIET, "checkpoint.every_steps=1"))
    saving = trainer.policy.save_checkpoint

    def preempted(*args, **kwargs):  # the signal lands in the middle of the write
        os.kill(os.getpid(), signal.SIGTERM)
        return saving(*args, **kwargs)

    trainer.policy.save_checkpoint = preempted
    stopped = _trained_as_the_cli_runs(trainer)
    assert stopped.value.code == 128 + signal.SIGTERM
    assert "stopping once checkpoint step 1 is written" in capfd.readouterr().err
    [written] = list_checkpoints(run)  # whole: it loads, and is the step the run stopped after
    assert written.name == "step-000001" and load_trainer_state(written)["step"] == 1
    assert not list(written.parent.glob(".tmp-*"))


def _stopped_in_a_step(trainer: Trainer, *signums: int, where: str = "update") -> pytest.ExceptionInfo:
    """Train with ``signums`` sent to this process in step 2's ``where`` (its generation or its
    policy update), the way the dapo CLI runs: SIGTERM unwinds (SystemExit 143)."""
    target = trainer.policy if where == "update" else trainer
    method = "update" if where == "update" else "generate_round"
    original, sent = getattr(target, method), []

    def preempted(*args, **kwargs):
        if trainer.step == 1 and not sent:
            sent.append(True)
            for signum in signums:
                os.kill(os.getpid(), signum)
        return original(*args, **kwargs)

    setattr(target, method, preempted)
    stopped = _trained_as_the_cli_runs(trainer)
    assert sent, "the signal was never sent"
    return stopped


def _trained_as_the_cli_runs(trainer: Trainer) -> pytest.ExceptionInfo:
    """``trainer.train()`` under the dapo CLI's SIGTERM handler, which it must leave by a stop."""
    replaced = exit_on_termination()
    try:
        with pytest.raises(SystemExit) as stopped, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer.train()
    finally:
        for signum, handler in replaced.items():
            signal.signal(signum, handler)
    return stopped


@pytest.mark.parametrize("where", ["update", "generate"])
def test_a_sigterm_during_a_step_stops_the_run_after_it_with_the_step_checkpointed(tiny_model_dir, reward_file,
                                                                                  tmp_path, capfd, where):
    """It stopped the run at once: step 2 and every step since the last checkpoint (up to
    checkpoint.every_steps - 1 of them, each a rollout and an update) trained again after the resume."""
    run = tmp_path / "run"
    trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file, *QUIET, "checkpoint.every_steps=0",
                                  "trainer.total_steps=4"))
    stopped = _stopped_in_a_step(trainer, signal.SIGTERM, where=where)
    assert stopped.value.code == 128 + signal.SIGTERM
    assert "stopping after step 2, once it is checkpointed (again: at once, losing the steps since the run's start)" \
        in capfd.readouterr().err
    [written] = list_checkpoints(run)
    state = load_trainer_state(written)
    assert written.name == "step-000002" and state["step"] == 2 and not state["evaluation_owed"]
    assert not state["final"]
    resumed = _train("checkpoint.every_steps=0", "trainer.total_steps=4", where=(tiny_model_dir, run, reward_file))
    assert resumed.step == 4 and [p.name for p in list_checkpoints(run)][-1] == "step-000004"


def test_the_stopped_step_s_due_evaluation_is_left_owed_to_the_resume(tiny_model_dir, reward_file, tmp_path):
    """Step 2's periodic evaluation is not run (a long avg@32 past the scheduler's grace): its checkpoint owes it."""
    run = tmp_path / "run"
    trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file, *QUIET, "checkpoint.every_steps=0",
                                  "trainer.total_steps=4", "eval.every_steps=2"))
    evaluated = []
    trainer.evaluate = lambda: evaluated.append(trainer.step) or {}
    _stopped_in_a_step(trainer, signal.SIGTERM)
    assert evaluated == []
    [written] = list_checkpoints(run)
    assert written.name == "step-000002" and load_trainer_state(written)["evaluation_owed"]


def test_the_last_step_is_evaluated_once_when_eval_every_steps_divides_total_steps(tiny_model_dir, reward_file,
                                                                                tmp_path):
    """Its periodic evaluation is the final one (evaluation_due stops short of the last step)."""
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *QUIET, "trainer.total_steps=2",
                                  "eval.every_steps=2"))
    evaluated = []
    trainer.evaluate = lambda: evaluated.append(trainer.step) or {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    assert evaluated == [2]


def test_a_second_sigterm_during_the_step_stops_it_at_once(tiny_model_dir, reward_file, tmp_path, capfd):
    run = tmp_path / "run"
    trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file, *QUIET, "checkpoint.every_steps=1"))
    stopped = _stopped_in_a_step(trainer, signal.SIGTERM, signal.SIGTERM)
    assert stopped.value.code == 128 + signal.SIGTERM and trainer.step == 1
    assert [p.name for p in list_checkpoints(run)] == ["step-000001"]  # step 1's periodic one, no more
    assert "stopping after step 2, once it is checkpointed (again: at once, losing the steps since step 1's " \
        "checkpoint)" in capfd.readouterr().err


def test_a_sigterm_in_the_stopped_step_s_checkpoint_write_stops_it_at_once(tiny_model_dir, reward_file, tmp_path):
    """The write's own deferral counts the step's held signal: its second is delivered, not held."""
    run = tmp_path / "run"
    trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file, *QUIET, "checkpoint.every_steps=0"))
    saving = trainer.policy.save_checkpoint

    def preempted_again(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return saving(*args, **kwargs)

    trainer.policy.save_checkpoint = preempted_again
    _stopped_in_a_step(trainer, signal.SIGTERM)
    assert list_checkpoints(run) == [] and not list((run / "checkpoints").glob(".tmp-*"))


def test_on_signal_stop_stops_inside_the_step(tiny_model_dir, reward_file, tmp_path):
    run = tmp_path / "run"
    trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file, *QUIET, "checkpoint.every_steps=0",
                                  "checkpoint.on_signal=stop"))
    _stopped_in_a_step(trainer, signal.SIGTERM)
    assert trainer.step == 1 and list_checkpoints(run) == []


HELD_REWARD = """
import os, time
from pathlib import Path

def parity_held(response, ground_truth, extra):
    here = Path(os.environ["DAPO_TEST_HOLD_DIR"])
    # (the checks before the run call it on a worked example: "Reasoning...\\nAnswer: ...")
    if not response.startswith("Reasoning...") and not (here / "release").exists():  # step 1 waits for the signal
        (here / "waiting").touch()
        deadline = time.time() + 120
        while not (here / "release").exists() and time.time() < deadline:
            time.sleep(0.05)
    odd = len(response) % 2 == 1
    return {"score": 1.0 if odd else -1.0, "acc": odd}
"""


@pytest.mark.parametrize("ranks", [pytest.param((), id="one-process"),
                                   pytest.param(("resources.devices_per_node=2", "trainer.num_threads=1"),
                                                id="two-ranks", marks=pytest.mark.slow)])
def test_dapo_train_sigtermed_in_a_step_exits_143_with_the_step_checkpointed(tiny_model_dir, tmp_path, ranks):
    """As a scheduler or `timeout` stops it: SIGTERM to the command's process group (Ray's processes
    too, when they are in it) while step 1 scores its responses."""
    reward = tmp_path / "held.py"
    reward.write_text(HELD_REWARD)
    run = tmp_path / "run"
    args = [*tiny_overrides(tiny_model_dir, run, reward, "parity_held"), *QUIET, "checkpoint.every_steps=0", *ranks]
    proc = subprocess.Popen([sys.executable, "-m", "dapo.cli.main", "train", "default", *args],
                            env=dict(os.environ, DAPO_TEST_HOLD_DIR=str(tmp_path)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not (tmp_path / "waiting").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the run never reached its first step"
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGTERM)
        time.sleep(3.0)  # what the signal stops (Ray's GCS and raylet were in the group) has stopped
        (tmp_path / "release").touch()
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "stopping after step 1, once it is checkpointed" in err and "stopped by SIGTERM" in err, err[-3000:]
    assert list_checkpoints(run), err[-3000:]
    [written] = list_checkpoints(run)
    assert written.name == "step-000001" and load_trainer_state(written)["step"] == 1


@pytest.mark.parametrize("damaged", ["trainer_state.pt", "model.safetensors"])
def test_a_checkpoint_that_cannot_be_read_names_the_one_to_resume_instead(tiny_model_dir, reward_file, tmp_path,
                                                                         damaged):
    """A copy cut short: "Invalid argument" or an EOFError traceback, no file named, and no way on said."""
    run = tmp_path / "run"
    _train("checkpoint.every_steps=1", "trainer.total_steps=3", where=(tiny_model_dir, run, reward_file))
    newest = run / "checkpoints" / "step-000003"
    os.truncate(newest / damaged, 5000)
    with pytest.raises(DamagedCheckpointError, match=rf"cannot read {newest / damaged}: damaged or incomplete \(.*\)\. "
                       rf"Resume from the checkpoint before it, checkpoint.resume={run / 'checkpoints' / 'step-000002'} "
                       r"\(the damaged one is then set aside\), or restore it from a copy"):
        _train("checkpoint.every_steps=1", "trainer.total_steps=4", where=(tiny_model_dir, run, reward_file))
    # the remedy as said: goes on from step 2, the damaged checkpoint set aside
    trainer = _train("checkpoint.every_steps=1", "trainer.total_steps=4",
                     f"checkpoint.resume={run / 'checkpoints' / 'step-000002'}", where=(tiny_model_dir, run, reward_file))
    assert trainer.step == 4 and [p.name for p in list_checkpoints(run)] == [f"step-00000{i}" for i in (1, 2, 3, 4)]
    assert load_trainer_state(run / "checkpoints" / "step-000003")["step"] == 3  # the new attempt's, whole


def test_the_run_s_only_checkpoint_damaged_says_to_restore_it_or_start_over(tiny_model_dir, reward_file, tmp_path):
    run = tmp_path / "run"
    _train("trainer.total_steps=1", where=(tiny_model_dir, run, reward_file))
    Path(run / "checkpoints" / "step-000001" / "trainer_state.pt").write_bytes(b"")
    with pytest.raises(DamagedCheckpointError, match=r"It is the run's only checkpoint: restore it from a copy, or "
                                                     r"start over with checkpoint.resume=never"):
        _train("trainer.total_steps=2", where=(tiny_model_dir, run, reward_file))


def test_resuming_another_attempt_s_checkpoint_keeps_the_logs_it_cuts(tiny_model_dir, reward_file, tmp_path):
    """Another run's checkpoint resumed in a directory that has logs and no checkpoint of its own: the
    logs are emptied for the new lineage, and were lost; now copied aside first."""
    other, run = tmp_path / "other", tmp_path / "run"
    _train("trainer.total_steps=1", where=(tiny_model_dir, other, reward_file))
    _train("trainer.total_steps=1", "checkpoint.every_steps=0", where=(tiny_model_dir, run, reward_file))
    for path in (run / "checkpoints").glob("step-*"):  # its logs stay; its checkpoint gone
        shutil.rmtree(path)
    before = (run / "metrics.jsonl").read_text()
    with pytest.warns(UserWarning, match=r"resuming another attempt's checkpoint: the lines of metrics.jsonl"):
        Trainer(tiny_config(tiny_model_dir, run, reward_file, *QUIET, "trainer.total_steps=2",
                            f"checkpoint.resume={other / 'checkpoints' / 'step-000001'}")).train()
    [aside] = (run / "checkpoints").glob("abandoned-*")
    assert (aside / "metrics.jsonl").read_text() == before


def test_a_final_evaluation_that_fails_on_a_checkpointed_step_writes_it_once(tiny_model_dir, reward_file, tmp_path):
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *QUIET, "trainer.total_steps=2",
                                  "checkpoint.every_steps=1"))
    saved = []
    save = trainer.policy.save_checkpoint
    trainer.policy.save_checkpoint = lambda *args, **kwargs: saved.append(1) or save(*args, **kwargs)

    def failing() -> dict[str, float]:
        raise RuntimeError("the judge is down")

    trainer.evaluate = failing
    with pytest.raises(RuntimeError, match="the judge is down"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    assert len(saved) == 2  # steps 1 and 2, each once: step 2's periodic checkpoint holds the trained step


def test_another_run_s_damaged_checkpoint_is_answered_with_naming_another(tiny_model_dir, reward_file, tmp_path):
    other = tmp_path / "other"
    _train("trainer.total_steps=1", where=(tiny_model_dir, other, reward_file))
    named = other / "checkpoints" / "step-000001"
    (named / "trainer_state.pt").write_bytes(b"")
    with pytest.raises(DamagedCheckpointError, match=r"Name another checkpoint in checkpoint.resume, or restore this "
                                                     r"one from a copy"):
        _train("trainer.total_steps=2", f"checkpoint.resume={named}", where=(tiny_model_dir, tmp_path / "run",
                                                                              reward_file))
