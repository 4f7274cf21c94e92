"""What runs inside a scoring worker process (the parent side is :mod:`dapo.rewards.pool`).

Each worker is a fresh interpreter started by the pool; it loads the user reward functions, says ``("ready", None)``, then answers chunks of
tasks one task at a time, sending ``("result", task_id, outcome)`` after each, so the parent
can hold every task to its own deadline and kill the worker when one runs past it.

Tasks:   ``("math", ground_truth, pred)`` and ``("fn", index, response, ground_truth, extra)``.
Outcome: ``("ok", value)``, ``("raised", traceback text)`` or ``("bad", why the return value
is wrong)``; the parent adds ``("timeout", None)`` and ``("died", None)``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any

import math_verify  # noqa: F401  # load sympy before saying ready, not inside a task's deadline

from dapo.rewards.equivalence import math_equal, silence_math_verify_logging
from dapo.rewards.user_functions import RewardFunction, load_reward_function, normalize_return

Outcome = tuple[str, Any]
_MAX_TRACEBACK_CHARS = 4000


def main(argv: list[str]) -> None:
    """Entry point of a worker interpreter: ``argv`` = [socket fd, parent pid, die_with_parent]."""
    fd, parent_pid, die_with_parent = int(argv[0]), int(argv[1]), argv[2] == "1"
    # Ctrl-C goes to the whole process group; the parent decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if die_with_parent:
        _die_with_parent(parent_pid)
    conn = Connection(fd)
    function_specs, parent_sys_path, parent_cwd = conn.recv()
    sys.path.extend(p for p in [*parent_sys_path, parent_cwd] if p not in sys.path)
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
    while True:
        try:
            chunk = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        if chunk is None:
            return
        for task_id, task in chunk:
            conn.send(("result", task_id, run_task(task, functions)))


def run_task(task: tuple, functions: list[RewardFunction]) -> Outcome:
    """Run one task; every exception becomes an outcome, so the worker survives it."""
    try:
        if task[0] == "math":
            _, ground_truth, pred = task
            return "ok", math_equal(pred, ground_truth)
        _, index, response, ground_truth, extra = task
        value = functions[index](response, ground_truth, extra)
    except Exception:
        # Formatting the traceback happens here, under the task's deadline, never in the parent.
        return "raised", traceback.format_exc()[-_MAX_TRACEBACK_CHARS:]
    try:
        return "ok", normalize_return(value)
    except Exception as exc:
        return "bad", f"{exc} (got a {type(value).__name__})"


def _die_with_parent(parent_pid: int) -> None:
    """Linux: get SIGKILL when the parent dies, so a worker stuck in a task is never orphaned."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)
