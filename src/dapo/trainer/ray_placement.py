"""Where Ray places the policy ranks: one STRICT_PACK placement group per node, a bundle per
device, and, while the cluster finds room, a line on what the run waits for."""

from __future__ import annotations

import sys
from typing import Any

from dapo.config import DAPOConfig
from dapo.errors import UserError
from dapo.trainer.ray_faults import handler_errors_kept


def ranks_use_gpus(cfg: DAPOConfig, ray: Any) -> bool:
    """Whether each policy rank asks Ray for a GPU: trainer.device names CUDA, or is "auto" and
    the cluster has GPUs (the driver may run on a CPU-only head node or a client)."""
    if cfg.trainer.device != "auto":
        return cfg.trainer.device.startswith("cuda")
    return ray.cluster_resources().get("GPU", 0) >= 1


class PlacementFailed(UserError, RuntimeError):
    """The Ray cluster has no room for the policy ranks."""


PLACEMENT_TIMEOUT_S = 600.0  # how long the cluster may take to find room for the ranks
PLACEMENT_NOTICE_S = 5.0  # placement not done by then: say what the run waits for
PLACEMENT_STATUS_EVERY_S = 60.0  # and again, this often, until it is


def _amounts(resources: dict[str, float], keys: Any) -> str:
    """'CPU 2, GPU 0' of ``resources`` for ``keys`` (Ray's own dicts also hold memory, node:IP...)."""
    return ", ".join(f"{key} {resources.get(key, 0):g}" for key in keys)


def _largest_node(ray: Any, need: dict[str, float]) -> tuple[dict[str, float], bool]:
    """The total resources of the alive node nearest to holding ``need`` (one node's ranks: a
    STRICT_PACK group), and whether some node's totals hold it (now busy or not)."""
    totals = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive")]
    fits = [t for t in totals if all(t.get(key, 0) >= amount for key, amount in need.items())]
    largest = max(totals, key=lambda t: tuple(t.get(key, 0) for key in need), default={})
    return (fits or [largest])[0], bool(fits)


def _placement_status(ray: Any, nnodes: int, devices_per_node: int, bundle: dict[str, float]) -> tuple[str, bool]:
    """One line on what the ranks wait for and what the cluster has now; and whether the cluster
    could hold them: a node with the total resources one node's ranks need, and totals for all."""
    need = {key: amount * devices_per_node for key, amount in bundle.items()}
    node, fits = _largest_node(ray, need)
    keys = list(bundle)
    total, every = ray.cluster_resources(), {key: amount * nnodes for key, amount in need.items()}
    room = all(total.get(key, 0) >= amount for key, amount in every.items())
    has = f"the cluster has {_amounts(total, keys)} in all, {_amounts(ray.available_resources(), keys)} free"
    where = ("" if fits else f"; no node has {_amounts(need, keys)} (a node's ranks are placed on one machine: "
             f"the largest has {_amounts(node, keys)})")
    if fits and not room:
        where = f"; all of them need {_amounts(every, keys)}"
    ask = f"{nnodes * devices_per_node} policy rank(s) ({nnodes} node(s) x {devices_per_node}) of {_amounts(bundle, keys)} each"
    return f"{ask}; {has}{where}", fits and room


def _wait_for_placement(ray: Any, refs: list[Any], nnodes: int, devices_per_node: int, bundle: dict[str, float],
                        can_grow: bool) -> int:
    """Wait for the placement groups' ``refs``, up to PLACEMENT_TIMEOUT_S; how many are ready.
    Not placed within PLACEMENT_NOTICE_S, it says what it waits for (to stderr: Ray itself prints
    only its autoscaler's lines), then again every PLACEMENT_STATUS_EVERY_S. Where the cluster
    cannot grow (``can_grow`` False: the local Ray this run started) and it could never hold the
    ranks (no node holds one node's ranks, or its totals are short of all of them: 2 nodes x 4 GPU
    ranks on a machine of 4), it returns at once."""
    import time

    if not can_grow and not _placement_status(ray, nnodes, devices_per_node, bundle)[1]:
        return 0  # the cluster cannot hold the ranks, and no node will join
    started = time.monotonic()
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=min(PLACEMENT_NOTICE_S, PLACEMENT_TIMEOUT_S))
    if len(ready) == len(refs):
        return len(ready)
    line, _ = _placement_status(ray, nnodes, devices_per_node, bundle)
    print(f"dapo-rl: waiting for Ray to place {line}; waiting up to {PLACEMENT_TIMEOUT_S:.0f} s for nodes to "
          "join or free their resources", file=sys.stderr, flush=True)
    while (left := PLACEMENT_TIMEOUT_S - (time.monotonic() - started)) > 0:
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=min(PLACEMENT_STATUS_EVERY_S, left))
        if len(ready) == len(refs) or time.monotonic() - started >= PLACEMENT_TIMEOUT_S:
            return len(ready)
        line, _ = _placement_status(ray, nnodes, devices_per_node, bundle)
        print(f"dapo-rl: still waiting after {time.monotonic() - started:.0f} s (of {PLACEMENT_TIMEOUT_S:.0f}) "
              f"to place {line}", file=sys.stderr, flush=True)
    return len(ready)


def node_placement_groups(ray: Any, nnodes: int, devices_per_node: int, cpus: float, gpus: int,
                           can_grow: bool = True) -> list[Any]:
    """One placement group per node (STRICT_PACK: its bundles on one machine), a bundle per
    device: ranks r*devices_per_node ... of node r share a machine, so a tensor-parallel engine
    (consecutive ranks, dividing devices_per_node) never spans the network. ``can_grow``: other
    nodes may join the cluster (False for the local Ray this run started: a request no node
    could hold is refused at once instead of after PLACEMENT_TIMEOUT_S)."""
    from ray.util.placement_group import placement_group

    bundle = {"CPU": cpus, **({"GPU": gpus} if gpus else {})}
    groups = [placement_group([bundle] * devices_per_node, strategy="STRICT_PACK") for _ in range(nnodes)]
    with handler_errors_kept():  # a SIGTERM while the cluster finds room: "stopped by SIGTERM", status 143
        ready = _wait_for_placement(ray, [group.ready() for group in groups], nnodes, devices_per_node, bundle,
                                    can_grow)
    if ready < nnodes:
        for group in groups:
            ray.util.remove_placement_group(group)
        line, fits = _placement_status(ray, nnodes, devices_per_node, bundle)
        if not fits and not can_grow:
            raise PlacementFailed(
                f"the local Ray this run started cannot hold {line}. Ask for fewer ranks "
                "(resources.devices_per_node), or start a Ray cluster with room for them and give its "
                "resources.ray_address")
        raise PlacementFailed(f"Ray could not place {line} within {PLACEMENT_TIMEOUT_S:.0f} s")
    return groups


def rank_bundle(groups: list[Any], rank: int, devices_per_node: int) -> Any:
    """Where rank ``rank`` runs: its bundle of its node's placement group."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    return PlacementGroupSchedulingStrategy(placement_group=groups[rank // devices_per_node],
                                            placement_group_bundle_index=rank % devices_per_node)
