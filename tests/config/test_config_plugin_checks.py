"""A plugin's parameters against the trainer's positional call (dapo.config.plugin_checks)."""

from __future__ import annotations

import pytest

from dapo.config import ConfigError
from dapo.config.plugin_checks import check_callable

ESTIMATOR_CALL = ("scores", "group_ids", "eps")
LOSS_CALL = ("logprobs", "old_logprobs", "advantages", "response_mask")


def test_verl_names_in_their_places_are_taken_and_out_of_them_refused():
    def in_place(scores, index, epsilon):  # verl's names for the group ids and eps, where the trainer passes them
        return scores

    def verl_loss(log_prob, old_log_prob, advantages, response_mask, **kwargs):
        return log_prob

    check_callable("algorithm.advantage='in_place'", in_place, ESTIMATOR_CALL, ())
    check_callable("algorithm.policy_loss='verl_loss'", verl_loss, LOSS_CALL, ("clip_ratio_low",))

    def shifted(scores, epsilon, index):  # eps would hold the group ids
        return scores

    def old_first(old_log_prob, log_prob, advantages, response_mask, **kwargs):
        return log_prob

    with pytest.raises(ConfigError, match=r"takes 'epsilon' as its argument 2, where the trainer passes 'group_ids'"):
        check_callable("algorithm.advantage='shifted'", shifted, ESTIMATOR_CALL, ())
    with pytest.raises(ConfigError, match=r"takes 'old_log_prob' as its argument 1, where the trainer passes 'logprobs'"):
        check_callable("algorithm.policy_loss='old_first'", old_first, LOSS_CALL, ("clip_ratio_low",))


def test_a_plugin_that_cannot_take_the_trainer_s_call_is_refused_with_the_argument_it_misplaces():
    """A function of no parameters, or one requiring a parameter the trainer does not pass, failed
    at the first step's call, after the model and the data had loaded."""
    def takes_nothing():
        return 0.0

    def wants_more(scores, group_ids, eps, baseline):
        return scores

    def swapped(group_ids, scores, eps):
        return scores

    for fn in (takes_nothing, wants_more):
        with pytest.raises(ConfigError, match=r"cannot be called as the trainer calls it, fn\(scores, group_ids, eps\)"):
            check_callable(f"algorithm.advantage={fn.__name__!r}", fn, ESTIMATOR_CALL, ())
    with pytest.raises(ConfigError, match=r"takes 'group_ids' as its argument 1, where the trainer passes 'scores'.*"
                                          r"\(group_ids is the trainer's argument 2\)"):
        check_callable("algorithm.advantage='swapped'", swapped, ESTIMATOR_CALL, ())
