"""Where correctness comes from, checked on what is scored: with the verifier off, ``acc`` is the
first user function's that applies (its ``"acc"``, else ``weight * score > 0``). TRL users list
reward functions in any order, and one who listed a length penalty before the accuracy function
got acc 0 on every response, unsaid: :class:`CorrectnessSourceCheck` says so, once."""

from __future__ import annotations

import logging

from dapo.rewards.types import RewardResult

logger = logging.getLogger("dapo.rewards")

RESPONSES_BEFORE_SAYING = 64  # a batch or two of all-wrong answers is a hard start, not a wrong order


class CorrectnessSourceCheck:
    """Said once: the first function judged every one of the first ``RESPONSES_BEFORE_SAYING`` or
    more responses alike while a later function's score (``weight * score > 0``) told them apart."""

    def __init__(self, labels: list[str], weights: list[float]) -> None:
        self.labels, self.weights = labels, weights
        self.done = len(labels) < 2  # one function: nothing to compare it with
        self.responses = 0
        self.acc_seen: set[bool] = set()
        self.verdicts_seen: dict[str, set[bool]] = {label: set() for label in labels[1:]}

    def observe(self, results: list[RewardResult]) -> None:
        """Take a scored batch's results (the verifier off) into account; say it once where due."""
        if self.done:
            return
        self.responses += len(results)
        self.acc_seen.update(r.acc for r in results)
        for label, weight in zip(self.labels[1:], self.weights[1:]):
            self.verdicts_seen[label].update(weight * r.extra[f"{label}/score"] > 0 for r in results
                                             if f"{label}/score" in r.extra)
        if len(self.acc_seen) > 1:
            self.done = True  # the first function tells responses apart: nothing to say
            return
        telling = [label for label, seen in self.verdicts_seen.items() if len(seen) == 2]
        if self.responses >= RESPONSES_BEFORE_SAYING and telling:
            self.done = True
            logger.warning(
                "correctness (acc: rollout/acc, avg@k, maj@k) comes from the first user function in "
                "reward.functions that applies, %s, with the verifier off; it judged all %d responses so far %s, "
                "while %s's score told them apart: if %s judges correctness, list it first (said once)",
                self.labels[0], self.responses, "right" if True in self.acc_seen else "wrong", telling[0], telling[0])
