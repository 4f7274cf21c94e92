"""Per-step metrics: each number is over the population its description names."""

from __future__ import annotations

from dapo.trainer.batch import Sample
from dapo.trainer.sampler import SamplingReport
from dapo.trainer.step_metrics import rollout_metrics, update_metrics


def test_truncation_counts_cut_responses_not_ones_that_stopped_on_their_last_allowed_token():
    stopped_at_limit = Sample(0, "a", [1], [5, 6, 7, 2], [0.0] * 4, truncated=False)  # EOS (2) was token 4
    cut = Sample(0, "a", [1], [5, 6, 7, 8], [0.0] * 4, truncated=True)
    report = SamplingReport(gen_rounds=1, groups_generated=1, groups_kept=1, generated=[stopped_at_limit, cut])
    assert rollout_metrics(report, [stopped_at_limit, cut], [])["rollout/truncation_rate"] == 0.5


def test_a_step_without_a_trained_batch_logs_no_loss_or_reward_figures_instead_of_zeros():
    all_wrong = [Sample(0, "a", [1], [5], [0.0], truncated=False, score=-1.0, reward=-1.0)] * 2
    report = SamplingReport(gen_rounds=4, groups_generated=1, groups_all_wrong=1, generated=all_wrong)
    metrics = {**rollout_metrics(report, [], []), **update_metrics([], [], lr=1e-6)}
    assert metrics["actor/response_tokens"] == 0.0
    # a trained batch counts its responses' tokens, carried-over and overlong-filtered ones included
    batch = [Sample(0, "a", [1], [5, 6, 7], [0.0] * 3, truncated=True, loss_weight=0.0),
             Sample(0, "a", [1], [5] * 5, [0.0] * 5, truncated=False, carried_over=True)]
    assert update_metrics([], batch, lr=1e-6)["actor/response_tokens"] == 8.0
    assert metrics["rollout/score_mean"] == -1.0 and metrics["actor/updates"] == 0.0
    absent = ("rollout/reward_mean", "rollout/overlong_penalty_mean", "actor/loss", "actor/pg_loss",
              "actor/clip_frac_low", "actor/grad_norm", "actor/advantage_abs_mean")
    assert not [key for key in absent if key in metrics]
