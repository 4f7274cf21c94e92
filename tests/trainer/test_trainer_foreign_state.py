"""A checkpoint's ``trainer_state.pt`` that loads but is no trainer state (overwritten by hand, another
tool's file under the name, a state with a key cut out) stopped the resume with a bare ``AttributeError:
'list' object has no attribute 'get'`` or ``KeyError: 'sampler'``, naming neither the file nor what to
do: now the damaged-checkpoint error, with the remedy the run's checkpoints allow."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from dapo.errors import DamagedCheckpointError
from dapo.trainer.checkpoint import load_trainer_state
from tests.trainer.test_trainer_preemption import _train


@pytest.mark.parametrize(("replace", "found"), [
    (lambda state: [1, 2, 3], "a list, not a dict"),
    (lambda state: {key: value for key, value in state.items() if key != "sampler"}, "no sampler"),
    (lambda state: {key: value for key, value in state.items() if key not in ("policy", "rng")}, "no policy, rng"),
])
def test_a_state_file_holding_something_else_is_a_damaged_checkpoint_naming_it(
        tiny_model_dir, reward_file, tmp_path: Path, replace, found: str) -> None:
    run = tmp_path / "run"
    _train("trainer.total_steps=2", "checkpoint.every_steps=1", where=(tiny_model_dir, run, reward_file))
    newest = run / "checkpoints" / "step-000002"
    torch.save(replace(load_trainer_state(newest)), newest / "trainer_state.pt")
    with pytest.raises(DamagedCheckpointError, match=re.escape(f"{newest / 'trainer_state.pt'} is no dapo-rl trainer "
                                                               f"state ({found})") + r".* Resume from the checkpoint "
                       + re.escape(f"before it, checkpoint.resume={run / 'checkpoints' / 'step-000001'}")):
        _train("trainer.total_steps=3", "checkpoint.every_steps=1", where=(tiny_model_dir, run, reward_file))
