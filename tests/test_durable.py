"""Files written so that a crash or a failed write loses nothing (dapo.durable)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dapo.durable import write_atomically


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
