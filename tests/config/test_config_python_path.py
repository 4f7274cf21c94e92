"""python_path: a reward function or plugin given as a module name that only the working
directory held (``my_rewards:fn``, my_rewards.py there) is imported by a process started
elsewhere from a run's saved config (``dapo eval CHECKPOINT``, a resume, a Ray rank): the saved
config records the directory, and rebuilding a config puts it on sys.path first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dapo.config import ConfigError, load_config
from dapo.config.loading import config_to_dict, with_absolute_paths

REWARDS = "def score(response, ground_truth, extra):\n    return 0.25\n"
# a plugin whose estimator only validates once the module is imported (in the algorithm section)
PLUGIN = ("from dapo.algo import register_advantage\n\n@register_advantage('{name}')\n"
          "def estimator(scores, group_ids, eps):\n    return scores - scores.mean()\n")
# what a process started in another directory does with the saved config: dapo eval's load_config,
# then the reward function; a rank's config_from_dict (its validation imports the plugin)
ELSEWHERE = """
import sys
import yaml
from dapo.config import load_config
from dapo.config.loading import config_from_dict
from dapo.rewards.user_functions import load_reward_function
cfg = load_config([sys.argv[1]])
print("score", load_reward_function(cfg.reward.functions[0].path)("response", "truth", {}))
print("rank", config_from_dict(yaml.safe_load(open(sys.argv[1]))).algorithm.advantage)
"""


@pytest.fixture
def restored_imports(monkeypatch: pytest.MonkeyPatch):
    """sys.path and the algorithm registries as they were, and the test's modules forgotten, after."""
    from dapo import algo

    monkeypatch.setattr(sys, "path", list(sys.path))
    modules, estimators = set(sys.modules), dict(algo.ADVANTAGE_ESTIMATORS)
    yield
    for name in set(sys.modules) - modules:
        if name.startswith(("pp_", "dapo_user_")):
            del sys.modules[name]
    for name in set(algo.ADVANTAGE_ESTIMATORS) - set(estimators):
        algo.ADVANTAGE_ESTIMATORS.pop(name)


def saved_config(*overrides: str) -> str:
    """The YAML a run saves (RUN_DIR/config.yaml, a checkpoint's dapo_config.yaml) for ``overrides``."""
    return yaml.safe_dump(with_absolute_paths(config_to_dict(load_config([], list(overrides)))), sort_keys=False)


def test_a_module_only_the_working_directory_held_is_found_from_another_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restored_imports: None):
    start, elsewhere = tmp_path / "start", tmp_path / "elsewhere"
    start.mkdir()
    elsewhere.mkdir()
    (start / "pp_my_rewards.py").write_text(REWARDS)
    (start / "pp_my_plugin.py").write_text(PLUGIN.format(name="pp_centred"))
    monkeypatch.chdir(start)
    text = saved_config("reward.functions=[{path: 'pp_my_rewards:score'}]", "algorithm.plugins=[pp_my_plugin]",
                        "algorithm.advantage=pp_centred")
    (tmp_path / "config.yaml").write_text(text)
    result = subprocess.run([sys.executable, "-c", ELSEWHERE, str(tmp_path / "config.yaml")], cwd=elsewhere,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("\n")[:2] == ["score 0.25", "rank pp_centred"]
    saved = yaml.safe_load(text)
    assert saved["python_path"] == [str(start)]  # once, for both modules
    assert saved["reward"]["functions"][0]["path"] == "pp_my_rewards:score"  # still a module name
    assert saved["algorithm"]["plugins"] == ["pp_my_plugin"]


def test_a_module_on_sys_path_gets_no_directory_though_the_working_directory_holds_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restored_imports: None):
    """The standard library, an installed package, a directory on sys.path (PYTHONPATH's): found
    from any directory; a json.py in the working directory (appended last) does not change that."""
    on_path = tmp_path / "on_path"
    on_path.mkdir()
    (on_path / "pp_listed.py").write_text(REWARDS)
    monkeypatch.syspath_prepend(str(on_path))
    (tmp_path / "json.py").write_text(REWARDS)
    monkeypatch.chdir(tmp_path)
    saved = yaml.safe_load(saved_config(
        "reward.functions=[{path: 'json:dumps'}, {path: 'math:sqrt'}, {path: 'dapo.rewards.user_functions:split_spec'},"
        " {path: 'pp_listed:score'}]", "algorithm.plugins=[math, dapo.algo]"))
    assert saved["python_path"] == []


def test_a_python_path_the_user_sets_finds_a_plugin_whatever_the_order_of_the_yaml(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restored_imports: None):
    """algorithm.plugins are imported while the algorithm section is built: python_path is on
    sys.path before that, written after it or not, appended after the installed packages, and
    saved absolute."""
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "pp_user_plugin.py").write_text(PLUGIN.format(name="pp_user_centred"))
    (tmp_path / "run.yaml").write_text("algorithm:\n  plugins: [pp_user_plugin]\n  advantage: pp_user_centred\n"
                                       "python_path: [code]\n")
    monkeypatch.chdir(tmp_path)
    cfg = load_config([tmp_path / "run.yaml"])
    assert cfg.algorithm.advantage == "pp_user_centred" and cfg.python_path == ["code"]
    code = str(tmp_path / "code")
    assert sys.path.index(code) > sys.path.index(os.path.dirname(os.__file__))  # after the standard library
    assert with_absolute_paths(config_to_dict(cfg))["python_path"] == [code]


def test_an_empty_python_path_entry_is_refused():
    with pytest.raises(ConfigError, match="python_path=.* holds an empty entry"):
        load_config([], ["python_path=['']"])
