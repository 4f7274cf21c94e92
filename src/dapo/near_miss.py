"""The path a mistyped one meant: ``dapo eval run/checkpoints/step-2`` for ``step-000002``."""

from __future__ import annotations

import difflib
import itertools
import re
from pathlib import Path


def near_miss(path: Path) -> Path | None:
    """The directory beside ``path`` with the same numbers in its name and a close spelling
    (``step-2``: ``step-000002``; not ``step-102``), if there is one."""
    def numbers(name: str) -> list[int]:
        return [int(digits) for digits in re.findall(r"[0-9]{1,30}", name)]

    try:  # (a parent that is missing, no directory, or cannot be listed names none)
        children = list(itertools.islice(path.parent.iterdir(), 10_000))
    except OSError:
        return None
    wanted = numbers(path.name)
    same_numbers = [child.name for child in children if numbers(child.name) == wanted and child.is_dir()]
    close = difflib.get_close_matches(path.name, same_numbers, n=1, cutoff=0.6)
    return path.parent / close[0] if close else None
