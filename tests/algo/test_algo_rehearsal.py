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
        if not seen:  # the whole batch's call (then each half's: do they add up?)
            seen.update(kwargs, shapes=(logprobs.shape, old_logprobs.shape, advantages.shape, response_mask.shape))
        loss, stats = compute_policy_loss(logprobs, old_logprobs, advantages, response_mask, **kwargs)
        seen.setdefault("grad", logprobs)
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


def test_a_loss_normalised_by_its_own_micro_batch_is_refused(monkeypatch):
    """A plugin loss that takes a masked mean over the tokens it is given (not the mini-batch's
    num_tokens) trained with no warning: with trainer.micro_batch_tokens=64 a helper's run got a
    gradient norm 12x the built-in's. The rehearsal's halves, each given the whole batch's
    normalisers, must add up to the whole batch's loss, as the built-in entries' do."""
    def local_mean(logprobs, old_logprobs, advantages, response_mask, **kwargs):
        loss, stats = compute_policy_loss(logprobs, old_logprobs, advantages, response_mask, **kwargs)
        per_token = -advantages[:, None] * torch.exp(logprobs - old_logprobs)
        return (per_token * response_mask).sum() / response_mask.sum(), stats

    def global_mean(logprobs, old_logprobs, advantages, response_mask, **kwargs):
        per_token = -advantages[:, None] * torch.exp(logprobs - old_logprobs)
        _, stats = compute_policy_loss(logprobs, old_logprobs, advantages, response_mask, **kwargs)
        return (per_token * response_mask).sum() / kwargs["num_tokens"], stats

    monkeypatch.setitem(POLICY_LOSSES, "local_mean", local_mean)
    monkeypatch.setitem(POLICY_LOSSES, "global_mean", global_mean)
    monkeypatch.setitem(LOSS_AGG_MODES, "own_tokens", lambda loss, mask, tokens, seqs, const: (loss * mask).sum() / mask.sum())
    with pytest.raises(PluginError, match=r"policy loss 'local_mean', .*local_mean \(.*\), does not add up over "
                                          r"micro-batches: its losses over the batch's two halves, each given the whole "
                                          r"batch's num_tokens=9 and num_seqs=4 .* divide by num_tokens or num_seqs"):
        rehearse_plugins("grpo", "local_mean", "token-mean", **SETTINGS)
    with pytest.raises(PluginError, match=r"loss aggregation mode 'own_tokens', .* does not add up over micro-batches"):
        rehearse_plugins("grpo", "decoupled_clip", "own_tokens", **SETTINGS)
    rehearse_plugins("grpo", "global_mean", "token-mean", **SETTINGS)


def test_an_exception_is_refused_unless_it_names_a_device(monkeypatch):
    def float_mask_index(logprobs, old_logprobs, advantages, response_mask, **kwargs):
        return logprobs[response_mask].sum(), None  # the mask is float32: an IndexError on any batch

    def moves_to_gpu(logprobs, *args, **kwargs):
        raise RuntimeError("Expected all tensors to be on the same device, but found cuda:0 and cpu")

    monkeypatch.setitem(POLICY_LOSSES, "float_mask_index", float_mask_index)
    monkeypatch.setitem(POLICY_LOSSES, "moves_to_gpu", moves_to_gpu)
    with pytest.raises(PluginError, match=r"raised IndexError: tensors used as indices .* before the run loaded"):
        rehearse_plugins("grpo", "float_mask_index", "token-mean", **SETTINGS)
    with pytest.warns(UserWarning, match=r"raised RuntimeError: Expected all tensors to be on the same device.* the "
                                         r"run goes on"):
        rehearse_plugins("grpo", "moves_to_gpu", "token-mean", **SETTINGS)


def test_an_estimator_is_rehearsed_on_groups_of_rollout_n(monkeypatch):
    """Groups of 2 whatever rollout.n: an estimator written for the run's group size (a view(-1, n))
    raised on them."""
    from dapo.algo import ADVANTAGE_ESTIMATORS

    def by_view(scores, group_ids, eps):
        grouped = scores.view(-1, 8)
        return (grouped - grouped.mean(-1, keepdim=True)).reshape(-1)

    monkeypatch.setitem(ADVANTAGE_ESTIMATORS, "by_view", by_view)
    rehearse_plugins("by_view", "decoupled_clip", "token-mean", **SETTINGS, group_size=8)
    with pytest.raises(PluginError, match=r"by_view.* raised RuntimeError: shape '\[-1, 8\]' is invalid"):
        rehearse_plugins("by_view", "decoupled_clip", "token-mean", **SETTINGS)


def test_the_rehearsal_has_the_groups_and_responses_a_run_may_train(monkeypatch):
    """Without Dynamic Sampling a group's rewards may all be equal, and overlong filtering masks a
    response whole: an estimator dividing by the group's std without eps, and a loss taking each
    response's token mean, passed the rehearsal and broke mid-run, after the model and a rollout."""
    from dapo.algo import ADVANTAGE_ESTIMATORS

    def std_no_eps(scores, group_ids, eps):
        advantages = torch.empty_like(scores)
        for group in group_ids.unique():
            members = group_ids == group
            advantages[members] = (scores[members] - scores[members].mean()) / scores[members].std()
        return advantages

    def per_response_mean(logprobs, old_logprobs, advantages, response_mask, **kwargs):
        _, stats = compute_policy_loss(logprobs, old_logprobs, advantages, response_mask, **kwargs)
        means = (-advantages[:, None] * logprobs * response_mask).sum(-1) / response_mask.sum(-1)
        return means.sum() / kwargs["num_seqs"], stats

    monkeypatch.setitem(ADVANTAGE_ESTIMATORS, "std_no_eps", std_no_eps)
    monkeypatch.setitem(POLICY_LOSSES, "per_response_mean", per_response_mean)
    rehearse_plugins("std_no_eps", "per_response_mean", "token-mean", **SETTINGS)  # neither case in the batch
    with pytest.raises(PluginError, match=r"std_no_eps.*NaN or inf.*its second group's rewards all equal "
                                          r"\(algorithm.dynamic_sampling=false trains such groups\)"):
        rehearse_plugins("std_no_eps", "decoupled_clip", "token-mean", **SETTINGS, constant_group=True)
    with pytest.raises(PluginError, match=r"per_response_mean.* returned the loss nan \(one of its responses wholly "
                                          r"masked, as overlong filtering masks them\)"):
        rehearse_plugins("grpo", "per_response_mean", "token-mean", **SETTINGS, masked_response=True)


def _with_extra(extra_sums):
    """A loss that returns the built-in's, with ``extra_sums`` as its own metrics."""
    def loss_with_metrics(logprobs, old_logprobs, advantages, response_mask, **kwargs):
        loss, stats = compute_policy_loss(logprobs, old_logprobs, advantages, response_mask, **kwargs)
        stats.extra_sums = extra_sums(logprobs, response_mask) if callable(extra_sums) else extra_sums
        return loss, stats
    return loss_with_metrics


def test_a_plugin_loss_s_own_metrics_are_detached_summed_and_logged_per_token(monkeypatch):
    from dapo.algo.policy_loss import PolicyLossStats, call_policy_loss

    grad_kept = torch.tensor(2.0, requires_grad=True)
    moved = PolicyLossStats(**{name: torch.tensor(1) for name in ("token_count", "clip_low_count", "clip_high_count",
                                                                   "dual_clip_count", "approx_kl_sum", "ratio_sum")},
                            extra_sums={"x": grad_kept * 2}).cpu()
    assert not moved.extra_sums["x"].requires_grad and moved.extra_sums["x"].device.type == "cpu"
    monkeypatch.setitem(POLICY_LOSSES, "with_metrics", _with_extra(
        lambda logprobs, mask: {"neg/sum": (logprobs * mask).sum(), "ones": mask.sum()}))
    rehearse_plugins("grpo", "with_metrics", "token-mean", **SETTINGS)  # accepted
    logprobs = torch.tensor([[-1.0, -2.0, -3.0], [-4.0, -5.0, -6.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    kwargs = dict(clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=None, loss_agg_mode="token-mean",
                  num_tokens=3.0, num_seqs=2.0, norm_const=None, importance_weights=None)
    _, stats = call_policy_loss("with_metrics", logprobs, logprobs.detach(), torch.tensor([1.0, -1.0]), mask, **kwargs)
    assert not stats.extra_sums["neg/sum"].requires_grad  # no graph kept across micro-batches
    moved = stats.cpu()  # (a Ray rank hands the driver CPU sums: the plugin's travel with the built-in ones)
    assert moved.extra_sums.keys() == stats.extra_sums.keys() and torch.equal(moved.extra_sums["ones"], mask.sum())
    assert torch.equal(moved.token_count, stats.token_count)
    other = PolicyLossStats(**{name: torch.tensor(1) for name in ("token_count", "clip_low_count", "clip_high_count",
                                                                   "dual_clip_count", "approx_kl_sum", "ratio_sum")},
                            extra_sums={"ones": torch.tensor(1.0), "other": torch.tensor(4.0)})
    metrics = PolicyLossStats.total([stats, other]).to_metrics()  # 3 + 1 tokens
    assert metrics["plugin/neg/sum"] == pytest.approx(-7.0 / 4)  # (-1 - 2 - 4) over 4 tokens
    assert metrics["plugin/ones"] == pytest.approx(4.0 / 4) and metrics["plugin/other"] == pytest.approx(1.0)
    assert metrics["clip_frac_low"] == pytest.approx(0.25)  # the built-in fields add up as before


@pytest.mark.parametrize(("extra_sums", "said"), [
    ({"a b": torch.tensor(1.0)}, r"an extra_sums name 'a b': letters, digits"),
    ({"": torch.tensor(1.0)}, r"an extra_sums name ''"),
    ({"per_token": torch.ones(4, 3)}, r"extra_sums\['per_token'\] of shape \(4, 3\): a 0-dim tensor"),
    ({"number": 3.0}, r"extra_sums\['number'\] of a float: a 0-dim tensor"),
    ([torch.tensor(1.0)], r"extra_sums of type list: a dict")])
def test_a_plugin_loss_s_metrics_that_cannot_be_logged_are_named_before_the_run(monkeypatch, extra_sums, said):
    monkeypatch.setitem(POLICY_LOSSES, "bad_metrics", _with_extra(extra_sums))
    with pytest.raises(PluginError, match=r"policy loss 'bad_metrics' .* returned " + said):
        rehearse_plugins("grpo", "bad_metrics", "token-mean", **SETTINGS)


def test_a_plugin_loss_that_takes_importance_weights_and_leaves_them_out_is_refused_under_tis_cap(monkeypatch):
    """Declaring the parameter passed the config's tis_cap check while the weights went unused: the
    run said it corrected the rollout/trainer mismatch and did not."""
    def ignoring(logprobs, old_logprobs, advantages, response_mask, *, importance_weights=None, **kwargs):
        return compute_policy_loss(logprobs, old_logprobs, advantages, response_mask, **kwargs)

    def using(logprobs, old_logprobs, advantages, response_mask, **kwargs):
        return compute_policy_loss(logprobs, old_logprobs, advantages, response_mask, **kwargs)

    monkeypatch.setitem(POLICY_LOSSES, "ignoring", ignoring)
    monkeypatch.setitem(POLICY_LOSSES, "using", using)
    def straight_through(logprobs, old_logprobs, advantages, response_mask, *, importance_weights=None, **kwargs):
        """The unweighted loss's value, the weighted loss's gradient: corrected, though its value is not."""
        plain, stats = compute_policy_loss(logprobs, old_logprobs, advantages, response_mask, **kwargs)
        weighted, _ = compute_policy_loss(logprobs, old_logprobs, advantages, response_mask,
                                          importance_weights=importance_weights, **kwargs)
        return plain.detach() + weighted - weighted.detach(), stats

    monkeypatch.setitem(POLICY_LOSSES, "straight_through", straight_through)
    rehearse_plugins("grpo", "straight_through", "token-mean", **{**SETTINGS, "tis_cap": 2.0})  # (was refused)
    with pytest.raises(PluginError, match=r"policy loss 'ignoring', .* takes importance_weights but neither its loss "
                                          r"nor its gradient changes with them .* algorithm.tis_cap=2 would correct "
                                          r"nothing"):
        rehearse_plugins("grpo", "ignoring", "token-mean", **{**SETTINGS, "tis_cap": 2.0})
    rehearse_plugins("grpo", "ignoring", "token-mean", **SETTINGS)  # without a cap: not checked
    rehearse_plugins("grpo", "using", "token-mean", **{**SETTINGS, "tis_cap": 2.0})  # the built-in's use of them
