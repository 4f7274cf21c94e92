"""Ray's own errors at ``ray.init``, said in dapo's settings: a cluster already running where
resources.ray_address is null (Ray refused the local Ray's num_cpus with a traceback), and
ray_address=auto with no cluster (Ray's message named a ``--address`` flag dapo does not have)."""

from __future__ import annotations

from dapo.cli import main as cli
from dapo.trainer.ray_policy import ray_init_problem
from tests.trainer.conftest import tiny_overrides


def test_a_running_cluster_and_a_null_ray_address_are_said_in_one_line(tiny_model_dir, reward_file, tmp_path,
                                                                        monkeypatch, capsys):
    """RAY_ADDRESS names a cluster, as `ray start` on this machine does for ray.init (Ray refuses
    num_cpus for it at once, before connecting: no cluster need answer there)."""
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    overrides = tiny_overrides(tiny_model_dir, tmp_path / "run", reward_file)
    assert cli.main(["train", *overrides, "resources.devices_per_node=2", "eval.before_training=false"]) != 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = [line for line in err.splitlines() if "error:" in line]
    assert line.startswith("dapo train: error: a Ray cluster is already running")
    assert "set resources.ray_address=auto to run the ranks on that cluster" in line


def test_auto_with_no_cluster_to_join_names_dapos_settings():
    said = ray_init_problem(ConnectionError("Could not find any running Ray instance. Please specify the one to "
                                            "connect to by setting `--address` flag or `RAY_ADDRESS` ..."), "auto")
    assert said is not None and said.startswith("resources.ray_address=auto joins the Ray cluster running on")
    assert "`ray start --head`" in said and "--address" not in said
    assert ray_init_problem(ConnectionError("x"), None) is None  # a local Ray's start failing: Ray's own error
    assert ray_init_problem(KeyboardInterrupt(), "auto") is None
