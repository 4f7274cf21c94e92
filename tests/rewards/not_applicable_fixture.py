"""Reward functions for a mixed-task dataset, TRL's way: each returns None on the items it does
not apply to (the other task's), as TRL's GRPOTrainer documents for multi-task data."""

from __future__ import annotations


def math_reward(response: str, ground_truth: str, extra: dict) -> dict | None:
    """Math items only: +1 / -1 by the last word, with acc."""
    if extra.get("data_source") != "math":
        return None
    hit = response.split()[-1] == ground_truth
    return {"score": 1.0 if hit else -1.0, "acc": hit}


def code_reward(response: str, ground_truth: str, extra: dict) -> float | dict:
    """Code items only: +1 / -1 by whether the response holds the ground truth; a dict whose
    score is None elsewhere (the dict form of "does not apply"), with a metric all the same."""
    if extra.get("data_source") != "code":
        return {"score": None, "chars": float(len(response))}
    return 1.0 if ground_truth in response else -1.0


def always_none(response: str, ground_truth: str, extra: dict) -> None:
    """Applies to nothing: a function for a task the data does not hold (yet)."""
    return None


def batched_math(responses: list, ground_truths: list, extras: list) -> list:
    """math_reward, batched: None in the list for the items it does not apply to."""
    return [math_reward(r, g, e) for r, g, e in zip(responses, ground_truths, extras)]


def returns_nan(response: str, ground_truth: str, extra: dict) -> float:
    return float("nan")


def returns_a_list(response: str, ground_truth: str, extra: dict) -> list:
    """A batched function configured without batch_size: it gets one response, returns a list."""
    return [1.0 for _ in response.split()]


def reserved_metric(response: str, ground_truth: str, extra: dict) -> dict:
    return {"score": 1.0, "not_applicable": 0.0}


def acc_without_score(response: str, ground_truth: str, extra: dict) -> dict:
    return {"score": None, "acc": True}


def judge(response: str, ground_truth: str, extra: dict) -> float | None:
    """Fails on items whose data_source says so, declines the others it says so of."""
    source = extra.get("data_source", "")
    if "judge_fails" in source:
        raise ConnectionError("judge is down")
    return None if "judge_declines" in source or source == "none" else 1.0


def fmt(response: str, ground_truth: str, extra: dict) -> float | None:
    source = extra.get("data_source", "")
    if "fmt_fails" in source:
        raise ValueError("fmt failed")
    return None if source == "none" else 1.0
