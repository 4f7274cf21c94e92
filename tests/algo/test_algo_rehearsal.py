"""The rehearsal that runs the selected plugins on a synthetic batch before a run loads."""

from __future__ import annotations

import pytest
import torch

from dapo.algo import LOSS_AGG_MODES, POLICY_LOSSES, PluginError, compute_policy_loss
from dapo.algo.rehearsal import rehearse_plugins

SETTINGS = dict(advantage_eps=1e-6, clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=None, norm_const=3.0,
                tis_cap=None)


def test_the_built_in_entries_are_not_rehearsed(monkeypatch):
    monkeypatch.setattr("dapo.algo.rehearsal.call_policy_loss", None)  # a call would fail
    rehearse_plugins("grpo", "decoupled_clip", "token-mean", **SETTINGS)


def test_a_plugin_loss_gets_the_trainer_s_arguments_and_its_backward_runs(monkeypatch):
    seen = {}

    def recording(logprobs, old_logprobs, advantages, response_mask, **kwargs):
        seen.update(kwargs, shapes=(logprobs.shape, old_logprobs.shape, advantages.shape, response_mask.shape))
        loss, stats = compute_policy_loss(logprobs, old_logprobs, advantages, response_mask, **kwargs)
        seen["grad"] = logprobs
        return loss, stats

    monkeypatch.setitem(POLICY_LOSSES, "recording", recording)
    rehearse_plugins("grpo", "recording", "token-mean", **{**SETTINGS, "tis_cap": 2.0})
    assert seen["shapes"] == ((4, 3), (4, 3), (4,), (4, 3))
    assert seen["num_tokens"] == 9.0 and seen["num_seqs"] == 4.0 and seen["norm_const"] == 3.0
    assert torch.equal(seen["importance_weights"], torch.ones(4, 3))  # tis_cap set: weights given
    assert seen["grad"].grad is not None and seen["grad"].grad.abs().sum() > 0  # backward ran


def test_a_plugin_aggregation_that_returns_no_scalar_is_named_with_when_it_was_found(monkeypatch):
    monkeypatch.setitem(LOSS_AGG_MODES, "per_seq", lambda loss, mask, tokens, seqs, const: loss.sum(-1) / tokens)
    with pytest.raises(PluginError, match=r"loss aggregation mode 'per_seq' .* returned shape \(4,\): it must return a "
                                          r"scalar .*\(found before the run loaded, on a synthetic batch"):
        rehearse_plugins("grpo", "decoupled_clip", "per_seq", **SETTINGS)
