"""pi_old for the update: from the rollout, or recomputed for fresh samples and the carry (from a mutation audit:
each test kills a mutant the suite let through)."""

from __future__ import annotations

import numpy as np
import pytest

from dapo.trainer.batch import Sample
from dapo.trainer.old_logprobs import assign_old_logprobs
from dapo.trainer.update_stats import LogprobPass


class FakePolicy:

    def __init__(self):
        self.calls = []

    def compute_logprobs(self, samples):
        self.calls.append([s.response_ids[0] for s in samples])
        return LogprobPass(logprobs=[np.full(len(s.response_ids), -float(s.response_ids[0]), np.float32)
                                     for s in samples], tokens=float(sum(len(s.response_ids) for s in samples)))

def sample(first: int, carried: bool = False, old=None) -> Sample:
    return Sample(0, "u", [1], [first, 3], [-0.25, -0.5], False, carried_over=carried,
                  old_logprobs=old if old is not None else [])

def test_rollout_pi_old_is_the_rollout_log_probs_with_no_pass():
    batch, policy = [sample(10), sample(11, carried=True)], FakePolicy()
    assert assign_old_logprobs(batch, [sample(12)], policy, from_rollout=True, on_policy=False) is None
    assert policy.calls == [] and all(s.old_logprobs is s.rollout_logprobs for s in batch)

@pytest.mark.parametrize("on_policy", [False, True])
def test_recompute_takes_the_fresh_samples_and_the_carry_and_keeps_a_carried_samples_own(on_policy):
    fresh, held = sample(10), sample(11, carried=True, old=[-7.0, -7.0])
    from_rollout_step = sample(13, carried=True)  # surplus of a step run with old_logprobs=rollout: no pi_old
    carry = [sample(12)]
    policy = FakePolicy()
    old = assign_old_logprobs([fresh, held, from_rollout_step], carry, policy, from_rollout=False, on_policy=on_policy)
    assert carry[0].old_logprobs.tolist() == [-12.0, -12.0]  # (O3) this step's policy, before the update
    assert held.old_logprobs.tolist() == [-7.0, -7.0]  # (O5) its own step's, not recomputed
    assert from_rollout_step.old_logprobs.tolist() == [-0.25, -0.5]  # (O2, O9) its sampling policy's
    if on_policy:  # (O4, O7, O10) the update's own forward is pi_old: no pass, fresh samples left without
        assert policy.calls == [[12]] and old is None and len(fresh.old_logprobs) == 0
    else:  # (O6) the separate pass over the fresh samples only, its diagnostics returned
        assert policy.calls == [[12], [10]] and fresh.old_logprobs.tolist() == [-10.0, -10.0]
        assert isinstance(old, LogprobPass) and old.tokens == 2.0
