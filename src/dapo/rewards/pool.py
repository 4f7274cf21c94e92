"""Persistent scoring worker processes with a hard per-task deadline.

Deadlines are enforced by killing the worker (SIGKILL), not by an alarm inside it: a C-level
loop in sympy or a huge ``int`` conversion ignores Python signals, a dead process does not.
Tasks go out in chunks for throughput, but a worker reports each task as it finishes, and the
parent restarts the clock at every report, so each task gets ``timeout_s`` of its own. When a
worker is killed, the task it was running is marked ``timeout`` and the unstarted rest of its
chunk goes back to the front of the queue (all of it when the worker ended itself after a task
that left it short of memory: :class:`dapo.rewards.worker.MemoryWatch`). A replacement starts in the background and takes
work once it says it is ready (start-up time never counts against a task). A worker that dies
while starting is not replaced within the run (its replacement would likely die the same way);
each run stops workers that have hung starting for ``startup_timeout_s`` and starts the pool back
up to its size, so a passing cause costs one run's capacity.
Each task travels pickled on its own and is unpickled inside the worker's error handling, so an
item the worker cannot rebuild fails alone, as ``raised``.

Workers are fresh interpreters talking over a socket pair, each below a keeper on Linux
(``pids``): :mod:`dapo.rewards.worker_process` starts, stops and reaps them.

The parent never blocks on a socket (:class:`dapo.rewards.channel.Channel`): a worker stuck
after an item (a thread its function left holding the GIL in C code) held the whole run, every
deadline included, in the send of a chunk larger than the socket's buffer, or in the read of a
result it had half sent. A chunk's first task's clock starts when the chunk is queued: a worker
that does not take it in time is retired as at a timeout.
"""

from __future__ import annotations

import math
import pickle
import sys
import time
from collections import deque
from typing import Any

from dapo.hardware import usable_cpus
from dapo.rewards.breaker import Breaker
from dapo.rewards.user_functions import RewardFunctionError
from dapo.rewards.worker_process import WorkerProcess, exit_status, launch, wait_for_any

Outcome = tuple[str, Any]
_MAX_CHUNK = 16
_POLL_S = 0.5


class WorkerPool:
    """``num_workers`` processes running :func:`dapo.rewards.worker.main`."""

    def __init__(
        self,
        num_workers: int,
        function_specs: list[str],
        timeout_s: float,
        startup_timeout_s: float = 60.0,
        memory_limit_bytes: int = 0,
    ) -> None:
        """``memory_limit_bytes``: each worker's address-space cap (0: none); every worker is the
        OOM killer's first choice either way (:func:`dapo.rewards.process_tree.limit_worker_memory`)."""
        self.num_workers = num_workers
        self.memory_limit_bytes = memory_limit_bytes
        self.timeout_s = timeout_s
        self.startup_timeout_s = startup_timeout_s
        self._specs = list(function_specs)
        self._workers: list[WorkerProcess] = []
        self._results: list[Outcome | None] = []
        self._timeouts: list[float | None] = []  # the run's per-task deadlines (see run)
        self._breaker = Breaker([], [], 0)  # the run's (see run); this one never trips
        self._done = 0
        # What tasks of the last run() printed: task id -> (first characters, total characters).
        self.outputs: dict[int, tuple[str, int]] = {}
        # What was printed between tasks (by a thread or a program a function left running) and
        # reported in the last run(): (the first report's characters, total characters), or None.
        self.stray_output: tuple[str, int] | None = None
        self._init_error: str | None = None
        try:
            self._workers = [self._start_worker() for _ in range(num_workers)]
            self._await_all_ready()
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int]:
        """The processes the pool started and reaps (on Linux the keepers, not the scorers)."""
        return [w.process.pid for w in self._workers]

    @property
    def scoring_pids(self) -> list[int]:
        """The processes that run the tasks (for resource accounting); until one is ready, its keeper's."""
        return [w.scoring_pid or w.process.pid for w in self._workers]

    def _functions(self) -> str:
        """The reward functions a worker imports as it starts, for a start-up error to name."""
        return "the reward function(s) " + ", ".join(self._specs) if self._specs else "the verifier"

    def _start_worker(self) -> WorkerProcess:
        return launch(self._specs, self.memory_limit_bytes)

    def _await_all_ready(self) -> None:
        """Block until every worker has loaded the user functions; raise if one cannot."""
        deadline = time.monotonic() + self.startup_timeout_s
        while not all(w.ready for w in self._workers):
            if time.monotonic() > deadline:
                raise RewardFunctionError(
                    f"reward workers did not start within {self.startup_timeout_s:.0f} s: does importing "
                    f"{self._functions()} hang?"
                )
            wait_for_any([w for w in self._workers if not w.ready], _POLL_S)
            for worker in self._workers:
                self._drain(worker)
                if self._init_error is not None:
                    raise RewardFunctionError(self._init_error)
                if not worker.ready and worker.dead:
                    raise RewardFunctionError(
                        f"a reward worker exited while importing {self._functions()} "
                        f"({exit_status(worker.process.wait())}; what it printed, if anything, is above)"
                    )

    def run(self, tasks: list[tuple], timeouts: list[float | None] | None = None,
            breaker: Breaker | None = None) -> list[Outcome]:
        """Run every task; return one outcome per task, in order. Never blocks past deadlines:
        each task's own (``timeouts[i]``; None, or no list: the pool's ``timeout_s``). The tasks
        ``breaker`` trips (:mod:`dapo.rewards.breaker`) are not run: they fail as ``("timeout" or "died", "skipped")``."""
        self._results = [None] * len(tasks)
        self._timeouts = timeouts or []
        self._breaker = breaker or Breaker([], [], 0)
        self._done = 0
        self.outputs = {}
        self.stray_output = None
        self._init_error = None
        # Replaced: a replacement stuck importing, and the workers a run interrupted part-way (Ctrl-C
        # in a notebook, an exception) left busy with its items, whose results would be taken for
        # this run's items of the same index.
        # (inflight first: reading a busy worker's socket would take its old result for this run's)
        for worker in [w for w in self._workers if w.inflight or self._hung_starting(w)]:
            worker.stop()
            self._workers.remove(worker)
        self._workers += [self._start_worker() for _ in range(self.num_workers - len(self._workers))]
        pending: deque[int] = deque(self._breaker.start_order(len(tasks)))  # (problems in turn)
        chunk_size = max(1, min(_MAX_CHUNK, len(tasks) // (4 * max(1, len(self._workers)))))
        while self._done < len(tasks):
            # Read before deciding anything: a replacement may have said it is ready since the last run.
            for worker in list(self._workers):
                self._drain(worker)
                if worker.dead or time.monotonic() > worker.deadline:
                    self._retire(worker, pending, "died" if worker.dead else "timeout")
            for task_id in self._breaker.skip(pending):
                self._finish(task_id, self._breaker.skipped_outcome(task_id))
            if self._done == len(tasks):
                break
            if self._none_can_start():
                self._fail_pending(pending, self._init_error or "no scoring worker could start")
                break
            self._dispatch(pending, tasks, chunk_size)
            wait_for_any(self._workers, self._wait_timeout())
        results, self._results = self._results, []
        return results  # type: ignore[return-value]

    def _dispatch(self, pending: deque[int], tasks: list[tuple], chunk_size: int) -> None:
        for worker in self._workers:
            if not (worker.ready and not worker.inflight and not worker.recycling and pending):
                continue
            ids = [pending.popleft() for _ in range(min(chunk_size, len(pending)))]
            chunk = [(i, blob) for i in ids if (blob := self._pickled(i, tasks[i])) is not None]
            # in flight before the send: an interrupt right after it leaves the worker marked busy
            worker.inflight.extend(i for i, _ in chunk)
            worker.channel.send(chunk)
            if worker.channel.closed:  # it was gone before it could take any of them
                worker.inflight.clear()
                pending.extendleft(reversed([i for i, _ in chunk]))  # none of them started
                continue
            # from now, not from the end of the transfer (see the module's docstring)
            worker.deadline = self._deadline_of(worker)

    def _deadline_of(self, worker: WorkerProcess) -> float:
        """When the task at the head of the worker's queue must be done, from now (it has just
        started: the previous one reported, or the chunk was queued)."""
        if not worker.inflight:
            return math.inf
        task_id = worker.inflight[0]
        timeout = self._timeouts[task_id] if task_id < len(self._timeouts) else None
        return time.monotonic() + (self.timeout_s if timeout is None else timeout)

    def _pickled(self, task_id: int, task: tuple) -> bytes | None:
        """The task as the worker receives it, or None (and the task failed) if it cannot be sent."""
        try:
            return pickle.dumps(task)
        except Exception as exc:
            self._finish(task_id, ("raised", f"the item could not be sent to a worker: {exc!r}"))
            return None

    def _drain(self, worker: WorkerProcess) -> None:
        """Send the worker what its socket takes, and read every message it has sent so far."""
        worker.channel.flush()
        try:
            for message in worker.channel.receive():
                if message[0] == "result":
                    _, task_id, outcome = message
                    if not worker.inflight or worker.inflight[0] != task_id:
                        worker.dead = True  # not the answer it owes (a process its function forked wrote
                        return  # on its socket): retired, its running task charged, the rest requeued
                    worker.inflight.popleft()
                    self._finish(task_id, outcome)
                    worker.deadline = self._deadline_of(worker)
                elif message[0] == "output":
                    _, task_id, text, total = message
                    if task_id is not None:
                        self.outputs[task_id] = (text, total)
                    else:
                        head, before = self.stray_output or (text, 0)
                        self.stray_output = (head, before + total)
                elif message[0] == "recycle":
                    worker.recycling = True
                elif message[0] == "ready":
                    worker.ready, worker.scoring_pid = True, message[1]
                elif message[0] == "init_error":
                    self._init_error = f"a reward worker could not start: {message[1]}"
        except Exception:  # (unpickling errors and the like) not the protocol's messages: as dead
            worker.dead = True
        if worker.channel.closed:
            worker.dead = True  # closed socket: the worker exited or was killed

    def _finish(self, task_id: int, outcome: Outcome) -> None:
        if self._results[task_id] is None:
            self._done += 1
            self._breaker.record(task_id, outcome[0])
        self._results[task_id] = outcome

    def _retire(self, worker: WorkerProcess, pending: deque[int], reason: str) -> None:
        """Kill ``worker``, charge its running task, requeue the rest, start a replacement. One that
        dies before it was ever ready is not replaced in this run (its replacement would likely die the
        same way): the pool shrinks, and with no worker left the run's remaining tasks fail with the reason."""
        ended_by_itself = worker.channel.closed  # (not killed by stop(): it closed its socket first)
        worker.stop()
        detail = exit_status(worker.process.returncode) if reason == "died" and ended_by_itself else None
        if worker.inflight and not worker.recycling:
            self._finish(worker.inflight.popleft(), (reason, detail))
        pending.extendleft(reversed(worker.inflight))  # (a recycled worker's: none of them started)
        index = self._workers.index(worker)
        if worker.ready:
            self._workers[index] = self._start_worker()
        else:
            self._init_error = self._init_error or (
                f"a reward worker exited while importing {self._functions()} "
                f"({exit_status(worker.process.returncode)})"
            )
            del self._workers[index]

    def _fail_pending(self, pending: deque[int], why: str) -> None:
        for worker in self._workers:
            pending.extendleft(reversed(worker.inflight))
            worker.inflight.clear()
        while pending:
            self._finish(pending.popleft(), ("died", why))

    def _past_startup(self, worker: WorkerProcess, now: float) -> bool:
        """Not ready ``startup_timeout_s`` after it was started."""
        return not worker.ready and now - worker.started_at > self.startup_timeout_s

    def _hung_starting(self, worker: WorkerProcess) -> bool:
        """:meth:`_past_startup`, after reading what it sent."""
        self._drain(worker)
        return self._past_startup(worker, time.monotonic())

    def _none_can_start(self) -> bool:
        """No worker is ready, and none may still become so: every one died starting or has
        taken longer than ``startup_timeout_s`` to start."""
        now = time.monotonic()
        return all(self._past_startup(w, now) for w in self._workers)

    def _wait_timeout(self) -> float:
        next_deadline = min((w.deadline for w in self._workers), default=math.inf)
        return max(0.0, min(_POLL_S, next_deadline - time.monotonic()))

    def _stop_all(self, graceful: bool) -> None:
        """Stop every worker: ask them all, then give them 2 s together (busy ones finish their
        task or are killed), unless not ``graceful``. Interrupted meanwhile (a second Ctrl-C), it
        kills the rest at once; a worker leaves the pool's list only once stopped, so a later
        close() still reaches any it could not."""
        deadline = None
        try:
            if graceful:
                for worker in self._workers:
                    worker.channel.send(None)
                deadline = time.monotonic() + 2.0
            while self._workers:
                self._workers[0].stop(deadline)
                del self._workers[0]
        except BaseException:
            while self._workers:
                self._workers[0].stop()
                del self._workers[0]
            raise

    def close(self) -> None:
        """Stop every worker and reap it; safe to call twice."""
        self._stop_all(graceful=True)

    def __del__(self) -> None:
        """A pool nobody closed (a script that ends without Trainer.close()): reap its workers.
        At interpreter exit the pickling machinery the polite stop message needs may already be
        torn down, so then the workers are killed instead of asked."""
        if hasattr(self, "_workers"):
            self._stop_all(graceful=not sys.is_finalizing())


MAX_DEFAULT_WORKERS = 32  # reward.num_workers=0 on a large node: ~65 MB per worker, rarely the bottleneck


def default_num_workers() -> int:
    """One scoring worker per CPU this process may run on (its affinity: a SLURM or container
    slice of a node, not the node's every core), at most MAX_DEFAULT_WORKERS."""
    return max(1, min(usable_cpus(), MAX_DEFAULT_WORKERS))
