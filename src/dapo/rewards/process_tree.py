"""The processes below a process (Linux /proc): what a reward function started, so that a
worker's end is also theirs."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator

_MAX_FREEZE_ROUNDS = 100  # a bound; a tree is frozen in two or three


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


def kill_descendants(pid: int) -> None:
    """SIGKILL every process below ``pid`` but those in the caller's own process group (a worker
    kills its own group last, itself included). One listing, then the kill, let a process forked
    in between live on, so each process found is first stopped (SIGSTOP: it cannot fork) with its
    process group (a group stops at once, however fast its members fork and exit), and the tree is
    listed again until nothing new shows; then the processes and their groups are killed."""
    own_group, frozen, groups = os.getpgid(0), [], set()
    for _ in range(_MAX_FREEZE_ROUNDS):
        new = [child for child in descendants(pid) if child not in frozen and _group(child) != own_group]
        if not new:
            break
        for child in new:
            signal_process(child, signal.SIGSTOP)
            if (group := _group(child)) not in (None, own_group):  # a group made below pid (setsid)
                signal_process(group, signal.SIGSTOP, group=True)
                groups.add(group)
        frozen += new
    for group in groups:
        signal_process(group, signal.SIGKILL, group=True)
    for child in frozen:
        signal_process(child, signal.SIGKILL)


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def signal_process(pid: int, signum: int, group: bool = False) -> None:
    """Send ``signum`` to a process (or the process group ``pid``) that may already be gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        (os.killpg if group else os.kill)(pid, signum)


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
