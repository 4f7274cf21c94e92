"""The default suite's xdist grouping (``tests/conftest.py``): modules that start a local Ray
cluster share one worker's queue, so two clusters never run at once on two cores."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

TESTS = Path(__file__).parent


def _suite_conftest():
    spec = importlib.util.spec_from_file_location("suite_conftest", TESTS / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Item:
    """What the hook reads of a collected test: its file, and the markers it adds."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.markers: list[pytest.Mark] = []

    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.markers.append(marker.mark)

    def groups(self) -> list[str]:
        return [m.args[0] for m in self.markers if m.name == "xdist_group"]


def _group(paths: list[Path], dist: str) -> list[_Item]:
    items = [_Item(p) for p in paths]
    config = SimpleNamespace(option=SimpleNamespace(dist=dist))
    _suite_conftest().pytest_collection_modifyitems(config, items)
    return items


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
    paths = [tmp_path / name for name in [*starts, *plain, "test_math.py"]]

    items = _group(paths, dist="loadgroup")

    assert [item.groups() for item in items] == [
        ["ray"], ["ray"], ["ray"], ["test_math"], ["test_other"], ["test_math"]]


def test_no_grouping_outside_loadgroup(tmp_path: Path) -> None:
    (tmp_path / "test_init.py").write_text("import ray\n")
    for dist in ("no", "load"):
        assert _group([tmp_path / "test_init.py"], dist=dist)[0].markers == []


@pytest.mark.parametrize("module", ["trainer/test_trainer_ray.py", "trainer/test_trainer_lora_ranks.py",
                                    "trainer/test_trainer_sequence_parallel.py", "test_ray_checks.py"])
def test_this_suites_cluster_modules_are_in_the_ray_group(module: str) -> None:
    assert _group([TESTS / module], dist="loadgroup")[0].groups() == ["ray"]
