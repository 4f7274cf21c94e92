"""The loop's state is in one place: ``Trainer.state_dict()`` (step, group ids, sampler cursor and
surplus, RNG) plus the policy's own state is everything the next step depends on."""

from __future__ import annotations

import copy

import torch

from dapo.trainer import Trainer
from dapo.trainer.checkpoint import set_rng_state
from dapo.trainer.run_state import RunState
from tests.trainer.conftest import tiny_config


def _comparable(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if not k.startswith(("time/", "perf/"))}


def test_state_dicts_moved_in_memory_reproduce_the_next_step(tiny_model_dir, reward_file, tmp_path):
    """A second trainer given the first one's loop and policy state (no checkpoint on disk) makes
    the same next step: same samples and rewards, same loss, same updated weights."""
    extra = ("checkpoint.every_steps=0", "trainer.gen_prompts_per_round=8")  # 8 > 4 per step: surplus groups
    first = Trainer(tiny_config(tiny_model_dir, tmp_path / "a", reward_file, *extra))
    second = Trainer(tiny_config(tiny_model_dir, tmp_path / "b", reward_file, *extra))
    try:
        for _ in range(2):
            first.step_once()
        assert first.sampler.surplus, "no surplus groups carried: the test would not cover them"
        # copies, as a checkpoint would hold (a state_dict shares the optimizer's tensors)
        loop_state, policy_state = copy.deepcopy(first.state_dict()), copy.deepcopy(first.policy.state_dict())
        second.model.load_state_dict(first.model.state_dict())
        second.policy.load_state_dict(policy_state)
        second.load_state_dict(loop_state)
        assert second.step == 2 and second.engine_version is None  # the engine syncs before its next use
        replayed = second.step_once()
        set_rng_state(loop_state["rng"])
        original = first.step_once()
        assert _comparable(replayed.metrics) == _comparable(original.metrics)
        assert [r.score for r in replayed.reward_results] == [r.score for r in original.reward_results]
        assert all(torch.equal(a, b) for a, b in zip(first.model.parameters(), second.model.parameters()))
        assert second.state_dict()["next_group_id"] == first.state_dict()["next_group_id"]
    finally:
        first.close()
        second.close()


def test_per_step_data_is_returned_not_kept_on_the_trainer(tiny_model_dir, reward_file, tmp_path):
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "logging.completions_per_step=2"))
    try:
        before = set(vars(trainer))
        result = trainer.step_once()
        assert set(vars(trainer)) == before  # nothing new written onto the trainer by a step
        assert len(result.completions) == 2 and result.reward_results
        assert result.metrics["time/generate"] == result.timer["generate"] > 0
        # the run directory is handed values; it holds no reference back to the trainer
        assert isinstance(trainer.state, RunState) and all(v is not trainer for v in vars(trainer.state).values())
    finally:
        trainer.close()
