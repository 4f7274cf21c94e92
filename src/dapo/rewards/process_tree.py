"""The processes below a process (Linux /proc): what a reward function started, so that a
worker's end is also theirs."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


def _processes() -> Iterator[tuple[int, str, int, int]]:
    """(pid, state, parent pid, session id) of every process (Linux /proc; elsewhere none)."""
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
                yield int(name), fields[0], int(fields[1]), int(fields[3])


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux /proc; elsewhere none), deepest first."""
    children: dict[int, list[int]] = {}
    for child, _, parent, _ in _processes():
        children.setdefault(parent, []).append(child)
    found, frontier = [], [pid]
    while frontier:
        frontier = [child for parent in frontier for child in children.get(parent, [])]
        found += frontier
    return found[::-1]


def adopt_orphans() -> None:
    """Linux: become the parent of every process orphaned below this one (PR_SET_CHILD_SUBREAPER),
    so a daemon a reward function starts (fork, setsid, fork again) stays among this process's
    :func:`descendants` instead of escaping to init."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_child_subreaper = 36
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1)


def reap_orphans() -> None:
    """Collect the adopted daemons that have ended (zombies until their new parent does): ended
    children in another session than this process's, as a daemon's setsid makes them. Children a
    reward function started itself stay in this session and are left to its own wait(): reaping
    them would report a Popen's exit status as 0 and leave a multiprocessing.Process alive forever."""
    me, session = os.getpid(), os.getsid(0)
    for pid, state, parent, their_session in _processes():
        if parent == me and state == "Z" and their_session != session:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
