"""A reward function that takes too much memory costs a scoring worker, never the trainer: the
workers are the OOM killer's first choice, and with ``reward.memory_limit_gb`` an allocation past
the cap fails inside the function, scored like any raise, the worker living on."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from dapo.config import ConfigError
from dapo.config.generation import RewardConfig
from dapo.rewards.pool import WorkerPool

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="oom_score_adj and RLIMIT_AS: Linux")

MEMORY_HUNGRY = """
import subprocess

_kept = []


def f(response, ground_truth, extra):
    if "fill" in extra:  # keeps all it can allocate but extra["fill"] MiB, catching its own MemoryError
        for size in (64 * 2**20, 2**20, 2**14):
            try:
                while True:
                    _kept.append(bytearray(size))
            except MemoryError:
                pass
        free = extra["fill"] * 2**20
        while free > 0 and _kept:
            free -= len(_kept.pop())
        return 1.0
    if extra.get("allocate_gib"):
        block = bytearray(int(extra["allocate_gib"] * 2**30))
        return len(block) / 2**30
    if extra.get("child"):  # what a program the function starts inherits
        return float(subprocess.run(["cat", "/proc/self/oom_score_adj"], capture_output=True, text=True).stdout)
    return float(open("/proc/self/oom_score_adj").read())
"""


def oom_score_adj(pid: int) -> int:
    return int(Path(f"/proc/{pid}/oom_score_adj").read_text())


def tasks(extras: list[dict]) -> list[tuple]:
    return [("fn", 0, "response", "1", extra) for extra in extras]


@pytest.fixture()
def memory_hungry(tmp_path: Path) -> str:
    module = tmp_path / "memory_hungry.py"
    module.write_text(MEMORY_HUNGRY)
    return f"{module}:f"


def test_workers_and_the_programs_they_start_are_the_oom_killers_first_choice(memory_hungry):
    pool = WorkerPool(1, [memory_hungry], timeout_s=30.0)
    try:
        outcomes = pool.run(tasks([{}, {"child": True}]))
        [scorer] = pool.scoring_pids
        assert oom_score_adj(scorer) == 1000
        # the keeper (a few MB) and the trainer keep their own score
        assert [oom_score_adj(pid) for pid in pool.pids] == [oom_score_adj(os.getpid())] != [1000]
    finally:
        pool.close()
    assert [score for _, (score, *_) in outcomes] == [1000.0, 1000.0]


def test_an_allocation_past_the_cap_fails_in_the_function_and_the_worker_lives_on(memory_hungry):
    pool = WorkerPool(1, [memory_hungry], timeout_s=30.0, memory_limit_bytes=768 * 2**20)
    try:
        scorers = pool.scoring_pids
        too_big, small = pool.run(tasks([{"allocate_gib": 2}, {"allocate_gib": 0.125}]))
        assert pool.scoring_pids == scorers  # the same worker: not killed, not replaced
    finally:
        pool.close()
    assert too_big[0] == "raised" and "MemoryError" in too_big[1]
    assert small[0] == "ok" and small[1][0] == 0.125


def test_without_a_cap_the_same_allocation_succeeds(memory_hungry):
    pool = WorkerPool(1, [memory_hungry], timeout_s=30.0)
    try:
        [outcome] = pool.run(tasks([{"allocate_gib": 1}]))
    finally:
        pool.close()
    assert outcome[0] == "ok" and outcome[1][0] == 1.0


def test_a_cap_past_what_setrlimit_takes_is_no_cap(memory_hungry):
    """(reward.memory_limit_gb=2e10: OverflowError in setrlimit, reported as "a reward worker exited
    during start-up")"""
    pool = WorkerPool(1, [memory_hungry], timeout_s=30.0, memory_limit_bytes=int(2e10 * 2**30))
    try:
        [outcome] = pool.run(tasks([{"allocate_gib": 0.125}]))
    finally:
        pool.close()
    assert outcome[0] == "ok" and outcome[1][0] == 0.125


def test_a_cap_too_small_for_a_worker_to_start_is_refused_with_the_reason():
    assert RewardConfig(memory_limit_gb=2).memory_limit_gb == 2
    with pytest.raises(ConfigError, match=r"reward.memory_limit_gb=0.1 would not let a scoring worker start"):
        RewardConfig(memory_limit_gb=0.1)


def test_the_scorer_caps_its_workers_at_reward_memory_limit_gb(memory_hungry):
    """The config field reaches the workers: a response whose function allocates past the cap is
    failed (and counted), the next one scores, the verifier beside it is unaffected."""
    from dapo.rewards import RewardScorer

    cfg = RewardConfig(memory_limit_gb=0.75, num_workers=1, functions=[{"path": memory_hungry}])
    with RewardScorer(cfg) as scorer:
        too_big, small = scorer.score(["Answer: 1", "Answer: 1"], ["1", "1"],
                                      extras=[{"allocate_gib": 2}, {"allocate_gib": 0.125}])
        assert scorer.num_errors == 1
    assert too_big.error and too_big.failed == ["f"] and too_big.acc  # the verifier's verdict stands
    assert small.extra["f/score"] == 0.125 and not small.error


def test_a_worker_a_function_left_near_its_cap_is_replaced_before_math_verify_runs_on_it(memory_hungry):
    """math-verify catches MemoryError as any error and answers False: a worker left near its cap
    by a function that keeps what it allocates judged the correct answers after it wrong, with no
    failure counted. The worker now ends after such a task, and the rest runs on a fresh one."""
    from dapo.rewards import RewardScorer

    cfg = RewardConfig(memory_limit_gb=0.75, num_workers=1, functions=[{"path": memory_hungry, "weight": 0.1}])
    responses, golds = ["Answer: \\frac{\\sqrt{2}}{2}"] * 4, ["\\frac{1}{\\sqrt{2}}"] * 4  # for math-verify
    with RewardScorer(cfg) as scorer:
        for _ in range(3):
            results = scorer.score(responses, golds, extras=[{"fill": 0}] + [{}] * 3)
            # (a worker left without the memory to send the filling call's result dies: that call's
            # failure is counted; the verdicts are a fresh worker's either way)
            assert [r.acc for r in results] == [True] * 4 and not any(r.error for r in results[1:])


def test_a_recycled_workers_unstarted_tasks_run_on_its_replacement_uncharged(memory_hungry):
    pool = WorkerPool(1, [memory_hungry], timeout_s=30.0, memory_limit_bytes=768 * 2**20)
    try:
        scorers = pool.scoring_pids
        outcomes = pool.run(tasks([{"fill": 4}, {"allocate_gib": 0.125}, {}, {"fill": 4}, {}]))
        assert pool.scoring_pids != scorers  # replaced
    finally:
        pool.close()
    assert [outcome[0] for outcome in outcomes] == ["ok"] * 5
    assert [outcome[1][0] for outcome in outcomes] == [1.0, 0.125, 1000.0, 1.0, 1000.0]
