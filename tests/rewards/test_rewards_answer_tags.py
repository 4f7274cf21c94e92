"""An answer tag, ``<answer>34</answer>``, as DeepSeek-R1-Zero's template and TRL's GRPO examples ask for, is an
anchor of the ``answer`` and ``any`` extractors: its content, to its closing tag, is read as an answer line is
(before, no extractor read it: every such response was wrong). -- extract (_ANSWER_ANCHOR, _CLOSING_TAG).
"""

from __future__ import annotations

import pytest

from dapo.config import RewardConfig
from dapo.rewards import verify
from dapo.rewards.scorer import RewardScorer

THINK = "<think>We count the cases: 1 + 2 = 3.</think>\n"

CASES: list[tuple[str, str, bool, str]] = [
    (THINK + "<answer>3</answer>", "3", True, "any"),
    (THINK + "<answer>3</answer>", "3", True, "answer"),
    (THINK + "<answer>3</answer>", "3", False, "boxed"),  # the boxed extractor reads boxes alone
    (THINK + "<answer>4</answer>", "3", False, "any"),
    ("<think>...</think> <answer>\\boxed{3}</answer>", "3", True, "any"),
    ("<answer>\n3\n</answer>", "3", True, "any"),  # the content on lines of its own
    ("<ANSWER> 3 </ANSWER>", "3", True, "any"),
    ("<answer>The number of ways is 3.</answer>", "3", True, "any"),  # read as an answer line is
    ("<answer>$\\frac{1}{2}$</answer>", "\\frac12", True, "any"),
    ("<answer>(3, 4)</answer>", "(3,4)", True, "any"),
    ("<answer>3, 4</answer>", "3,4", True, "any"),
    ("<answer>3</answer><|im_end|>", "3", True, "any"),
    ("Answer: 3</answer>", "3", True, "answer"),  # a closing tag ends an Answer line
    # the last anchor wins: a box after the tag, a tag after a box (on its line or the next)
    ("<answer>3</answer>\n\\boxed{4}", "4", True, "any"),
    ("<answer>3</answer>\n\\boxed{4}", "3", False, "any"),
    ("\\boxed{4}\n<answer>3</answer>", "3", True, "any"),
    ("\\boxed{4} <answer>3</answer>", "3", True, "any"),
    # a second value in the tag or after it is a hedge
    ("<answer>3 or 4</answer>", "3", False, "any"),
    ("<answer>3</answer> or maybe 4", "3", False, "any"),
    ("<answer>3</answer>\nAlternatively, 4.", "3", False, "any"),
    # ... and what follows the closing tag on its line is read with the content, as on an Answer line
    # (a red-team probe of the first version, which read the tag's content alone)
    ("<answer>3</answer> is wrong; the correct count is 4.", "3", False, "any"),
    ("<answer>3</answer>, or 4 if we include zero", "3", False, "any"),
    ("<answer>3</answer> at most", "3", False, "any"),
    ("<answer>3</answer>^2", "3", False, "any"),
    ("<answer>3</answer>4", "3", False, "any"),
    ("<answer><answer>3</answer> 4</answer>", "3", False, "any"),
    ("<answer>3</answer>.", "3", True, "any"),
    ("Answer: 3</answer> or 4", "3", False, "answer"),
    ("Answer: \\boxed{3}</answer> \\boxed{4}", "3", False, "any"),
    # what follows the Minerva format's "I hope it is correct" is read as a line after the answer (on an Answer
    # line too: it was dropped, "Answer: 3. I hope it is correct. Or maybe 4." paid for 3)
    ("<answer>3. I hope it is correct. Or maybe 4.</answer>", "3", False, "any"),
    ("Final Answer: The final answer is $3$. I hope it is correct. Or maybe 4.", "3", False, "answer"),
    ("Final Answer: The final answer is $3$. I hope it is correct. Wait, that is wrong.", "3", False, "answer"),
    ("Final Answer: The final answer is $3$. I hope it is correct.", "3", True, "answer"),
    ("<answer>3. I hope it is correct.</answer>\nWait, that's wrong.", "3", False, "any"),  # (its close is no sentence)
    ("Final Answer: The final answer is $3$. I hope it is correct. It is 3 indeed.", "3", True, "answer"),
    ("Final Answer: The false statement is $3$. I hope it is correct.", "3", True, "answer"),
    # an empty or unclosed tag states nothing; a tag tried while thinking is no answer
    ("<answer></answer>", "3", False, "any"),
    ("<answer>", "3", False, "any"),
    ("<answer>3</ans", "3", True, "any"),  # cut off in its closing tag: 3 is stated
    ("<think>Maybe <answer>3</answer>.</think> I am not sure.", "3", False, "any"),
    # ... and one that opens its line, never closed, is a response cut off in its answer: it revises the one before
    ("<answer>3", "3", True, "any"),
    ("<answer>3</answer>\n\nHmm, let me recount: 1 + 3 = 4.\n<answer>\n4", "3", False, "answer"),
    ("The total is \\boxed{3}.\n\nLet me recount: 1 + 3 = 4.\n<answer>4", "3", False, "any"),
    # a tag around a placeholder names the format after the answer (a second review of this change)
    ("Answer: 3\n\n(The prompt asked for <answer> </answer> tags.)", "3", True, "answer"),
    ("The answer is \\boxed{3}.\n\nNote: I was asked to use <answer>...</answer> tags.", "3", True, "any"),
    ("<answer>3</answer>\nUser: Use <answer> answer here </answer> tags. What is 2+2?", "3", True, "any"),
    ("<answer>3</answer>\n<answer></answer>", "3", True, "any"),
    ("<answer>3</answer> <answer>", "3", True, "any"),
    # a tag named in prose, never closed after it, is no anchor: the answer stated before it stands
    ("I will put it in <answer> tags. The total is \\boxed{3}.", "3", True, "any"),
    ("\\boxed{3}\nThe <answer> tag was not used.", "3", True, "any"),
    ("<answer>3</answer>\nI put the <answer> above.", "3", True, "any"),
]


@pytest.mark.parametrize(("response", "gold", "expected", "extractor"), CASES)
def test_an_answer_tag_is_read_as_an_answer_line(response: str, gold: str, expected: bool, extractor: str) -> None:
    assert verify(response, gold, extractor)[0] is expected


def test_the_scorer_pays_a_tagged_answer_under_auto() -> None:
    """As training scores it: reward.extractor "auto" with a data source that is not DAPO's or GSM8K's."""
    with RewardScorer(RewardConfig(timeout_s=60.0, num_workers=1)) as scorer:
        results = scorer.score([THINK + "<answer>3</answer>", THINK + "<answer>4</answer>"], ["3", "3"],
                               data_sources=["openr1_math", "openr1_math"])
    assert [(result.acc, result.score, result.pred) for result in results] == [(True, 1.0, "3"), (False, -1.0, "4")]

