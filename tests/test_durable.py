"""Files written so that a crash or a failed write loses nothing (dapo.durable)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from dapo.durable import fsync_dir, fsync_tree, modes_as_umask, write_atomically


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    """A write that fails part way (here text that cannot be encoded; a full disk alike) raises,
    keeps the file as it was, and leaves no .NAME.tmp-PID beside it (one was left before, for good)."""
    path = tmp_path / "metrics.jsonl"
    write_atomically(path, "old\n")
    with pytest.raises(UnicodeEncodeError):
        write_atomically(path, "new \udc80\n")  # a lone surrogate: not UTF-8
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl"]
    write_atomically(path, b"bytes\n")
    assert path.read_bytes() == b"bytes\n" and sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl"]


def test_the_file_is_synced_before_it_is_renamed_into_place(tmp_path: Path, monkeypatch):
    real_fsync, synced = os.fsync, []

    def recorded(fd: int) -> None:
        synced.append("file" if stat.S_ISREG(os.fstat(fd).st_mode) else "directory")
        real_fsync(fd)
    monkeypatch.setattr(os, "fsync", recorded)
    write_atomically(tmp_path / "f", "x")
    assert synced[0] == "file"


def test_a_ctrl_c_mid_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path: Path, monkeypatch):
    """As a failed write (above), for a KeyboardInterrupt too: it is no Exception."""
    write_atomically(tmp_path / "f", "x")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomically(tmp_path / "f", "y")
    assert [p.name for p in tmp_path.iterdir()] == ["f"] and (tmp_path / "f").read_text() == "x"


def test_modes_follow_a_group_writable_umask(tmp_path: Path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "w").write_text("x")
    os.chmod(tmp_path / "d" / "w", 0o600)
    old = os.umask(0o002)
    try:
        modes_as_umask(tmp_path)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "d" / "w").stat().st_mode) == 0o664


def test_a_directory_sync_refused_with_enotsup_is_tolerated(tmp_path: Path, monkeypatch):
    """FUSE and NFS mounts answer ENOTSUP to a directory's fsync: a checkpoint must not crash."""
    def refused(fd: int) -> None:
        raise OSError(errno.ENOTSUP, "Operation not supported")
    monkeypatch.setattr(os, "fsync", refused)
    fsync_dir(tmp_path)


def test_the_rename_is_flushed_by_a_sync_of_the_directory_after_it(tmp_path: Path, monkeypatch):
    """A rename is durable once its directory is flushed: without it a power loss could bring the old
    config.yaml (or no set-aside marker) back."""
    real_fsync, real_replace, events = os.fsync, os.replace, []

    def recorded(fd: int) -> None:
        events.append("file" if stat.S_ISREG(os.fstat(fd).st_mode) else f"directory {os.readlink(f'/proc/self/fd/{fd}')}")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recorded)
    monkeypatch.setattr(os, "replace", lambda *args: (events.append("rename"), real_replace(*args))[1])
    write_atomically(tmp_path / "f", "x")
    assert events == ["file", "rename", f"directory {tmp_path.resolve()}"]


def test_fsync_tree_flushes_every_file_and_directory_under_it(tmp_path: Path, monkeypatch):
    """What a checkpoint's rename publishes is on disk first: every file (weights, trainer state),
    every directory."""
    tmp_path = tmp_path.resolve()  # (as /proc/self/fd reads it)
    (tmp_path / "sub").mkdir()
    for name in ("model.safetensors", "trainer_state.pt", "sub/rng.pt"):
        (tmp_path / name).write_bytes(b"x")
    real_fsync, synced = os.fsync, set()

    def recorded(fd: int) -> None:
        synced.add(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recorded)
    fsync_tree(tmp_path)
    assert synced == {str(tmp_path), str(tmp_path / "sub"), *(str(tmp_path / n) for n in
                                                            ("model.safetensors", "trainer_state.pt", "sub/rng.pt"))}
