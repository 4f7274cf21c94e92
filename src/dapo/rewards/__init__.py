"""Rule-based rewards: the built-in math verifier and pluggable user reward functions.

- ``extract``: the final answer behind the last ``Answer:`` line, ``<answer>`` tag or ``\\boxed{}``
  (``boxes``: the boxes; ``answer_text``: the extracted answer and the presentation stripped from it;
  ``answer_tags``: which ``<answer>`` tags state an answer; ``unicode_math``: Unicode maths as LaTeX;
  ``restatements``: where a stated value ends, at a unit, a counted noun or a LaTeX constant, and "that
  is" after it).
- ``equivalence``: exact integers in pure string code (``number_forms``), exact rationals
  (``exact_numbers``), lists and sets (``answer_lists``), units (``units``); math-verify for
  everything else (``math_verify_call``).
- ``inequalities``: ``x<-1 or x>2`` as the interval union it states (one answer, not a hedge).
- ``verifier``: the policy between them; :func:`verify` for one response, in-process.
- ``user_functions``: ``file.py:fn`` / ``pkg.mod:fn`` loading and return-value checks.
- ``formats``: ``r1_format``, a format reward to list in ``reward.functions`` (R1-Zero's layout).
- ``worker`` / ``pool``: scoring processes with a hard, kill-enforced per-item deadline.
- ``scorer``: :class:`RewardScorer`, the batch API the trainer uses.
"""

from dapo.rewards.scorer import RewardScorer
from dapo.rewards.types import RewardResult
from dapo.rewards.user_functions import RewardFunctionError, load_reward_function
from dapo.rewards.verifier import verify

__all__ = [
    "RewardFunctionError",
    "RewardResult",
    "RewardScorer",
    "load_reward_function",
    "verify",
]
