"""Processes the run starts that a stop signal to the command's process group must not stop.

`timeout`, a scheduler or a closed terminal signals every process of the command's group: the
driver, and every helper process it started that stayed in the group. The driver holds such a
signal until the step it is in is checkpointed (``checkpoint.on_signal=finish_step``); a helper
that died at once (Ray's GCS and raylet, vLLM's tensor-parallel workers) took the step with it.
Processes inherit the signal mask of the thread that starts them, so blocking the signals while
they start spares them; the driver stops them itself, as it ends.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

# What `timeout`, a scheduler and a closed terminal send (Ray blocks SIGINT in its processes itself)
GROUP_STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextlib.contextmanager
def children_spared(signums: tuple[int, ...] = GROUP_STOP_SIGNALS) -> Iterator[None]:
    """``signums`` blocked in this thread while it starts processes, which inherit the mask; the
    thread's own mask is as it was after. A signal to the driver meanwhile is delivered when the
    block ends (or at once, to another of its threads that does not block it). Multiprocessing's
    resource tracker is running before the block: started at a process's first spawn (vLLM's
    workers), it unblocks SIGINT and SIGTERM in the thread that starts it, which spared nothing."""
    if not hasattr(signal, "pthread_sigmask"):  # (Windows)
        yield
        return
    if {signal.SIGINT, signal.SIGTERM} & set(signums):
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, set(signums))
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def stop_signals_unblocked(signums: tuple[int, ...] = GROUP_STOP_SIGNALS) -> None:
    """Take off this thread's block of ``signums`` that :func:`children_spared` passed on: called in
    a process that leads a process group of its own (a policy rank's Ray worker, started by the
    raylet), out of reach of a signal to the command's, so that the processes it starts stop on a
    SIGTERM (``Popen.terminate``, a pool's shutdown), which would otherwise wait, blocked, for good."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, set(signums))
