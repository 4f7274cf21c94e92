"""A Ray cluster with no room for the policy ranks: the driver said nothing for up to 10 minutes
(PLACEMENT_TIMEOUT_S) while Ray printed only its autoscaler's lines. Now it says what it waits
for after a few seconds, and again every minute; the local Ray a run started itself, which no node
will join, refuses a request no node of it can hold at once. A fake Ray (with a clock) for the
waiting, a real one for what Ray reports."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from dapo.trainer import ray_placement
from dapo.trainer.ray_placement import PlacementFailed


class FakeRay:
    """A cluster of ``nodes`` (their total resources) whose placement never succeeds; each
    ``wait`` moves the fake clock on by its timeout."""

    def __init__(self, nodes: list[dict[str, float]], clock: list[float]) -> None:
        self._nodes, self.clock, self.waits = nodes, clock, []
        self.util = SimpleNamespace(remove_placement_group=lambda group: None)

    def nodes(self) -> list[dict]:
        return [{"Alive": True, "Resources": {**node, "memory": 1e9, "node:10.0.0.1": 1.0}} for node in self._nodes]

    def cluster_resources(self) -> dict[str, float]:
        return {key: sum(node.get(key, 0) for node in self._nodes) for key in ("CPU", "GPU")}

    def available_resources(self) -> dict[str, float]:
        return {"CPU": 0.0}

    def wait(self, refs, num_returns, timeout):
        self.waits.append(timeout)
        self.clock[0] += timeout
        return [], list(refs)


@pytest.fixture
def clock(monkeypatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    return now


def test_a_placement_that_waits_says_for_what_then_every_minute(clock, capsys):
    ray = FakeRay([{"CPU": 2.0}], clock)
    ready = ray_placement._wait_for_placement(ray, ["group"], 1, 3, {"CPU": 1.0}, can_grow=True)
    assert ready == 0
    assert ray.waits[0] == ray_placement.PLACEMENT_NOTICE_S and sum(ray.waits) == ray_placement.PLACEMENT_TIMEOUT_S
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == ("dapo-rl: waiting for Ray to place 3 policy rank(s) (1 node(s) x 3) of CPU 1 each; the cluster "
                        "has CPU 2 in all, CPU 0 free; no node has CPU 3 (a node's ranks are placed on one machine: "
                        "the largest has CPU 2); waiting up to 600 s for nodes to join or free their resources")
    # then one short line a minute (the last wait ends at the timeout: no line for it)
    assert len(lines) == 1 + 9 and lines[1].startswith("dapo-rl: still waiting after 65 s (of 600) to place 3 policy")
    assert lines[-1].startswith("dapo-rl: still waiting after 545 s (of 600)")


def test_a_placement_done_within_the_notice_says_nothing(clock, capsys):
    ray = FakeRay([{"CPU": 4.0}], clock)
    ray.wait = lambda refs, num_returns, timeout: (list(refs), [])
    assert ray_placement._wait_for_placement(ray, ["a", "b"], 2, 2, {"CPU": 1.0}, can_grow=True) == 2
    assert capsys.readouterr().err == ""


def test_the_local_ray_refuses_at_once_what_none_of_its_nodes_can_hold(clock, capsys, monkeypatch):
    """(8 GPU ranks asked of a machine with 4: no node will join the Ray the run started)"""
    ray = FakeRay([{"CPU": 16.0, "GPU": 4.0}], clock)
    assert ray_placement._wait_for_placement(ray, ["group"], 1, 8, {"CPU": 1.0, "GPU": 1}, can_grow=False) == 0
    assert ray.waits == [] and capsys.readouterr().err == ""
    # two nodes' ranks of 4 GPUs each, where the machine's 4 hold one node's: nothing to wait for
    assert ray_placement._wait_for_placement(ray, ["a", "b"], 2, 4, {"CPU": 1.0, "GPU": 1}, can_grow=False) == 0
    assert ray.waits == [] and capsys.readouterr().err == ""
    assert ray_placement._placement_status(ray, 2, 4, {"CPU": 1.0, "GPU": 1}) == (
        "8 policy rank(s) (2 node(s) x 4) of CPU 1, GPU 1 each; the cluster has CPU 16, GPU 4 in all, CPU 0, GPU 0 "
        "free; all of them need CPU 8, GPU 8", False)
    # a request its node can hold (another run holds the GPUs for now) waits as on a cluster
    assert ray_placement._wait_for_placement(ray, ["group"], 1, 4, {"CPU": 1.0, "GPU": 1}, can_grow=False) == 0
    assert sum(ray.waits) == ray_placement.PLACEMENT_TIMEOUT_S and "waiting up to 600 s" in capsys.readouterr().err


@pytest.mark.slow  # a real Ray (7 s): the fake-Ray tests above hold the rule
def test_what_ray_reports_of_a_cluster_too_small_is_said_and_refused(monkeypatch, capsys):
    """A real Ray of 2 CPUs, as `ray start --head --num-cpus=2`, asked for 3 ranks of 1 CPU."""
    ray = pytest.importorskip("ray")
    monkeypatch.setattr(ray_placement, "PLACEMENT_NOTICE_S", 1.0)
    monkeypatch.setattr(ray_placement, "PLACEMENT_TIMEOUT_S", 2.5)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        started = time.monotonic()
        with pytest.raises(PlacementFailed, match=r"^the local Ray this run started cannot hold 3 policy rank\(s\) "
                           r"\(1 node\(s\) x 3\) of CPU 1 each; the cluster has CPU 2 in all, CPU 2 free; no node "
                           r"has CPU 3 .*the largest has CPU 2\)\. Ask for fewer ranks"):
            ray_placement.node_placement_groups(ray, 1, 3, 1.0, 0, can_grow=False)
        assert time.monotonic() - started < 2
        with pytest.raises(PlacementFailed, match=r"^Ray could not place 3 policy rank\(s\) .* within 2 s$"):
            ray_placement.node_placement_groups(ray, 1, 3, 1.0, 0, can_grow=True)
        assert "dapo-rl: waiting for Ray to place 3 policy rank(s)" in capsys.readouterr().err
    finally:
        ray.shutdown()


def test_each_rank_gets_a_bundle_of_its_own_on_its_nodes_group():
    """Ranks 0, 1 on node 0 and 2, 3 on node 1 (a tensor-parallel engine's consecutive ranks share a
    machine), no bundle holding two ranks: every local test has one node, where rank % groups and
    rank // devices_per_node agree (on two nodes ranks 0 and 2 took one bundle and the run hung)."""
    pytest.importorskip("ray")
    groups = ["node0", "node1"]  # (stand-ins: the strategy only carries them)
    placed = [(strategy.placement_group, strategy.placement_group_bundle_index)
              for strategy in (ray_placement.rank_bundle(groups, rank, 2) for rank in range(4))]
    assert placed == [("node0", 0), ("node0", 1), ("node1", 0), ("node1", 1)]


def test_each_bundle_holds_what_its_rank_actor_asks_for(monkeypatch):
    """A rank actor asks for resources.cpus_per_rank CPUs (and its GPU) inside its bundle: a bundle
    of fewer would never place it, and Ray would wait for good."""
    pytest.importorskip("ray")
    import importlib

    ray_pg = importlib.import_module("ray.util.placement_group")  # (ray.util's function of that name hides it)
    asked = []

    def placement_group(bundles, strategy):
        asked.append((bundles, strategy))
        return SimpleNamespace(ready=lambda: "ref")

    monkeypatch.setattr(ray_pg, "placement_group", placement_group)
    monkeypatch.setattr(ray_placement, "_wait_for_placement", lambda ray, refs, *rest: len(refs))
    ray_placement.node_placement_groups(None, 2, 3, 2.5, 1)
    assert asked == [([{"CPU": 2.5, "GPU": 1}] * 3, "STRICT_PACK")] * 2
