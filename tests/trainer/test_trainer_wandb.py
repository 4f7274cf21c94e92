"""W&B logging across attempts of one run directory (against a stand-in ``wandb`` module)."""

from __future__ import annotations

import json
import sys
import types
from types import SimpleNamespace

import pytest

from dapo.trainer.metrics import WANDB_RUN_FILE, MetricsLogger


@pytest.fixture
def fake_wandb(monkeypatch):
    module = types.ModuleType("wandb")
    module.inits = []

    def init(**kwargs):
        module.inits.append(kwargs)
        run = SimpleNamespace(id=kwargs.get("id") or f"run{len(module.inits)}", logged=[], finish=lambda: None)
        run.log = lambda metrics, step: run.logged.append(step)
        return run

    module.init = init
    monkeypatch.setitem(sys.modules, "wandb", module)
    return module


def attempt(run_dir, resumed_at: int, steps: range) -> MetricsLogger:
    logger = MetricsLogger(run_dir, tensorboard=False, wandb=True, wandb_project="p", config={})
    logger.truncate_after(resumed_at)  # what the run directory does before the first step
    for step in steps:
        logger.log(step, {"loss": 1.0})
    logger.close()
    return logger


def test_a_resume_goes_on_in_its_wandb_run_unless_wandb_holds_steps_it_would_log_again(fake_wandb, tmp_path):
    attempt(tmp_path, -1, range(0, 3))  # a fresh run: steps 0-2, killed after a checkpoint at step 2
    assert [(i.get("id"), i.get("resume"), i["group"]) for i in fake_wandb.inits] == [(None, None, None)]
    attempt(tmp_path, 2, range(3, 6))  # resumed at its last logged step: the same W&B run goes on
    assert fake_wandb.inits[-1]["id"] == "run1" and fake_wandb.inits[-1]["resume"] == "allow"
    # killed at step 5 after a checkpoint at step 4: W&B holds step 5, which the resume logs again
    with pytest.warns(UserWarning, match=r"W&B run run1 holds steps 5-5 .* new run in W&B group 'run1'"):
        attempt(tmp_path, 4, range(5, 7))
    assert "id" not in fake_wandb.inits[-1] and fake_wandb.inits[-1]["group"] == "run1"
    assert json.loads((tmp_path / WANDB_RUN_FILE).read_text()) == {"id": "run3", "group": "run1"}
    attempt(tmp_path, 6, range(7, 8))  # and that run goes on in its turn, in the group
    assert (fake_wandb.inits[-1]["id"], fake_wandb.inits[-1]["group"]) == ("run3", "run1")
    attempt(tmp_path, -1, range(0, 1))  # checkpoint.resume=never: a run of its own
    assert "id" not in fake_wandb.inits[-1] and fake_wandb.inits[-1]["group"] is None


def test_wandb_opens_at_first_use_and_only_once(fake_wandb, tmp_path):
    logger = MetricsLogger(tmp_path, tensorboard=False, wandb=True, wandb_project="p", config={"a": 1})
    assert fake_wandb.inits == []  # not before the resume decision
    logger.log(1, {"loss": 1.0})
    logger.log_completions(1, [])
    logger.log(2, {"loss": 1.0})
    assert len(fake_wandb.inits) == 1 and fake_wandb.inits[0]["config"] == {"a": 1}
    assert logger._wandb.logged == [1, 2]
