"""A per-batch circuit breaker for reward functions that hang.

Each task has a hard deadline (:mod:`dapo.rewards.pool`), but a function that hangs on every item
still costs each of its items the whole deadline: ``timeout_s x items / workers`` a batch, tens
of minutes for a training step. Within one :meth:`WorkerPool.run`, a function (a *group* of tasks)
*trips* once it has timed out on ``max(2 x workers, 3)`` tasks in a row, none of its tasks
finishing in time in between (any other outcome, a raise included, ends the streak), and those
timeouts covered at least two different problems (ground truth and prompt): two deadlines per
worker spent on that function, across problems, with nothing back in time. Its tasks not yet
started are then not run: each fails at once as a timeout (``("timeout", "skipped")``), as it
would have. The breaker lives for one run: the next batch tries the function again.

What does not trip it: a function that is slow now and then (any task of it that finishes in time,
on any worker, ends the streak), and one that cannot score the responses of one problem in time
(a sandbox whose test for that problem loops: every timeout on one problem is one subject, however
many). Tasks of no group (math-verify's) are never skipped.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable


class Breaker:
    """``groups[i]``: task i's function (None: never skipped); ``subjects[i]``: what task i
    scores (its problem, or the problems of a batched call), to tell a hang from a hard problem."""

    def __init__(self, groups: list[Hashable | None], subjects: list[Hashable], num_workers: int) -> None:
        """``num_workers`` 0: a breaker that never trips (reward.skip_hung=false)."""
        self._groups = groups if num_workers else []
        self._subjects = subjects
        self.limit = max(2 * num_workers, 3)  # timeouts in a row that trip a group
        self._streak: dict[Hashable, list[Hashable]] = {}  # group -> subjects of its timeouts in a row
        self.tripped: dict[Hashable, tuple[int, int]] = {}  # group -> (timeouts in a row, problems) at the trip
        self.skipped: dict[Hashable, list[int]] = {}  # group -> the tasks it did not run

    def record(self, task_id: int, kind: str) -> None:
        """Count task ``task_id``'s outcome (``kind``: ``"ok"``, ``"timeout"``, ...)."""
        group = self._group(task_id)
        if group is None or group in self.tripped:
            return
        if kind != "timeout":
            self._streak.pop(group, None)  # it finished in time: slow at worst, not hung
            return
        streak = self._streak.setdefault(group, [])
        streak.append(self._subjects[task_id])
        if len(streak) >= self.limit and len(problems := set(streak)) >= 2:
            self.tripped[group] = (len(streak), len(problems))

    def skip(self, pending: deque[int]) -> list[int]:
        """Take the tasks of tripped groups out of ``pending`` (unstarted: none is running) and
        return them, to be failed as timeouts."""
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

    def _group(self, task_id: int) -> Hashable | None:
        return self._groups[task_id] if task_id < len(self._groups) else None
