"""One scoring worker process as the pool (:mod:`dapo.rewards.pool`) sees it: how it is started,
what the pool knows of it, how it is stopped and reaped, how it ended, and the wait on the
sockets of several. What a worker runs, and when, is the pool's.

Workers are fresh interpreters (``python -c "...worker.main()"``) talking over a socket pair:
the trainer process holds torch threads, so forking it is unsafe, and multiprocessing's spawn
and forkserver re-import the trainer's ``__main__`` (torch and all) in every worker. On Linux
that interpreter forks at start and stays behind as the worker's keeper (``WorkerPool.pids``;
see :func:`dapo.rewards.process_tree.start_keeper`).
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from dapo.rewards import capture_file, process_tree
from dapo.rewards.channel import Channel
from dapo.rewards.process_tree import end_below_keeper, group_members, has_keeper, kill_group

_KEEPER_EXIT_S = 5.0  # for a keeper to reap what was killed below it and exit (milliseconds, usually)
# `python -c` puts the working directory first on sys.path: drop it before any import, so a
# file there (random.py) does not shadow the stdlib in workers only; main() sets the trainer's path.
# The keeper forks off before the package is imported (process_tree.py and capture_file.py, stdlib
# only, loaded from their files): it stays a bare interpreter, a few MB. It holds the file the
# worker's output goes to (made before the fork) to its cap, which C code holding the worker's GIL
# cannot hold up.
_WORKER_CODE = (
    "import sys; del sys.path[0]; from importlib import util; "
    "spec = util.spec_from_file_location('dapo_keeper', sys.argv[4]); tree = util.module_from_spec(spec); "
    "spec.loader.exec_module(tree); "
    "spec = util.spec_from_file_location('dapo_capture', sys.argv[6]); cap = util.module_from_spec(spec); "
    "spec.loader.exec_module(cap); "
    "capture = cap.CaptureFile(); "
    "keeper = tree.start_keeper(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == '1', capture, int(sys.argv[5])); "
    "from dapo.rewards.worker import main; main(sys.argv[1:4], keeper, capture)"
)


@dataclass
class WorkerProcess:
    """A started worker: its process, its socket, and the tasks the pool has sent it."""

    process: subprocess.Popen  # the keeper on Linux (see the module's docstring)
    channel: Channel
    started_at: float
    scoring_pid: int | None = None  # the process that runs the tasks, as it said when ready
    ready: bool = False
    dead: bool = False  # its connection closed: it exited or was killed
    recycling: bool = False  # it said it ends, short of memory (dapo.rewards.worker.MemoryWatch)
    inflight: deque[int] = field(default_factory=deque)
    deadline: float = math.inf  # when the task at the head of ``inflight`` must be done

    def stop(self, deadline: float | None = None) -> None:
        """End the worker and reap it (no zombie): a worker asked to stop may exit by itself until
        ``deadline``; then SIGKILL, to it and to the processes it started (a sandboxed program a
        reward function runs), frozen first, so none is left running on its own. On Linux what is
        below the keeper is killed and the keeper reaps it (killed with it, the worker and what
        it started were zombies of init: of the trainer, when it is a container's PID 1)."""
        if deadline is not None and not self.dead:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        leader = self.process.pid
        alive = self.process.poll() is None
        # (nothing below a keeper whose worker's socket is still open: it has not forked yet)
        keeper_reaps = alive and has_keeper() and not sys.is_finalizing()
        if keeper_reaps and (end_below_keeper(leader) or self.channel.closed):
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=_KEEPER_EXIT_S)
        if self.process.poll() is None:
            kill_group(leader, roots=[leader])
        elif not alive:
            # it ended by itself (os._exit, a crash, the OOM killer; its keeper, if it had none):
            # what it started in its group lives on, and keeps the group's id from being reused
            for group in {leader, self.scoring_pid or leader}:
                if members := group_members(group):
                    kill_group(group, roots=members)
        self.process.wait()
        self.channel.close()
        self.dead = True


def launch(function_specs: list[str], memory_limit_bytes: int = 0) -> WorkerProcess:
    """Start one worker interpreter and send it what it needs to load the user functions.
    ``memory_limit_bytes``: its address-space cap, 0 for none (:func:`process_tree.limit_worker_memory`)."""
    parent_sock, child_sock = socket.socketpair()
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])  # the directory holding dapo/
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    # PR_SET_PDEATHSIG fires when the creating *thread* exits: from another thread, the keeper
    # ignores it while the trainer lives (a worker without keeper, off Linux, asks only from main)
    die_with_parent = threading.current_thread() is threading.main_thread()
    argv = [str(child_sock.fileno()), str(os.getpid()), str(int(die_with_parent)), process_tree.__file__,
            str(memory_limit_bytes), capture_file.__file__]
    process = subprocess.Popen(
        [sys.executable, "-c", _WORKER_CODE, *argv],
        pass_fds=(child_sock.fileno(),),
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,  # its own process group, to be stopped as one (see WorkerProcess.stop)
    )
    child_sock.close()
    worker = WorkerProcess(process=process, channel=Channel(parent_sock), started_at=time.monotonic())
    worker.channel.send((function_specs, list(sys.path), os.getcwd()))
    return worker


def exit_status(code: int | None) -> str | None:
    """How a worker that ended by itself ended, from its keeper's exit status (the keeper exits as
    its worker did): ``exit code 3`` (``os._exit(3)`` in a reward function), ``killed by SIGKILL``
    (the OOM killer?), or None when not known."""
    if code is None:
        return None
    if code >= 0:
        return f"exit code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"killed by {name}" + (" (out of memory? the OOM killer sends it)" if -code == signal.SIGKILL else "")


def wait_for_any(workers: list[WorkerProcess], timeout: float) -> None:
    """Until a worker's socket has something to read (a dying worker's: the end of the stream) or
    takes more of what is queued for it, or ``timeout`` s. (poll(): a trainer may hold fd 1024+.)"""
    poller = select.poll()
    for worker in workers:
        if not worker.channel.closed:
            poller.register(worker.channel, select.POLLIN | (select.POLLOUT if worker.channel.outbox else 0))
    poller.poll(math.ceil(timeout * 1000))
