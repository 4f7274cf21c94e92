"""A reward function that hangs on every item costs a batch a few deadlines, not one per item:
the breaker (dapo/rewards/breaker.py) fails the rest of its batch at once, as timeouts; one that
ends its worker on every item costs a few restarts, not one per item. A function that is only slow
now and then, or that cannot score one problem's responses, is not tripped."""

from __future__ import annotations

import logging
import re
import time
from collections import deque
from pathlib import Path

import pytest

from dapo.config.schema import RewardConfig, RewardFunctionSpec
from dapo.rewards import RewardScorer
from dapo.rewards.breaker import FALSE_TRIP_CHANCE, Breaker, Record

FNS = str(Path(__file__).resolve().parent / "reward_fns_fixture.py")
TRIPPED = "in a row"  # in the breaker's warning only


def spec(name: str, **kwargs) -> RewardFunctionSpec:
    return RewardFunctionSpec(path=f"{FNS}:{name}", **kwargs)


# -- the rule, without processes --------------------------------------------------------------

def test_the_limit_is_two_timeouts_per_worker_and_at_least_three() -> None:
    assert [Breaker([], [], w).limit for w in (1, 2, 8, 32)] == [3, 4, 16, 64]


def test_a_group_trips_on_timeouts_in_a_row_across_problems_and_its_pending_tasks_are_skipped() -> None:
    groups = [None, None] + [0] * 6 + [1] * 3
    breaker = Breaker(groups, [None, None] + list("abcdef") + list("xyz"), num_workers=1)
    for task_id in (2, 3):
        breaker.record(task_id, "timeout")
    breaker.record(0, "timeout")  # math-verify's (no group): never counted, never skipped
    assert not breaker.tripped
    breaker.record(4, "timeout")
    assert breaker.tripped == {0: (3, 3, 0)}
    pending = deque([1, 5, 8, 6, 9, 7, 10])
    assert breaker.skip(pending) == [5, 6, 7]
    assert breaker.skipped_outcome(5) == ("timeout", "skipped")
    assert list(pending) == [1, 8, 9, 10] and breaker.skipped == {0: [5, 6, 7]}
    assert breaker.skip(pending) == []


def test_a_call_that_finishes_in_time_ends_the_streak() -> None:
    breaker = Breaker([0] * 10, list("abcdefghij"), num_workers=1)
    for task_id, kind in enumerate(["timeout", "timeout", "ok", "timeout", "timeout", "raised", "timeout"]):
        breaker.record(task_id, kind)
    assert not breaker.tripped  # never three timeouts in a row


def test_a_call_that_finishes_in_time_ends_the_streak_of_a_function_that_rarely_failed() -> None:
    """With a long clean history the chance bound alone would trip four timeouts in seven calls;
    the streak must restart at each call that returned."""
    breaker = Breaker([0] * 10, list("abcdefghij"), num_workers=1, history={0: Record(100, 0)})
    for task_id, kind in enumerate(["timeout", "ok", "timeout", "ok", "timeout", "ok", "timeout"]):
        breaker.record(task_id, kind)
    assert not breaker.tripped


def test_nothing_is_counted_for_a_group_once_it_tripped() -> None:
    """Its skipped tasks are failed unrun (the pool records them too): they must not lengthen the
    trip's streak or add to the failures the next batch's chance bound reads."""
    breaker = Breaker([0] * 6, list("abcdef"), num_workers=1)
    for task_id in range(3):
        breaker.record(task_id, "timeout")
    assert breaker.tripped == {0: (3, 3, 0)} and breaker.history == {0: Record(0, 3)}
    for task_id in range(3, 6):
        breaker.record(task_id, "timeout")
    assert breaker.tripped == {0: (3, 3, 0)} and breaker.history == {0: Record(0, 3)}


def test_timeouts_on_one_problem_alone_do_not_trip() -> None:
    """One problem its function cannot score in time (all 16 responses of a prompt) is no hang."""
    breaker = Breaker([0] * 20, ["hard"] * 16 + ["b", "c", "d", "e"], num_workers=1)
    for task_id in range(16):
        breaker.record(task_id, "timeout")
    assert not breaker.tripped
    breaker.record(16, "timeout")  # a second problem, still nothing in time: hung
    assert breaker.tripped == {0: (17, 2, 0)}


def test_as_many_looping_problems_as_workers_do_not_trip() -> None:
    """Two workers, each stuck on one of two problems whose tests loop: 16 timeouts in a row across
    two problems tripped the function, and every later response of the batch failed unrun, though
    it scores them. A third problem's timeout in the same streak is more than two stuck workers."""
    assert [Breaker([], [], w).min_problems for w in (1, 2, 8)] == [2, 3, 9]
    breaker = Breaker([0] * 20, ["p0", "p1"] * 8 + ["p2", "p3", "p4", "p5"], num_workers=2)
    for task_id in range(16):
        breaker.record(task_id, "timeout")
    assert not breaker.tripped
    breaker.record(16, "timeout")
    assert breaker.tripped == {0: (17, 3, 0)}


def test_a_function_that_returns_in_time_now_and_then_needs_a_streak_chance_does_not_explain() -> None:
    """Four timeouts in a row on two workers trip a function that never returned in time, and one
    that always had (its server went down); one that timed out on a third of its calls before
    needs a streak whose chance, (1/3)^S x its calls this batch, is at most FALSE_TRIP_CHANCE."""
    def streak_that_trips(history: Record, before: list[str]) -> int:
        breaker = Breaker([0] * 100, [str(i) for i in range(100)], num_workers=2, history={0: history})
        for task_id, kind in enumerate(before):
            breaker.record(task_id, kind)
        for task_id in range(len(before), 100):
            breaker.record(task_id, "timeout")
            if breaker.tripped:
                return task_id + 1 - len(before)
        return 0

    assert streak_that_trips(Record(0, 0), []) == 4  # hung from the start: as before
    assert streak_that_trips(Record(200, 0), []) == 4  # worked, then hangs: at once
    assert streak_that_trips(Record(0, 0), ["ok"] * 30) == 4  # worked in this batch, then hangs
    flaky = streak_that_trips(Record(20, 10), ["ok", "timeout", "ok"] * 4)
    calls = 12 + flaky
    rate = (10 + 4 + 1) / (30 + 12 + 2)  # before the streak, with one of each added
    assert rate**flaky * calls <= FALSE_TRIP_CHANCE < rate ** (flaky - 1) * (calls - 1)
    assert flaky >= 8  # twice the count alone: a run of 4 at p=1/3 happens in about 1 batch of 3
    records: dict = {}
    Breaker([0] * 3, list("abc"), num_workers=1, history=records).record(0, "ok")
    Breaker([0] * 3, list("abc"), num_workers=1, history=records).record(1, "timeout")
    assert records == {0: Record(returned=1, failed=1)}  # kept across batches, in the scorer's dict


@pytest.mark.parametrize("kinds, tripped_as", [(["died"] * 3, "died"), (["timeout", "died", "died"], "died"),
                                               (["died", "timeout", "timeout"], "timeout")])
def test_deaths_of_the_worker_count_in_the_streak_as_timeouts_do(kinds: list[str], tripped_as: str) -> None:
    """A function that ends its worker (a crash, os._exit) on every item is as broken as one that
    hangs: its skipped tasks fail as most of its streak did."""
    breaker = Breaker([0] * 6, list("abcdef"), num_workers=1)
    for task_id, kind in enumerate(kinds):
        breaker.record(task_id, kind)
    assert breaker.tripped[0].kind == tripped_as and breaker.tripped[0].deaths == kinds.count("died")
    assert breaker.skip(deque([3, 4])) == [3, 4] and breaker.skipped_outcome(4) == (tripped_as, "skipped")
    returned = Breaker([0] * 6, list("abcdef"), num_workers=1)
    for task_id, kind in enumerate(["died", "died", "raised", "died", "died"]):
        returned.record(task_id, kind)
    assert not returned.tripped  # a raise is a call that returned: it ends the streak


# -- through the scorer ----------------------------------------------------------------------

N = 40


def items(n: int = N) -> tuple[list[str], list[str]]:
    """Responses and ground truths of ``n`` problems: every other one right; one in four an
    expression only math-verify (in the workers, with the hanging function's calls) judges right."""
    responses = [f"Answer: $x^2+{i}$" if i % 4 == 1 else f"Answer: {i if i % 2 else i + 1000}" for i in range(n)]
    return responses, [f"{i}+x^2" if i % 4 == 1 else str(i) for i in range(n)]


def test_a_hanging_function_costs_a_batch_a_few_deadlines_and_every_item_a_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """40 items, 2 workers, 0.5 s deadlines: one deadline per item takes 10 s and more (32 s measured at 1 s);
    with the breaker, about two rounds of deadlines. Every item is a timeout of the function, scored
    with its failure score, and the verifier's verdicts (math-verify's too, under reward.timeout_s's 5 s:
    a worker restarted after a hang imports it again, which a loaded machine can take past 0.5 s) stand."""
    cfg = RewardConfig(functions=[spec("sleeps_forever", weight=0.5, timeout_s=0.5)], num_workers=2)
    responses, golds = items()
    with RewardScorer(cfg) as scorer, caplog.at_level(logging.WARNING, logger="dapo.rewards"):
        for batch in range(2):  # the next batch tries it again, and trips again
            caplog.clear()
            started = time.monotonic()
            results = scorer.score(responses, golds)
            elapsed = time.monotonic() - started
            assert elapsed < 8.0, f"batch {batch}: {elapsed:.1f} s"  # about 2 s; 10 s and more without the breaker
            assert all(r.timed_out and r.failed == ["sleeps_forever"] for r in results)
            assert [r.acc for r in results] == [i % 2 == 1 for i in range(N)]
            assert [r.score for r in results] == pytest.approx([(1.0 if i % 2 else -1.0) - 0.5 for i in range(N)])
            assert scorer.num_timeouts == N * (batch + 1)
            tripped = [r.getMessage() for r in caplog.records if TRIPPED in r.getMessage()]
            if batch == 1:  # said once: the second batch's trip is counted, not said again
                assert tripped == []
                continue
            assert len(tripped) == 1 and tripped[0].startswith("sleeps_forever timed out on 4 responses in a row")
            skipped = int(tripped[0].split("so its other ")[1].split()[0])
            assert N - 4 - 2 <= skipped <= N - 4  # the rest, less what was already running


def test_a_function_that_ends_its_worker_on_every_item_costs_a_few_restarts(caplog: pytest.LogCaptureFixture) -> None:
    """os._exit on every call: each item cost a worker's restart (0.2 s a response on 2 workers,
    8 s for these 40; 1024 responses, 3.5 minutes); the breaker stops it after four, the rest
    fail at once as worker deaths, and the verifier's verdicts stand."""
    cfg = RewardConfig(functions=[spec("exits_when_asked", weight=0.5)], num_workers=2)
    responses, golds = items()
    with RewardScorer(cfg) as scorer, caplog.at_level(logging.WARNING, logger="dapo.rewards"):
        started = time.monotonic()
        results = scorer.score(responses, golds, extras=[{"exit": True}] * N)
        elapsed = time.monotonic() - started
        assert all(r.error and r.failed == ["exits_when_asked"] for r in results)
        assert [r.acc for r in results] == [i % 2 == 1 for i in range(N)]
        [tripped] = [r.getMessage() for r in caplog.records if TRIPPED in r.getMessage()]
        assert tripped.startswith("exits_when_asked ended its worker process (a crash, os._exit, a signal) on 4 "
                                  "responses in a row") and "score as worker deaths" in tripped
        assert scorer.score(responses[:2], golds[:2], extras=[{}, {}])[0].extra["exits_when_asked/score"] == 1.0
    assert elapsed < 6.0, f"{elapsed:.1f} s"  # about 1 s; 8 s without the breaker


def test_a_hang_that_passes_is_scored_in_the_next_batch() -> None:
    cfg = RewardConfig(functions=[spec("sleeps_when_asked")], timeout_s=1.0, num_workers=2)
    responses, golds = items(20)
    with RewardScorer(cfg) as scorer:
        hung = scorer.score(responses, golds, extras=[{"sleep": True}] * 20)
        well = scorer.score(responses, golds, extras=[{}] * 20)
    assert all(r.timed_out for r in hung)
    assert not any(r.timed_out or r.failed for r in well)
    assert all(r.extra["sleeps_when_asked/score"] == 0.5 for r in well)


def test_a_batched_function_that_hangs_is_tripped_by_calls() -> None:
    cfg = RewardConfig(functions=[spec("batched_judge", batch_size=2)], timeout_s=1.0, num_workers=2,
                       verifier_weight=0.0)
    responses, golds = items()
    with RewardScorer(cfg) as scorer:
        started = time.monotonic()
        results = scorer.score(responses, golds, extras=[{"sleep": True}] * N)
    assert time.monotonic() - started < 15.0  # 20 calls of 1 s on 2 workers: 10 s and more without it
    assert all(r.timed_out and not r.acc for r in results)


def test_a_function_slow_now_and_then_is_not_tripped(caplog: pytest.LogCaptureFixture) -> None:
    """One item in six hangs, two of them side by side; one worker, so the order is fixed: every
    item that finishes in time ends the streak, and only the slow ones time out."""
    slow = {0, 7, 8, 15}
    cfg = RewardConfig(functions=[spec("sleeps_when_asked")], timeout_s=1.0, num_workers=1)
    responses, golds = items(24)
    with RewardScorer(cfg) as scorer, caplog.at_level(logging.WARNING, logger="dapo.rewards"):
        results = scorer.score(responses, golds, extras=[{"sleep": i in slow} for i in range(24)])
    assert {i for i, r in enumerate(results) if r.timed_out} == slow
    assert not any(TRIPPED in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("hanging", [
    # random thirds (random.seed(2) and (4), p=1/3) whose four hangs in a row on 2 workers tripped the
    # function before, in each of two tries of each (a new worker's first item hanging, on both
    # workers, twice): the other items not yet run then scored as timeouts
    {2, 3, 7, 11, 19, 20, 21, 23, 28, 29, 30, 31},
    pytest.param({0, 1, 3, 4, 9, 11, 12, 13, 14, 19, 20, 25, 29, 31}, marks=pytest.mark.slow),  # 14 s, the same path
])
def test_a_function_that_hangs_on_a_third_of_random_items_is_not_tripped(
    hanging: set[int], caplog: pytest.LogCaptureFixture,
) -> None:
    """Only the items that hang time out: a flaky judge's other responses keep their scores."""
    cfg = RewardConfig(functions=[spec("sleeps_when_asked")], timeout_s=1.0, num_workers=2, verifier_weight=0.0)
    responses, golds = items(32)
    with RewardScorer(cfg) as scorer, caplog.at_level(logging.WARNING, logger="dapo.rewards"):
        results = scorer.score(responses, golds, extras=[{"sleep": i in hanging} for i in range(32)])
    assert {i for i, r in enumerate(results) if r.timed_out} == hanging
    assert not any(TRIPPED in r.getMessage() for r in caplog.records)


def test_one_problem_the_function_cannot_score_costs_only_its_responses(caplog: pytest.LogCaptureFixture) -> None:
    """One worker, so nothing else finishes in between: four responses to one problem hang in a
    row, past the limit of three (a sandbox whose test for that problem loops); the other problems'
    responses, after them, are scored."""
    cfg = RewardConfig(functions=[spec("sleeps_when_asked")], timeout_s=1.0, num_workers=1)
    golds = ["7"] * 4 + [str(i) for i in range(6)]
    prompts = [[{"role": "user", "content": "the hard one"}]] * 4 + [f"problem {i}" for i in range(6)]
    with RewardScorer(cfg) as scorer, caplog.at_level(logging.WARNING, logger="dapo.rewards"):
        results = scorer.score([f"Answer: {g}" for g in golds], golds, prompts=prompts,
                               extras=[{"sleep": i < 4} for i in range(10)])
    assert [r.timed_out for r in results] == [True] * 4 + [False] * 6
    assert all(r.acc for r in results)
    assert not any(TRIPPED in r.getMessage() for r in caplog.records)


def test_problems_that_share_an_answer_are_told_apart_by_their_prompts(caplog: pytest.LogCaptureFixture) -> None:
    """Many problems of a dataset have the answer 1: by the ground truth alone a hung function
    would look stuck on one problem, never tripped, and cost every response its deadline."""
    cfg = RewardConfig(functions=[spec("sleeps_forever", timeout_s=0.3)], num_workers=1)
    with RewardScorer(cfg) as scorer, caplog.at_level(logging.WARNING, logger="dapo.rewards"):
        results = scorer.score(["Answer: 1"] * 10, ["1"] * 10, prompts=[f"problem {i}" for i in range(10)])
    assert all(r.timed_out for r in results)
    assert any(TRIPPED in r.getMessage() for r in caplog.records)


def test_skip_hung_false_lets_every_call_wait_out_its_deadline() -> None:
    """reward.skip_hung=false: a code sandbox whose policy often writes loops keeps every call."""
    assert RewardConfig().skip_hung
    never = Breaker([0] * 6, list("abcdef"), num_workers=0)
    for task_id in range(6):
        never.record(task_id, "timeout")
    assert not never.tripped and never.skip(deque([0, 1, 2, 3, 4, 5])) == []
    cfg = RewardConfig(functions=[spec("sleeps_when_asked")], timeout_s=0.5, num_workers=1, skip_hung=False)
    responses, golds = items(5)
    with RewardScorer(cfg) as scorer:
        results = scorer.score(responses, golds, extras=[{"sleep": i < 4} for i in range(5)])
    assert [r.timed_out for r in results] == [True] * 4 + [False]  # the fifth still ran, and passed


def test_a_function_stopped_every_batch_is_said_in_full_once_then_in_one_line_the_10th_and_100th_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A function that hangs on every call trips every batch (thousands in a run): the log says it
    in full at the first, then one line at the 10th, 100th, ... batch, the count in it."""
    cfg = RewardConfig(functions=[spec("sleeps_forever")], num_workers=1)
    breaker = Breaker([0] * 8, list(range(8)), num_workers=1)
    for task in range(3):
        breaker.record(task, "timeout")
    assert breaker.skip(deque(range(3, 8))) == [3, 4, 5, 6, 7]
    calls = [(0, range(task, task + 1)) for task in range(8)]
    with RewardScorer(cfg) as scorer, caplog.at_level(logging.WARNING, logger="dapo.rewards"):
        said = {}
        for batch in range(1, 121):
            caplog.clear()
            scorer._report_skipped(breaker, calls, 0)
            if caplog.records:
                [said[batch]] = [r.getMessage() for r in caplog.records]
    assert sorted(said) == [1, 10, 100]
    assert said[1].startswith("sleeps_forever timed out on 3 responses in a row, of 3 different problems")
    assert "its other 5 responses in this batch were not run" in said[1]
    assert said[10] == ("sleeps_forever was stopped again as hung: in 10 batches so far (its skipped responses "
                        "are counted in the reward_failures/sleeps_forever metrics)")
    assert said[100].startswith("sleeps_forever was stopped again as hung: in 100 batches so far")


def test_calls_start_one_problem_after_another_in_turn() -> None:
    """A problem's responses come one after the other in a batch; they start in turn with the
    other problems' (math-verify's first, as given), with the breaker off too."""
    groups, subjects = [None, 0, 0, 0, 0, 0, 1, 1], [None, "a", "a", "a", "b", "b", "a", "a"]
    for workers in (2, 0):
        assert Breaker(groups, subjects, num_workers=workers).start_order(8) == [0, 1, 4, 6, 2, 5, 7, 3]
    assert Breaker([], [], 0).start_order(3) == [0, 1, 2]


def test_a_hanging_function_trips_within_two_deadlines_a_worker_when_problems_have_many_responses(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """8 responses a problem (a group, as the trainer scores them), 2 workers: started a problem's
    responses at a time, a function that hangs timed out on 13 responses in a row before they
    covered 3 problems (14 s for this batch, 7 s now); in turn, on 4, or 5 or 6 when the two
    workers start far apart (a loaded machine: both first time out on the same problem)."""
    cfg = RewardConfig(functions=[spec("sleeps_forever", timeout_s=0.5)], num_workers=2, verifier_weight=0.0)
    golds = [str(problem) for problem in range(6) for _ in range(8)]
    with RewardScorer(cfg) as scorer, caplog.at_level(logging.WARNING, logger="dapo.rewards"):
        results = scorer.score([f"Answer: {g}" for g in golds], golds, prompts=[f"problem {g}" for g in golds])
    assert all(r.timed_out for r in results)
    [tripped] = [r.getMessage() for r in caplog.records if TRIPPED in r.getMessage()]
    streak = re.match(r"sleeps_forever timed out on (\d+) responses in a row, of ", tripped)
    assert streak is not None and 4 <= int(streak.group(1)) <= 6, tripped
