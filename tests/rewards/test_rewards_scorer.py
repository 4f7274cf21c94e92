"""RewardScorer: the DAPO score, the hard deadline on hostile inputs, and clean shutdown."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dapo.config.schema import RewardConfig
from dapo.rewards import RewardScorer

TIMEOUT_S = 1.0
SLACK_S = 2.0  # a killed worker's replacement may still be starting on a busy 2-core machine

# (response, ground truth): integer ground truths stay in the parent; the others reach math-verify.
HOSTILE_ITEMS = {
    "power tower": ("Answer: $9^{9^{9^{9^{9^{9}}}}}$", "\\frac{1}{2}"),
    "power tower, integer truth": ("Answer: $9^{9^{9^{9^{9^{9}}}}}$", "34"),
    "factorial": ("Answer: $(10^{100})!$", "\\frac{1}{2}"),
    "100,000 digits": ("Answer: " + "7" * 100_000, "34"),
    "100,000 digits, short tail": ("x" * 10 + "\nAnswer: " + "7" * 900, "\\frac{1}{2}"),
    "5,000 nested braces": ("\\boxed{" + "{" * 5000 + "1" + "}" * 5000 + "}", "\\frac{1}{2}"),
    "400 nested braces": ("\\boxed{" + "{" * 400 + "1" + "}" * 400 + "}", "\\frac{1}{2}"),
    "unbalanced box": ("so \\boxed{" + "{1" * 1000, "\\frac{1}{2}"),
    "1 MB response": ("step " * 200_000 + "\nAnswer: 34", "34"),  # the tail is read: correct
    "1e999999": ("Answer: 1e999999", "\\frac{1}{2}"),
    "1e999999, integer truth": ("Answer: 1e999999", "34"),
    "non-ASCII digits": ("Answer: \u0663\u0664", "34"),
}


@pytest.fixture(scope="module")
def scorer() -> Iterator[RewardScorer]:
    with RewardScorer(RewardConfig(timeout_s=TIMEOUT_S, num_workers=2)) as reward_scorer:
        yield reward_scorer


@pytest.mark.parametrize("name", list(HOSTILE_ITEMS))
def test_hostile_input_is_answered_within_deadline(scorer: RewardScorer, name: str) -> None:
    response, ground_truth = HOSTILE_ITEMS[name]
    start = time.monotonic()
    [result] = scorer.score([response], [ground_truth])
    assert time.monotonic() - start < TIMEOUT_S + SLACK_S
    assert result.acc is (name in ("non-ASCII digits", "1 MB response"))
    assert result.score == (1.0 if result.acc else -1.0)
    assert len(result.pred) <= 100


def test_hangs_do_not_cost_their_chunk_neighbours(scorer: RewardScorer) -> None:
    """A killed chunk's unstarted items are requeued and still get their own verdicts."""
    good = [("Answer: $\\frac{2}{4}$", "\\frac{1}{2}"), ("Answer: $\\sqrt{12}$", "2\\sqrt3")] * 8
    hang = ("Answer: $(10^{100})!$", "\\frac{1}{2}")
    items = good[:5] + [hang] + good[5:11] + [hang] + good[11:]
    start = time.monotonic()
    results = scorer.score([r for r, _ in items], [g for _, g in items])
    assert time.monotonic() - start < 2 * TIMEOUT_S + 2 * SLACK_S
    for (response, _), result in zip(items, results):
        if (response, _) == hang:
            assert result.timed_out and not result.acc
        else:
            assert result.acc and not result.timed_out and not result.error


def test_dapo_score_and_flags(scorer: RewardScorer) -> None:
    results = scorer.score(
        ["Answer: 34", "Answer: 340", "no answer here", "\\boxed{\\frac12}", None],  # type: ignore[list-item]
        ["34", "34", "34", "0.5", "34"],
        data_sources=["math_dapo", "math_dapo", "math_dapo", "math", "math_dapo"],
    )
    assert [r.score for r in results] == [1.0, -1.0, -1.0, 1.0, -1.0]
    assert [r.acc for r in results] == [True, False, False, True, False]
    assert [r.pred for r in results] == ["34", "340", "", "\\frac12", ""]
    assert not any(r.timed_out or r.error for r in results)


def test_a_response_begun_inside_the_thinking_is_read_after_it_closes(scorer: RewardScorer) -> None:
    """thinking=True (the prompt ended in <think>): an answer before any </think> is still the
    thinking, cut off, and no answer; the same text outside thinking is read."""
    cut_off, closed = "Let me think. Answer: 34", "Let me think.</think>\nAnswer: 34"
    results = scorer.score([cut_off, closed, cut_off], ["34"] * 3, thinking=[True, True, False])
    assert [r.acc for r in results] == [False, True, True]


def test_a_missing_ground_truth_rewards_no_answer(scorer: RewardScorer) -> None:
    """A row whose ground truth is None (a null in the data) is not the text "None": the answer
    "None" is no match for it."""
    [result] = scorer.score(["Answer: None"], [None])  # type: ignore[list-item]
    assert result.acc is False


def test_dapo_source_reads_only_the_answer_line(scorer: RewardScorer) -> None:
    [dapo, other] = scorer.score(["\\boxed{34}"] * 2, ["34"] * 2, ["math_dapo", "MATH"])
    assert not dapo.acc and other.acc


def test_many_integer_responses_are_fast(scorer: RewardScorer) -> None:
    response = "We compute. " * 600 + "\nAnswer: 540"
    start = time.monotonic()
    results = scorer.score([response] * 2000, ["540"] * 2000)
    assert all(r.acc for r in results)
    assert time.monotonic() - start < 2.0


def test_mismatched_lengths_are_a_clear_error(scorer: RewardScorer) -> None:
    with pytest.raises(ValueError, match="must match"):
        scorer.score(["Answer: 1", "Answer: 2"], ["1"])


def test_empty_batch(scorer: RewardScorer) -> None:
    assert scorer.score([], []) == []


def test_configured_scores() -> None:
    cfg = RewardConfig(
        correct_score=1.0, incorrect_score=0.5, verifier_weight=2.0, num_workers=1, timeout_s=1.0
    )
    with RewardScorer(cfg) as custom:
        results = custom.score(["Answer: 7", "Answer: 8", "Answer: $(10^{100})!$"], ["7", "7", "7"])
    assert [r.score for r in results] == [2.0, 1.0, 1.0]
    assert [r.timed_out for r in results] == [False, False, True]


def _alive(pid: int) -> bool:
    """True while the process exists, zombies included (a zombie still has /proc/<pid>)."""
    return os.path.exists(f"/proc/{pid}")


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
def test_timeouts_respawn_workers_and_close_reaps_them(caplog: pytest.LogCaptureFixture) -> None:
    scorer = RewardScorer(RewardConfig(timeout_s=TIMEOUT_S, num_workers=1))
    first_pids = scorer._pool.pids
    with caplog.at_level(logging.DEBUG):
        [result] = scorer.score(["Answer: $(10^{100})!$"], ["\\frac{1}{2}"])
    assert "deadline" in caplog.text and "10^{100}" not in caplog.text  # model output not logged
    assert result.timed_out and scorer.num_timeouts == 1
    assert not any(_alive(pid) for pid in first_pids)  # killed and reaped
    [result] = scorer.score(["Answer: $\\frac{3}{6}$"], ["\\frac{1}{2}"])  # the replacement works
    assert result.acc
    pids = scorer._pool.pids
    assert pids != first_pids and all(_alive(pid) for pid in pids)
    scorer.close()
    assert not any(_alive(pid) for pid in pids)
    scorer.close()  # twice is fine


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
def test_a_scorer_left_open_at_exit_is_reaped_quietly(tmp_path: Path) -> None:
    """A script that ends without closing its scorer (or its Trainer) prints no shutdown traceback
    and leaves no worker behind. (With torch imported after dapo.rewards, the interpreter tears
    down multiprocessing before the scorer is collected: the polite stop message then raised.)"""
    pid_file = tmp_path / "pids"
    script = (
        "from dapo.config.schema import RewardConfig\n"
        "from dapo.rewards import RewardScorer\n"
        "import torch\n"
        "scorer = RewardScorer(RewardConfig(timeout_s=5.0, num_workers=2))\n"
        f"open({str(pid_file)!r}, 'w').write(' '.join(map(str, scorer._pool.pids)))\n"
        "assert scorer.score(['Answer: 34'], ['34'])[0].acc\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    pids = [int(pid) for pid in pid_file.read_text().split()]
    assert len(pids) == 2 and not any(_alive(pid) for pid in pids)


def test_the_default_worker_count_follows_this_process_cpus_not_the_machines(monkeypatch):
    # a 4-CPU slice of a 200-core node started 200 sympy interpreters (~13 GB)
    import os

    from dapo.rewards.pool import MAX_DEFAULT_WORKERS, default_num_workers

    monkeypatch.setattr(os, "cpu_count", lambda: 200)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert default_num_workers() == 4
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(200)), raising=False)
    assert default_num_workers() == MAX_DEFAULT_WORKERS == 32


def test_a_function_s_extra_is_the_row_s_fields_with_its_prompt_and_data_source_unless_it_has_its_own() -> None:
    """Built in one place (the trainer added the prompt, the scorer the data_source): the prompt
    first, the row's fields over it, the data_source last unless the row has one; the row's dict
    is not changed, and the start-up dummy item has both fields, as every real item."""
    from dapo.rewards.start_checks import SMOKE_ITEM, function_extra

    row = {"k": 1}
    extra = function_extra(row, "math", [{"role": "user", "content": "What is 1+1?"}])
    assert list(extra.items()) == [("prompt", [{"role": "user", "content": "What is 1+1?"}]), ("k", 1),
                                   ("data_source", "math")]
    assert row == {"k": 1}
    assert function_extra({"prompt": "own", "data_source": "own"}, "math", "asked") == {"prompt": "own",
                                                                                       "data_source": "own"}
    assert function_extra(None, None) == {} and function_extra({"k": 1}, None, None) == {"k": 1}
    assert SMOKE_ITEM[2] == {"prompt": "What is 0 + 1?", "data_source": "smoke_test"}
