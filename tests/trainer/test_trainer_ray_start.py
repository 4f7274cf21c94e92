"""Starting a local Ray: RAY_AUTH_MODE set to Ray's own default before Ray is imported, so that
Ray 2.59+ does not warn at every start that it turned token authentication on."""

from __future__ import annotations

import importlib.metadata
import os
import signal
import sys

import pytest

from dapo.trainer.ray_policy import quiet_local_token_auth


@pytest.mark.parametrize(("version", "user_mode", "imported", "mode"), [
    ("2.60.0", None, False, "token"),  # Ray's default since 2.59, set before Ray would warn that it sets it
    ("2.59.0", None, False, "token"),
    ("2.58.1", None, False, None),  # token mode is opt-in there: left to the user
    ("2.60.0", "disabled", False, "disabled"),  # the user's choice stays
    ("2.60.0", None, True, None),  # Ray imported already: its config has read the variable, too late
    ("nightly", None, False, None),
])
def test_a_local_start_sets_ray_token_auth_where_ray_defaults_to_it(monkeypatch, version, user_mode, imported, mode):
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    if user_mode is not None:
        monkeypatch.setenv("RAY_AUTH_MODE", user_mode)
    monkeypatch.setattr(importlib.metadata, "version", lambda name: version if name == "ray" else "0")
    if imported:
        monkeypatch.setitem(sys.modules, "ray", object())
    else:
        monkeypatch.delitem(sys.modules, "ray", raising=False)
    quiet_local_token_auth()
    assert os.environ.get("RAY_AUTH_MODE") == mode


def test_a_sigterm_in_ray_init_unwinds_through_the_callers_handler(monkeypatch):
    """Ray's handler, live while ray.init runs, exits with status 15: the dapo CLI did not read that
    as a stop (no message, exit 15 rather than 143, which a requeueing scheduler reads)."""
    from dapo.trainer.ray_policy import keeping_sigterm_handler

    def unwind(signum, frame):  # as the dapo CLI's exit_on_termination
        signal.signal(signum, signal.SIG_DFL)  # a second signal ends the process at once
        raise SystemExit(128 + signum)

    monkeypatch.setattr(signal, "getsignal", lambda signum: unwind)
    installed = []
    monkeypatch.setattr(signal, "signal", lambda signum, handler: installed.append((signum, handler)))
    with pytest.raises(SystemExit) as stopped, keeping_sigterm_handler():
        raise SystemExit(signal.SIGTERM)  # Ray's: sys.exit(signum)
    assert stopped.value.code == 143 and installed == [(signal.SIGTERM, unwind), (signal.SIGTERM, signal.SIG_DFL)]
    installed.clear()
    with keeping_sigterm_handler():  # ray.init returned: the caller's handler back over Ray's
        pass
    assert installed == [(signal.SIGTERM, unwind)]


def test_a_local_ray_stopped_while_it_started_stops_what_it_started(monkeypatch):
    """ray.shutdown knows no node whose start was interrupted: its raylet was killed by Ray's
    reaper instead, which left two Ray agents (about 180 MB) running for a minute a time."""
    ray_node = pytest.importorskip("ray._private.node")
    from dapo.trainer.ray_policy import stop_half_started_ray

    killed, shut = [], []
    monkeypatch.setattr(ray_node.Node, "kill_all_processes", lambda self, **kw: killed.append(kw))
    node = object.__new__(ray_node.Node)

    def node_init(self):  # Ray's Node.__init__, interrupted
        raise SystemExit(15)

    def callers_handler():
        raise SystemExit(143)

    with pytest.raises(SystemExit) as stopped:
        try:
            node_init(node)
        except SystemExit:
            callers_handler()  # (keeping_sigterm_handler's call: Ray's exit is its context)
    stop_half_started_ray(type("Ray", (), {"shutdown": staticmethod(lambda: shut.append(1))}), stopped.value)
    assert killed == [{"check_alive": False, "allow_graceful": True, "wait": True}] and shut == [1]


def test_the_policy_group_stops_what_an_interrupted_ray_init_started(monkeypatch):
    ray = pytest.importorskip("ray")
    from dapo.config import builtin_config_path, load_config
    from dapo.trainer import ray_policy

    def interrupted(**kwargs):
        raise KeyboardInterrupt

    stopped = []
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", interrupted)
    monkeypatch.setattr(ray_policy, "stop_half_started_ray", lambda ray_module, stop: stopped.append(type(stop)))
    cfg = load_config([builtin_config_path("default")], ["resources.devices_per_node=2"])
    with pytest.raises(KeyboardInterrupt):
        ray_policy.RayPolicyGroup(cfg)
    assert stopped == [KeyboardInterrupt]


@pytest.mark.parametrize(("presses", "expected"), [
    (1, ["init went on", "init returned", "ray.shutdown"]),  # held back until Ray has started
    (2, ["init went on", "ray.shutdown"]),  # asked twice: at once
])
def test_a_ctrl_c_while_ray_init_runs_stops_the_run_once_ray_has_started(capfd, presses, expected):
    """A Ctrl-C that lands while ray.init builds the driver's CoreWorker leaves it half-built, and the
    process segfaulted at exit (reproduced with Ray 2.60: 1 in 7 Ctrl-Cs about 3.3 s into the start).
    It is held back until ray.init returns, then stops the run (Ray shut down); a second stops at once."""
    from dapo.config import ResourcesConfig
    from dapo.trainer import ray_policy

    events: list[str] = []

    def init(**kwargs):
        for _ in range(presses):
            signal.raise_signal(signal.SIGINT)  # the user's Ctrl-C, inside Ray's start
            events.append("init went on")
        events.append("init returned")

    ray = type("Ray", (), {"init": staticmethod(init), "shutdown": staticmethod(lambda: events.append("ray.shutdown"))})
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own, as in `dapo train`
    try:
        with pytest.raises(KeyboardInterrupt):
            ray_policy.start_ray(ray, ResourcesConfig())
        assert events == expected
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    finally:
        signal.signal(signal.SIGINT, previous)
    assert capfd.readouterr().err.count(ray_policy.RAY_INIT_CTRL_C) == 1


def test_an_ignored_ctrl_c_stays_ignored_while_ray_starts(capfd):
    """Under nohup (SIGINT ignored) a Ctrl-C was deferred, said the run would stop, and was then
    ignored: the handler stays SIG_IGN, and nothing is said."""
    from dapo.config import ResourcesConfig
    from dapo.trainer import ray_policy

    seen = []
    ray = type("Ray", (), {"init": staticmethod(lambda **kw: (signal.raise_signal(signal.SIGINT),
                                                              seen.append(signal.getsignal(signal.SIGINT)))),
                           "shutdown": staticmethod(lambda: None)})
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        ray_policy.start_ray(ray, ResourcesConfig())
    finally:
        signal.signal(signal.SIGINT, previous)
    assert seen == [signal.SIG_IGN] and ray_policy.RAY_INIT_CTRL_C not in capfd.readouterr().err


@pytest.mark.parametrize("blocked_before", [set(), {signal.SIGHUP}])
def test_a_local_ray_starts_its_processes_with_sigterm_and_sighup_blocked(blocked_before):
    """Ray's GCS and raylet were in the command's process group: a SIGTERM to it (`timeout`, a
    scheduler) killed them, and with them the ranks, before the step's checkpoint was written. What
    ray.init starts inherits this thread's mask; the caller's mask is as it was after."""
    from dapo.child_signals import stop_signals_unblocked
    from dapo.config import ResourcesConfig
    from dapo.trainer import ray_policy

    seen = []
    ray = type("Ray", (), {"init": staticmethod(lambda **kw: seen.append(signal.pthread_sigmask(signal.SIG_BLOCK, []))),
                           "shutdown": staticmethod(lambda: None)})
    before = signal.pthread_sigmask(signal.SIG_SETMASK, blocked_before)
    try:
        ray_policy.start_ray(ray, ResourcesConfig())
        assert {signal.SIGTERM, signal.SIGHUP} <= seen[0]
        assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == blocked_before
        # a rank's worker (its own process group) takes the block off, for what it starts to stop on SIGTERM
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGHUP})
        stop_signals_unblocked()
        assert not signal.pthread_sigmask(signal.SIG_BLOCK, []) & {signal.SIGTERM, signal.SIGHUP}
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def test_a_policy_rank_in_a_ray_actor_takes_the_inherited_block_off(monkeypatch):
    """A rank's worker inherits the raylet's block of SIGTERM and SIGHUP; unless the rank takes it
    off, what the rank starts (a vLLM engine, torch's workers) would ignore `terminate()`."""
    from dapo.trainer import ray_rank

    monkeypatch.setattr(ray_rank, "_in_ray_actor", lambda: True)
    monkeypatch.setattr(ray_rank, "rank_warnings", lambda rank, command: None)
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGHUP})
    try:
        ray_rank.PolicyRank({}, rank=1, world_size=2)
        assert not signal.pthread_sigmask(signal.SIG_BLOCK, []) & {signal.SIGTERM, signal.SIGHUP}
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def test_a_local_ray_has_room_for_fractional_ranks():
    """3 ranks of 1.5 CPUs need 5 Ray CPUs (rounded up): with 4 the third rank never started."""
    from types import SimpleNamespace

    from dapo.trainer.ray_policy import start_ray

    inits = []
    fake_ray = SimpleNamespace(init=lambda **kwargs: inits.append(kwargs), shutdown=lambda: None)
    start_ray(fake_ray, SimpleNamespace(ray_address=None, world_size=3, cpus_per_rank=1.5))
    assert inits[0]["num_cpus"] == 5
