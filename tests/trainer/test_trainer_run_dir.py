"""Run directories protect themselves: one run per directory, leftovers of killed runs removed,
no resume of another model's checkpoint, torn metrics lines survived."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import warnings

import pytest

from dapo.cli.main import main as dapo_main
from dapo.trainer import Trainer
from dapo.trainer.checkpoint import load_trainer_state
from dapo.trainer.metrics import read_metrics
from dapo.trainer.run_dir import RunDirError
from tests.trainer.conftest import make_tiny_model, tiny_config, tiny_overrides


def test_a_second_run_on_the_same_directory_refuses_naming_the_first(tiny_model_dir, reward_file, tmp_path, capsys):
    run = tmp_path / "run"
    first = Trainer(tiny_config(tiny_model_dir, run, reward_file))
    # another process: the lock is the kernel's, so it holds across processes too
    script = f"from dapo.trainer.run_dir import RunDirLock; from pathlib import Path; RunDirLock(Path(r'{run}'))"
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert other.returncode != 0 and f"in use by another dapo train (pid {os.getpid()})" in other.stderr
    assert dapo_main(["train", "default", *tiny_overrides(tiny_model_dir, run, reward_file)]) == 2
    assert "error: output_dir" in capsys.readouterr().err  # one line, no traceback
    first.state.close()
    assert not (run / ".lock").exists()  # a closed run leaves no lock file behind to look stale
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=1")).train()  # free again
    assert not (run / ".lock").exists()  # nor does a run that trained to its end


def test_leftover_temporary_checkpoints_of_a_killed_run_are_removed(tiny_model_dir, reward_file, tmp_path):
    run = tmp_path / "run"
    stale = run / "checkpoints" / ".tmp-step-000002-12345"
    stale.mkdir(parents=True)
    (stale / "model.safetensors").write_bytes(b"half")
    with pytest.warns(UserWarning, match="incomplete checkpoint"):
        trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file))
    assert not stale.exists()
    trainer.state.close()


def test_resume_refuses_another_models_checkpoint_naming_the_difference(tiny_model_dir, reward_file, tmp_path):
    run = tmp_path / "run"
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=1")).train()
    run_config = (run / "config.yaml").read_text()
    wider = make_tiny_model(tmp_path / "wider", hidden_size=48)
    trainer = Trainer(tiny_config(wider, run, reward_file, "trainer.total_steps=2"))
    with pytest.raises(RunDirError, match=r"hidden_size 32 \(checkpoint\) != 48 \(this run\).*new output_dir") as refused:
        trainer.train()
    assert "name it" not in str(refused.value)  # a named resume refuses another architecture too
    trainer.state.close()
    assert (run / "config.yaml").read_text() == run_config  # the refused run's config is not the run's
    # named (checkpoint.resume=PATH) by a run in another directory: no new output_dir would help
    named = Trainer(tiny_config(wider, tmp_path / "run2", reward_file, "trainer.total_steps=2",
                                f"checkpoint.resume={run / 'checkpoints' / 'step-000001'}"))
    with pytest.raises(RunDirError, match=r"hidden_size 32 .*\. Name another checkpoint in checkpoint\.resume"):
        named.train()
    named.state.close()
    # the same architecture from another directory: a different model.path is refused too
    same_shape = make_tiny_model(tmp_path / "other", seed=1)
    trainer = Trainer(tiny_config(same_shape, run, reward_file, "trainer.total_steps=2"))
    # (a moved model or dataset: a named resume goes on from the checkpoint, and the refusal says how)
    with pytest.raises(RunDirError, match=r"model\.path.*name it to go on from it with this run's settings "
                                          r"\(checkpoint\.resume=.*step-000001\)"):
        trainer.train()
    trainer.state.close()
    step_1 = run / "checkpoints" / "step-000001"
    with pytest.warns(UserWarning, match="model.path .* differs"):  # as the refusal said: it goes on from step 1
        resumed = Trainer(tiny_config(same_shape, run, reward_file, "trainer.total_steps=2", f"checkpoint.resume={step_1}"))
        resumed.train()
    assert resumed.step == 2
    # ... unless the user says to start over
    Trainer(tiny_config(same_shape, run, reward_file, "trainer.total_steps=1", "checkpoint.resume=never")).train()


def test_a_torn_metrics_line_is_skipped_on_resume_and_the_file_repaired(tiny_model_dir, reward_file, tmp_path):
    run = tmp_path / "run"
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=2")).train()
    with open(run / "metrics.jsonl", "a") as handle:
        handle.write('{"step": 3, "actor/lo')  # killed mid-write (after step 2's checkpoint: cut with step 3)
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=3")).train()
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert all(isinstance(json.loads(line)["step"], int) for line in lines)
    assert [r["step"] for r in read_metrics(run) if "actor/loss" in r] == [1, 2, 3]


def test_a_run_killed_during_its_final_evaluation_does_it_on_resume(tiny_model_dir, reward_file, tmp_path):
    """checkpoint.every_steps divides total_steps, so step 2 is checkpointed before the final
    evaluation; a run stopped during that evaluation must not count as finished on resume."""
    run = tmp_path / "run"
    overrides = ("trainer.total_steps=2", "eval.every_steps=0", "eval.before_training=false")
    interrupted = Trainer(tiny_config(tiny_model_dir, run, reward_file, *overrides))

    def killed() -> dict:
        raise KeyboardInterrupt

    interrupted.evaluate = killed  # the only evaluation left is the final one
    with pytest.raises(KeyboardInterrupt):
        interrupted.train()
    assert (run / "checkpoints" / "step-000002").is_dir()
    summary = Trainer(tiny_config(tiny_model_dir, run, reward_file, *overrides)).train()
    assert summary.steps == 2 and summary.eval_after and "eval/avg@2" in summary.eval_after
    assert [row["step"] for row in read_metrics(run) if "eval/avg@2" in row] == [2]
    # the final checkpoint is marked: resuming it again has nothing left to do
    assert load_trainer_state(run / "checkpoints" / "step-000002")["final"] is True
    again = Trainer(tiny_config(tiny_model_dir, run, reward_file, *overrides)).train()
    assert again.eval_after is None


def test_a_checkpoint_that_fails_to_load_leaves_the_later_ones_in_place(tiny_model_dir, reward_file, tmp_path):
    """Going back to an earlier checkpoint sets the later ones aside only once it has loaded:
    a damaged one must not move the run's good checkpoints out of resume=auto's reach."""
    run = tmp_path / "run"
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "eval.every_steps=0", "trainer.total_steps=2")).train()
    checkpoints = run / "checkpoints"
    (checkpoints / "step-000001" / "model.safetensors").write_bytes(b"\0" * 64)
    going_back = tiny_config(tiny_model_dir, run, reward_file, "eval.every_steps=0",
                             f"checkpoint.resume={checkpoints / 'step-000001'}", "trainer.total_steps=2")
    with pytest.raises(Exception, match="(?i)safetensor|header|deserializ"):
        Trainer(going_back).train()
    assert sorted(p.name for p in checkpoints.iterdir()) == ["step-000001", "step-000002"]


def test_a_checkpoint_left_half_swapped_by_a_kill_is_put_back(tiny_model_dir, reward_file, tmp_path):
    run = tmp_path / "run"
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=1", "eval.every_steps=0")).train()
    checkpoints = run / "checkpoints"
    # killed between renaming step-1 aside and renaming its replacement into place
    (checkpoints / "step-000001").rename(checkpoints / ".old-step-000001-4242")
    (checkpoints / ".tmp-step-000001-4242").mkdir()
    with pytest.warns(UserWarning, match="restored checkpoint"):
        trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=2"))
    try:
        assert [p.name for p in checkpoints.iterdir()] == ["step-000001"]
        assert trainer.resume() and trainer.step == 1
    finally:
        trainer.close()


def test_an_architecture_field_an_older_checkpoint_did_not_write_is_no_mismatch(tmp_path):
    """Fields are compared where the checkpoint's config.json has them: one written before a field
    existed (no tie_word_embeddings) resumes; a field it holds with another value does not."""
    from types import SimpleNamespace

    from dapo.trainer.run_dir import checkpoint_mismatch

    checkpoint = tmp_path / "step-000001"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({"model_type": "qwen2", "vocab_size": 64}))
    model = SimpleNamespace(model_type="qwen2", vocab_size=64, tie_word_embeddings=False)
    assert checkpoint_mismatch(checkpoint, model, {}, automatic=True) is None
    assert "vocab_size 64 (checkpoint) != 65" in checkpoint_mismatch(
        checkpoint, SimpleNamespace(model_type="qwen2", vocab_size=65, tie_word_embeddings=False), {}, automatic=True)
    # every difference said, not the first alone: the model's and the run's
    (checkpoint / "dapo_config.yaml").write_text("data:\n  train_files: [/data/a.jsonl]\n")
    both = checkpoint_mismatch(checkpoint, SimpleNamespace(model_type="llama", vocab_size=64, tie_word_embeddings=False),
                               {"data": {"train_files": ["/data/b.jsonl"]}}, automatic=True)
    assert both == ("model_type 'qwen2' (checkpoint) != 'llama' (this run); data.train_files ['/data/a.jsonl'] "
                    "(checkpoint) != ['/data/b.jsonl'] (this run)")


def test_a_driver_that_steps_without_train_still_records_its_config(tiny_model_dir, reward_file, tmp_path):
    """dapo ablate and Python drivers call step_once() and log, never train(): the run's
    config.yaml is written with the first metrics."""
    run = tmp_path / "run"
    trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file))
    assert not (run / "config.yaml").exists()
    trainer.state.log(1, trainer.step_once().metrics)
    assert "output_dir: " + str(run) in (run / "config.yaml").read_text()
    trainer.close()


def resume_warnings(trainer: Trainer) -> list[str]:
    """What ``trainer.train()`` warned of its resume's settings (what changed, the optimizer's)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    return [str(w.message) for w in caught
            if any(word in str(w.message) for word in ("settings", "lr", "learning rate", "weight_decay", "betas"))]


def test_a_resumed_run_trains_with_its_own_optimizer_settings(tiny_model_dir, reward_file, tmp_path):
    """The checkpoint's AdamW state carries the lr, weight decay and betas it was saved with; a
    run resumed with other values must use its own from its first step, and say so, once: the
    changed-settings list said trainer.lr and the optimizer again ("resumed with this run's
    optimizer settings, not the checkpoint's: initial_lr 0.001 -> 0.005, ..."), in two warnings."""
    import torch

    run = tmp_path / "run"
    common = ("eval.every_steps=0", "eval.before_training=false", "trainer.warmup_steps=0",
              "trainer.lr_schedule=constant")
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=2", "trainer.lr=1e-3",
                        "trainer.weight_decay=0.1", *common)).train()
    resumed = tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=3", "trainer.lr=5e-3",
                          "trainer.weight_decay=0.0", "trainer.betas=[0.8,0.9]", *common)
    assert resume_warnings(Trainer(resumed)) == [
        "resuming step-000002 with other settings than it was saved with, which apply from the resumed step: "
        "trainer.betas [0.9, 0.999] -> [0.8, 0.9]; trainer.lr 0.001 -> 0.005; trainer.total_steps 2 -> 3; "
        "trainer.weight_decay 0.1 -> 0.0; the learning-rate schedule goes on from step 3 with this run's settings: "
        "its learning rate 0.001 -> 0.005"]
    assert [row["actor/lr"] for row in read_metrics(run) if "actor/lr" in row] == [1e-3, 1e-3, 5e-3]
    groups = torch.load(run / "checkpoints" / "step-000003" / "trainer_state.pt",
                        weights_only=True)["policy"]["optimizer"]["param_groups"]
    assert [(g["lr"], g["weight_decay"], tuple(g["betas"])) for g in groups] == [(5e-3, 0.0, (0.8, 0.9))] * 2
    # a schedule changed on resume ("train longer": total_steps up re-stretches a cosine) says so,
    # with the learning rate it goes on at (0.55 x lr, not the 0.1 x lr the shorter cosine had reached)
    cosine = ("eval.every_steps=0", "eval.before_training=false", "trainer.warmup_steps=0", "trainer.lr=1e-3",
              "trainer.lr_schedule=cosine")
    longer = tmp_path / "longer"
    Trainer(tiny_config(tiny_model_dir, longer, reward_file, "trainer.total_steps=2", *cosine)).train()
    assert resume_warnings(Trainer(tiny_config(tiny_model_dir, longer, reward_file, "trainer.total_steps=4",
                                               *cosine))) == [
        "resuming step-000002 with other settings than it was saved with, which apply from the resumed step: "
        "trainer.total_steps 2 -> 4; the learning-rate schedule goes on from step 3 with this run's settings: "
        "its learning rate 0.0001 -> 0.00055"]
    assert {row["step"]: row["actor/lr"] for row in read_metrics(longer) if "actor/lr" in row}[3] == pytest.approx(5.5e-4)


def test_a_changed_lr_resumed_from_a_checkpoint_without_its_run_config_is_said_by_the_optimizer(
        tiny_model_dir, reward_file, tmp_path):
    """No dapo_config.yaml in the checkpoint (copied without it): no changed-settings list, so the
    optimizer's own report is the one that says the lr changed."""
    run = tmp_path / "run"
    common = ("eval.every_steps=0", "eval.before_training=false", "trainer.warmup_steps=0",
              "trainer.lr_schedule=constant", "trainer.total_steps=1")
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.lr=1e-3", *common)).train()
    (run / "checkpoints" / "step-000001" / "dapo_config.yaml").unlink()
    said = resume_warnings(Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.lr=2e-3", *common[:-1],
                                               "trainer.total_steps=2")))
    assert said == ["resumed with this run's optimizer settings, not the checkpoint's: initial_lr 0.001 -> 0.002, "
                    "learning rate at step 1 0.001 -> 0.002 (trainer.lr, lr_schedule, warmup_steps, total_steps, "
                    "min_lr_ratio)"]


def test_a_run_killed_while_writing_its_final_checkpoint_logs_the_final_evaluation_once(
        tiny_model_dir, reward_file, tmp_path):
    run = tmp_path / "run"
    overrides = ("trainer.total_steps=2", "eval.every_steps=0", "eval.before_training=false")
    killed = Trainer(tiny_config(tiny_model_dir, run, reward_file, *overrides))
    save = killed.save_checkpoint

    def killed_while_writing_the_final(final: bool = False, **markers):
        if final:
            raise KeyboardInterrupt
        return save(final, **markers)

    def killed_while_rewriting_the_periodic_one_as_final(*args, **kwargs):  # (a periodic one of step 2 is there)
        raise KeyboardInterrupt

    killed.save_checkpoint = killed_while_writing_the_final
    killed.state.resave = killed_while_rewriting_the_periodic_one_as_final
    with pytest.raises(KeyboardInterrupt):
        killed.train()
    Trainer(tiny_config(tiny_model_dir, run, reward_file, *overrides)).train()
    assert [row["step"] for row in read_metrics(run) if "eval/avg@2" in row] == [2]
    assert [row["step"] for row in read_metrics(run) if "actor/loss" in row] == [1, 2]


def test_resuming_past_total_steps_says_there_is_nothing_to_train(tiny_model_dir, reward_file, tmp_path):
    run = tmp_path / "run"
    overrides = ("eval.every_steps=0", "eval.before_training=false")
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=2", *overrides)).train()
    with pytest.warns(UserWarning, match="resumed at step 2, past trainer.total_steps=1: nothing to train"):
        assert Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=1", *overrides)).train().steps == 2


def test_resuming_a_final_checkpoint_at_total_steps_says_there_is_nothing_to_train(tiny_model_dir, reward_file,
                                                                                   tmp_path):
    """Another run's final checkpoint named with the same total_steps trains nothing: said, not silent."""
    overrides = ("eval.every_steps=0", "eval.before_training=false", "trainer.total_steps=2")
    Trainer(tiny_config(tiny_model_dir, tmp_path / "first", reward_file, *overrides)).train()
    final = tmp_path / "first" / "checkpoints" / "step-000002"
    with pytest.warns(UserWarning, match="resumed at step 2, from a final checkpoint, at trainer.total_steps=2"):
        Trainer(tiny_config(tiny_model_dir, tmp_path / "second", reward_file, *overrides,
                            f"checkpoint.resume={final}")).train()


def test_a_run_without_held_out_data_logs_no_empty_final_row(tiny_model_dir, reward_file, tmp_path):
    """data.eval_files=[]: the final evaluation has nothing to log, and metrics.jsonl (and
    TensorBoard, W&B) get no row holding the step alone."""
    run = tmp_path / "run"
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=1", "data.eval_files=[]",
                        "eval.before_training=false", "eval.every_steps=0")).train()
    rows = read_metrics(run)
    assert [row["step"] for row in rows] == [0, 1] and "actor/loss" in rows[1]  # step 0: the data's counts
    assert all(len(row) > 1 for row in rows), rows


@pytest.mark.parametrize("stop", [RuntimeError("out of memory"), KeyboardInterrupt(), SystemExit(143)],
                         ids=["fails", "ctrl-c", "sigterm"])
def test_a_final_evaluation_that_fails_leaves_the_trained_steps_checkpointed(tiny_model_dir, reward_file, tmp_path,
                                                                             stop):
    """checkpoint.every_steps=2 does not divide total_steps=3: step 3 had no checkpoint but the
    final one, written after the final evaluation, so an evaluation that failed lost step 3; so
    did one stopped by Ctrl-C or SIGTERM (dapo's CLI raises SystemExit for it), where a scheduler's
    time limit lands during a long final avg@32: with checkpoint.every_steps=0, the whole run."""
    run = tmp_path / "run"
    overrides = ("trainer.total_steps=3", "checkpoint.every_steps=2", "eval.every_steps=0", "eval.before_training=false")
    failing = Trainer(tiny_config(tiny_model_dir, run, reward_file, *overrides))

    def stopped() -> dict:
        raise stop

    failing.evaluate = stopped
    with pytest.raises(type(stop)):
        failing.train()
    assert load_trainer_state(run / "checkpoints" / "step-000003")["final"] is False
    summary = Trainer(tiny_config(tiny_model_dir, run, reward_file, *overrides)).train()
    assert summary.steps == 3 and summary.resumed_at == 3 and summary.eval_after


def test_a_checkpoint_that_cannot_be_written_says_why_in_one_line_and_leaves_nothing(
        tiny_model_dir, reward_file, tmp_path, capsys, monkeypatch):
    """A full disk stopped a run with a traceback (exit 1) and left the half-written checkpoint
    taking room until the next start: torch.save raises a RuntimeError of its own over the
    OSError, and safetensors an error that holds no OSError at all."""
    import errno

    import safetensors.torch
    import torch

    from dapo.trainer.policy import PolicyWorker

    run = tmp_path / "run"
    args = ["train", "default", *tiny_overrides(tiny_model_dir, run, reward_file), "trainer.total_steps=2",
            "eval.every_steps=0", "eval.before_training=false", "logging.tensorboard=false"]
    real_save, real_policy_save = torch.save, PolicyWorker.save_checkpoint
    saves = []

    def full_disk(obj, handle, *rest, **kwargs):  # as torch.save fails on a full disk
        saves.append(1)
        if len(saves) < 2:
            return real_save(obj, handle, *rest, **kwargs)
        handle.write(b"half")
        try:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 4 vs 2") from None

    monkeypatch.setattr(torch, "save", full_disk)
    assert dapo_main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"error: No space left on device (checkpoint step 2 not written; the earlier ones are kept): {run}" in err
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-000001"]
    monkeypatch.setattr(torch, "save", real_save)

    def safetensors_fails(self, directory, tokenizer, hf_export=True):  # a real SafetensorError
        real_policy_save(self, directory, tokenizer, hf_export)
        safetensors.torch.save_file({"w": torch.zeros(1)}, str(directory / "gone" / "model.safetensors"))

    monkeypatch.setattr(PolicyWorker, "save_checkpoint", safetensors_fails)
    assert dapo_main(args) == 2  # resumes step 1, fails writing step 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error: No such file or directory (checkpoint step 2 not written" in err
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-000001"]

    def file_fails(self, directory, tokenizer, hf_export=True):  # the file the error names is said, not the folder
        raise OSError(errno.EIO, os.strerror(errno.EIO), str(directory / "model.safetensors"))

    monkeypatch.setattr(PolicyWorker, "save_checkpoint", file_fails)
    assert dapo_main(args) == 2
    err = capsys.readouterr().err
    assert f"error: {os.strerror(errno.EIO)} (checkpoint step 2 not written; the earlier ones are kept): {run}" in err
    assert err.split("the earlier ones are kept): ")[1].split("\n")[0].endswith("/model.safetensors")
    monkeypatch.setattr(PolicyWorker, "save_checkpoint", real_policy_save)
    assert dapo_main(args) == 0
    assert [p.name for p in (run / "checkpoints").iterdir() if p.name.startswith(".")] == []
    assert load_trainer_state(run / "checkpoints" / "step-000002")["final"] is True


def test_a_resume_that_only_finishes_the_run_says_no_schedule_goes_on():
    """A step-2 checkpoint resumed with trainer.total_steps lowered to 2 said "the learning-rate
    schedule goes on from step 3", and no step 3 is trained."""
    from dapo.config import TrainerConfig
    from dapo.trainer.optim import schedule_change

    saved = {"total_steps": 4, "lr_schedule": "cosine", "warmup_steps": 0, "lr": 1e-3}
    shorter = TrainerConfig(total_steps=2, lr_schedule="cosine", warmup_steps=0, lr=1e-3)
    assert schedule_change(saved, shorter, done_steps=2) == ""
    assert schedule_change(saved, dataclasses.replace(shorter, total_steps=3), done_steps=2).startswith(
        "; the learning-rate schedule goes on from step 3")
