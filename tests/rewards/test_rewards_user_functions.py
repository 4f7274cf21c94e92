"""User reward functions: loading, weighting, and isolation of hostile functions."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from dapo.config.schema import RewardConfig, RewardFunctionSpec
from dapo.rewards import RewardFunctionError, RewardScorer
from dapo.rewards.user_functions import reward_formula

HERE = Path(__file__).resolve().parent
FNS = str(HERE / "reward_fns_fixture.py")
TIMEOUT_S = 1.0
SLACK_S = 2.0


def spec(name: str, weight: float = 1.0) -> RewardFunctionSpec:
    return RewardFunctionSpec(path=f"{FNS}:{name}", weight=weight)


@pytest.fixture(scope="module")
def scorer() -> Iterator[RewardScorer]:
    cfg = RewardConfig(
        functions=[spec("exact_match", 0.5), spec("length_bonus", 2.0),
                   spec("sleeps_when_asked", 1.0), spec("raises_when_asked", 1.0)],
        timeout_s=TIMEOUT_S,
        num_workers=2,
    )
    with RewardScorer(cfg) as reward_scorer:
        yield reward_scorer


def test_weighted_sum_of_verifier_and_user_functions(scorer: RewardScorer) -> None:
    response = "x" * 96 + "Answer: 34"  # 106 characters
    [result] = scorer.score([response], ["34"], extras=[{}])
    # verifier +1, exact_match 0.5 * 1, length_bonus 2 * 0.106, sleeps 1 * 0.5, raises 1 * 1
    assert result.score == pytest.approx(1.0 + 0.5 + 2 * 0.106 + 0.5 + 1.0)
    assert result.acc
    assert result.extra["exact_match/score"] == 1.0
    assert result.extra["exact_match/chars"] == 106.0
    assert result.extra["length_bonus/score"] == pytest.approx(0.106)


def test_sleeping_function_times_out_alone(scorer: RewardScorer) -> None:
    extras = [{}, {"sleep": True}, {}, {}]
    start = time.monotonic()
    results = scorer.score(["Answer: 34"] * 4, ["34"] * 4, extras=extras)
    assert time.monotonic() - start < TIMEOUT_S + SLACK_S
    assert [r.timed_out for r in results] == [False, True, False, False]
    # the verifier judged all four correct: a bonus function's timeout does not make one wrong
    assert [r.acc for r in results] == [True, True, True, True]
    # The timed-out function contributes weight * incorrect_score (-1) instead of 0.5.
    assert results[1].score == pytest.approx(results[0].score - 1.5)


def test_raising_function_is_counted_and_its_traceback_shown_once(
    scorer: RewardScorer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="dapo.rewards"):
        for _ in range(2):
            results = scorer.score(["Answer: 34"] * 3, ["34"] * 3, extras=[{"boom": True}] * 3)
            assert all(r.error and r.acc for r in results)  # correct, by the verifier
    shown = [r for r in caplog.records if "raises_when_asked raised" in r.getMessage()]
    assert len(shown) == 1
    assert "boom from the reward function" in shown[0].getMessage()
    assert scorer.num_errors >= 6


def test_acc_from_first_user_function_when_verifier_is_off() -> None:
    cfg = RewardConfig(verifier_weight=0.0, functions=[spec("exact_match")], num_workers=1)
    with RewardScorer(cfg) as scorer:
        results = scorer.score(["the end 34", "the end 35"], ["34", "34"])
    assert [r.acc for r in results] == [True, False]
    assert [r.score for r in results] == [1.0, 0.0]


@pytest.mark.parametrize("weight", [1.0, -1.0])
def test_acc_without_an_acc_key_follows_the_weighted_score(weight: float) -> None:
    """A float return is correct when it adds to the reward: a penalty function (negative weight) that
    scores a response 0.3 takes 0.3 off its reward, so it is no success (it was counted correct)."""
    cfg = RewardConfig(verifier_weight=0.0, functions=[spec("length_bonus", weight=weight)], num_workers=1)
    with RewardScorer(cfg) as scorer:
        results = scorer.score(["x" * 300, ""], ["34", "34"])
    assert [r.score for r in results] == pytest.approx([0.3 * weight, 0.0])
    assert [r.acc for r in results] == [weight > 0, False]


@pytest.mark.parametrize("verifier_weight", [1.0, 0.0])
def test_function_that_always_sleeps_warns_at_start_and_times_out(
    caplog: pytest.LogCaptureFixture, verifier_weight: float
) -> None:
    cfg = RewardConfig(functions=[spec("sleeps_forever")], timeout_s=TIMEOUT_S, num_workers=1,
                       verifier_weight=verifier_weight)
    with caplog.at_level(logging.WARNING, logger="dapo.rewards"), RewardScorer(cfg) as scorer:
        [result] = scorer.score(["Answer: 1"], ["1"])
    # without the verifier the function is where acc comes from: its timeout makes the item wrong
    assert result.timed_out and result.acc == (verifier_weight != 0)
    assert result.score == pytest.approx(verifier_weight * 1.0 - 1.0)
    assert any("deadline on a dummy item" in r.getMessage() for r in caplog.records)


def test_function_that_kills_its_worker_is_an_error_not_a_hang() -> None:
    # no verifier: the function is where acc comes from, so its crash makes the item wrong
    cfg = RewardConfig(functions=[spec("exits_when_asked")], timeout_s=TIMEOUT_S, num_workers=1, verifier_weight=0.0)
    with RewardScorer(cfg) as scorer:
        results = scorer.score(["Answer: 1"] * 3, ["1"] * 3, extras=[{}, {"exit": True}, {}])
        assert [r.error for r in results] == [False, True, False]
        assert [r.acc for r in results] == [True, False, True]
        assert [r.score for r in results] == [1.0, -1.0, 1.0]
        assert scorer.score(["Answer: 1"], ["1"])[0].acc  # the replacement worker serves


def test_a_real_failure_is_shown_and_named_after_a_dummy_item_failure(caplog: pytest.LogCaptureFixture) -> None:
    """The start-up dummy item has no extra fields, so a function may fail on it for that reason
    alone; that must not hide the function's failure on real data, nor be what a stopped run names."""
    cfg = RewardConfig(functions=[spec("fails_one_way_on_the_dummy_another_on_data")], num_workers=1)
    with caplog.at_level(logging.WARNING, logger="dapo.rewards"), RewardScorer(cfg) as scorer:
        assert "KeyError" in caplog.text and "ZeroDivisionError" not in caplog.text
        # the user's frame and the error; not the frames of dapo-rl's worker around the call
        assert 'reward_fns_fixture.py", line' in caplog.text and "rewards/worker.py" not in caplog.text
        assert "a column of your data reads None on it" in caplog.text
        [result] = scorer.score(["Answer: 1"], ["1"], extras=[{"kind": 1}])
    assert result.error and "ZeroDivisionError" in caplog.text
    assert "ZeroDivisionError" in scorer.first_failure["fails_one_way_on_the_dummy_another_on_data"]


def test_a_first_function_that_judges_every_response_alike_is_said_to_decide_correctness(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """TRL users list reward functions in any order; with the verifier off, acc comes from the
    first: a length penalty listed first made every response wrong, unsaid."""
    (tmp_path / "trl.py").write_text("def length_penalty(response, ground_truth, extra):\n    return -0.01\n"
                                     "def accuracy(response, ground_truth, extra):\n"
                                     "    return 1.0 if response.endswith(ground_truth) else 0.0\n")
    penalty, accuracy = (RewardFunctionSpec(path=f"{tmp_path / 'trl.py'}:{name}") for name in ("length_penalty", "accuracy"))
    responses, golds = [f"Answer: {i % 2}" for i in range(32)], ["1"] * 32
    for order, said in (([penalty, accuracy], True), ([accuracy, penalty], False)):
        caplog.clear()
        cfg = RewardConfig(functions=order, num_workers=1, verifier_weight=0.0)
        with caplog.at_level(logging.WARNING, logger="dapo.rewards"), RewardScorer(cfg) as scorer:
            results = scorer.score(responses, golds)
            assert not [r for r in caplog.records if "comes from the first" in r.getMessage()]  # 32: too few yet
            for _ in range(3):  # 64 and more: said, once
                scorer.score(responses, golds)
        lines = [r.getMessage() for r in caplog.records if "comes from the first user function" in r.getMessage()]
        if said:
            assert not any(r.acc for r in results) and len(lines) == 1
            assert "length_penalty, with the verifier off; it judged all 64 responses so far wrong, while " \
                   "accuracy's score told them apart" in lines[0]
        else:
            assert [r.acc for r in results] == [i % 2 == 1 for i in range(32)] and lines == []


def test_functions_of_the_same_name_in_two_files_keep_their_own_metrics(tmp_path: Path) -> None:
    for stem, value in (("accuracy", 1.0), ("style", 0.25)):
        (tmp_path / f"{stem}.py").write_text(f"def reward(response, ground_truth, extra):\n    return {value}\n")
    functions = [RewardFunctionSpec(path=f"{tmp_path / stem}.py:reward") for stem in ("accuracy", "style")]
    with RewardScorer(RewardConfig(functions=functions, num_workers=1, verifier_weight=0.0)) as scorer:
        [result] = scorer.score(["x"], ["1"])
    assert result.extra == {"accuracy.reward/score": 1.0, "style.reward/score": 0.25,
                            "accuracy.reward/not_applicable": 0.0, "style.reward/not_applicable": 0.0}


def test_a_metric_of_none_has_no_value_for_that_response_and_the_score_counts() -> None:
    """``{"score": 0.25, "confidence": None}`` was a bad value: the response failed, and the start-up item
    (no confidence in its extra) refused the function. The score counts; the metric is left out for that
    response alone, so its mean is over the responses that gave it a value. A None score is still "does
    not apply", its None metrics left out too."""
    from dapo.rewards.user_functions import normalize_return
    from dapo.rewards.worker import _batch_outcome, _item_outcome
    from dapo.trainer.step_metrics import reward_function_metrics

    with RewardScorer(RewardConfig(functions=[spec("confidence_when_given", 2.0)], num_workers=1)) as scorer:
        results = scorer.score(["Answer: 4", "Answer: 4", "Answer: 5"], ["4"] * 3,
                               extras=[{"confidence": 0.5}, {}, {"confidence": 0.9}])
    assert [r.score for r in results] == [1.5, 1.5, -1.5]  # verifier +-1, then 2 x +-0.25
    assert not any(r.error or r.failed for r in results)
    assert [r.extra.get("confidence_when_given/confidence", "absent") for r in results] == [0.5, "absent", 0.9]
    metrics = reward_function_metrics(results)
    assert metrics["reward/confidence_when_given/confidence"] == pytest.approx(0.7)  # (0.5 + 0.9) / 2, not / 3
    assert metrics["reward/confidence_when_given/score"] == pytest.approx(0.25 / 3)
    assert metrics["reward_failures/confidence_when_given"] == 0.0
    assert _item_outcome({"score": None, "m": None}) == ("ok", (None, None, {}, None))
    assert _batch_outcome([{"score": 1, "m": None}], 1) == ("ok", [("ok", (1.0, None, {}, None))])
    # a NaN or infinite metric (a ratio of 0/0) has no value either: the score was lost, the response a failure
    assert _item_outcome({"score": 0.5, "ratio": float("nan"), "n": np.float64("inf"), "k": 3}) == (
        "ok", (0.5, None, {"k": 3.0}, None))
    with pytest.raises(TypeError, match="'ratio' is a str, not a number"):
        normalize_return({"score": 0.5, "ratio": "nan"})


def test_scores_too_large_for_the_advantages_are_failures_not_a_crash(tmp_path: Path) -> None:
    """1e200 is a finite float, but the group's std of such scores is not: every advantage came
    out 0 or NaN, and an infinite weighted sum stopped the run."""
    module = tmp_path / "large.py"
    module.write_text("def large(response, ground_truth, extra):\n    return 1e7 if extra.get('big') else 1e6\n")
    always = RewardConfig(functions=[RewardFunctionSpec(path=f"{module}:large", weight=1.0)], num_workers=1)
    with RewardScorer(always) as scorer:
        results = scorer.score(["Answer: 34"] * 2, ["34"] * 2, extras=[{}, {"big": True}])
    assert [r.error for r in results] == [False, True] and results[1].failed == ["large"]
    assert [r.score for r in results] == [1.0 + 1e6, 1.0 - 1.0]  # the verifier's +1; the failure's weight x -1
    # each score bounded, the weight not: 1e6 x 1e303 overflows, and is that function's failure
    heavy = RewardConfig(functions=[RewardFunctionSpec(path=f"{module}:large", weight=1e303)], num_workers=1)
    with RewardScorer(heavy) as scorer:
        [result] = scorer.score(["Answer: 34"], ["34"])
    assert result.error and result.failed == ["large"] and result.acc and result.score == 1.0 - 1e303


def test_a_function_drawing_random_numbers_scores_a_response_alike_in_any_worker_and_run() -> None:
    """Reward workers hold no checkpointed state: a function using random (or numpy's global
    generator) is seeded from the call, so a rerun or a resumed run scores a response as before,
    whichever of the workers gets it."""
    cfg = RewardConfig(functions=[spec("draws")], verifier_weight=0.0, num_workers=2)
    responses = [f"response {i}" for i in range(6)] * 2
    runs = []
    for _ in range(2):
        with RewardScorer(cfg) as reward_scorer:
            results = reward_scorer.score(responses, ["1"] * 12, ["s"] * 12, [{}] * 12)
        runs.append([(r.score, r.extra["draws/numpy"]) for r in results])
    assert runs[0] == runs[1]
    assert runs[0][:6] == runs[0][6:]  # the same response, another task (and maybe worker)
    assert len(set(runs[0][:6])) == 6  # while different responses draw differently


def test_a_batched_function_scores_in_batches_and_fails_alone_or_by_batch() -> None:
    """batch_size N: the function gets up to N responses a call (an LLM judge, a sandbox) and
    returns one value each; a bad value fails its response alone, a raise or a timeout the
    batch's responses alone, under the function's own deadline."""
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{FNS}:batched_judge", batch_size=3, timeout_s=1.0)],
                       verifier_weight=0.0, num_workers=2, timeout_s=60.0)
    responses = [f"answer {i}" for i in range(7)]
    extras = [{}, {"nan": True}, {}, {"boom": True}, {}, {}, {"sleep": True}]  # batches [0-2] [3-5] [6]
    with RewardScorer(cfg) as reward_scorer:
        started = time.monotonic()
        results = reward_scorer.score(responses, [str(i) for i in range(7)], ["s"] * 7, extras)
        assert time.monotonic() - started < 1.0 + SLACK_S + 5  # the function's 1 s, not reward.timeout_s
        assert [r.extra.get("batched_judge/batch") for r in results] == [3.0, None, 3.0, None, None, None, None]
        assert [r.score for r in results[:3]] == [8.0, -1.0, 8.0]  # its own score, weight 1; NaN: incorrect_score
        assert [r.acc for r in results[:3]] == [True, False, True]
        assert [r.error for r in results] == [False, True, False, True, True, True, False]
        assert results[6].timed_out and not any(r.timed_out for r in results[:6])
        assert reward_scorer.num_errors == 4 and reward_scorer.num_timeouts == 1
    wrong = RewardConfig(functions=[RewardFunctionSpec(path=f"{FNS}:batched_wrong_length", batch_size=4)],
                         verifier_weight=0.0, num_workers=1)
    with pytest.raises(RewardFunctionError, match="holds 2 scores for 1 responses"):
        RewardScorer(wrong)  # found by the start-up call, as a per-response function's bad return is


def test_a_failing_penalty_function_is_charged_not_paid(caplog: pytest.LogCaptureFixture) -> None:
    """A penalty (a negative weight) that raised added weight * incorrect_score = +0.5: more than
    it ever gives when it works, so a policy could learn to make it fail. A failure now adds the
    lower of weight * incorrect_score and weight * correct_score, and its timeout message names
    the function's own deadline."""
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{FNS}:raises_when_asked", weight=-0.5),
                                  RewardFunctionSpec(path=f"{FNS}:sleeps_when_asked", weight=1.0, timeout_s=0.5)],
                       timeout_s=30.0, num_workers=1)
    with RewardScorer(cfg) as penalized:
        works, fails = penalized.score(["Answer: 34"] * 2, ["34"] * 2, extras=[{}, {"boom": True}])
        [slow] = penalized.score(["Answer: 34"], ["34"], extras=[{"sleep": 5}])
    assert works.score == pytest.approx(1.0 - 0.5 + 0.5) and fails.error
    assert fails.score == pytest.approx(1.0 - 0.5 + 0.5)  # the penalty at its worst (-0.5 * 1), not +0.5
    assert slow.timed_out and "sleeps_when_asked ran past its 0.5 s deadline" in caplog.text


def test_a_forked_child_returning_into_the_worker_does_not_answer_for_it() -> None:
    """The child went on serving the worker's socket: duplicate results crashed score() with
    IndexError, or (a child that raised) every item got the child's outcome."""
    cfg = RewardConfig(functions=[spec("forks_and_returns_in_the_child")], verifier_weight=0.0,
                       timeout_s=10.0, num_workers=1)
    with RewardScorer(cfg) as forking:
        for child_raises in (False, True):
            extras = [{"i": i, "child_raises": child_raises} for i in range(6)]
            results = forking.score(["x"] * 6, ["1"] * 6, extras=extras)
            assert [r.score for r in results] == [float(i) for i in range(6)]
            assert not any(r.error or r.timed_out for r in results)


def test_what_a_function_prints_through_has_an_encoding() -> None:
    """The captured sys.stdout had encoding None: code reading it failed on every response."""
    cfg = RewardConfig(functions=[spec("reads_stdout_encoding")], verifier_weight=0.0, timeout_s=10.0, num_workers=1)
    with RewardScorer(cfg) as scorer_:
        [result] = scorer_.score(["x"], ["1"], extras=[{}])
    assert result.score == 1.0 and not result.error


def test_a_failure_names_the_function_s_file_and_a_dead_worker_its_exit_status(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A timeout, a bad value or a dead worker has no traceback to name the function's file, and
    the messages named only the function ("bad returned a bad value ...": which bad, in which
    file?); a worker that ended by itself was "(crashed)", though its exit code (os._exit(3)) or
    signal (the OOM killer's SIGKILL) says how."""
    module = tmp_path / "my_rewards.py"
    module.write_text(
        "import os, time\n"
        "def bad(response, ground_truth, extra):\n"
        "    return 'high' if extra.get('x') else 0.0\n"
        "def hangs(response, ground_truth, extra):\n"
        "    if extra.get('x'):\n"
        "        time.sleep(60)\n"
        "    return 0.0\n"
        "def exits(response, ground_truth, extra):\n"
        "    if extra.get('x'):\n"
        "        os._exit(3)\n"
        "    return 0.0\n"
    )
    names = ("bad", "hangs", "exits")
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{module}:{name}") for name in names],
                       timeout_s=TIMEOUT_S, num_workers=2)
    with caplog.at_level(logging.WARNING, logger="dapo.rewards"), RewardScorer(cfg) as scorer:
        [result] = scorer.score(["Answer: 1"], ["1"], extras=[{"x": True}])
    assert result.failed == list(names)
    assert scorer.first_failure["bad"] == (
        f"bad returned a bad value on a response ({module}:bad): the return value is a str, not a number")
    assert scorer.first_failure["hangs"] == f"hangs ran past its {TIMEOUT_S} s deadline on a response ({module}:hangs)"
    assert scorer.first_failure["exits"] == f"the worker running exits died on a response ({module}:exits) (exit code 3)"
    assert all(f"{module}:{name}" in caplog.text for name in names)


def test_a_function_gets_the_row_s_data_source_in_extra(tmp_path: Path) -> None:
    """The loader takes data_source out of the row's fields (Problem.data_source), so a reward
    function routing on it, as verl's compute_score(data_source, ...) does, never saw it. It is in
    extra now, batched too, unless the row has a field of that name of its own; the caller's dicts
    are not changed."""
    cfg = _one_and_batched(tmp_path / "routes.py", "one", "batch", 4,
                           "def one(response, ground_truth, extra):\n"
                           "    return {'score': 0.0, 'math': float(extra.get('data_source') == 'math'), 'k': float(extra['k'])}\n"
                           "def batch(responses, ground_truths, extras):\n"
                           "    return [float(extra.get('data_source') == 'math') for extra in extras]\n")
    extras = [{"k": 1}, {"k": 2}, {"k": 3, "data_source": "own"}]
    with RewardScorer(cfg) as scorer:
        results = scorer.score(["Answer: 1"] * 3, ["1"] * 3, ["math", "code", "math"], extras)
    assert [r.extra["one/math"] for r in results] == [1.0, 0.0, 0.0]
    assert [r.extra["batch/score"] for r in results] == [1.0, 0.0, 0.0]
    assert [r.extra["one/k"] for r in results] == [1.0, 2.0, 3.0]
    assert extras == [{"k": 1}, {"k": 2}, {"k": 3, "data_source": "own"}]


def test_an_async_function_is_run_to_its_end_in_its_worker(tmp_path: Path) -> None:
    """An async def function (an async LLM-judge client, as TRL users write them) returned a
    coroutine, refused at start-up as 'not a number'."""
    cfg = _one_and_batched(tmp_path / "judge.py", "judge", "judge_batch", 2,
                           "import asyncio\n"
                           "async def judge(response, ground_truth, extra):\n"
                           "    await asyncio.sleep(0.01)\n"
                           "    return {'score': float(response.endswith(ground_truth)), 'acc': response.endswith(ground_truth)}\n"
                           "async def judge_batch(responses, ground_truths, extras):\n"
                           "    return await asyncio.gather(*(judge(r, g, e) for r, g, e in zip(responses, ground_truths, extras)))\n")
    with RewardScorer(cfg) as scorer:
        results = scorer.score(["Answer: 1", "Answer: 2", "Answer: 3"], ["1", "1", "3"], extras=[{}] * 3)
    assert [r.extra["judge/score"] for r in results] == [1.0, 0.0, 1.0]
    assert [r.extra["judge_batch/score"] for r in results] == [1.0, 0.0, 1.0]
    assert not any(r.failed for r in results)


def _one_and_batched(module: Path, one: str, batched: str, batch_size: int, code: str) -> RewardConfig:
    """A scorer config of ``code``'s per-response function ``one`` and batched function ``batched``."""
    module.write_text(code)
    return RewardConfig(functions=[RewardFunctionSpec(path=f"{module}:{one}"),
                                   RewardFunctionSpec(path=f"{module}:{batched}", batch_size=batch_size)], num_workers=1)


def test_a_function_file_can_use_a_spawned_process_pool_on_its_own_helpers(tmp_path: Path) -> None:
    """multiprocessing's spawn (and forkserver, Python 3.14's default on Linux) imports a function
    by its module's name in the child: a file imported under a made-up name ('dapo_user_...')
    failed every call with BrokenProcessPool there; it is imported under its own name now."""
    (tmp_path / "spawning_reward.py").write_text(
        "import concurrent.futures, multiprocessing\n"
        "def square(x):\n    return x * x\n"
        "def f(response, ground_truth, extra):\n"
        "    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context('spawn')) as pool:\n"
        "        return float(sum(pool.map(square, range(4))))\n")
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{tmp_path / 'spawning_reward.py'}:f")],
                       verifier_weight=0.0, num_workers=1, timeout_s=60.0)
    with RewardScorer(cfg) as scorer:
        [result] = scorer.score(["x"], ["1"])
    assert not result.error and result.extra["f/score"] == 14.0


def test_the_start_of_a_run_says_how_its_reward_is_summed() -> None:
    """A TRL user's 0/1 function is the whole reward there; here the verifier's +1/-1 stays in the
    sum unless reward.verifier_weight=0 (a right answer read 2, a wrong one -1, unsaid)."""
    judge, style = RewardFunctionSpec(path="j.py:judge", weight=0.5), RewardFunctionSpec(path="s.py:style", weight=0.25)
    summed = reward_formula(RewardConfig(verifier="math_dapo", functions=[judge]), ("judge",))
    assert summed.startswith("reward: 1 x the built-in verifier (math_dapo: 1 right, -1 wrong) + 0.5 x judge; ")
    assert "reward.verifier_weight=0 leaves the functions alone" in summed and "is the verifier's" in summed
    alone = reward_formula(RewardConfig(verifier_weight=0.0, functions=[judge, style]), ("judge", "style"))
    assert alone.startswith("reward: 0.5 x judge + 0.25 x style; correctness (acc, avg@k): the first of them that ")


def test_a_function_listed_twice_is_numbered_from_two() -> None:
    """Its labels name its metrics (reward/<label>/score): the second entry is #2, as documented."""
    from dapo.rewards.user_functions import function_labels

    assert function_labels(["a.py:reward", "a.py:reward", "b.py:other"]) == ["a.reward", "a.reward#2", "other"]
