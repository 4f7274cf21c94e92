"""What a score is."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RewardResult:
    score: float  # the reward used for advantages (before overlong shaping)
    acc: bool  # correctness; what dynamic sampling filters on by default
    pred: str = ""  # the extracted answer, shortened for logs ("" when none was found)
    answer: str = ""  # the extracted answer in full (what maj@k votes on)
    # reward.verifier=math_dapo: the answer is "" from an Answer: line that normalises to "", not
    # from a missing one (maj@k with exact votes counts "" apart from [INVALID], as the reference)
    empty_answer_line: bool = False
    timed_out: bool = False  # some scorer ran past its deadline (it scores weight * incorrect_score)
    error: bool = False  # some scorer raised or returned a wrong type (the same)
    extra: dict[str, float] = field(default_factory=dict)  # extra metrics from user functions
    failed: list[str] = field(default_factory=list)  # labels of the scorers that timed out or failed on it
    # the scorer whose failure left acc unmeasured (False whatever the answer): math-verify with the
    # verifier on, else the first user function that applies (scorer.py); None: acc was measured
    unmeasured_by: str | None = None
