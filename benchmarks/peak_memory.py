"""A process's peak resident memory, as the benchmarks report it."""

from __future__ import annotations

import resource
from pathlib import Path


def peak_rss_kib(pid: int | str = "self") -> int:
    """The resident high-water mark of process ``pid`` (default: this one), KiB: Linux's VmHWM.

    Not ``ru_maxrss``: on Linux a child's ``ru_maxrss`` starts at its parent's resident size when
    it was spawned, so a process started by a large parent (a pytest worker that ran heavier tests,
    a benchmark driver) reads the parent's peak, not its own. ``ru_maxrss`` only for this process
    where there is no /proc."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        if pid != "self":
            raise
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
