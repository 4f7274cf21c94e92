"""A per-batch circuit breaker for reward functions that hang, or that end their worker process.

Each task has a hard deadline (:mod:`dapo.rewards.pool`), but a function that hangs on every item
still costs each of its items the whole deadline: ``timeout_s x items / workers`` a batch, tens
of minutes for a training step; one that ends its worker on every item (a crash in a C extension,
``os._exit``, a signal) costs each item a worker's restart (0.2 s a response on 2 workers, ad hoc:
1024 responses, 3.5 minutes). Within one :meth:`WorkerPool.run`, a function (a *group* of tasks) *trips*
once it has failed that way (timed out, or died) on ``max(2 x workers, 3)`` tasks in a row, none
of its tasks returning in between (any other outcome, a raise included, ends the streak), and
those failures covered more different problems (ground truth and prompt) than there are workers,
at least two: two deadlines or restarts per worker spent on that function, across more problems
than the workers could each be stuck on, with nothing back (with two workers, two problems whose
tests loop kept both busy for a streak over two problems, and every later response of the batch,
of problems it scores, failed unrun). Its tasks not
yet started are then not run: each fails at once as the streak's most failures did (``("timeout",
"skipped")`` or ``("died", "skipped")``), as it would have. The breaker lives for one run: the
next batch tries the function again.

A function that has returned in time before (in any batch of its scorer's, this one included:
its ``history``) must also fail more in a row than chance explains: a function that times out on
a fraction p of its items gives such a streak of length S with a chance of about p^S at each of
its failures, and p^S x (its tasks in this batch) must be at most ``FALSE_TRIP_CHANCE``, p
estimated from its outcomes before the streak ((failures + 1) / (outcomes + 2)). One that hangs on a third of its
items (a flaky judge) is then taken for hung about once in a thousand batches (by the bound),
not in a third or more of them as under the count alone (ad-hoc probes on 2 workers); one that worked and then hangs (its server went down) is
still tripped at ``max(2 x workers, 3)``, its failure rate before being low.

What does not trip it: a function that is slow now and then (any task of it that finishes in time,
on any worker, ends the streak), and one that cannot score the responses of one problem in time
(a sandbox whose test for that problem loops: every timeout on one problem is one subject, however
many, nor as many such problems as workers). Tasks of no group (math-verify's) are never skipped.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from itertools import zip_longest
from typing import NamedTuple

_FAILURES = ("timeout", "died")  # the outcomes a streak counts
# At most about this chance, per batch, that a function which returns in time on part of its
# items is taken for hung by a chance run of failures (its other responses then scored wrong)
FALSE_TRIP_CHANCE = 1e-3


class Record(NamedTuple):
    returned: int  # tasks of a function that returned (in time: a result, a raise, a wrong type)
    failed: int  # its tasks that timed out or ended their worker


class Trip(NamedTuple):
    failures: int  # timeouts and deaths in a row when it tripped
    problems: int  # the different problems among them
    deaths: int  # how many of them ended their worker

    @property
    def kind(self) -> str:
        """"timeout" or "died", whichever most of its failures were: what its skipped tasks fail as."""
        return "died" if 2 * self.deaths > self.failures else "timeout"

    def first_warning(self, label: str, spec: str, batched: bool, responses: int) -> str:
        """What the log says the first time function ``label`` (``spec``: its file or module) trips:
        on what, and that its other ``responses`` in the batch were not run."""
        what = "calls in a row, on {} different sets of problems" if batched else "responses in a row, of {} different problems"
        if not self.deaths:
            failed = "timed out"
        elif self.deaths == self.failures:
            failed = "ended its worker process (a crash, os._exit, a signal)"
        else:
            failed = f"timed out or ended its worker process ({self.deaths} deaths)"
        looks, counted = ("hung", "timeouts") if self.kind == "timeout" else ("broken", "worker deaths")
        return (f"{label} {failed} on {self.failures} {what.format(self.problems)}, in this batch, none of its calls "
                f"returning in time: it looks {looks}, so its other {responses} responses in this batch were not run "
                f"and score as {counted} (it is tried again on the next batch; said once, then counted) ({spec})")

    def again_warning(self, label: str, trips: int) -> str:
        """What the log says at function ``label``'s ``trips``-th trip (the 10th, 100th, ...)."""
        return (f"{label} was stopped again as {'hung' if self.kind == 'timeout' else 'broken'}: in {trips} batches so "
                f"far (its skipped responses are counted in the reward_failures/{label} metrics)")


class Breaker:
    """``groups[i]``: task i's function (None: never skipped); ``subjects[i]``: what task i
    scores (its problem, or the problems of a batched call), to tell a hang from a hard problem;
    ``history``: each group's :class:`Record` before this batch, updated here (the scorer keeps it
    across batches)."""

    def __init__(self, groups: list[Hashable | None], subjects: list[Hashable], num_workers: int,
                 history: dict[Hashable, Record] | None = None) -> None:
        """``num_workers`` 0: a breaker that never trips (reward.skip_hung=false)."""
        self._groups = groups
        self._on = num_workers > 0  # 0: it never trips (reward.skip_hung=false)
        self._subjects = subjects
        self.limit = max(2 * num_workers, 3)  # failures in a row that trip a group
        self.min_problems = max(num_workers + 1, 2)  # ... across more problems than workers
        self._streak: dict[Hashable, list[tuple[Hashable, str]]] = {}  # group -> (subject, kind) of its failures in a row
        self.history = {} if history is None else history
        self._tasks_now: dict[Hashable, int] = {}  # group -> its tasks that ended in this batch
        self.tripped: dict[Hashable, Trip] = {}
        self.skipped: dict[Hashable, list[int]] = {}  # group -> the tasks it did not run

    def start_order(self, count: int) -> list[int]:
        """The order to start ``count`` tasks in: those of no group (math-verify's) first, as given,
        then each function's calls one problem after another in turn (the first call of every
        problem, then every second, ...), not a problem's responses one after the other. A function
        that hangs on everything then times out on as many problems as calls and trips after about
        two deadlines a worker, not once its streak reached a third problem (the recipe's 16
        responses a problem on 2 workers, 1 s deadlines, ad hoc: 23 timeouts in a row and 22.0 s a
        batch, now 4 and 4.7 s); and the calls of a problem that all time out (a sandbox's test
        that loops) are spread over the batch, between other problems' results, which end a streak."""
        first: list[int] = []
        turns: dict[tuple[Hashable, Hashable], list[int]] = {}  # (function, problem) -> its calls
        for i in range(count):
            group = self._groups[i] if i < len(self._groups) else None  # (the breaker off too)
            if group is None:
                first.append(i)
            else:
                turns.setdefault((group, self._subjects[i]), []).append(i)
        return first + [i for turn in zip_longest(*turns.values()) for i in turn if i is not None]

    def record(self, task_id: int, kind: str) -> None:
        """Count task ``task_id``'s outcome (``kind``: ``"ok"``, ``"timeout"``, ...)."""
        group = self._group(task_id)
        if group is None or group in self.tripped:
            return
        returned, failed = self.history.get(group, Record(0, 0))
        self._tasks_now[group] = self._tasks_now.get(group, 0) + 1
        if kind not in _FAILURES:
            self.history[group] = Record(returned + 1, failed)
            self._streak.pop(group, None)  # it returned in time: slow at worst, not hung
            return
        self.history[group] = Record(returned, failed + 1)
        streak = self._streak.setdefault(group, [])
        streak.append((self._subjects[task_id], kind))
        if (len(streak) >= self.limit and len(problems := {subject for subject, _ in streak}) >= self.min_problems
                and self._beyond_chance(group, len(streak))):
            self.tripped[group] = Trip(len(streak), len(problems), sum(failure == "died" for _, failure in streak))

    def _beyond_chance(self, group: Hashable, streak: int) -> bool:
        """Whether ``streak`` failures in a row are more than a function failing at its rate before
        them would show in this batch: p^streak x (its tasks this batch) <= FALSE_TRIP_CHANCE. One
        that never returned in time is hung as far as anything shows: True."""
        returned, failed = self.history[group]
        if returned == 0:
            return True
        failed_before = failed - streak
        rate = (failed_before + 1) / (returned + failed_before + 2)
        return rate**streak * self._tasks_now[group] <= FALSE_TRIP_CHANCE

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
        return self._groups[task_id] if self._on and task_id < len(self._groups) else None
