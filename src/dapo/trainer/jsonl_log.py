"""A run's JSON-lines logs (metrics.jsonl, completions.jsonl) as a resume cuts them back.

Both files grow by one line per row, ``{"step": N, ...}``, steps never decreasing down the file.
completions.jsonl holds prompts and responses: at DAPO's 20k-token responses it reaches
gigabytes, so nothing here reads a file whole or rewrites it: lines are counted in chunks and a
resume cuts the file where its kept head ends (one ``truncate``), reading only each line's step.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dapo.durable import write_atomically

_CHUNK = 1 << 20
# the head every row is written with (json.dumps of {"step": step, ...}): its step, without parsing the rest
_STEP_HEAD = re.compile(rb'\{"step": (-?\d+)[,}]')


def count_lines(path: Path) -> int:
    """Lines (newlines) in ``path``, 0 when it does not exist, read 1 MiB at a time."""
    if not path.exists():
        return 0
    lines = 0
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            lines += chunk.count(b"\n")
    return lines


def parse_row(line: str | bytes) -> dict[str, Any] | None:
    """The row a line of a log holds (a JSON object with an integer ``step``), None for a line that
    holds none (blank, torn by a kill, damaged: bytes that are not UTF-8 are replaced)."""
    try:
        row = json.loads(line if isinstance(line, str) else line.decode("utf-8", errors="replace"))
    except json.JSONDecodeError:
        return None
    return row if isinstance(row, dict) and isinstance(row.get("step"), int) else None


def _line_step(line: bytes) -> int | None:
    """The step of a row's line, None for a line that holds no row (:func:`parse_row`): read off
    its head where the line is whole (it ends its object), parsed otherwise (a line torn by a kill
    after its head holds no row)."""
    if line.endswith((b"}\n", b"}", b"}\r\n")) and (match := _STEP_HEAD.match(line)):
        return int(match.group(1))
    row = parse_row(line)
    return None if row is None else row["step"]


@dataclass
class Cut:
    """What :func:`cut_after` kept and dropped of one file."""

    kept: int = 0  # lines kept (rows, and any blank line between them)
    dropped_steps: list[int] = field(default_factory=list)  # steps of the rows cut off (sorted, once each)
    last_step_rows: list[dict[str, Any]] = field(default_factory=list)  # kept rows of the step cut after


def cut_after(path: Path, step: int, count: int | None) -> Cut:
    """Keep the rows of ``path`` that are within its first ``count`` lines (what a checkpoint
    recorded; None: all) and of steps up to ``step``, and drop the rest: the kept rows are the
    file's head, so it is cut there in place (then fsynced). A line in that head that holds no row
    (a run killed mid-write, resumed by a version that kept it) is dropped too, with a warning: the
    file is then rewritten atomically, once."""
    result = Cut()
    if not path.exists():
        return result
    rows: list[tuple[int, int, int]] = []  # (line number, offset, length) of each kept row
    torn: list[int] = []  # line numbers of lines that hold no row, before the cut
    dropped: set[int] = set()
    with path.open("rb") as handle:
        offset, cutting = 0, False
        for number, line in enumerate(handle):
            line_step = _line_step(line)
            cutting = cutting or (count is not None and number >= count) or (line_step is not None and line_step > step)
            if cutting:
                if line_step is not None:
                    dropped.add(line_step)
            elif line_step is None:
                if line.strip():
                    torn.append(number)
            else:
                if line_step == step and (row := parse_row(line)) is not None:
                    result.last_step_rows.append(row)
                rows.append((number, offset, len(line)))
            offset += len(line)
    result.dropped_steps = sorted(dropped)
    # a torn line after the last kept row goes with the cut; one among the kept rows needs a rewrite
    if torn_inside := [number + 1 for number in torn if rows and number < rows[-1][0]]:
        warnings.warn(f"{path}: dropped {len(torn_inside)} unreadable line(s) {torn_inside[:5]} (a run killed "
                      "mid-write)", stacklevel=3)
        with path.open("rb") as handle:
            parts = [_read_at(handle, start, length).rstrip(b"\n") + b"\n" for _, start, length in rows]
        write_atomically(path, b"".join(parts))
        result.kept = len(rows)
        return result
    head_end = rows[-1][1] + rows[-1][2] if rows else 0
    result.kept = rows[-1][0] + 1 if rows else 0
    with path.open("r+b") as handle:
        handle.truncate(head_end)
        # a last kept row whose newline the kill cut off: the next row starts a line of its own
        if head_end and _read_at(handle, head_end - 1, 1) != b"\n":
            handle.write(b"\n")
        handle.flush()
        os.fsync(handle.fileno())
    return result


def _read_at(handle: Any, offset: int, length: int) -> bytes:
    handle.seek(offset)
    return handle.read(length)
