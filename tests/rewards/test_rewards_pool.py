"""The scoring worker pool recovers: replacements are used whenever they became ready, a worker
that could not start is tried again on the next run, and one bad item fails alone."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from dapo.rewards import process_tree
from dapo.rewards.pool import WorkerPool

FNS = str(Path(__file__).resolve().parent / "reward_fns_fixture.py")


def fn_tasks(extras: list[dict]) -> list[tuple]:
    return [("fn", 0, "response", "1", extra) for extra in extras]


def test_a_replacement_that_became_ready_between_runs_takes_the_next_run():
    """The last item hangs, so its worker is replaced as the run ends; the trainer then
    generates for longer than the start-up timeout before it scores again. The replacement said
    it was ready meanwhile: the next run must use it, not fail every item."""
    # The first worker may start slowly on a loaded machine: the short start-up timeout is for
    # the replacement only.
    pool = WorkerPool(1, [f"{FNS}:sleeps_when_asked"], timeout_s=3.0, startup_timeout_s=120.0)
    pool.startup_timeout_s = 2.0
    try:
        first = pool.run(fn_tasks([{}, {}, {"sleep": True}]))
        assert [kind for kind, _ in first] == ["ok", "ok", "timeout"]
        [replacement] = pool._workers
        deadline = time.monotonic() + 120
        while not select.select([replacement.channel], [], [], 0.05)[0] and time.monotonic() < deadline:
            pass  # until its "ready" is waiting
        time.sleep(max(0.0, replacement.started_at + 2.5 - time.monotonic()))  # past startup_timeout_s
        assert [kind for kind, _ in pool.run(fn_tasks([{}] * 4))] == ["ok"] * 4
        assert pool._workers == [replacement]  # used, not stopped as hung and started again
    finally:
        pool.close()


def flaky_import(tmp_path: Path, on_import: str) -> tuple[str, Path]:
    """A reward function whose module runs ``on_import`` when imported while the returned marker
    file exists, and which kills its worker on items with exit=True: (spec, marker)."""
    marker = tmp_path / "marker"
    module = tmp_path / "flaky_import.py"
    module.write_text(
        "import os, pathlib, time\n"
        f"if pathlib.Path({str(marker)!r}).exists():\n"
        f"    {on_import}\n"
        "def f(response, ground_truth, extra):\n"
        "    if extra.get('exit'):\n"
        "        os._exit(3)\n"
        "    return 1.0\n"
    )
    return f"{module}:f", marker


def test_a_worker_that_could_not_start_is_tried_again_on_the_next_run(tmp_path):
    spec, marker = flaky_import(tmp_path, "raise ImportError('a passing cause')")
    pool = WorkerPool(1, [spec], timeout_s=5.0, startup_timeout_s=30.0)
    try:
        marker.touch()  # the replacement of the worker killed below cannot start
        outcomes = pool.run(fn_tasks([{"exit": True}, {}, {}]))
        assert outcomes[0][0] == "died" and all(kind == "died" for kind, _ in outcomes[1:])
        assert "a passing cause" in outcomes[1][1]
        marker.unlink()  # the cause passed: the pool starts back up to its size
        assert [kind for kind, _ in pool.run(fn_tasks([{}] * 3))] == ["ok"] * 3
    finally:
        pool.close()


def test_an_item_the_worker_cannot_unpickle_fails_alone():
    """An extra holding a class only the trainer process defines: that item is 'raised', its
    chunk neighbours are scored, and no worker dies."""
    only_here = types.ModuleType("defined_only_in_the_trainer")
    thing = type("Thing", (), {"__module__": only_here.__name__})
    only_here.Thing = thing
    sys.modules[only_here.__name__] = only_here
    pool = WorkerPool(1, [f"{FNS}:length_bonus"], timeout_s=5.0)
    try:
        pids = pool.pids
        outcomes = pool.run(fn_tasks([{}, {"obj": thing()}, {}]))
        assert [kind for kind, _ in outcomes] == ["ok", "raised", "ok"]
        assert "defined_only_in_the_trainer" in outcomes[1][1] and pool.pids == pids
    finally:
        pool.close()
        del sys.modules[only_here.__name__]


def alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting for its new parent to reap it)."""
    return process_tree._state(pid) not in (None, "Z")


def assert_ends(pid: int, within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def program_running_reward(tmp_path: Path) -> tuple[Path, Path]:
    """A reward function (module, its f) that runs a program, writes its pid, then hangs."""
    pid_file = tmp_path / "child.pid"
    module = tmp_path / "runs_a_program.py"
    module.write_text(
        "import subprocess, time\n"
        "def f(response, ground_truth, extra):\n"
        "    child = subprocess.Popen(['sleep', '300'])\n"
        f"    open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "    time.sleep(300)\n"
    )
    return module, pid_file


def test_what_a_reward_function_started_stops_with_its_worker(tmp_path):
    """A code-execution reward runs a program that hangs: when the worker is killed at the
    deadline, the program must not live on (burning a core for the rest of training)."""
    module, pid_file = program_running_reward(tmp_path)
    pool = WorkerPool(1, [f"{module}:f"], timeout_s=1.0)
    try:
        [(kind, _)] = pool.run(fn_tasks([{}]))
        assert kind == "timeout"
        assert_ends(int(pid_file.read_text()))
    finally:
        pool.close()


def test_what_a_reward_function_started_stops_when_its_worker_dies_by_itself(tmp_path):
    """A reward function that starts a program and then ends its worker (os._exit, a crash, the
    OOM killer): the item fails as "died", and the program, left in the worker's process group,
    must not live on. (Before, it was killed only when the pool saw the worker's socket close
    before the worker had fully exited: a race.)"""
    pid_file = tmp_path / "child.pid"
    module = tmp_path / "exits.py"
    module.write_text(
        "import os, subprocess\n"
        "def f(response, ground_truth, extra):\n"
        "    child = subprocess.Popen(['sleep', '300'])\n"
        f"    open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "    os._exit(3)\n"
    )
    pool = WorkerPool(1, [f"{module}:f"], timeout_s=30.0)
    try:
        [(kind, _)] = pool.run(fn_tasks([{}]))
        assert kind == "died"
        assert_ends(int(pid_file.read_text()))
    finally:
        pool.close()


def start_scoring_program(tmp_path: Path, script: str, **popen: object) -> tuple[subprocess.Popen, int]:
    """Run ``script`` (``python -c``, given :func:`program_running_reward`'s module as argv[1])
    in a fresh interpreter until the reward function has started its program; the interpreter,
    and the program's pid."""
    module, pid_file = program_running_reward(tmp_path)
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen([sys.executable, "-c", script, str(module)], cwd=tmp_path,
                               env={**os.environ, "PYTHONPATH": str(root / "src")}, **popen)
    try:
        deadline = time.monotonic() + 120
        while not (pid_file.exists() and pid_file.read_text()):
            assert time.monotonic() < deadline and process.poll() is None, "the reward function never ran"
            time.sleep(0.05)
    except BaseException:
        process.kill()
        raise
    return process, int(pid_file.read_text())


DRIVEN_FROM_PYTHON = """
import sys
from dapo.rewards.pool import WorkerPool
pool = WorkerPool(1, [sys.argv[1] + ":f"], timeout_s=300.0)
pool.run([("fn", 0, "response", "1", {})])
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_what_a_reward_function_started_stops_when_the_trainer_dies_without_closing(tmp_path, signum):
    """A trainer driven from Python (a notebook, a script: no dapo CLI to unwind on SIGTERM), or
    one SIGKILLed, runs no close(): its workers end when it dies, and what their functions started
    must end with them, not run on under init."""
    trainer, child = start_scoring_program(tmp_path, DRIVEN_FROM_PYTHON)
    try:
        trainer.send_signal(signum)
        assert trainer.wait(timeout=60) == -signum  # died by the signal: nothing unwound
        deadline = time.monotonic() + 20
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(child)
    finally:
        if trainer.poll() is None:
            trainer.kill()
        if alive(child):
            os.kill(child, signal.SIGKILL)


@pytest.mark.parametrize("hangs", [True, False], ids=["killed-at-the-deadline", "closed"])
def test_a_daemon_a_reward_function_starts_stops_with_its_worker(tmp_path, hangs):
    """A daemon (fork, setsid, fork again, the middle process exits) is no child of the worker's:
    init adopted it, and it outlived the worker. The worker now adopts its orphans (a subreaper)."""
    pid_file = tmp_path / "daemon.pid"
    module = tmp_path / "starts_a_daemon.py"
    module.write_text(
        "import os, time\n"
        "def f(response, ground_truth, extra):\n"
        "    middle = os.fork()\n"
        "    if middle == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        f"            open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "            time.sleep(300)\n"
        "        os._exit(0)\n"
        "    os.waitpid(middle, 0)\n"
        "    if extra.get('hang'):\n"
        "        time.sleep(300)\n"
        "    return 1.0\n"
    )
    pool = WorkerPool(1, [f"{module}:f"], timeout_s=2.0)
    try:
        [(kind, _)] = pool.run(fn_tasks([{"hang": hangs}]))
        assert kind == ("timeout" if hangs else "ok")
        deadline = time.monotonic() + 10
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "the daemon never started"
            time.sleep(0.05)
        daemon = int(pid_file.read_text())
    finally:
        pool.close()
    deadline = time.monotonic() + 10
    while alive(daemon) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(daemon)


REAP_CHECK = """
import os, subprocess, sys, time
from dapo.rewards.process_tree import adopt_orphans, reap_orphans
adopt_orphans()
child = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])  # kept by 'user code'
middle = os.fork()
if middle == 0:  # a daemon: fork, setsid, fork; the middle exits and this process adopts the last
    os.setsid()
    if os.fork() == 0:
        os._exit(0)
    os._exit(0)
os.waitpid(middle, 0)
time.sleep(1.0)
reap_orphans()
zombies = [line.split() for line in os.popen(f"ps -o pid=,stat= --ppid {os.getpid()}").read().splitlines()]
print(sorted(int(pid) for pid, stat in zombies if "Z" in stat) == [child.pid], child.wait())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and PR_SET_CHILD_SUBREAPER")
def test_a_worker_reaps_the_daemons_it_adopted_and_leaves_its_own_children_to_their_wait():
    """(In a subprocess: adopting orphans would change the test process for every later test.)"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    out = subprocess.run([sys.executable, "-c", REAP_CHECK], capture_output=True, text=True, timeout=60, env=env)
    assert out.stdout.split() == ["True", "3"], out.stderr  # the daemon reaped; the Popen's own exit status kept


def test_sys_exit_in_a_reward_function_fails_the_item_and_keeps_the_worker():
    pool = WorkerPool(1, [f"{FNS}:calls_sys_exit"], timeout_s=5.0)
    try:
        pids = pool.pids
        outcomes = pool.run(fn_tasks([{}, {"exit": True}, {}]))
        assert [kind for kind, _ in outcomes] == ["ok", "raised", "ok"] and "SystemExit" in outcomes[1][1]
        assert pool.pids == pids
    finally:
        pool.close()


def test_a_replacement_that_hangs_while_starting_is_replaced_on_the_next_run(tmp_path):
    spec, marker = flaky_import(tmp_path, "time.sleep(600)")
    pool = WorkerPool(1, [spec], timeout_s=5.0, startup_timeout_s=2.0)
    try:
        marker.touch()  # the replacement of the worker killed below hangs importing the function
        outcomes = pool.run(fn_tasks([{"exit": True}, {}]))
        assert [kind for kind, _ in outcomes] == ["died", "died"]
        hung = pool.pids
        marker.unlink()
        assert [kind for kind, _ in pool.run(fn_tasks([{}] * 3))] == ["ok"] * 3
        assert pool.pids != hung
    finally:
        marker.unlink(missing_ok=True)
        pool.close()


def test_a_file_in_the_working_directory_does_not_shadow_the_stdlib_in_workers(tmp_path, monkeypatch):
    # The trainer imports `statistics` from the stdlib; a worker must import the same module.
    (tmp_path / "statistics.py").write_text("raise ImportError('the local statistics.py shadowed the stdlib')\n")
    (tmp_path / "uses_stdlib.py").write_text(
        "import statistics\ndef f(response, ground_truth, extra):\n    return statistics.mean([0.0, 2.0])\n"
    )
    monkeypatch.chdir(tmp_path)
    pool = WorkerPool(1, ["uses_stdlib:f"], timeout_s=30.0, startup_timeout_s=60.0)
    try:
        [(kind, (score, *_))] = pool.run(fn_tasks([{}]))
        assert (kind, score) == ("ok", 1.0)
    finally:
        pool.close()


@pytest.mark.parametrize("results_waiting", [False, True], ids=["still-scoring", "results-sent"])
def test_a_run_interrupted_part_way_does_not_hand_its_results_to_the_next(results_waiting):
    """Ctrl-C in a notebook (or any exception) mid-run left the worker busy with the old items:
    their results came back as the next run's items of the same index, also once the worker had
    sent them (they waited in its socket, and the next run's first read took them)."""
    pool = WorkerPool(1, [f"{FNS}:echoes_index"], timeout_s=10.0)

    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(KeyboardInterrupt):
            pool.run(fn_tasks([{"i": 1000 + i, "slow": 0.05} for i in range(64)]))  # chunks of 16
        signal.setitimer(signal.ITIMER_REAL, 0)
        if results_waiting:
            time.sleep(1.5)  # the chunk under way (16 x 0.05 s) is scored and its results sent
        outcomes = pool.run(fn_tasks([{"i": i} for i in range(16)]))
        assert [value[0] for _, value in outcomes] == [float(i) for i in range(16)]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        pool.close()


def test_a_second_interrupt_while_closing_still_stops_every_worker():
    """close() gives busy workers 2 s to finish: a second Ctrl-C in that wait left the rest
    running, off the pool's list, so that no later close() could stop them."""
    pool = WorkerPool(2, [f"{FNS}:sleeps_when_asked"], timeout_s=60.0)
    keepers = pool.pids

    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(KeyboardInterrupt):
            pool.run(fn_tasks([{"sleep": True}] * 2))  # both workers busy, for good
        signal.setitimer(signal.ITIMER_REAL, 0.5)  # the second, during close's 2-s wait
        with pytest.raises(KeyboardInterrupt):
            pool.close()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert pool._workers == []
    for pid in keepers:  # stopped and reaped: no such process
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


WALKER = """
import os, time
def f(response, ground_truth, extra):
    if os.fork() == 0:
        if extra.get("own_session"):
            os.setsid()
        while True:  # fork, exit, go on as the child: the walker's pid never stays
            if os.fork():
                os._exit(0)
            with open({pid_file!r}, "a") as out:
                out.write(f"{{os.getpid()}} ")
            time.sleep(0.001)
    time.sleep(0.5)
    if extra.get("hang"):
        time.sleep(300)
    return 1.0
"""


@pytest.mark.parametrize("own_session", [False, True], ids=["in-the-workers-group", "setsid"])
@pytest.mark.parametrize("hangs", [True, False], ids=["killed-at-the-deadline", "closed"])
def test_a_process_that_forks_and_exits_in_a_loop_stops_with_its_worker(tmp_path, hangs, own_session):
    """A process that forks and exits over and over is gone from where a listing saw it by the
    time the kill comes: listing a worker's processes and then killing them let it live on."""
    pid_file = tmp_path / "walker.pid"
    module = tmp_path / "walks.py"
    module.write_text(WALKER.format(pid_file=str(pid_file)))
    pool = WorkerPool(1, [f"{module}:f"], timeout_s=2.0)
    try:
        [(kind, _)] = pool.run(fn_tasks([{"hang": hangs, "own_session": own_session}]))
        assert kind == ("timeout" if hangs else "ok")
    finally:
        pool.close()
    time.sleep(0.5)
    walked = pid_file.read_text()
    time.sleep(0.5)
    assert pid_file.read_text() == walked and len(walked.split()) > 10  # it walked, and walks no more
    assert not alive(int(walked.split()[-1]))


def test_each_item_of_a_chunk_gets_the_whole_timeout_from_its_own_start():
    """A worker takes its items a chunk at a time (here two of eight); the deadline restarts as each
    item starts, so two slow but legal items in one chunk (1.2 s each, 2 s allowed) both pass. With
    one deadline for the chunk, the second timed out and its worker was killed."""
    pool = WorkerPool(1, [f"{FNS}:echoes_index"], timeout_s=2.0)
    try:
        extras = [{"i": i, "slow": 1.2 if i < 2 else 0} for i in range(8)]
        outcomes = pool.run([("fn", 0, "response", "1", extra) for extra in extras])
        assert [kind for kind, _ in outcomes] == ["ok"] * 8, outcomes
    finally:
        pool.close()


def test_items_sent_to_a_worker_that_died_idle_are_scored_by_its_replacement():
    """A worker whose scoring process died just before the run sent it a chunk: the chunk sent to its
    closed socket goes back to the queue, to its replacement, rather than being lost (the run waited
    for good)."""
    pool = WorkerPool(1, [f"{FNS}:echoes_index"], timeout_s=5.0)

    def stuck(signum, frame):
        raise TimeoutError("the pool waited for items it had lost")

    previous = signal.signal(signal.SIGALRM, stuck)
    try:
        assert [kind for kind, _ in pool.run([("fn", 0, "r", "1", {"i": 0})])] == ["ok"]
        [pid] = pool.scoring_pids
        [worker] = pool._workers
        send = worker.channel.send

        def dies_first(message):  # (as it would between the pool's last read of it and the send)
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)
            send(message)

        worker.channel.send = dies_first
        signal.alarm(120)
        outcomes = pool.run([("fn", 0, "r", "1", {"i": i}) for i in range(8)])
        assert [(kind, value.score) for kind, value in outcomes] == [("ok", float(i)) for i in range(8)], outcomes
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        pool.close()
