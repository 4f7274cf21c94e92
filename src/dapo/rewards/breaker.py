"""A per-batch circuit breaker for reward functions that hang, or that end their worker process.

Each task has a hard deadline (:mod:`dapo.rewards.pool`), but a function that hangs on every item
still costs each of its items the whole deadline: ``timeout_s x items / workers`` a batch, tens
of minutes for a training step; one that ends its worker on every item (a crash in a C extension,
``os._exit``, a signal) costs each item a worker's restart (0.2 s a response on 2 workers, ad hoc:
1024 responses, 3.5 minutes). Within one :meth:`WorkerPool.run`, a function (a *group* of tasks) *trips*
once it has failed that way (timed out, or died) on ``max(2 x workers, 3)`` tasks in a row, none
of its tasks returning in between (any other outcome, a raise included, ends the streak), and
those failures covered at least two different problems (ground truth and prompt): two deadlines
or restarts per worker spent on that function, across problems, with nothing back. Its tasks not
yet started are then not run: each fails at once as the streak's most failures did (``("timeout",
"skipped")`` or ``("died", "skipped")``), as it would have. The breaker lives for one run: the
next batch tries the function again.

What does not trip it: a function that is slow now and then (any task of it that finishes in time,
on any worker, ends the streak), and one that cannot score the responses of one problem in time
(a sandbox whose test for that problem loops: every timeout on one problem is one subject, however
many). Tasks of no group (math-verify's) are never skipped.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import NamedTuple

_FAILURES = ("timeout", "died")  # the outcomes a streak counts


class Trip(NamedTuple):
    failures: int  # timeouts and deaths in a row when it tripped
    problems: int  # the different problems among them
    deaths: int  # how many of them ended their worker

    @property
    def kind(self) -> str:
        """"timeout" or "died", whichever most of its failures were: what its skipped tasks fail as."""
        return "died" if 2 * self.deaths > self.failures else "timeout"


class Breaker:
    """``groups[i]``: task i's function (None: never skipped); ``subjects[i]``: what task i
    scores (its problem, or the problems of a batched call), to tell a hang from a hard problem."""

    def __init__(self, groups: list[Hashable | None], subjects: list[Hashable], num_workers: int) -> None:
        """``num_workers`` 0: a breaker that never trips (reward.skip_hung=false)."""
        self._groups = groups if num_workers else []
        self._subjects = subjects
        self.limit = max(2 * num_workers, 3)  # failures in a row that trip a group
        self._streak: dict[Hashable, list[tuple[Hashable, str]]] = {}  # group -> (subject, kind) of its failures in a row
        self.tripped: dict[Hashable, Trip] = {}
        self.skipped: dict[Hashable, list[int]] = {}  # group -> the tasks it did not run

    def record(self, task_id: int, kind: str) -> None:
        """Count task ``task_id``'s outcome (``kind``: ``"ok"``, ``"timeout"``, ...)."""
        group = self._group(task_id)
        if group is None or group in self.tripped:
            return
        if kind not in _FAILURES:
            self._streak.pop(group, None)  # it returned in time: slow at worst, not hung
            return
        streak = self._streak.setdefault(group, [])
        streak.append((self._subjects[task_id], kind))
        if len(streak) >= self.limit and len(problems := {subject for subject, _ in streak}) >= 2:
            self.tripped[group] = Trip(len(streak), len(problems), sum(failure == "died" for _, failure in streak))

    def skip(self, pending: deque[int]) -> list[int]:
        """Take the tasks of tripped groups out of ``pending`` (unstarted: none is running) and
        return them, to be failed as :meth:`skipped_outcome` says."""
        if not self.tripped:
            return []
        skipped = [i for i in pending if self._group(i) in self.tripped]
        if skipped:
            kept = [i for i in pending if self._group(i) not in self.tripped]
            pending.clear()
            pending.extend(kept)
            for i in skipped:
                self.skipped.setdefault(self._group(i), []).append(i)
        return skipped

    def skipped_outcome(self, task_id: int) -> tuple[str, str]:
        """The outcome of a task :meth:`skip` took: its group's trip's kind, "skipped"."""
        return self.tripped[self._group(task_id)].kind, "skipped"

    def _group(self, task_id: int) -> Hashable | None:
        return self._groups[task_id] if task_id < len(self._groups) else None
