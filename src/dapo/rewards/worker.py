"""What runs inside a scoring worker process (the parent side is :mod:`dapo.rewards.pool`).

Each worker is a fresh interpreter started by the pool (on Linux the child of a keeper, see
:func:`dapo.rewards.process_tree.start_keeper`); it loads the user reward functions, says
``("ready", its pid)``, then answers chunks of tasks one task at a time, sending
``("result", task_id, outcome)`` after each, so the parent can hold every task to its own
deadline and kill the worker when one runs past it. Messages travel as :mod:`dapo.rewards.channel`
frames them.

Tasks:   ``("math", ground_truth, pred)``, ``("fn", index, response, ground_truth, extra)`` and,
for a batched function, ``("batch", index, responses, ground_truths, extras)``, each pickled on
its own: a chunk is a list of ``(task_id, pickled task)``.
Outcome: ``("ok", value)`` (value: :func:`~dapo.rewards.user_functions.normalize_return`'s
(score, acc, metrics), score None where the function does not apply), ``("raised", traceback
text)`` or ``("bad", why the return value is wrong)``; the parent adds ``("timeout", None)`` and
``("died", None)``. A batch's ``value`` is one outcome per response: ``("ok", value)`` or
``("bad", why)``.

What a user function prints is captured per task, not written to the trainer's terminal, at the
file-descriptor level (see :class:`OutputCapture`): a task that printed sends ``("output",
task_id, first characters, total characters)`` before its result, at most ``MAX_OUTPUT_CHARS``
of text, however much it printed; what was printed between two tasks (by a thread or a program
a function left running), ``("output", None, ...)`` before the second.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import hashlib
import inspect
import io
import os
import pickle
import random
import socket
import sys
import traceback
from typing import Any

from dapo.rewards.capture_file import CAPTURE_HEAD_BYTES, CaptureFile
from dapo.rewards.channel import HEADER, receive_message, send_message
from dapo.rewards.equivalence import math_equal, silence_math_verify_logging
from dapo.rewards.peer_functions import BadReturnValue
from dapo.rewards.process_tree import (
    adopt_orphans,
    die_with_parent,
    end_everything_below,
    reap_orphans,
)
from dapo.rewards.user_functions import (
    DictFieldError,
    RewardFunction,
    load_reward_function,
    normalize_return,
)

Outcome = tuple[str, Any]
_MAX_TRACEBACK_CHARS = 4000
MAX_OUTPUT_CHARS = CAPTURE_HEAD_BYTES // 4  # (UTF-8: at most 4 bytes a character)

class OutputCapture:
    """What a worker prints once it is ready, wherever it prints it: fds 1 and 2 lead to one
    :class:`~dapo.rewards.capture_file.CaptureFile` (``dup2``), so ``os.write(1, ...)``, a C
    extension's ``printf`` and a subprocess that inherits them are captured, and ``sys.stdout`` /
    ``sys.stderr`` are :class:`_CapturedStream`, which write there too, in order, and have a real
    ``fileno()`` (``subprocess.run(..., stdout=sys.stdout)`` and ``faulthandler`` need one). For
    the worker's whole life, not a task's: a thread or a program a function left running printed
    between tasks onto the trainer's terminal. :meth:`collect` after a task takes what it printed;
    before the next, what was printed in between (sent unattributed, see :func:`serve`).
    What prints through Python is written until it makes ``limit`` characters and only counted
    after, so a function printing gigabytes fills neither memory nor disk; below Python the file
    is cut back to its head past a few MB by the keeper, a process of its own (a thread here
    stops while C code holds the GIL; see :class:`~dapo.rewards.capture_file.CaptureFile`),
    which counts what it cut: bounded too, and the count exact but for what is written while it
    cuts."""

    def __init__(self, file: CaptureFile, limit: int = MAX_OUTPUT_CHARS) -> None:
        self.limit = limit
        self._file = file
        self._fd = file.fd
        self._libc = ctypes.CDLL(None)  # fflush(): what C code printed, into the file before it is read
        self._saved = (os.dup(1), os.dup(2))  # the worker's own: the trainer's terminal (see release)
        self.server = os.getpid()  # (a process a task forks has another)
        self.kept = self.total = self.written = 0  # characters written, characters printed, bytes written
        self._streams = _CapturedStream(self, 1), _CapturedStream(self, 2)
        self._flush_below_python()  # the worker's own, onto its terminal
        os.dup2(self._fd, 1)
        os.dup2(self._fd, 2)
        sys.stdout, sys.stderr = self._streams

    def settle(self) -> None:
        """Before and after each task (in a process it forked too, which then exits): what is
        buffered of what was printed, into the file, to be collected; ``sys.stdout`` /
        ``sys.stderr`` the capture's again, whatever the task set them to."""
        self._flush_below_python()
        sys.stdout, sys.stderr = self._streams

    def release(self) -> None:
        """fds 1 and 2 and ``sys.stdout`` / ``sys.stderr`` back to the worker's own: for its own
        traceback, if it fails."""
        self._flush_below_python()
        os.dup2(self._saved[0], 1)
        os.dup2(self._saved[1], 2)
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__

    def _flush_below_python(self) -> None:
        """Write out what is buffered on its way to fds 1 and 2: the interpreter's own streams
        (``sys.__stdout__``) and C stdio's (``printf`` in an extension)."""
        for stream in (sys.__stdout__, sys.__stderr__):  # (twice a task: no suppress(), 4x slower)
            try:  # noqa: SIM105
                stream.flush()
            except Exception:  # (None, closed: nothing of the task's to write out)
                pass
        try:  # noqa: SIM105
            self._libc.fflush(None)
        except Exception:
            pass

    def collect(self) -> tuple[str, int] | None:
        """(The first ``limit`` characters, how many there were) of what was printed since the
        last call, or None if nothing; empties the file. (Below Python, a byte counts as a
        character.) A file found empty was not cut either (a cut leaves its head): no lock then."""
        if not (size := os.fstat(self._fd).st_size) and not self.total:
            return None
        with self._file.locked():
            size, cut = os.fstat(self._fd).st_size, self._file.take_cut()
            head = os.pread(self._fd, 4 * self.limit, 0).decode("utf-8", "replace")[: self.limit]
            os.ftruncate(self._fd, 0)
        total = self.total + max(0, size + cut - self.written)
        self.kept = self.total = self.written = 0
        return (head, total) if total else None


class _CapturedStream(io.TextIOBase):
    """``sys.stdout`` or ``sys.stderr`` while a task runs (see :class:`OutputCapture`)."""

    def __init__(self, capture: OutputCapture, fd: int) -> None:
        self._capture, self._fd = capture, fd

    @property
    def encoding(self) -> str:  # what code that prints bytes or picks a codec reads (None broke it)
        return "utf-8"

    @property
    def buffer(self) -> io.RawIOBase:  # sys.stdout.buffer.write(b"..."): straight to the file
        return io.FileIO(self._fd, "w", closefd=False)

    def fileno(self) -> int:
        return self._fd

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        capture = self._capture
        if (room := capture.limit - capture.kept) > 0 and text:
            data = text[:room].encode("utf-8", "backslashreplace")
            with contextlib.suppress(OSError):  # a full disk loses the output, not the item
                capture.written += os.write(self._fd, data)
            capture.kept += len(text[:room])
        capture.total += len(text)
        return len(text)


def main(argv: list[str], keeper: int | None, capture_file: CaptureFile) -> None:
    """Entry point of a worker interpreter: ``argv`` = [socket fd, parent pid, die_with_parent];
    ``keeper``: what :func:`dapo.rewards.process_tree.start_keeper` returned, before this module
    was imported; ``capture_file``: what the worker's output goes to, which the keeper holds to
    its cap (without a keeper, a thread of this process does)."""
    fd, parent_pid, with_parent = int(argv[0]), int(argv[1]), argv[2] == "1"  # (SIGINT: start_keeper)
    os.set_inheritable(fd, False)  # not to the programs a function runs: the worker's end is its own
    if keeper is not None:
        die_with_parent(keeper)
    else:
        capture_file.watch()
        if with_parent:
            die_with_parent(parent_pid)
    adopt_orphans()  # a daemon a reward function starts stays below the worker, to be stopped with it
    sock = socket.socket(fileno=fd)
    function_specs, parent_sys_path, parent_cwd = receive_message(sock)
    # The trainer's import path in its order, and its working directory last, where
    # dapo.user_code looks for "module:fn" reward functions.
    sys.path[:] = [*parent_sys_path, *([parent_cwd] if parent_cwd not in parent_sys_path else [])]
    serve(sock, function_specs, capture_file)


def serve(sock: socket.socket, function_specs: list[str], capture_file: CaptureFile) -> None:
    """Load the user functions, say ready, then run chunks of tasks until told to stop. What the
    functions print on import is the worker's own (on the trainer's terminal, before a failed
    start is reported); from ready on, everything it prints is captured (:class:`OutputCapture`)."""
    import math_verify  # noqa: F401  # sympy loaded before saying ready, not inside a task's deadline
    import numpy  # noqa: F401  # (its global generator is seeded per call; 40 ms at start)

    silence_math_verify_logging()
    try:
        functions = [load_reward_function(spec) for spec in function_specs]
    except Exception as exc:
        send_message(sock, ("init_error", f"{type(exc).__name__}: {exc}"))
        return
    capture = OutputCapture(capture_file)
    send_message(sock, ("ready", os.getpid()))
    try:
        _serve_chunks(sock, functions, capture)
    except BaseException:
        if os.getpid() == capture.server:
            capture.release()  # the worker's own traceback, onto its terminal
        raise


def _serve_chunks(sock: socket.socket, functions: list[RewardFunction], capture: OutputCapture) -> None:
    """Each task in turn, with what it printed, and first what was printed since the last (by a
    thread or a program a function left running), as ``("output", None, ...)``. A worker that a
    task left short of memory (:class:`MemoryWatch`) says ``("recycle",)`` after its result and
    ends: the pool runs the rest of its chunk on a fresh one."""
    server = capture.server
    memory = MemoryWatch()
    while True:
        try:
            chunk = receive_message(sock)
        except (EOFError, OSError):
            return  # the parent is gone
        if chunk is None:  # asked to stop: what the functions started (and left running) stops too
            end_everything_below()
        for task_id, pickled_task in chunk:
            capture.settle()
            try:
                if stray := capture.collect():
                    send_message(sock, ("output", None, *stray))
            except OSError:
                return
            try:
                outcome = run_task(pickled_task, functions)
            finally:
                capture.settle()
            if os.getpid() != server:  # a process the function forked that returned (or raised) into
                os._exit(0)  # this loop: it must not answer on the worker's socket
            try:
                if printed := capture.collect():
                    send_message(sock, ("output", task_id, *printed))
                send_message(sock, ("result", task_id, outcome))
                if memory.short():
                    sock.sendall(memory.recycle_frame)
                    return
            except OSError:  # the parent is gone (no traceback on its terminal)
                return
        reap_orphans()


class MemoryWatch:
    """Under reward.memory_limit_gb (an address-space cap), whether a task left this worker short
    of memory: holding more than three quarters of the room it had when it became ready (a
    function that keeps what it allocates; one whose allocation failed and was freed leaves it as
    it was). It is then replaced, because math-verify, run by the same worker, catches MemoryError
    as any error and answers False: near its cap a worker would judge correct answers wrong
    without a failure to count."""

    def __init__(self) -> None:
        import resource

        cap = resource.getrlimit(resource.RLIMIT_AS)[0]
        self.cap = None if cap == resource.RLIM_INFINITY else cap
        try:  # (opened now: near the cap, opening it would need memory the worker may not have)
            self.statm: int | None = os.open("/proc/self/statm", os.O_RDONLY)
        except OSError:  # not Linux: no measure
            self.statm = None
        self.page_size = os.sysconf("SC_PAGE_SIZE")
        self.ready_size = self._address_space()
        data = pickle.dumps(("recycle",))
        self.recycle_frame = HEADER.pack(len(data)) + data  # (sent as it is: no allocation then)

    def short(self) -> bool:
        if self.cap is None or self.statm is None or self.ready_size is None:
            return False
        try:
            return self.cap - self._address_space() < (self.cap - self.ready_size) / 4
        except MemoryError:  # too short to read a number: short
            return True

    def _address_space(self) -> int | None:
        """This process's address space in bytes (what RLIMIT_AS caps)."""
        if self.statm is None:
            return None
        return int(os.pread(self.statm, 64, 0).split()[0]) * self.page_size


def run_task(pickled_task: bytes, functions: list[RewardFunction]) -> Outcome:
    """Run one task; every exception becomes an outcome, so the worker survives it (an item
    that cannot be unpickled here, e.g. of a class only the trainer's ``__main__`` defines, too)."""
    try:
        task = pickle.loads(pickled_task)
        if task[0] == "math":
            _, ground_truth, pred = task
            return "ok", math_equal(pred, ground_truth)
        if task[0] == "columns":  # the dataset columns a function requires (TRL's contract)
            return "ok", tuple(getattr(functions[task[1]], "required_columns", ()))
        kind, index, response, ground_truth, extra = task
        seed_global_generators(index, str(response), str(ground_truth))
        value = functions[index](response, ground_truth, extra)
        if inspect.iscoroutine(value):  # an async def function (an async judge's client): run to its end, here
            value = asyncio.run(value)
    except BadReturnValue as error:  # a verl or TRL function's return its contract does not allow
        return "bad", str(error)
    except BaseException:  # sys.exit() in a reward function too: the item fails, the worker lives
        # Formatting the traceback happens here, under the task's deadline, never in the parent.
        return "raised", traceback.format_exc()[-_MAX_TRACEBACK_CHARS:]
    if kind == "batch":
        return _batch_outcome(value, len(response))
    outcome = _item_outcome(value)
    # a list (or an array) for one response: a batched function run as a per-response one
    if outcome[0] == "bad" and hasattr(value, "__len__") and not isinstance(value, (str, bytes, dict)):
        return "bad", (f"{outcome[1]} (a batched function, lists in and a list out, needs batch_size > 0 on its "
                       "reward.functions entry: {path: ..., batch_size: N})")
    return outcome


def _item_outcome(value: Any) -> Outcome:
    try:
        return "ok", normalize_return(value)
    except DictFieldError as exc:  # a dict's bad field is named by its key ('score' is a str): say where
        return "bad", f"{exc} (in the returned dict)"
    except Exception as exc:  # names the value ("the return value is a NoneType, not a number") or the dict
        return "bad", str(exc)


def _batch_outcome(values: Any, size: int) -> Outcome:
    """A batched function's return: a list with one value per response, each checked alone (one
    bad value fails its response, not the batch)."""
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__") or not hasattr(values, "__iter__"):
        return "bad", (f"a batched function returns a list of scores, one per response (got a {type(values).__name__}"
                       + ("; None for a response it does not apply to goes in the list)" if values is None else ")"))
    try:  # (a 0-d array or tensor has both, and raises: here, not where it would kill the worker)
        items = list(values)
    except Exception as exc:
        return "bad", (f"a batched function returns a list of scores, one per response (got a "
                       f"{type(values).__name__} that is not one: {exc})")
    if len(items) != size:
        return "bad", f"the returned list holds {len(items)} scores for {size} responses"
    return "ok", [_item_outcome(value) for value in items]


def seed_global_generators(function_index: int, response: str, ground_truth: str) -> None:
    """Seed Python's ``random`` and numpy's global generator from the call itself, so a function
    that draws from them scores the same response the same way whichever worker runs it, in a
    rerun and after a resume (which restores no worker state)."""
    text = f"{function_index}\0{ground_truth}\0{response}".encode("utf-8", "surrogatepass")
    seed = int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")
    random.seed(seed)
    import numpy  # (imported by serve(), after the keeper's fork: a lookup here)

    numpy.random.seed(seed % 2**32)

