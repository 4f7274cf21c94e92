"""pi_old: the behaviour policy's log-probs that the update's importance ratio divides by.

    r_t(theta) = pi_theta(o_t | q, o_<t) / pi_old(o_t | q, o_<t)

Three sources, by ``algorithm.old_logprobs`` and the number of updates a step makes:
  - ``rollout``: the engine's own log-probs of what it sampled (verl's rollout_log_probs);
  - ``recompute`` with one update a step: the policy is still pi_old when that update runs, so it
    takes them from its own forward pass (ratio 1; see :meth:`PolicyWorker.update`);
  - ``recompute`` with several updates a step: a separate forward pass before the first one.
Samples carried over to the next step (Dynamic Sampling's surplus) were sampled by this step's
policy: their pi_old is taken now, before it changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dapo.trainer.batch import Sample, has_logprobs
from dapo.trainer.update_stats import LogprobPass

if TYPE_CHECKING:
    from dapo.trainer.policy import PolicyWorker
    from dapo.trainer.ray_policy import RayPolicyGroup


def assign_old_logprobs(batch: list[Sample], carry: list[Sample], policy: PolicyWorker | RayPolicyGroup,
                        from_rollout: bool, on_policy: bool) -> LogprobPass | None:
    """Set ``old_logprobs`` on ``batch`` (and on ``carry``, the surplus the next step trains on);
    return the separate recompute pass's diagnostics (entropy, engine/trainer mismatch), or None
    when there was none (``from_rollout`` or ``on_policy``: the update reports them)."""
    if from_rollout:
        for sample in batch:
            sample.old_logprobs = sample.rollout_logprobs
        return None
    # Surplus carried from a step run with old_logprobs=rollout (a checkpoint resumed with
    # recompute) holds no forward of its sampling policy: its behaviour log-probs are that
    # policy's, where a recompute now would take the next one's.
    for sample in batch:
        if sample.carried_over and not has_logprobs(sample.old_logprobs):
            sample.old_logprobs = sample.rollout_logprobs
    # The surplus the next step trains on was sampled by this step's policy: its pi_old is taken
    # now, before the update (the next step's recompute or on-policy update would take the next
    # policy's, and the ratio would ignore a step of training).
    if carry:
        for sample, logprobs in zip(carry, policy.compute_logprobs(carry).logprobs):
            sample.old_logprobs = logprobs
    if on_policy:
        return None
    fresh = [sample for sample in batch if not (sample.carried_over and has_logprobs(sample.old_logprobs))]
    old = policy.compute_logprobs(fresh)  # carried-over samples hold theirs, from their own step
    for sample, logprobs in zip(fresh, old.logprobs):
        sample.old_logprobs = logprobs
    return old
