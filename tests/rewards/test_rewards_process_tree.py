"""Signals held back while a worker's process group is frozen (process_tree.signals_deferred)."""

from __future__ import annotations

import os
import signal
import threading

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
