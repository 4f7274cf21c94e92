"""One process's final checkpoint: built on the files of this run directory's periodic
checkpoint of its step (not written again), and written whole after another run's."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from dapo.trainer import Trainer
from dapo.trainer.checkpoint import load_trainer_state
from dapo.trainer.metrics import read_metrics
from tests.trainer.conftest import tiny_config


def spy_on_the_final_checkpoint(trainer: Trainer, checkpoint: Path, folder: str = "") -> tuple[list[int], dict]:
    """Have ``trainer`` record the steps at which its policy writes a checkpoint, and, at the final
    evaluation (after the periodic checkpoint of the last step), the inodes of the files in
    ``checkpoint / folder`` and the checkpoint's trainer_state.pt."""
    saves: list[int] = []
    periodic: dict = {}
    save, evaluate = trainer.policy.save_checkpoint, trainer.evaluate

    def counted(directory, *args):
        saves.append(trainer.step)
        return save(directory, *args)

    def recorded():
        if trainer.step == trainer.cfg.trainer.total_steps:
            periodic.update(inodes={p.name: p.stat().st_ino for p in (checkpoint / folder).iterdir()},
                            state=load_trainer_state(checkpoint))
        return evaluate()

    trainer.policy.save_checkpoint, trainer.evaluate = counted, recorded
    return saves, periodic


def test_one_process_s_final_checkpoint_after_a_periodic_one_of_its_step_links_its_weights(
        tiny_model_dir, reward_file, tmp_path):
    """checkpoint.every_steps divides total_steps: one process wrote step 2's weights twice, by the
    periodic checkpoint and by the final one (gigabytes for the 1-GPU config's 1.5B model)."""
    run = tmp_path / "run"
    trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=2", "checkpoint.every_steps=2",
                                  "trainer.num_threads=1"))
    final = run / "checkpoints" / "step-000002"
    saves, periodic = spy_on_the_final_checkpoint(trainer, final)
    assert trainer.train().steps == 2
    assert saves == [2]  # the periodic checkpoint's weights alone
    state = load_trainer_state(final)
    assert state["final"] and not periodic["state"]["final"]
    weights = [name for name in periodic["inodes"] if name.endswith(".safetensors")]
    assert weights and all((final / name).stat().st_ino == periodic["inodes"][name] for name in weights)
    assert (final / "trainer_state.pt").stat().st_ino != periodic["inodes"]["trainer_state.pt"]
    optimizer, before = state["policy"]["optimizer"]["state"], periodic["state"]["policy"]["optimizer"]["state"]
    assert optimizer.keys() == before.keys() and all(
        torch.equal(optimizer[i]["exp_avg_sq"], before[i]["exp_avg_sq"]) for i in optimizer)
    assert state["log_lines"][0] == len(read_metrics(run))  # the final evaluation's line counted
    exported = AutoModelForCausalLM.from_pretrained(final)
    initial = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert any((a != b).any() for a, b in zip(exported.parameters(), initial.parameters())), "not the trained weights"


def test_a_run_resuming_another_run_s_checkpoint_of_its_last_step_writes_its_own_final_one(
        tiny_model_dir, reward_file, tmp_path):
    """checkpoint.resume=OTHER/checkpoints/step-N at the last step: the final checkpoint was built
    on a step-N of this run's directory, which holds none (FileNotFoundError), or where an earlier
    attempt left one, on that one's files: another lineage's weights."""
    first = tmp_path / "first"
    overrides = ("trainer.total_steps=2", "checkpoint.every_steps=2", "eval.every_steps=0",
                 "eval.before_training=false", "trainer.num_threads=1")
    stopped = Trainer(tiny_config(tiny_model_dir, first, reward_file, *overrides))

    def stopped_in_the_final_evaluation():
        raise KeyboardInterrupt

    stopped.evaluate = stopped_in_the_final_evaluation
    with pytest.raises(KeyboardInterrupt):
        stopped.train()
    source = first / "checkpoints" / "step-000002"
    assert load_trainer_state(source)["final"] is False
    inodes = {p.name: p.stat().st_ino for p in source.iterdir()}
    second = tmp_path / "second"
    Trainer(tiny_config(tiny_model_dir, second, reward_file, *overrides, f"checkpoint.resume={source}")).train()
    final = second / "checkpoints" / "step-000002"
    assert load_trainer_state(final)["final"] is True
    assert not [name for name, inode in inodes.items() if (final / name).exists() and (final / name).stat().st_ino == inode]
    assert load_trainer_state(source)["final"] is False  # the other run's checkpoint as it was
    AutoModelForCausalLM.from_pretrained(final)
