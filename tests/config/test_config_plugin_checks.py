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
