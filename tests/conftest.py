"""Test-suite-wide hooks.

``scripts/test.sh`` runs the default suite on two pytest-xdist workers (``-n 2 --dist
loadgroup``). A module's tests stay on one worker, in file order, as they run serially (a
module-scoped fixture is built once); every module that starts a local Ray cluster (dapo-rl's
policy ranks) shares one group ("ray"), so no two run at once: Ray's configuration is
process-global (its auth mode, read at first import) and two local clusters on two cores would
starve each other's timeouts. (torch.distributed launches pick their own free port or rendezvous
file, and run beside them.)

The groups are this suite's own scheduler (:func:`pytest_xdist_make_scheduler`), not
``xdist_group`` markers, which were silently ignored: the hook that added them tested ``dist``,
which xdist's workers set to "no", and xdist reads them into the test ids by setting
``item._nodeid``, which pytest 9.2 no longer reads.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

_STARTS_CLUSTER = re.compile(r"devices_per_node=2|import ray|ray\.init|TWO_RANKS|importorskip\(\"ray")


@cache
def group_of(path: Path) -> str:
    """The group of test module ``path``: "ray" for one that starts a local Ray cluster, else its own."""
    return "ray" if _STARTS_CLUSTER.search(path.read_text()) else str(path)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    if config.getoption("dist", "no") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    root = config.rootpath

    class ModuleOrRayScheduling(LoadScopeScheduling):
        """xdist's load-by-scope scheduling, a scope being :func:`group_of` a test's module."""

        def _split_scope(self, nodeid: str) -> str:
            return group_of(root / nodeid.split("::", 1)[0])

    return ModuleOrRayScheduling(config, log)
