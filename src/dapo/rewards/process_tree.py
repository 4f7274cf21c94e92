"""The processes below a process (Linux /proc): what a reward function started, so that a
worker's end is also theirs, and the keeper that outlives a worker to end them (and holds the
file a worker's output goes to to its cap on disk, see
:class:`dapo.rewards.capture_file.CaptureFile`)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

TYPE_CHECKING = False  # (typing's, without importing typing into the keeper, a bare interpreter)
if TYPE_CHECKING:
    from dapo.rewards.capture_file import CaptureFile

_MAX_FREEZE_ROUNDS = 100  # a bound; a tree is frozen in two or three rounds


def _stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, parent pid, group, session,
    ...), or None for a process that is gone (or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _processes() -> Iterator[tuple[int, str, int, int, int]]:
    """(pid, state, parent pid, process group, session id) of every process (Linux /proc; elsewhere none)."""
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit() and (fields := _stat(name)) is not None:
                with contextlib.suppress(ValueError, IndexError):
                    yield int(name), fields[0], int(fields[1]), int(fields[2]), int(fields[3])


def group_members(group: int) -> list[int]:
    """The processes of process group ``group`` (Linux /proc; elsewhere none)."""
    return [pid for pid, _, _, their_group, _ in _processes() if their_group == group]


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP held back while the block runs, then sent again: a process that
    freezes others (SIGSTOP) to kill them must not die in between, which would leave them frozen
    for good (a worker in a session of its own gets no SIGCONT from the kernel). In the main
    thread only, where Python handles signals; elsewhere, and for a handler Python did not set,
    nothing changes. (Kin of dapo.trainer.ray_faults.signals_deferred, not shared: this file is
    stdlib only, loaded from its path before the package is, see :func:`start_keeper`.)"""
    caught: list[int] = []
    previous = {}
    if threading.current_thread() is threading.main_thread() and not sys.is_finalizing():
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            if (handler := signal.getsignal(signum)) is not None:
                previous[signum] = handler
                signal.signal(signum, lambda received, _frame: caught.append(received))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in caught:  # under the handlers they would have met
            os.kill(os.getpid(), signum)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux /proc; elsewhere none), deepest first."""
    children: dict[int, list[int]] = {}
    for child, _, parent, _, _ in _processes():
        children.setdefault(parent, []).append(child)
    found, frontier = [], [pid]
    while frontier:
        frontier = [child for parent in frontier for child in children.get(parent, [])]
        found += frontier
    return found[::-1]


def kill_descendants(pid: int, leave_group: int | None = None) -> set[int]:
    """SIGKILL every process below ``pid`` (but those of process group ``leave_group``, which
    the caller kills as one); return those it killed. One listing, then the kill, let a process
    forked in between live on, so each process found is first stopped (SIGSTOP: a stopped process
    cannot fork), with the process group it is in unless that is the caller's own (a group stops
    at once, however fast its members fork and exit), and the tree is listed again once they have
    stopped, until nothing new shows. The processes are killed first, while their parents,
    stopped too, cannot reap them and free their pids, then their groups."""
    own_group, frozen, groups = os.getpgid(0), set(), set()
    for _ in range(_MAX_FREEZE_ROUNDS):
        new = {child: _group(child) for child in descendants(pid) if child not in frozen}
        new = {child: group for child, group in new.items() if group != leave_group}
        if not new:
            break
        for child, group in new.items():
            signal_process(child, signal.SIGSTOP)
            if group not in (None, own_group, *groups):
                signal_process(group, signal.SIGSTOP, group=True)
                groups.add(group)
        wait_stopped(list(new))  # kill() returns before the stop: a fork under way would finish unseen
        frozen.update(new)
    for child in frozen:
        signal_process(child, signal.SIGKILL)
    for group in groups:
        signal_process(group, signal.SIGKILL, group=True)
    return frozen


def wait_stopped(pids: list[int], timeout_s: float = 0.1) -> None:
    """Until each of ``pids`` is stopped, ended or gone: a stop takes microseconds, but a process
    in an uninterruptible sleep stops only when it leaves it, or never (another user's, whose
    SIGSTOP was refused), hence the bound: at most ``timeout_s`` for them all."""
    deadline = time.monotonic() + timeout_s
    for pid in pids:
        while _state(pid) not in ("T", "t", "Z", "X", None) and time.monotonic() < deadline:
            time.sleep(0.0005)


def _state(pid: int) -> str | None:
    fields = _stat(pid)
    return fields[0] if fields else None


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
    them would report a Popen's exit status as 0 and leave a multiprocessing.Process alive forever.
    (Only when some child has ended: the walk of /proc took a millisecond, after every chunk.)"""
    if not sys.platform.startswith("linux"):
        return
    try:  # WNOWAIT: reaps nothing, only says whether there is a child to reap
        if os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            return
    except ChildProcessError:  # no children at all
        return
    me, session = os.getpid(), os.getsid(0)
    for pid, state, parent, _, their_session in _processes():
        if parent == me and state == "Z" and their_session != session:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


# /proc/PID/oom_score_adj's maximum: the first process the kernel's OOM killer picks
OOM_SCORE_ADJ_FIRST = 1000


def limit_worker_memory(memory_limit_bytes: int) -> None:
    """Make this process (a scoring worker, and what a reward function starts, which inherits
    both settings) the OOM killer's first choice, so that a reward function that leaks memory costs
    a worker, which the pool replaces, and not the trainer, whose memory (the model, the optimizer,
    the run's state) is the largest on the machine; and, with ``memory_limit_bytes`` > 0, cap its
    address space (RLIMIT_AS): an allocation past the cap raises MemoryError inside the function,
    which is then scored as a failure, like any raise, before the machine runs short. Raising
    one's own oom_score_adj needs no privilege; where it cannot be set (not Linux), nothing."""
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as file:
        file.write(str(OOM_SCORE_ADJ_FIRST))
    if memory_limit_bytes > 0:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        memory_limit_bytes = min(memory_limit_bytes, 2**62)  # (setrlimit takes a C long: 2e10 GiB overflowed it)
        limit = memory_limit_bytes if hard == resource.RLIM_INFINITY else min(memory_limit_bytes, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def has_keeper() -> bool:
    """Whether a worker runs below a keeper (:func:`start_keeper`): on Linux."""
    return sys.platform.startswith("linux")


def end_below_keeper(keeper: int) -> bool:
    """Kill every process below ``keeper`` (frozen first, see :func:`kill_descendants`), the
    keeper itself frozen meanwhile, then left to reap them and exit (:func:`start_keeper`): so
    nothing it leaves becomes a zombie of init, which, when the trainer is a container's PID 1
    (or a subreaper), is the trainer, which reaps no process it did not start. Whether there was
    anything below it (none: it has not forked its worker yet, or has already reaped it)."""
    with signals_deferred():
        signal_process(keeper, signal.SIGSTOP)
        try:
            killed = kill_descendants(keeper)
        finally:
            signal_process(keeper, signal.SIGCONT)
    return bool(killed)


def reap_children(timeout_s: float) -> None:
    """Reap every child of this process, those killed included, until there is none or for
    ``timeout_s`` (a process in an uninterruptible sleep dies only when it leaves it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if not pid:
            if time.monotonic() > deadline:
                return
            time.sleep(0.001)


def kill_group(leader: int, roots: list[int]) -> None:
    """SIGKILL process group ``leader`` (a worker's) and what ``roots`` started outside it. SIGSTOP
    freezes the group at once, every process in it that stayed there; what left it (a daemon's
    setsid) is frozen and killed next, then the group; no signal to this process ends it in
    between, which would leave them frozen. (At interpreter exit open() is gone.)"""
    with signals_deferred():
        signal_process(leader, signal.SIGSTOP, group=True)
        if not sys.is_finalizing():
            for root in roots:
                kill_descendants(root, leave_group=leader)
        signal_process(leader, signal.SIGKILL, group=True)


def end_everything_below(*_: object) -> None:
    """Kill what this process started (frozen first, see :func:`kill_descendants`), then its
    process group, this process included (a worker leads a group of its own below its keeper,
    which reaps them all; a keeper, the group the pool started it in)."""
    kill_descendants(os.getpid(), leave_group=os.getpgid(0))
    signal_process(0, signal.SIGKILL, group=True)
    os._exit(1)  # (not reached: the group's SIGKILL ends this process)


_at_fork = threading.local()  # .masks: each forking thread's signal masks, saved before its fork


def _hold_sigterm_over_fork() -> None:
    """(before fork) SIGTERM is held back across the fork: a child forked with this process's
    handler, which its interpreter clears a signal for on start, lost one sent before it first ran
    (``Pool.terminate()`` right after ``Pool()`` on busy cores: the child lived on, the pool hung)."""
    if not hasattr(_at_fork, "masks"):
        _at_fork.masks = []
    _at_fork.masks.append(signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM}))


def _release_sigterm_in_parent() -> None:
    signal.pthread_sigmask(signal.SIG_SETMASK, _at_fork.masks.pop())


def _default_sigterm_in_child() -> None:
    """(after fork, in the child) SIGTERM's default action, then the signal let through: one sent
    while it was held ends the child, as it would outside dapo."""
    mask = _at_fork.masks.pop()
    with contextlib.suppress(ValueError):  # (not the main thread: die_with_parent's handler ends it so)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def die_with_parent(parent_pid: int, by_a_thread: bool = False) -> None:
    """Linux: get SIGTERM, handled by :func:`end_everything_below`, when process ``parent_pid``
    (this one's parent) dies, however it dies; exit now if it already has. A SIGTERM from
    elsewhere, the parent alive, ends this process by SIGTERM, with what it started. Python runs the handler
    between two bytecodes: a task stuck in C code that holds the GIL delays it in a worker, never
    in its keeper, which waits in waitpid(). ``by_a_thread``: started by a thread other than the
    parent's main thread, whose end (the parent living on) sends the signal too (then ignored:
    it comes again when the process ends). A child forked from this process without exec (a
    reward function's ``multiprocessing`` pool) inherits the handler: there SIGTERM (``Pool``'s
    ``terminate()``) ends that child alone, as it would outside dapo, not the worker's group."""
    if not sys.platform.startswith("linux"):
        return
    installed_in = os.getpid()

    def on_sigterm(*_: object) -> None:
        if os.getpid() != installed_in:  # a forked child: the default action, on itself only
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        if os.getppid() != parent_pid:  # the parent died
            end_everything_below()
        elif not by_a_thread:
            # sent by something else (a reward function's os.killpg(0, SIGTERM), a user's kill):
            # ended by it, as outside dapo, so that the pool reports it (not the group's SIGKILL, read
            # as the OOM killer's), with what it started (the keeper kills what this leaves)
            kill_descendants(os.getpid())
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)
    os.register_at_fork(before=_hold_sigterm_over_fork, after_in_parent=_release_sigterm_in_parent,
                        after_in_child=_default_sigterm_in_child)
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != parent_pid:  # it died before prctl took effect
        os._exit(1)


def start_keeper(
    close_in_keeper: int,
    parent_pid: int,
    by_main_thread: bool = True,
    capture: CaptureFile | None = None,
    memory_limit_bytes: int = 0,
) -> int | None:
    """Linux: fork, and return in the child, which goes on as the worker, the pid of this process,
    which stays behind as its keeper and never returns: a subreaper, it reaps the orphans it
    adopts, and when the worker ends, however it ends (``os._exit`` in a reward function, a crash,
    the OOM killer), kills every process left below it, then exits as the worker did. Without it
    a daemon a reward function started (fork, setsid, fork), which the worker had adopted, was
    orphaned again by the worker's death, to init, in no group or session the pool could find.
    ``close_in_keeper``: the worker's socket, so that the parent sees it close with the worker;
    ``parent_pid``: end (with everything below) when that process, the pool's, dies (also when
    a thread other than its main one started this process: see :func:`die_with_parent`). Elsewhere
    (no subreaper): None, and no fork. (The pool runs this from this file, before the package is
    imported: stdlib only here.) The worker leads a process group of its own, so that the pool
    kills it, and the processes in its group, as one, and the keeper, left alive, reaps them all
    before it exits (see :func:`end_below_keeper`). ``capture``: the file the worker's output goes
    to, which the keeper holds to its cap (:meth:`~dapo.rewards.capture_file.CaptureFile.watch`).
    ``memory_limit_bytes``: the worker's, see :func:`limit_worker_memory` (the keeper, a bare
    interpreter, keeps its parent's)."""
    # the parent decides when workers stop (it leads their process group, so Ctrl-C reaches them
    # only through the trainer's close(); this is in case something signals their group)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not has_keeper():
        limit_worker_memory(memory_limit_bytes)
        return None
    keeper = os.getpid()
    adopt_orphans()
    die_with_parent(parent_pid, by_a_thread=not by_main_thread)
    worker = os.fork()
    if worker == 0:
        os.setpgid(0, 0)
        limit_worker_memory(memory_limit_bytes)
        return keeper
    os.close(close_in_keeper)
    if capture is not None:
        capture.watch()
    with contextlib.suppress(OSError):  # (on both sides: in its group before anyone signals it)
        os.setpgid(worker, worker)
    while True:  # interrupted by SIGTERM only to run its handler, which ends this process
        pid, status = os.waitpid(-1, 0)
        if pid == worker:
            break
    kill_descendants(keeper)  # all below the keeper: it adopted every orphan
    reap_children(timeout_s=2.0)  # (the pool waits for this process a little longer)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # killed by a signal: the same signal, so that the pool reports the same cause
        with contextlib.suppress(OSError, ValueError):  # (SIGKILL's cannot be set, nor needs to be)
            signal.signal(-code, signal.SIG_DFL)
        os.kill(keeper, -code)
    os._exit(code if code >= 0 else 1)
