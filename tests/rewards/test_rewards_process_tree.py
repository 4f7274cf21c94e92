"""Signals held back while a worker's process group is frozen (process_tree.signals_deferred); the
file a worker's output goes to, held to its cap (capture_file.CaptureFile)."""

from __future__ import annotations

import os
import signal
import threading
import time

from dapo.rewards.capture_file import CAPTURE_HEAD_BYTES, CAPTURE_MAX_BYTES, CaptureFile
from dapo.rewards.process_tree import signals_deferred


def test_a_signal_during_the_freeze_is_handled_after_it_by_the_handler_it_would_have_met():
    """The pool freezes a worker's group (SIGSTOP), kills what left it, then kills the group: a
    SIGTERM (or a second Ctrl-C, whose handler is the default one) in between would end the
    trainer and leave the group frozen for good. Held back, it reaches its handler afterwards."""
    received: list[int] = []

    def handler(signum: int, _frame: object) -> None:
        received.append(signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        with signals_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # Python runs handlers between bytecodes: give it many
                pass
            assert received == []
        for _ in range(1000):
            pass
        assert received == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is handler  # put back
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_outside_the_main_thread_nothing_changes():
    handlers: list[object] = []

    def in_a_thread() -> None:
        with signals_deferred():
            handlers.append(signal.getsignal(signal.SIGTERM))

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert handlers == [before]


def test_a_capture_file_is_cut_back_to_its_head_and_the_cut_counted_by_a_thread_that_takes_no_signal():
    """The keeper's thread cuts the file; a signal sent to the keeper must reach its main thread
    (waiting in waitpid), where its handler runs: the thread blocks them all."""
    capture = CaptureFile()
    try:
        os.write(capture.fd, b"head" + b"y" * CAPTURE_MAX_BYTES)
        capture.watch()
        deadline = time.monotonic() + 30.0
        while os.fstat(capture.fd).st_size > CAPTURE_HEAD_BYTES and time.monotonic() < deadline:
            time.sleep(0.01)
        with capture.locked():
            assert os.fstat(capture.fd).st_size == CAPTURE_HEAD_BYTES
            assert capture.take_cut() == 4 + CAPTURE_MAX_BYTES - CAPTURE_HEAD_BYTES
            assert capture.take_cut() == 0  # (taken)
        assert os.pread(capture.fd, 4, 0) == b"head"
        with open(f"/proc/self/task/{capture._watcher.native_id}/status") as status:
            blocked = int(next(line for line in status if line.startswith("SigBlk:")).split()[1], 16)
        assert all(blocked >> (signum - 1) & 1 for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP))
    finally:
        capture.close()
    assert not capture._watcher.is_alive()
