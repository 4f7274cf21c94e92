"""dapo.rewards.formats:r1_format, the R1-Zero format reward: which responses are in the format, and the
function loaded by its module path in reward.functions, summed with the verifier's reward."""

from __future__ import annotations

import pytest

from dapo.config import RewardConfig
from dapo.rewards import RewardScorer
from dapo.rewards.formats import r1_format

CASES = [
    ("<think>1 + 2 = 3</think> <answer>3</answer>", 1.0),
    ("<think>\n1 + 2 = 3\n</think>\n<answer>\n3\n</answer>\n", 1.0),  # open-r1's line layout
    (" <think>x</think><answer>3</answer>", 1.0),  # after R1_TEMPLATE's "Assistant:"
    ("1 + 2 = 3</think> <answer>3</answer>", 1.0),  # the prompt opened the thinking
    ("<think>x</think> <answer>3</answer> Hope this helps!", 0.0),  # text after the answer
    ("<think>x</think> So: <answer>3</answer>", 0.0),  # text between the blocks
    ("<think>x</think> <answer> </answer>", 0.0),  # a blank answer
    ("<think>x</think>", 0.0),
    ("<answer>3</answer>", 0.0),  # no thinking
    ("<answer>3</answer> <think>x</think>", 0.0),
    ("<think>x</think> <answer>3</answer> <answer>4</answer>", 0.0),  # two answers
    ("<think>x <think>y</think> <answer>3</answer>", 0.0),
    ("<think>x</think> <answer>3", 0.0),  # cut off
    ("", 0.0),
]


@pytest.mark.parametrize(("response", "expected"), CASES)
def test_r1_format_pays_only_the_think_then_answer_layout(response: str, expected: float) -> None:
    assert r1_format(response, "3", {}) == expected


def test_r1_format_is_a_reward_function_by_its_module_path() -> None:
    cfg = RewardConfig(num_workers=1, timeout_s=60.0,
                       functions=[{"path": "dapo.rewards.formats:r1_format", "weight": 0.5}])
    responses = ["<think>1 + 2 = 3</think> <answer>3</answer>", "<think>1 + 2 = 4</think> <answer>4</answer>",
                 "The answer is <answer>3</answer>"]
    with RewardScorer(cfg) as scorer:
        results = scorer.score(responses, ["3"] * 3, ["r1"] * 3)
    # verifier +1/-1 (reward.extractor auto reads the tag) plus 0.5 x format
    assert [result.score for result in results] == [1.5, -0.5, 1.0]
    assert [result.extra["r1_format/score"] for result in results] == [1.0, 1.0, 0.0]
