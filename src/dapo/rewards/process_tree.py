"""The processes below a process (Linux /proc): what a reward function started, so that a
worker's end is also theirs."""

from __future__ import annotations

import contextlib
import os
import sys


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux /proc; elsewhere none), deepest first."""
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{name}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(name))
    found, frontier = [], [pid]
    while frontier:
        frontier = [child for parent in frontier for child in children.get(parent, [])]
        found += frontier
    return found[::-1]


def adopt_orphans() -> None:
    """Linux: become the parent of every process orphaned below this one (PR_SET_CHILD_SUBREAPER),
    so a daemon a reward function starts (fork twice, the middle process exits) stays among this
    process's :func:`descendants` instead of escaping to init."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_child_subreaper = 36
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_child_subreaper, 1)


def reap_orphans() -> None:
    """Collect the exit status of every child that has ended (adopted orphans become zombies
    until their new parent does)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
