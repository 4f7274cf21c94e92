"""A TRL reward function is called with the dataset's columns by name: one that requires a column
no row of the data has is refused once the data has loaded, by a training run and by dapo eval."""

from __future__ import annotations

from pathlib import Path

import pytest

from dapo.rewards import RewardFunctionError
from dapo.trainer import Trainer
from dapo.trainer.summary import evaluate_model
from tests.trainer.conftest import tiny_config

TRL_REWARD = '''
def accuracy(completions, solution, **kwargs):
    return [0.0 if s is None else 1.0 for s in solution]
'''


@pytest.mark.parametrize("evaluation", [False, True])
def test_a_trl_function_requiring_a_column_the_data_lacks_stops_the_run_before_it_trains(
    tiny_model_dir: Path, tmp_path: Path, evaluation: bool
) -> None:
    rewards = tmp_path / "trl_rewards.py"
    rewards.write_text(TRL_REWARD)
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", rewards, fn="accuracy")
    split = "held-out data" if evaluation else "training data"
    with pytest.raises(RewardFunctionError, match=rf"the column 'solution', which no row of the {split} "
                                                   r"\(builtin:arithmetic\) has: it would get None for every response"):
        evaluate_model(cfg, progress=False) if evaluation else Trainer(cfg)
    assert not (tmp_path / "run" / "checkpoints").exists()
