"""The file a scoring worker's output goes to (its fds 1 and 2), held to a cap on disk by the
worker's keeper (:func:`dapo.rewards.process_tree.start_keeper`), and the count of what the cap
cut. Stdlib only, like :mod:`dapo.rewards.process_tree`: the pool loads this file into the bare
interpreter that becomes the keeper, before the package is imported (see
:mod:`dapo.rewards.worker_process`)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

CAPTURE_MAX_BYTES = 1 << 22  # what a worker's captured output may take of disk (or memory)
CAPTURE_HEAD_BYTES = 8000  # what a cut keeps: the head the pool is sent (2000 characters, <= 4 bytes each)
_TRIM_EVERY_S = 0.05


class CaptureFile:
    """The unnamed file a worker's fds 1 and 2 lead to (see :class:`dapo.rewards.worker.OutputCapture`),
    cut back to its head (``CAPTURE_HEAD_BYTES``) whenever it holds more than ``CAPTURE_MAX_BYTES``,
    checked every ``_TRIM_EVERY_S`` by :meth:`watch`'s thread, which counts what it cut
    (:meth:`take_cut`). Made before the keeper forks, so that the keeper, a process of its own,
    watches it: a thread of the worker's stops whenever a C extension holds the worker's GIL while
    it, or a program it runs, prints (300 MB took 300 MB of disk). The count of what was cut is
    in memory shared with the worker (an anonymous ``mmap`` survives the fork); a cut and the
    worker's reading of the file exclude each other by a lock of each process's thread and a
    POSIX record lock between the two processes (``lockf``: released when the process closes any
    fd of the file, so never held across a ``dup2`` onto fds 1 or 2). Not ``RLIMIT_FSIZE``: the
    kernel would hold every file the worker and its programs write to that size, and fail the
    write (SIGXFSZ, EFBIG) where this counts it."""

    def __init__(self) -> None:
        import fcntl  # (POSIX, like a worker; the trainer imports this module too)
        import mmap  # (builtins: the keeper stays a bare interpreter)

        try:  # in memory: no disk, and no tempfile module in the keeper (15 ms, 2 MB)
            self.fd = os.memfd_create("dapo-reward-output")
        except (AttributeError, OSError):  # (no memfd: off Linux)
            import tempfile

            with tempfile.TemporaryFile() as file:  # unlinked: lives as long as an fd on it
                self.fd = os.dup(file.fileno())
        # O_APPEND: a process left running that still writes there after the file was cut or
        # emptied writes at its (new) end, not at its old offset, past a hole
        fcntl.fcntl(self.fd, fcntl.F_SETFL, fcntl.fcntl(self.fd, fcntl.F_GETFL) | os.O_APPEND)
        self._cut = mmap.mmap(-1, 8)  # MAP_SHARED: the keeper's cuts, seen by the worker
        self._lock = threading.Lock()  # (held by no thread when the keeper forks: made just before)
        self._closed = threading.Event()
        self._watcher: threading.Thread | None = None

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The file to itself: no cut runs, in this process or the other, until the block ends."""
        import fcntl

        with self._lock:
            fcntl.lockf(self.fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.lockf(self.fd, fcntl.LOCK_UN)

    def take_cut(self) -> int:
        """Bytes cut off the file's end since the last call (call it holding :meth:`locked`)."""
        cut = int.from_bytes(self._cut[:8], "little")
        self._cut[:8] = bytes(8)
        return cut

    def trim(self) -> None:
        """Cut the file back to its head if it holds more than ``CAPTURE_MAX_BYTES``, counting the
        rest (but what is written between the size's reading and the cut)."""
        with contextlib.suppress(OSError), self.locked():
            size = os.fstat(self.fd).st_size
            if size > CAPTURE_MAX_BYTES:
                os.ftruncate(self.fd, CAPTURE_HEAD_BYTES)
                cut = int.from_bytes(self._cut[:8], "little") + size - CAPTURE_HEAD_BYTES
                self._cut[:8] = cut.to_bytes(8, "little")

    def watch(self) -> None:
        """Trim every ``_TRIM_EVERY_S`` from a daemon thread, which takes no signal: one sent to
        the process must reach the main thread, where the keeper's handler runs (delivered to
        another thread, it would wait for the main one's ``waitpid`` to return)."""

        def trim_until_closed() -> None:
            while not self._closed.wait(_TRIM_EVERY_S):
                self.trim()

        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())  # (inherited by the thread)
        try:
            self._watcher = threading.Thread(target=trim_until_closed, name="dapo-output-cap", daemon=True)
            self._watcher.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def close(self) -> None:
        """Stop watching, then close the file (not before: its fd's number, reused, would be
        another file's). A worker and its keeper never call it: the file lasts their lives."""
        self._closed.set()
        if self._watcher is not None:
            self._watcher.join()
        os.close(self.fd)
