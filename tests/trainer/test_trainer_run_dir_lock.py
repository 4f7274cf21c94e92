"""RUN_DIR/.lock: one holder at a time, and no file left behind once released, without the race
that removing it opens (a run that opened the file before its release must not end up holding a
lock on a file no longer at the path, beside another run holding the new one)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dapo.trainer import run_dir as run_dir_module
from dapo.trainer.run_dir import RunDirError, RunDirLock

IN_USE = rf"output_dir .* is in use by another dapo train \(pid {os.getpid()}\)"


def holds_the_file_at_the_path(lock: RunDirLock) -> bool:
    opened, at_path = os.fstat(lock._handle.fileno()), os.stat(lock.path)
    return (opened.st_dev, opened.st_ino) == (at_path.st_dev, at_path.st_ino)


def test_a_released_lock_leaves_no_file_and_a_held_one_refuses_a_second(tmp_path: Path) -> None:
    with RunDirLock(tmp_path) as lock:
        assert lock.path.read_text() == f"{os.getpid()}\n"
        with pytest.raises(RunDirError, match=IN_USE):
            RunDirLock(tmp_path)  # (flock: another open file, in this process too)
        assert lock.path.exists()  # the refused one removed nothing
    assert not (tmp_path / ".lock").exists()
    with RunDirLock(tmp_path):  # free again
        assert (tmp_path / ".lock").exists()
    assert not (tmp_path / ".lock").exists()


def test_a_killed_run_s_leftover_file_is_locked_again(tmp_path: Path) -> None:
    (tmp_path / ".lock").write_text("12345\n")  # no process holds it
    with RunDirLock(tmp_path) as lock:
        assert lock.path.read_text() == f"{os.getpid()}\n" and holds_the_file_at_the_path(lock)


def open_then(action: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run ``action`` once, between the next acquisition's opening of the lock file and its flock."""
    def opened_then_acted(*args: Any, **kwargs: Any) -> Any:
        handle = open(*args, **kwargs)  # noqa: SIM115 (the acquisition holds it)
        monkeypatch.delattr(run_dir_module, "open")  # once
        action()
        return handle

    monkeypatch.setattr(run_dir_module, "open", opened_then_acted, raising=False)


def test_a_release_between_a_second_acquirer_s_open_and_its_flock_leaves_it_holding_the_file_at_the_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = RunDirLock(tmp_path)
    open_then(first.release, monkeypatch)  # it removes the file the second has open, and unlocks it
    with RunDirLock(tmp_path) as second:
        assert holds_the_file_at_the_path(second)  # not the removed file, which its flock got first
        with pytest.raises(RunDirError, match=IN_USE):
            RunDirLock(tmp_path)


def test_a_third_run_that_takes_the_directory_in_that_moment_refuses_the_second(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, third = RunDirLock(tmp_path), []

    def release_and_take() -> None:
        first.release()
        third.append(RunDirLock(tmp_path))  # a new file at the path, locked

    open_then(release_and_take, monkeypatch)
    with pytest.raises(RunDirError, match=IN_USE):
        RunDirLock(tmp_path)  # its flock of the removed file succeeds, but that lock is no lock
    assert holds_the_file_at_the_path(third[0])
    third[0].release()


def test_runs_racing_for_a_directory_never_hold_it_two_at_once(tmp_path: Path) -> None:
    """Threads acquiring and releasing as fast as they can (flock: each open file is its own)."""
    holders, overlaps, acquired = [0], [], [0]
    guard = threading.Lock()
    deadline = time.monotonic() + 1.0

    def contend() -> None:
        while time.monotonic() < deadline:
            try:
                lock = RunDirLock(tmp_path)
            except RunDirError:
                continue
            with guard:
                holders[0] += 1
                acquired[0] += 1
                if holders[0] > 1 or not holds_the_file_at_the_path(lock):
                    overlaps.append(holders[0])
            time.sleep(0)  # held a moment: another thread's acquisition runs meanwhile
            with guard:
                holders[0] -= 1
            lock.release()

    threads = [threading.Thread(target=contend) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert acquired[0] > 0 and not overlaps
    assert not (tmp_path / ".lock").exists()
