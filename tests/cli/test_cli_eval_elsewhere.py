"""`dapo eval CHECKPOINT` from another directory than the run's: a reward function given as a
module name that only the run's working directory held (my_rewards.py there) is still imported,
by the reward workers too, through the python_path the run's saved config recorded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dapo.config import builtin_config_path, load_config
from dapo.config.loading import config_to_dict, with_absolute_paths
from tests.trainer.conftest import make_tiny_model

# a constant score: the reward the eval reports is this function's, not the verifier's
REWARDS = "def constant(response, ground_truth, extra):\n    return {'score': 0.5, 'acc': True}\n"


def test_eval_of_a_checkpoint_from_another_directory_imports_a_working_directory_reward(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    start, elsewhere = tmp_path / "start", tmp_path / "elsewhere"
    start.mkdir()
    elsewhere.mkdir()
    (start / "cli_eval_rewards.py").write_text(REWARDS)
    checkpoint = make_tiny_model(tmp_path / "run" / "checkpoints" / "step-000001")
    monkeypatch.chdir(start)
    cfg = load_config([builtin_config_path("default")], [
        f"output_dir={tmp_path / 'run'}", "reward.functions=[{path: 'cli_eval_rewards:constant', weight: 1.0}]",
        "reward.verifier_weight=0", "reward.num_workers=1", "eval.k=1", "eval.max_problems=2",
        "rollout.max_response_length=4", "algorithm.overlong_buffer_len=2", "rollout.native_dtype=float32"])
    # what the run writes into every checkpoint (dapo.trainer.run_state.RunState)
    (checkpoint / "dapo_config.yaml").write_text(yaml.safe_dump(with_absolute_paths(config_to_dict(cfg)),
                                                                sort_keys=False))
    result = subprocess.run([sys.executable, "-m", "dapo.cli.main", "eval", str(checkpoint)], cwd=elsewhere,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    metrics = json.loads((tmp_path / "run" / "eval" / "step-000001" / "metrics.json").read_text())
    assert metrics["num_problems"] == 2 and metrics["metrics"]["eval/avg@1"] == 1.0
