"""What a multi-rank run's Ray settings show before Ray starts (``resources.*``): a cluster address
nothing answers at (``ray.init`` keeps retrying one, printing only its own C++ warnings), and a
local Ray asked for more CPUs than this machine gives the run, or for several nodes; and, once
``ray.init`` failed, a cluster's refusal of the token this process sent (or did not). Torch- and
Ray-free, like the rest of :mod:`dapo.preflight`, which calls it."""

from __future__ import annotations

import os
import socket
import warnings
from collections.abc import Mapping
from urllib.parse import urlsplit

from dapo.config import DAPOConfig
from dapo.hardware import usable_cpus

CONNECT_TIMEOUT_S = 5.0


RUNNING_CLUSTER = ("a Ray cluster is already running (started by `ray start` on this machine, or named by the "
                   "RAY_ADDRESS environment variable), and resources.ray_address is null, which starts a local Ray of "
                   "this run's own: set resources.ray_address=auto to run the ranks on that cluster, or stop it "
                   "(`ray stop`)")


def ray_address_problems(cfg: DAPOConfig, environ: Mapping[str, str] = os.environ) -> list[str]:
    """resources.ray_address "host:port" or "ray://host:port" where nothing accepts a connection
    (a name that does not resolve, a port closed, no answer within CONNECT_TIMEOUT_S); "auto" is
    Ray's own to resolve (it fails in seconds). A null address with RAY_ADDRESS set: ray.init
    would join that cluster, which refuses a local Ray's CPU count (a cluster `ray start` left
    running without RAY_ADDRESS is found only there, by Ray: ray_policy.ray_init_problem)."""
    address = cfg.resources.ray_address
    if cfg.resources.world_size > 1 and address is None and environ.get("RAY_ADDRESS", "").strip():
        return [f"{RUNNING_CLUSTER} (RAY_ADDRESS={environ['RAY_ADDRESS']})"]
    if cfg.resources.world_size == 1 or address is None or address.strip() == "auto":
        return []
    try:
        parts = urlsplit(address if "://" in address else f"//{address}")
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is no number
        host, port = None, None
    if not host or port is None:
        return []  # (not host:port: Ray's to read)
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as error:
        reason = "no answer" if isinstance(error, TimeoutError) else (error.strerror or str(error))
        return [f"resources.ray_address={address!r}: nothing answers at {host}:{port} ({reason}): start the cluster "
                "(`ray start --head` prints the address to give) or fix the address; null starts a local Ray"]
    return []


def token_auth_problem(error: BaseException, address: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """A cluster's refusal of this process's Ray token, behind ``ray.init``'s "Failed to connect to
    Ray cluster" (after ~20 s of Ray's own C++ warnings): clusters of Ray 2.59+ start with token
    authentication on, and Ray sends a token to an address given explicitly (not auto) only where
    RAY_AUTH_MODE=token says so; None for another failure."""
    causes, link = [], error
    while link is not None and len(causes) < 8:
        causes.append(str(link))
        link = link.__cause__ or link.__context__
    if not any("InvalidAuthToken" in cause for cause in causes):
        return None
    mode = environ.get("RAY_AUTH_MODE", "").strip().lower()
    if mode != "token" and address.strip() != "auto":
        return (f"the Ray cluster at resources.ray_address={address} asks for Ray's token authentication (on by "
                "default since Ray 2.59), and Ray connects to an address given explicitly with no token unless "
                "RAY_AUTH_MODE=token: set it, with the cluster's token in ~/.ray/auth_token (where `ray start --head` "
                "wrote it on the head node) or in RAY_AUTH_TOKEN; or run on a node of the cluster with "
                "resources.ray_address=auto")
    return (f"the Ray cluster at resources.ray_address={address} refused this process's Ray token, or its lack of "
            f"one (RAY_AUTH_MODE={mode or 'unset'}): it needs the head node's, the ~/.ray/auth_token `ray start --head` "
            "wrote there: copy that file here (every node of the cluster needs it too) or set RAY_AUTH_TOKEN to its text")


def warn_about_local_ray(cfg: DAPOConfig) -> None:
    """A local Ray (resources.ray_address null) is started with world_size x cpus_per_rank CPUs
    whatever the machine has: more than this process may use, and the ranks share cores. Its
    "nodes" (resources.nnodes > 1) are all this machine: a cluster's run that left out the address
    would otherwise train on one node, saying nothing."""
    res = cfg.resources
    if res.nnodes > 1 and res.ray_address is None:
        warnings.warn(f"resources.nnodes={res.nnodes} with resources.ray_address null: the local Ray this run starts "
                      f"places all {res.nnodes} nodes' ranks on this machine (a simulation); on a cluster started "
                      "with `ray start`, set resources.ray_address=auto", stacklevel=1)
    asked = res.world_size * res.cpus_per_rank
    if res.world_size == 1 or res.ray_address is not None or asked <= (cpus := usable_cpus()):
        return
    warnings.warn(f"{res.world_size} policy ranks x resources.cpus_per_rank={res.cpus_per_rank:g} ask the local Ray "
                  f"for {asked:g} CPUs, and this process may use {cpus}: the ranks share cores (each slower; "
                  "fewer ranks, or a smaller cpus_per_rank, say what the machine has)", stacklevel=1)
