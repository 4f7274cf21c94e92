"""Algorithm plugins: the example of docs/extending.md registers an advantage estimator and a
policy loss from a file, config selects them by name, and a training step runs with them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dapo import algo
from dapo.config import ConfigError
from dapo.trainer import Trainer
from tests.trainer.conftest import tiny_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"


@pytest.fixture
def doc_plugin(tmp_path: Path):
    """docs/extending.md's my_algo.py, written to a file; its registrations are undone after."""
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    path = tmp_path / "my_algo.py"
    path.write_text(code)
    yield path
    algo.ADVANTAGE_ESTIMATORS.pop("median_baseline", None)
    algo.POLICY_LOSSES.pop("plain_pg", None)


def test_a_plugin_from_a_file_is_selectable_by_name_and_trains(doc_plugin, tiny_model_dir, reward_file, tmp_path, monkeypatch):
    command = re.search(r"```bash\ndapo train (.*?)\n```", DOC.read_text(), re.S).group(1).split()
    assert command[0] == "algorithm.plugins=[my_algo.py]"
    overrides = [f"algorithm.plugins=[{doc_plugin}]", *command[1:], "trainer.total_steps=1"]
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *overrides)
    assert (cfg.algorithm.advantage, cfg.algorithm.policy_loss) == ("median_baseline", "plain_pg")
    calls = {"median_baseline": 0, "plain_pg": 0}

    def counted(registry, name):
        inner = registry[name]

        def wrapper(*args, **kwargs):
            calls[name] += 1
            return inner(*args, **kwargs)

        monkeypatch.setitem(registry, name, wrapper)

    counted(algo.ADVANTAGE_ESTIMATORS, "median_baseline")
    counted(algo.POLICY_LOSSES, "plain_pg")
    trainer = Trainer(cfg)
    trainer.train()
    assert calls["median_baseline"] == 1 and calls["plain_pg"] >= 2  # one per micro-batch
    assert trainer.policy.version == 2  # both optimizer updates of the step were made


def test_the_median_baseline_is_what_its_docstring_says(doc_plugin):
    import torch

    from dapo.config import load_config

    load_config([], [f"algorithm.plugins=[{doc_plugin}]"])
    scores = torch.tensor([1.0, -1.0, -1.0, 3.0, 0.5, 0.5], dtype=torch.float64)
    groups = torch.tensor([7, 7, 7, 2, 2, 2])
    advantages = algo.compute_advantages("median_baseline", scores, groups)
    assert advantages.tolist() == [2.0, 0.0, 0.0, 2.5, 0.0, 0.0]


def test_unknown_names_and_broken_plugins_are_config_errors_that_say_why(tmp_path):
    from dapo.config import load_config

    with pytest.raises(ConfigError, match=r"algorithm.policy_loss='nope' is not one of \['decoupled_clip'\]"):
        load_config([], ["algorithm.policy_loss=nope"])
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(ConfigError, match=r"algorithm.plugins entry .*broken.py.*RuntimeError: boom"):
        load_config([], [f"algorithm.plugins=[{broken}]"])
