"""What runs inside a scoring worker process (the parent side is :mod:`dapo.rewards.pool`).

Each worker is a fresh interpreter started by the pool; it loads the user reward functions, says ``("ready", None)``, then answers chunks of
tasks one task at a time, sending ``("result", task_id, outcome)`` after each, so the parent
can hold every task to its own deadline and kill the worker when one runs past it.

Tasks:   ``("math", ground_truth, pred)``, ``("fn", index, response, ground_truth, extra)`` and,
for a batched function, ``("batch", index, responses, ground_truths, extras)``, each pickled on
its own: a chunk is a list of ``(task_id, pickled task)``.
Outcome: ``("ok", value)``, ``("raised", traceback text)`` or ``("bad", why the return value
is wrong)``; the parent adds ``("timeout", None)`` and ``("died", None)``. A batch's ``value``
is one outcome per response: ``("ok", value)`` or ``("bad", why)``.

What a user function prints (``sys.stdout`` / ``sys.stderr``) is captured per task, not written
to the trainer's terminal: a task that printed sends ``("output", task_id, first characters,
total characters)`` before its result, at most ``MAX_OUTPUT_CHARS`` of text, however much it
printed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import pickle
import random
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any

import math_verify  # noqa: F401  # load sympy before saying ready, not inside a task's deadline
import numpy  # (its global generator is seeded per call; 40 ms at start)

from dapo.rewards.equivalence import math_equal, silence_math_verify_logging
from dapo.rewards.process_tree import (
    adopt_orphans,
    kill_descendants,
    reap_orphans,
    signal_process,
)
from dapo.rewards.user_functions import RewardFunction, load_reward_function, normalize_return

Outcome = tuple[str, Any]
_MAX_TRACEBACK_CHARS = 4000
MAX_OUTPUT_CHARS = 2000


class BoundedOutput(io.TextIOBase):
    """A text stream that keeps the first ``limit`` characters written to it and counts the rest."""

    def __init__(self, limit: int = MAX_OUTPUT_CHARS) -> None:
        self.limit, self.kept, self.total = limit, io.StringIO(), 0

    @property
    def encoding(self) -> str:  # what code that prints bytes or picks a codec reads (None broke it)
        return "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        room = self.limit - self.kept.tell()
        if room > 0:
            self.kept.write(text[:room])
        self.total += len(text)
        return len(text)


def main(argv: list[str]) -> None:
    """Entry point of a worker interpreter: ``argv`` = [socket fd, parent pid, die_with_parent]."""
    fd, parent_pid, die_with_parent = int(argv[0]), int(argv[1]), argv[2] == "1"
    # the parent decides when workers stop (it leads its own process group, so Ctrl-C reaches it
    # only through the trainer's close(); this is in case something signals its group)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if die_with_parent:
        _die_with_parent(parent_pid)
    adopt_orphans()  # a daemon a reward function starts stays below the worker, to be stopped with it
    conn = Connection(fd)
    function_specs, parent_sys_path, parent_cwd = conn.recv()
    # The trainer's import path in its order, and its working directory last, where
    # dapo.user_code looks for "module:fn" reward functions.
    sys.path[:] = [*parent_sys_path, *([parent_cwd] if parent_cwd not in parent_sys_path else [])]
    serve(conn, function_specs)


def serve(conn: Connection, function_specs: list[str]) -> None:
    """Load the user functions, say ready, then run chunks of tasks until told to stop."""
    silence_math_verify_logging()
    try:
        functions = [load_reward_function(spec) for spec in function_specs]
    except Exception as exc:
        conn.send(("init_error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", None))
    server = os.getpid()
    while True:
        try:
            chunk = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        if chunk is None:  # asked to stop: what the functions started (and left running) stops too
            _end_with_everything_started()
        for task_id, pickled_task in chunk:
            output = BoundedOutput()
            with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
                outcome = run_task(pickled_task, functions)
            if os.getpid() != server:  # a process the function forked that returned (or raised) into
                os._exit(0)  # this loop: it must not answer on the worker's socket
            if output.total:
                conn.send(("output", task_id, output.kept.getvalue(), output.total))
            conn.send(("result", task_id, outcome))
        reap_orphans()


def run_task(pickled_task: bytes, functions: list[RewardFunction]) -> Outcome:
    """Run one task; every exception becomes an outcome, so the worker survives it (an item
    that cannot be unpickled here, e.g. of a class only the trainer's ``__main__`` defines, too)."""
    try:
        task = pickle.loads(pickled_task)
        if task[0] == "math":
            _, ground_truth, pred = task
            return "ok", math_equal(pred, ground_truth)
        kind, index, response, ground_truth, extra = task
        seed_global_generators(index, str(response), str(ground_truth))
        value = functions[index](response, ground_truth, extra)
    except BaseException:  # sys.exit() in a reward function too: the item fails, the worker lives
        # Formatting the traceback happens here, under the task's deadline, never in the parent.
        return "raised", traceback.format_exc()[-_MAX_TRACEBACK_CHARS:]
    if kind == "batch":
        return _batch_outcome(value, len(response))
    return _item_outcome(value)


def _item_outcome(value: Any) -> Outcome:
    try:
        return "ok", normalize_return(value)
    except Exception as exc:
        return "bad", f"{exc} (got a {type(value).__name__})"


def _batch_outcome(values: Any, size: int) -> Outcome:
    """A batched function's return: a list with one value per response, each checked alone (one
    bad value fails its response, not the batch)."""
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__") or not hasattr(values, "__iter__"):
        return "bad", f"a batched function returns a list of scores, one per response (got a {type(values).__name__})"
    if len(values) != size:
        return "bad", f"the returned list holds {len(values)} scores for {size} responses"
    return "ok", [_item_outcome(value) for value in values]


def seed_global_generators(function_index: int, response: str, ground_truth: str) -> None:
    """Seed Python's ``random`` and numpy's global generator from the call itself, so a function
    that draws from them scores the same response the same way whichever worker runs it, in a
    rerun and after a resume (which restores no worker state)."""
    text = f"{function_index}\0{ground_truth}\0{response}".encode("utf-8", "surrogatepass")
    seed = int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")
    random.seed(seed)
    numpy.random.seed(seed % 2**32)


def _end_with_everything_started(*_: object) -> None:
    """Kill what the reward functions started (frozen first, see :func:`kill_descendants`), then
    this worker's process group, the worker included: it leads the group (the pool starts it in
    its own session)."""
    kill_descendants(os.getpid(), leave_group=os.getpid())
    signal_process(0, signal.SIGKILL, group=True)
    os._exit(1)  # (not reached: the group's SIGKILL ends this process)


def _die_with_parent(parent_pid: int) -> None:
    """Linux: end, with what the reward functions started, when the parent dies, however it dies
    (SIGKILL, or SIGTERM to a trainer driven from Python, which runs no close()). The parent's
    death sends SIGTERM, not SIGKILL: a killed worker would leave its functions' programs running.
    The handler runs between two Python bytecodes, so a task stuck in C code holding the GIL delays
    it until the code returns."""
    if not sys.platform.startswith("linux"):
        return
    signal.signal(signal.SIGTERM, _end_with_everything_started)
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)
