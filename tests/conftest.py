"""Test-suite-wide hooks.

``scripts/test.sh`` runs the default suite on two pytest-xdist workers (``-n 2 --dist
loadgroup``). A module's tests stay on one worker, in file order, as they run serially; every
module that starts a local Ray cluster (dapo-rl's policy ranks) shares one group ("ray"), so no two
run at once: Ray's configuration is process-global (its auth mode, read at first import) and two
local clusters on two cores would starve each other's timeouts. (torch.distributed launches pick
their own free port or rendezvous file, and run beside them.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

_STARTS_CLUSTER = re.compile(r"devices_per_node=2|import ray|ray\.init|TWO_RANKS|importorskip\(\"ray")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if getattr(config.option, "dist", "no") != "loadgroup":
        return
    starts_cluster: dict[Path, bool] = {}
    for item in items:
        path = item.path
        if path not in starts_cluster:
            starts_cluster[path] = bool(_STARTS_CLUSTER.search(path.read_text()))
        item.add_marker(pytest.mark.xdist_group("ray" if starts_cluster[path] else path.stem))
