"""The README's multi-node journey on one machine: a Ray cluster started with `ray start --head`,
which `dapo train ... resources.ray_address=HOST:PORT` joins (no local Ray of its own, no
num_cpus), trains on, checkpoints, resumes on, and leaves as it found it: every CPU free again
and its placement group removed, so that the next run (or another user's job) gets the cluster.
The cluster has Ray's token authentication on (Ray 2.59+), which Ray uses for an address given
explicitly only with RAY_AUTH_MODE=token: without, the run says so in one line.
Every other Ray test starts its own local Ray; a cluster's errors are tested apart
(test_trainer_ray_cluster.py)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.trainer.conftest import tiny_overrides

pytestmark = pytest.mark.slow  # a cluster (~10 s), a refused run (~25 s), two two-rank runs on it (~30 s each)

# Run in a fresh interpreter, as a user would: what Ray says of the cluster once the run is over.
CLUSTER_STATE = """
import json, sys, time, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
from ray.util import placement_group_table
for _ in range(60):  # (Ray frees a gone driver's resources within a few seconds)
    free = ray.available_resources().get("CPU", 0.0)
    groups = sorted({group["state"] for group in placement_group_table().values()})
    if free == ray.cluster_resources().get("CPU") and groups in ([], ["REMOVED"]):
        break
    time.sleep(0.5)
print(json.dumps({"free_cpus": free, "all_cpus": ray.cluster_resources().get("CPU"), "groups": groups}))
"""


@pytest.fixture()
def ray_cluster() -> Iterator[str]:
    """A head node of 2 CPUs as `ray start --head` starts one, under a temp dir of its own (so
    that no other Ray on this machine finds it at /tmp/ray, and its processes can be told
    apart); its address, host:port."""
    ray = Path(sys.executable).with_name("ray")
    if not ray.exists():
        pytest.skip("the ray command is not installed (pip install -e '.[ray]')")
    temp_dir = tempfile.mkdtemp(prefix="dray", dir="/tmp")  # (short: Ray's socket paths live under it)
    log = Path(temp_dir) / "head.log"
    with log.open("w") as out:
        head = subprocess.Popen([str(ray), "start", "--head", "--port=0", "--num-cpus=2", "--disable-usage-stats",
                                 "--include-dashboard=false", f"--temp-dir={temp_dir}", "--block"],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=auth_mode(None))
    try:
        address = None
        for _ in range(240):  # (Ray says how to join once it runs: `ray start --address='IP:PORT'`)
            if found := re.search(r"ray start --address='([^']+)'", log.read_text()):
                address = found.group(1)
                break
            assert head.poll() is None, log.read_text()
            time.sleep(0.5)
        assert address is not None, log.read_text()
        yield address
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        head.wait(timeout=60)
        # The head's own processes (GCS, raylet, agents) outlive `ray start`: each names the temp dir.
        subprocess.run(["pkill", "-KILL", "-f", temp_dir], check=False)
        shutil.rmtree(temp_dir, ignore_errors=True)


def auth_mode(mode: str | None) -> dict[str, str]:
    """This environment with RAY_AUTH_MODE=mode, or unset (as a user's shell has it; an earlier
    test's local Ray may have set it in this process)."""
    env = {name: value for name, value in os.environ.items() if name != "RAY_AUTH_MODE"}
    return env if mode is None else {**env, "RAY_AUTH_MODE": mode}


def dapo_train(overrides: list[str], *extra: str, mode: str | None = "token") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dapo.cli.main", "train", *overrides, *extra],
                          capture_output=True, text=True, timeout=600, env=auth_mode(mode))


def test_a_run_joins_a_cluster_trains_resumes_and_leaves_it_free(ray_cluster, tiny_model_dir, reward_file, tmp_path):
    run_dir = tmp_path / "run"
    on_cluster = [*tiny_overrides(tiny_model_dir, run_dir, reward_file), "resources.devices_per_node=2",
                  f"resources.ray_address={ray_cluster}", "eval.before_training=false", "eval.every_steps=0"]

    unauthenticated = dapo_train(on_cluster, "trainer.total_steps=2", mode=None)
    assert unauthenticated.returncode == 2 and "Traceback" not in unauthenticated.stderr
    [error] = [line for line in unauthenticated.stderr.splitlines() if line.startswith("dapo train: error:")]
    assert error.startswith(f"dapo train: error: the Ray cluster at resources.ray_address={ray_cluster} asks for "
                            "Ray's token authentication"), error
    assert not run_dir.joinpath("checkpoints").exists()

    first = dapo_train(on_cluster, "trainer.total_steps=2")
    assert first.returncode == 0, first.stderr[-3000:]
    assert f"Connecting to existing Ray cluster at address: {ray_cluster}" in first.stderr
    # A second run's two ranks of 1 CPU need the whole cluster: the first run gave it back.
    second = dapo_train(on_cluster, "trainer.total_steps=3")
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"resumed from {run_dir / 'checkpoints' / 'step-000002'} at step 2" in second.stdout + second.stderr
    assert sorted(path.name for path in (run_dir / "checkpoints").iterdir()) == ["step-000001", "step-000002",
                                                                               "step-000003"]
    assert (run_dir / "checkpoints" / "step-000003" / "policy").is_dir()  # the ranks' shards, on the cluster

    state = subprocess.run([sys.executable, "-c", CLUSTER_STATE, ray_cluster], capture_output=True, text=True,
                           timeout=120, env=auth_mode("token"))
    assert state.returncode == 0, state.stderr[-3000:]
    assert state.stdout.strip().splitlines()[-1] == '{"free_cpus": 2.0, "all_cpus": 2.0, "groups": ["REMOVED"]}'
