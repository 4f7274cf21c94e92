"""The final checkpoint of policy ranks with checkpoint.hf_export=final: its shards are published
before its Hugging Face export, so that a run stopped in the export resumes to write it alone."""

from __future__ import annotations

import shutil

import pytest
from transformers import AutoModelForCausalLM

from dapo.trainer import Trainer
from dapo.trainer.checkpoint import load_trainer_state
from dapo.trainer.metrics import read_metrics
from dapo.trainer.run_dir import SHARDED_DIR
from tests.trainer.conftest import tiny_config
from tests.trainer.test_trainer_final_checkpoint import spy_on_the_final_checkpoint
from tests.trainer.test_trainer_ray import TWO_RANKS

pytest.importorskip("ray")


@pytest.mark.slow  # a Ray run of two ranks stopped in its export, and its resume (about 25 s)
def test_a_run_stopped_in_its_final_export_resumes_to_write_the_export_alone(tiny_model_dir, reward_file, tmp_path):
    """No periodic checkpoint held step 2 (checkpoint.every_steps=5): stopped in the final export,
    the run resumed from the last periodic checkpoint (here: none) and trained the steps again."""
    run = tmp_path / "run"
    overrides = (*TWO_RANKS, "trainer.total_steps=2", "checkpoint.every_steps=5", "checkpoint.hf_export=final")
    trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file, *overrides))

    def stopped(directory):
        raise KeyboardInterrupt  # a scheduler's SIGTERM landing in a 131 GB export

    trainer.policy.export_checkpoint = stopped
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    final = run / "checkpoints" / "step-000002"
    state = load_trainer_state(final)
    assert state["final"] and state["export_owed"] and not (final / "config.json").exists()
    shard = final / SHARDED_DIR / "__0_0.distcp"
    shard_inode, rows = shard.stat().st_ino, read_metrics(run)
    assert [r["step"] for r in rows if "actor/loss" in r] == [1, 2] and "eval/avg@2" in rows[-1]

    # one process resuming the ranks' shards writes its own checkpoint of the step
    alone = tmp_path / "alone"
    shutil.copytree(run, alone)
    one = Trainer(tiny_config(tiny_model_dir, alone, reward_file, *overrides[len(TWO_RANKS):], "trainer.num_threads=1"))
    with pytest.warns(UserWarning, match="from a final checkpoint"):
        assert one.train().updates == 0
    state = load_trainer_state(alone / "checkpoints" / "step-000002")
    assert state["final"] and not state["export_owed"] and "sharded" not in state["policy"]
    AutoModelForCausalLM.from_pretrained(alone / "checkpoints" / "step-000002")

    resumed = Trainer(tiny_config(tiny_model_dir, run, reward_file, *overrides))
    with pytest.warns(UserWarning, match="from a final checkpoint"):
        summary = resumed.train()
    assert summary.steps == 2 and summary.updates == 0  # nothing trained again, nor evaluated
    assert read_metrics(run) == rows
    state = load_trainer_state(final)
    assert state["final"] and not state["export_owed"]
    assert (final / SHARDED_DIR / "__0_0.distcp").stat().st_ino == shard_inode  # linked, not written again
    exported = AutoModelForCausalLM.from_pretrained(final)
    initial = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert any((a != b).any() for a, b in zip(exported.parameters(), initial.parameters())), "not the trained weights"


@pytest.mark.slow  # a Ray run of two ranks (about 12 s)
def test_the_final_checkpoint_after_a_periodic_one_of_its_step_links_its_shards(tiny_model_dir, reward_file, tmp_path):
    """checkpoint.every_steps divides total_steps (the 32B config's 500 and 20): step 2's shards,
    the whole AdamW state, were written twice, by the periodic checkpoint and by the final one."""
    run = tmp_path / "run"
    trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file, *TWO_RANKS, "trainer.total_steps=2",
                                  "checkpoint.every_steps=2", "checkpoint.hf_export=final"))
    saves, periodic = spy_on_the_final_checkpoint(trainer, run / "checkpoints" / "step-000002", SHARDED_DIR)
    assert trainer.train().steps == 2
    assert saves == [2]  # the periodic checkpoint's shards alone
    final = run / "checkpoints" / "step-000002"
    state = load_trainer_state(final)
    assert state["final"] and not state["export_owed"] and (final / "config.json").is_file()
    now = {p.name: p.stat().st_ino for p in (final / SHARDED_DIR).iterdir()}
    assert {name for name in now if now[name] == periodic["inodes"].get(name)} == {".metadata", "__0_0.distcp", "__1_0.distcp"}
    assert state["log_lines"][0] == len(read_metrics(run))  # the final evaluation's line counted
    AutoModelForCausalLM.from_pretrained(final)

