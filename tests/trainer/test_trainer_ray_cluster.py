"""Ray's own errors at ``ray.init``, said in dapo's settings: a cluster already running where
resources.ray_address is null (Ray refused the local Ray's num_cpus with a traceback), and
ray_address=auto with no cluster (Ray's message named a ``--address`` flag dapo does not have), and a
cluster's refusal of this process's token (Ray said only "Failed to connect to Ray cluster at ...")."""

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
    assert "(RAY_ADDRESS=127.0.0.1:1)" in line  # said by preflight, before the model loads and Ray starts


def test_a_cluster_s_running_ray_is_found_by_ray_itself(monkeypatch):
    """A cluster that `ray start` left running without RAY_ADDRESS is Ray's to find, at ray.init: its
    ValueError is said in the same words."""
    from dapo.ray_checks import RUNNING_CLUSTER
    said = ray_init_problem(ValueError("When connecting to an existing cluster, num_cpus and num_gpus must not "
                                       "be provided."), None)
    assert said == RUNNING_CLUSTER


def test_auto_with_no_cluster_to_join_names_dapos_settings():
    said = ray_init_problem(ConnectionError("Could not find any running Ray instance. Please specify the one to "
                                            "connect to by setting `--address` flag or `RAY_ADDRESS` ..."), "auto")
    assert said is not None and said.startswith("resources.ray_address=auto joins the Ray cluster running on")
    assert "`ray start --head`" in said and "--address" not in said
    assert ray_init_problem(ConnectionError("x"), None) is None  # a local Ray's start failing: Ray's own error
    assert ray_init_problem(KeyboardInterrupt(), "auto") is None


def test_ray_address_in_the_environment_matters_only_to_ranks_on_a_local_ray():
    from dapo.config import builtin_config_path, load_config
    from dapo.ray_checks import ray_address_problems
    environ = {"RAY_ADDRESS": "10.0.0.1:6379"}
    one = load_config([builtin_config_path("default")], [])
    assert ray_address_problems(one, environ) == []  # one process: no Ray
    ranks = load_config([builtin_config_path("default")], ["resources.devices_per_node=2"])
    [problem] = ray_address_problems(ranks, environ)
    assert problem.endswith("(RAY_ADDRESS=10.0.0.1:6379)")
    assert ray_address_problems(ranks, {}) == []


# What Ray 2.60 raises at ray.init(address=HOST:PORT) of a cluster with token authentication on, for a
# driver with RAY_AUTH_MODE unset (test_trainer_ray_joined_cluster.py meets the real one).
REFUSED_TOKEN = ("Failed to connect to GCS. Last connection error: Traceback (most recent call last):\n  ...\n"
                 "ray.exceptions.AuthenticationError: RPC error: InvalidAuthToken: Authentication token is missing or "
                 "incorrect. Note: RAY_AUTH_MODE is currently 'disabled' (not 'token').")


def refused(address: str) -> ConnectionError:
    try:
        try:
            raise RuntimeError(REFUSED_TOKEN)
        except RuntimeError as gcs_error:
            raise ConnectionError(f"Failed to connect to Ray cluster at {address}") from gcs_error
    except ConnectionError as error:
        return error


def test_a_token_refused_at_an_explicit_address_says_what_to_set(monkeypatch):
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    said = ray_init_problem(refused("10.0.0.1:6379"), "10.0.0.1:6379")
    assert said is not None and said.startswith("the Ray cluster at resources.ray_address=10.0.0.1:6379 asks for "
                                                "Ray's token authentication")
    assert "unless RAY_AUTH_MODE=token: set it" in said and "~/.ray/auth_token" in said
    # with the mode set (or on a node of the cluster, auto), the token itself is wrong or missing
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    said = ray_init_problem(refused("10.0.0.1:6379"), "10.0.0.1:6379")
    assert said is not None and "refused this process's Ray token, or its lack of one (RAY_AUTH_MODE=token)" in said
    assert "copy that file here" in said and "RAY_AUTH_TOKEN" in said
    monkeypatch.delenv("RAY_AUTH_MODE")
    said = ray_init_problem(refused("auto"), "auto")
    assert said is not None and "refused this process's Ray token, or its lack of one (RAY_AUTH_MODE=unset)" in said


def test_a_connection_that_fails_otherwise_keeps_rays_error():
    assert ray_init_problem(ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379"), "10.0.0.1:6379") \
        is None
    assert ray_init_problem(refused("10.0.0.1:6379"), None) is None  # (a local Ray is this run's own)
