"""A worker stuck outside any task, or gone with a daemon still running, holds no run past its
deadlines and leaves nothing behind (the pool's sockets never block; each worker has a keeper)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dapo.rewards import process_tree
from dapo.rewards.pool import WorkerPool

FNS = str(Path(__file__).resolve().parent / "reward_fns_fixture.py")


def fn_tasks(extras: list[dict]) -> list[tuple]:
    return [("fn", 0, "response", "1", extra) for extra in extras]


def alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting for its new parent to reap it)."""
    return process_tree._state(pid) not in (None, "Z")


# A thread a reward function leaves behind that takes the GIL at the worst moment and keeps it in
# C code (ctypes.PyDLL does not release it): it spins (so it gets the GIL whenever the main thread
# lets go of it) until the main thread's innermost Python frame is one of `extra["when"]`.
GIL_HOLDER = """
import ctypes, sys, threading

def _hold_the_gil(when, seconds):
    main = threading.main_thread().ident
    while True:
        frame = sys._current_frames().get(main)
        if frame is not None and frame.f_code.co_name in when:
            ctypes.PyDLL(None).usleep(int(seconds * 1e6))
            return

def f(response, ground_truth, extra):
    if "when" in extra:
        threading.Thread(target=_hold_the_gil, args=(extra["when"], 60.0), daemon=True).start()
    if extra.get("big_result"):  # no "score": a "bad" outcome quoting the key, a message sent in
        return {"x" * 20_000_000: 1.0}  # many writes, the main thread letting go of the GIL in each
    return 1.0
"""
# the main thread's frames: reading the next chunk, sending a message (this code, and the
# multiprocessing.connection the pool used before)
WAITING_FOR_A_CHUNK = ["_read_exactly", "_recv"]
SENDING = ["send_message", "_send"]


@pytest.fixture()
def gil_holder(tmp_path: Path) -> str:
    module = tmp_path / "holds_the_gil.py"
    module.write_text(GIL_HOLDER)
    return f"{module}:f"


def test_a_chunk_a_stuck_worker_cannot_take_is_held_to_the_deadline(gil_holder):
    """The item returned in time, but left a thread holding the GIL while the worker waits for
    its next chunk: the worker reads no more of its socket. The parent's send of a chunk larger
    than the socket's buffer blocked until the thread let go (60 s here), past every deadline."""
    pool = WorkerPool(1, [gil_holder], timeout_s=2.0)
    try:
        assert [kind for kind, _ in pool.run(fn_tasks([{"when": WAITING_FOR_A_CHUNK}]))] == ["ok"]
        time.sleep(1.0)  # the thread holds the GIL by now
        started = time.monotonic()
        [(kind, _)] = pool.run([("fn", 0, "x" * 4_000_000, "1", {})])  # 4 MB: more than the buffer
        assert kind == "timeout" and time.monotonic() - started < 2.0 + 20.0
        assert [kind for kind, _ in pool.run(fn_tasks([{}, {}]))] == ["ok", "ok"]  # its replacement
    finally:
        pool.close()


def test_a_result_half_sent_by_a_stuck_worker_is_held_to_the_deadline(gil_holder):
    """A result longer than the socket's buffer, sent while the item's thread takes the GIL: the
    parent read the start of the message and blocked for the rest until the thread let go (60 s
    here; the thread takes the GIL when the main thread waits for the parent to read)."""
    pool = WorkerPool(1, [gil_holder], timeout_s=3.0)
    try:
        started = time.monotonic()
        [(kind, _)] = pool.run(fn_tasks([{"when": SENDING, "big_result": True}]))
        assert kind == "timeout" and time.monotonic() - started < 3.0 + 20.0
    finally:
        pool.close()


DAEMON_THEN_EXIT = """
import os, time
def f(response, ground_truth, extra):
    middle = os.fork()
    if middle == 0:  # a daemon: fork, setsid, fork; the middle exits
        os.setsid()
        if os.fork() == 0:
            with open({pid_file!r}, "w") as out:
                out.write(str(os.getpid()))
            time.sleep(300)
            os._exit(0)
        os._exit(0)
    os.waitpid(middle, 0)
    while not (os.path.exists({pid_file!r}) and open({pid_file!r}).read()):  # (written whole)
        time.sleep(0.01)
    os._exit(3)  # the worker ends by itself, its daemon (adopted, in a session of its own) running
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the keeper is a Linux subreaper")
def test_a_daemon_of_a_worker_that_exits_by_itself_does_not_outlive_it(tmp_path):
    """The worker's death orphaned its daemon again, to init, outside the worker's group: nothing
    found it. It also held the worker's socket open, so the item was charged a timeout at the
    deadline instead of "died" at once. The worker's keeper now adopts it and kills it."""
    pid_file = tmp_path / "daemon.pid"
    module = tmp_path / "daemon_then_exit.py"
    module.write_text(DAEMON_THEN_EXIT.format(pid_file=str(pid_file)))
    pool = WorkerPool(1, [f"{module}:f"], timeout_s=60.0)
    try:
        [(kind, _)] = pool.run(fn_tasks([{}]))
    finally:
        pool.close()
        daemon = int(pid_file.read_text()) if pid_file.exists() else None
    deadline = time.monotonic() + 10
    while daemon and alive(daemon) and time.monotonic() < deadline:
        time.sleep(0.05)
    outlived = daemon is not None and alive(daemon)
    if outlived:
        os.kill(daemon, signal.SIGKILL)
    assert kind == "died" and daemon is not None and not outlived


def test_the_workers_scoring_processes_are_told_apart_from_their_keepers():
    pool = WorkerPool(2, [f"{FNS}:length_bonus"], timeout_s=30.0)
    try:
        assert len(set(pool.scoring_pids)) == 2 and all(alive(pid) for pid in pool.scoring_pids)
        if sys.platform.startswith("linux"):  # each keeper is its worker's parent
            assert set(pool.scoring_pids).isdisjoint(pool.pids)
            for keeper, worker in zip(pool.pids, pool.scoring_pids):
                assert Path(f"/proc/{worker}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(keeper)
    finally:
        pool.close()


AS_PID_1 = """
import ctypes, os, sys, time
ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans come to this process, as to a container's PID 1
from dapo.rewards.pool import WorkerPool

def zombie_children():
    found = []
    for name in os.listdir("/proc"):
        try:
            fields = open(f"/proc/{name}/stat").read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == "Z" and int(fields[1]) == os.getpid():
            found.append(int(name))
    return found

pool = WorkerPool(1, [sys.argv[1] + ":f"], timeout_s=2.0)
kinds = [kind for kind, _ in pool.run([("fn", 0, "response", "1", {"mode": mode}) for mode in sys.argv[2:]])]
pool.close()
deadline = time.monotonic() + 10
while zombie_children() and time.monotonic() < deadline:
    time.sleep(0.1)
print(" ".join(kinds), len(zombie_children()))
"""
STARTS_A_PROGRAM_THEN = """
import os, subprocess, time
def f(response, ground_truth, extra):
    subprocess.Popen(["sleep", "300"])
    if extra["mode"] == "hang":
        time.sleep(300)
    if extra["mode"] == "exit":
        os._exit(3)
    return 1.0
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the keeper is a Linux subreaper")
def test_a_trainer_that_is_a_containers_pid_1_is_left_no_zombies(tmp_path):
    """A trainer that is a container's PID 1 (or a subreaper) inherits every orphan and reaps none
    it did not start: a worker killed with its keeper (at a deadline, on close) and the programs
    its function started were its zombies for good, one more at each worker restart. The keeper
    now outlives them and reaps them. (In a subprocess: a subreaper would change the test process.)"""
    module = tmp_path / "starts_a_program.py"
    module.write_text(STARTS_A_PROGRAM_THEN)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    out = subprocess.run([sys.executable, "-c", AS_PID_1, str(module), "hang", "ok", "exit", "ok"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.stdout.split() == ["timeout", "ok", "died", "ok", "0"], out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr


WALKS_PROC_ONLY_WHEN_NEEDED = """
import os, subprocess, sys, time
from dapo.rewards import process_tree
walks, listing = [], process_tree._processes
process_tree._processes = lambda: walks.append(1) or listing()
process_tree.reap_orphans()  # no child
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1)"])
process_tree.reap_orphans()  # a child, running
before = len(walks)
while os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT) is None:
    pass
process_tree.reap_orphans()  # a child that ended: looked for among the adopted
print(before, len(walks), child.wait())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_a_worker_walks_proc_for_ended_orphans_only_when_a_child_has_ended():
    """After every chunk a worker walked all of /proc (a millisecond: half the worker's time per
    item with a trivial reward function) to find adopted daemons to reap, most often none."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    out = subprocess.run([sys.executable, "-c", WALKS_PROC_ONLY_WHEN_NEEDED], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.stdout.split() == ["0", "1", "0"], out.stdout + out.stderr  # (and the Popen's own status kept)


HANGS_WITH_A_PROGRAM = """
import subprocess, time
def f(response, ground_truth, extra):
    child = subprocess.Popen(["sleep", "300"])
    if extra.get("hang"):
        open({pid_file!r}, "w").write(str(child.pid))
        time.sleep(300)
    return 1.0
"""
FROM_A_THREAD = """
import sys, threading, time
from dapo.rewards.pool import WorkerPool
made = []
thread = threading.Thread(target=lambda: made.append(WorkerPool(1, [sys.argv[1] + ":f"], timeout_s=300.0)))
thread.start()
thread.join()  # the thread that started the workers has ended
time.sleep(0.5)
[(kind, _)] = made[0].run([("fn", 0, "response", "1", {})])
print(kind, made[0].pids[0], made[0].scoring_pids[0], flush=True)
made[0].run([("fn", 0, "response", "1", {"hang": True})])
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_workers_a_thread_started_end_with_the_trainer_not_with_the_thread(tmp_path):
    """A pool made by a thread other than the main one (PR_SET_PDEATHSIG fires when the thread
    that started a process ends) was not tied to the trainer at all: SIGKILLed while an item
    hung, it left the keeper, the worker and the item's program running for good."""
    pid_file, module = tmp_path / "program.pid", tmp_path / "hangs.py"
    module.write_text(HANGS_WITH_A_PROGRAM.format(pid_file=str(pid_file)))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    trainer = subprocess.Popen([sys.executable, "-c", FROM_A_THREAD, str(module)], stdout=subprocess.PIPE,
                               text=True, env=env)
    left: list[int] = []
    try:
        kind, keeper, worker = trainer.stdout.readline().split()
        left = [int(keeper), int(worker)]
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()):
            assert time.monotonic() < deadline, "the item never ran"
            time.sleep(0.05)
        left.append(int(pid_file.read_text()))  # the item's program
        assert kind == "ok" and all(alive(pid) for pid in left)  # the thread's end stopped nothing
        trainer.kill()
        trainer.wait(timeout=60)
        deadline = time.monotonic() + 20
        while any(alive(pid) for pid in left) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(pid) for pid in left)
    finally:
        trainer.kill()
        trainer.stdout.close()
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("fn", ["runs_a_multiprocessing_pool", "terminates_its_child"])
def test_a_reward_function_may_terminate_the_processes_it_forks(fn: str) -> None:
    """A forked child inherited the worker's SIGTERM handler, which killed the worker's whole group
    (reported as "killed by SIGKILL (out of memory?)"), or lost the signal when it came before the
    child first ran (the pool waited for it past the deadline)."""
    from dapo.config.schema import RewardConfig
    from dapo.rewards.scorer import RewardScorer

    cfg = RewardConfig(functions=[{"path": f"{FNS}:{fn}"}], num_workers=2, timeout_s=30.0)
    with RewardScorer(cfg) as scorer:
        results = scorer.score([f"Answer: {i}" for i in range(12)], ["1"] * 12)
        assert (scorer.num_errors, scorer.num_timeouts) == (0, 0)
    assert not any(result.failed for result in results)
    if fn == "terminates_its_child":
        assert all(result.extra[f"{fn}/score"] == 1.0 for result in results)  # the child ended by SIGTERM


def test_a_function_that_sigterms_its_own_group_is_reported_as_killed_by_sigterm(tmp_path: Path) -> None:
    """Its worker's handler answered the SIGTERM by SIGKILLing the worker's group: reported as "killed
    by SIGKILL (out of memory? the OOM killer sends it)". What the function started still goes."""
    from dapo.config.schema import RewardConfig
    from dapo.rewards.scorer import RewardScorer

    pid_file = tmp_path / "child.pid"
    cfg = RewardConfig(functions=[{"path": f"{FNS}:terminates_its_group"}], num_workers=1, timeout_s=30.0)
    with RewardScorer(cfg) as scorer:
        [result] = scorer.score(["Answer: 1"], ["1"], extras=[{"pid_file": str(pid_file)}])
        assert result.failed == ["terminates_its_group"]
        assert scorer.first_failure["terminates_its_group"].endswith("(killed by SIGTERM)")
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)
