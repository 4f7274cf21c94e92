"""The default suite's xdist grouping (``tests/conftest.py``): modules that start a local Ray
cluster share one worker's queue, so two clusters never run at once on two cores."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

TESTS = Path(__file__).parent


def _suite_conftest():
    spec = importlib.util.spec_from_file_location("suite_conftest", TESTS / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ray_modules_share_one_group_and_others_keep_their_own(tmp_path: Path) -> None:
    starts = {
        "test_init.py": "import ray\nray.init(num_cpus=2)\n",
        "test_ranks.py": "run(['dapo', 'train', 'trainer.devices_per_node=2'])\n",
        "test_skip.py": 'ray = pytest.importorskip("ray")\n',
    }
    plain = {"test_math.py": "def test_one():\n    assert 1 + 1 == 2\n",
             "test_other.py": "# ray tracing of the math, not the cluster\n"}
    for name, source in {**starts, **plain}.items():
        (tmp_path / name).write_text(source)
    group_of = _suite_conftest().group_of
    assert [group_of(tmp_path / name) for name in [*starts, *plain]] == [
        "ray", "ray", "ray", str(tmp_path / "test_math.py"), str(tmp_path / "test_other.py")]


def test_no_scheduler_of_its_own_outside_loadgroup() -> None:
    for dist in ("no", "load", "loadfile"):
        config = SimpleNamespace(getoption=lambda name, default=None, dist=dist: dist)
        assert _suite_conftest().pytest_xdist_make_scheduler(config, None) is None


@pytest.mark.parametrize("module", ["trainer/test_trainer_ray.py", "trainer/test_trainer_lora_ranks.py",
                                    "trainer/test_trainer_sequence_parallel.py", "test_ray_checks.py"])
def test_this_suites_cluster_modules_are_in_the_ray_group(module: str) -> None:
    assert _suite_conftest().group_of(TESTS / module) == "ray"


def test_under_xdist_a_modules_tests_run_on_one_worker_and_ray_modules_on_the_same_one(tmp_path: Path) -> None:
    """Through pytest-xdist itself (its hook must see the groups: it reads them into the test ids
    its scheduler groups by): each test writes the worker that ran it."""
    (tmp_path / "conftest.py").write_text((TESTS / "conftest.py").read_text())
    body = "".join(f"def test_{i}():\n    record()\n" for i in range(6))
    record = ("import os, pathlib\n\ndef record():\n    with open(pathlib.Path(__file__).with_suffix('.ran'), 'a') as f:\n"
              "        f.write(os.environ['PYTEST_XDIST_WORKER'] + '\\n')\n\n")
    sources = {"test_a.py": "", "test_b.py": "", "test_ray_one.py": "import ray\n", "test_ray_two.py": "# ray.init\n"}
    for name, head in sources.items():
        (tmp_path / name).write_text(head + record + body)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist",
                             "loadgroup", str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                            env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    workers = {name: set((tmp_path / name).with_suffix(".ran").read_text().split()) for name in sources}
    assert all(len(ran) == 1 for ran in workers.values()), workers
    assert workers["test_ray_one.py"] == workers["test_ray_two.py"], workers
