"""resources.* before Ray starts: an address nothing answers at is one line at once (ray.init
kept retrying it, printing only its own warnings), and a local Ray asked for more CPUs than the
process may use is said."""

from __future__ import annotations

import socket

import pytest

from dapo.config import builtin_config_path, load_config
from dapo.ray_checks import ray_address_problems, warn_about_local_ray


def _config(*overrides: str):
    return load_config([], ["resources.devices_per_node=2", *overrides])


def test_an_address_nothing_answers_at_is_said_at_once():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        open_port = listening.getsockname()[1]
        for address in (f"127.0.0.1:{open_port}", f"ray://127.0.0.1:{open_port}"):
            assert ray_address_problems(_config(f"resources.ray_address={address}")) == []
    # the port is closed now: refused at once
    for address in (f"127.0.0.1:{open_port}", f"ray://127.0.0.1:{open_port}"):
        [problem] = ray_address_problems(_config(f"resources.ray_address={address}"))
        assert problem.startswith(f"resources.ray_address='{address}': nothing answers at 127.0.0.1:{open_port} (")
        assert "`ray start --head` prints the address to give" in problem
    # Ray's own to resolve, and one rank (no Ray at all)
    assert ray_address_problems(_config("resources.ray_address=auto")) == []
    assert ray_address_problems(load_config([], ["resources.ray_address=nowhere.invalid:6379"])) == []


def test_dapo_trains_preflight_refuses_an_address_nothing_answers_at(tmp_path):
    from dapo.preflight import PreflightError, check_run

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: nothing answers
        with pytest.raises(PreflightError, match=rf"resources.ray_address='127.0.0.1:{port}': nothing answers"):
            check_run(load_config([builtin_config_path("default")], [
                f"output_dir={tmp_path}", "resources.devices_per_node=2", f"resources.ray_address=127.0.0.1:{port}"]))


def test_a_local_ray_asked_for_more_cpus_than_the_process_may_use_is_said(monkeypatch):
    monkeypatch.setattr("dapo.ray_checks.usable_cpus", lambda: 2)
    with pytest.warns(UserWarning, match=r"4 policy ranks x resources.cpus_per_rank=1 ask the local Ray for 4 CPUs, "
                                         r"and this process may use 2: the ranks share cores"):
        warn_about_local_ray(load_config([], ["resources.devices_per_node=4"]))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_about_local_ray(_config())  # 2 x 1 on 2
        warn_about_local_ray(load_config([], ["resources.devices_per_node=4", "resources.ray_address=auto"]))


def test_several_nodes_on_a_local_ray_are_said_to_be_this_machine(monkeypatch):
    """resources.nnodes=2 without an address ran both nodes' ranks here, saying nothing."""
    monkeypatch.setattr("dapo.ray_checks.usable_cpus", lambda: 8)
    with pytest.warns(UserWarning, match=r"resources.nnodes=2 with resources.ray_address null: the local Ray this run "
                                         r"starts places all 2 nodes' ranks on this machine .*set resources.ray_address=auto"):
        warn_about_local_ray(load_config([], ["resources.nnodes=2", "resources.devices_per_node=2"]))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_about_local_ray(load_config([], ["resources.nnodes=2", "resources.ray_address=auto"]))
