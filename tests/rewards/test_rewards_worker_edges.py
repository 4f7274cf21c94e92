"""A scoring worker's edge cases that reach a user: a reward too large to add up, a deep
traceback, how a worker's exit is said, and the daemons a reward function leaves behind."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import pytest

from dapo.config.schema import RewardConfig, RewardFunctionSpec
from dapo.rewards import RewardScorer
from dapo.rewards.pool import WorkerPool
from dapo.rewards.process_tree import _processes
from dapo.rewards.worker_process import exit_status

REWARDS = """
import os, time

def big(response, ground_truth, extra):
    return 1e6 if extra.get("big") else 1.0

def deep(response, ground_truth, extra, depth=0):
    if extra.get("deep"):
        if depth < 200:  # through two functions: a traceback says one's repeated frames in a line
            return _deeper(response, ground_truth, extra, depth)
        raise ValueError("the marker at the bottom")
    return 1.0

def _deeper(response, ground_truth, extra, depth):
    return deep(response, ground_truth, extra, depth + 1)

def daemon(response, ground_truth, extra):
    if extra.get("daemon"):  # a daemon's double fork: its child, in a session of its own, outlives it
        pid = os.fork()
        if pid == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(0.1)
            os._exit(0)
        os.waitpid(pid, 0)
    return 1.0
"""


@pytest.fixture(scope="module")
def rewards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rewards") / "edge_rewards.py"
    path.write_text(REWARDS)
    return path


def test_a_score_whose_weighted_sum_overflows_fails_as_a_bad_value_not_an_infinite_reward(rewards: Path) -> None:
    """1e6 is an allowed score, but under weight 1e303 the sum is inf: the advantages, and then the
    weights, would be NaN. The function fails on that response instead, with its failure score."""
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{rewards}:big", weight=1e303)], num_workers=1)
    with RewardScorer(cfg) as scorer:
        [result] = scorer.score(["Answer: 1"], ["1"], extras=[{"big": True}])
        assert math.isfinite(result.score) and result.error and result.failed == ["big"]
        assert "overflows the reward" in scorer.first_failure["big"]


def test_a_deep_traceback_keeps_its_end_the_line_that_names_the_exception(rewards: Path) -> None:
    """(Cut to its last 4000 characters: its first ones are frames, and the run-stopping error
    says the exception from the last line.)"""
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{rewards}:deep")], num_workers=1)
    with RewardScorer(cfg) as scorer:
        [result] = scorer.score(["Answer: 1"], ["1"], extras=[{"deep": True}])
        assert result.error and result.failed == ["deep"]
        assert scorer.first_failure["deep"] == (
            "deep raised ValueError: the marker at the bottom (the whole traceback is logged above)")


def test_a_worker_s_exit_is_said_by_its_code_zero_included_or_its_signal() -> None:
    assert [exit_status(code) for code in (0, 3, -9, None)] == [
        "exit code 0", "exit code 3", "killed by SIGKILL (out of memory? the OOM killer sends it)", None]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, and a subreaper")
def test_a_daemon_a_reward_function_left_is_reaped_by_its_worker_when_it_ends(rewards: Path) -> None:
    """The worker adopts it (a subreaper); once it ends it is a zombie until the worker collects
    it, which a worker must do as it goes: a long run would otherwise fill the process table."""
    pool = WorkerPool(1, [f"{rewards}:daemon"], timeout_s=30.0)
    try:
        worker = pool.scoring_pids[0]
        assert [kind for kind, _ in pool.run([("fn", 0, "response", "1", {"daemon": True})])] == ["ok"]
        time.sleep(0.5)  # the daemon has ended: a zombie of the worker's
        assert [kind for kind, _ in pool.run([("fn", 0, "response", "1", {})])] == ["ok"]  # collected after it
        deadline = time.monotonic() + 30
        while (zombies := [pid for pid, state, parent, *_ in _processes() if parent == worker and state == "Z"]):
            assert time.monotonic() < deadline, f"the worker never collected {zombies}"
            time.sleep(0.05)
    finally:
        pool.close()
