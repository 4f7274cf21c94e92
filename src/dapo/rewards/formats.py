"""Format rewards to list in ``reward.functions``, as R1-Zero-style runs add one to the correctness reward.

``r1_format`` (``{path: dapo.rewards.formats:r1_format, weight: 0.1}``): 1.0 for a response in
DeepSeek-R1-Zero's format (``data.template=r1``), ``<think> reasoning </think> <answer> answer </answer>``
and nothing after it, else 0.0 -- the format reward of the R1 paper and of open-r1's and TRL's GRPO examples.
Each tag appears once, in that order, with blank space alone between the two blocks and after the
answer's; the answer is not blank. A response whose prompt opened the thinking (a chat template or
prefill ending in ``<think>``, which the response continues) is in the format without its own
``<think>``. Linear string scanning, no regular-expression backtracking.
"""

from __future__ import annotations

from typing import Any

_TAGS = ("<think>", "</think>", "<answer>", "</answer>")


def r1_format(response: str, ground_truth: str, extra: dict[str, Any]) -> float:
    """1.0 if ``response`` is ``[<think>] ... </think> <answer> ... </answer>`` (module rules), else 0.0."""
    text = response.strip()
    counts = [text.count(tag) for tag in _TAGS]
    opened = text.startswith("<think>")
    if counts != [int(opened), 1, 1, 1] or not text.endswith("</answer>"):
        return 0.0
    thinking_end = text.index("</think>")
    answer_start = text.index("<answer>")
    between = text[thinking_end + len("</think>") : answer_start]
    answer = text[answer_start + len("<answer>") : -len("</answer>")]
    return 1.0 if thinking_end < answer_start and not between.strip() and answer.strip() else 0.0
