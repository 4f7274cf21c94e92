"""What the pool makes of its workers' messages, without processes: a result is taken for the
task its worker owes and no other, output between tasks is counted in full, and the pool waits no
longer than the next deadline."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from dapo.rewards.pool import WorkerPool

OK = ("ok", (1.0, None, {}, None))


class FakeChannel:
    def __init__(self, messages: list[tuple]) -> None:
        self.messages = messages
        self.closed = False

    def flush(self) -> None:
        pass

    def receive(self) -> list[tuple]:
        messages, self.messages = self.messages, []
        return messages


def fake_worker(inflight: list[int], messages: list[tuple]) -> SimpleNamespace:
    return SimpleNamespace(channel=FakeChannel(messages), inflight=deque(inflight), dead=False,
                           deadline=time.monotonic() + 60, ready=True, recycling=False)


@pytest.fixture
def pool() -> Iterator[WorkerPool]:
    """A pool of no processes, in a run of 5 tasks."""
    pool = WorkerPool(0, [], timeout_s=5.0)
    pool._results = [None] * 5
    yield pool
    pool._workers = []  # (the fakes cannot be stopped)


def test_a_result_is_taken_for_the_task_at_the_head_of_its_worker_s_queue(pool: WorkerPool) -> None:
    worker = fake_worker([3, 4], [("result", 3, OK), ("result", 4, OK)])
    pool._drain(worker)
    assert pool._results[3] == OK and pool._results[4] == OK and not worker.dead and not worker.inflight


def test_a_result_for_another_task_than_the_one_owed_retires_the_worker_and_is_not_recorded(pool: WorkerPool) -> None:
    """(A process its function forked can write on the socket: its message must not land on an item.)"""
    worker = fake_worker([3, 4], [("result", 4, OK)])
    pool._drain(worker)
    assert worker.dead and pool._results == [None] * 5 and list(worker.inflight) == [3, 4]


def test_output_printed_between_tasks_is_counted_over_every_report(pool: WorkerPool) -> None:
    worker = fake_worker([], [("output", None, "ab", 2), ("output", None, "cd", 2), ("output", 1, "x", 7)])
    pool._drain(worker)
    assert pool.stray_output == ("ab", 4)  # the first report's text, every report's characters
    assert pool.outputs == {1: ("x", 7)}


def test_the_pool_waits_no_longer_than_the_next_deadline(pool: WorkerPool) -> None:
    """A per-function timeout shorter than the poll interval is kept to, not overshot by a poll."""
    pool._workers = [fake_worker([0], []), fake_worker([1], [])]
    pool._workers[1].deadline = time.monotonic() + 0.1
    assert pool._wait_timeout() <= 0.1  # (not the poll's 0.5 s)
    pool._workers[1].deadline = time.monotonic() - 1.0  # already past: no wait at all
    assert pool._wait_timeout() == 0.0
