"""User reward functions for the tests: well-behaved ones and hostile ones."""

from __future__ import annotations

import time


def length_bonus(response: str, ground_truth: str, extra: dict) -> float:
    """0.001 per character, capped at 1."""
    return min(1.0, 0.001 * len(response))


def exact_match(response: str, ground_truth: str, extra: dict) -> dict:
    """Dict return: score, acc and an extra metric."""
    hit = response.strip().endswith(ground_truth)
    return {"score": 1.0 if hit else 0.0, "acc": hit, "chars": float(len(response))}


def sleeps_when_asked(response: str, ground_truth: str, extra: dict) -> float:
    """Sleeps forever on rows whose extra has sleep=True; 0.5 otherwise."""
    while extra.get("sleep"):
        time.sleep(3600)
    return 0.5


def sleeps_forever(response: str, ground_truth: str, extra: dict) -> float:
    while True:
        time.sleep(3600)


def raises_when_asked(response: str, ground_truth: str, extra: dict) -> float:
    if extra.get("boom"):
        raise RuntimeError("boom from the reward function")
    return 1.0


def returns_string(response: str, ground_truth: str, extra: dict) -> str:
    return "1.0"


def returns_dict_without_score(response: str, ground_truth: str, extra: dict) -> dict:
    return {"reward": 1.0}


def returns_dict_with_text_score(response: str, ground_truth: str, extra: dict) -> dict:
    return {"score": "1.0"}


def wrong_arity(response: str) -> float:
    return 0.0


not_callable = 3


def exits_when_asked(response: str, ground_truth: str, extra: dict) -> float:
    """Kills its own worker process on rows whose extra has exit=True."""
    if extra.get("exit"):
        import os

        os._exit(3)
    return 1.0


def fails_one_way_on_the_dummy_another_on_data(response: str, ground_truth: str, extra: dict) -> float:
    """KeyError on the start-up dummy item (no extra fields), ZeroDivisionError on every real row."""
    return extra["kind"] / 0


def calls_sys_exit(response: str, ground_truth: str, extra: dict) -> float:
    """sys.exit() on rows whose extra has exit=True: SystemExit, not an Exception."""
    if extra.get("exit"):
        import sys

        sys.exit(3)
    return 1.0


def echoes_index(response: str, ground_truth: str, extra: dict) -> float:
    """extra["i"], after sleeping extra.get("slow", 0) seconds."""
    time.sleep(extra.get("slow", 0))
    return float(extra["i"])


def draws(response: str, ground_truth: str, extra: dict) -> dict:
    """Random draws: Python's random and numpy's global generator."""
    import random

    import numpy

    return {"score": random.random(), "numpy": float(numpy.random.random())}


def batched_judge(responses: list, ground_truths: list, extras: list) -> list:
    """A batched function: the batch's size in a metric, a dict per response; NaN where the
    extra asks for it (a bad value for that response alone), or a sleep or a raise for the batch."""
    if any(extra.get("sleep") for extra in extras):
        time.sleep(3600)
    if any(extra.get("boom") for extra in extras):
        raise RuntimeError("the judge is down")
    return [{"score": float(len(r)), "acc": r.endswith(g), "batch": float(len(responses))}
            if not extra.get("nan") else float("nan") for r, g, extra in zip(responses, ground_truths, extras)]


def batched_wrong_length(responses: list, ground_truths: list, extras: list) -> list:
    return [1.0] * (len(responses) + 1)


def forks_and_returns_in_the_child(response: str, ground_truth: str, extra: dict) -> float:
    """A sandbox with a bug: its child returns (or raises) instead of calling os._exit."""
    import os

    pid = os.fork()
    if pid == 0:
        if extra.get("child_raises"):
            raise RuntimeError("the sandboxed code failed")
        return -5.0
    os.waitpid(pid, 0)
    return float(extra["i"])


def reads_stdout_encoding(response: str, ground_truth: str, extra: dict) -> float:
    """Code that picks a codec from sys.stdout, as many libraries do."""
    import sys

    return 1.0 if sys.stdout.encoding.lower() == "utf-8" else 0.0


def confidence_when_given(response: str, ground_truth: str, extra: dict) -> dict:
    """A judge whose confidence metric has no value where the row gives none (None, not a bad value)."""
    return {"score": 0.25 if response.endswith(ground_truth) else -0.25, "confidence": extra.get("confidence")}


def runs_a_multiprocessing_pool(response: str, ground_truth: str, extra: dict) -> float:
    """A sandbox that runs code in a multiprocessing pool; leaving ``with`` terminates its children
    (SIGTERM), right after they start when the work is short."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(2) as pool:
        return float(sum(pool.map(len, [response, ground_truth])))


def terminates_its_child(response: str, ground_truth: str, extra: dict) -> float:
    """A sandbox that stops its child process with ``terminate()`` (SIGTERM) and waits for it."""
    import multiprocessing
    import time

    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,))
    child.start()
    child.terminate()
    child.join()
    return 1.0 if child.exitcode == -15 else 0.0


def terminates_its_group(response: str, ground_truth: str, extra: dict) -> float:
    """Starts a program (its pid to extra["pid_file"]), then SIGTERMs its own process group, as a
    function that cleans up after itself with os.killpg(0, ...) does."""
    import os
    import signal
    import subprocess

    if "pid_file" not in extra:  # (the scorer's start-up test item)
        return 1.0
    child = subprocess.Popen(["sleep", "60"], start_new_session=True)  # not in the group: left to the worker's end
    with open(extra["pid_file"], "w") as handle:
        handle.write(str(child.pid))
    os.killpg(0, signal.SIGTERM)
    return 1.0
