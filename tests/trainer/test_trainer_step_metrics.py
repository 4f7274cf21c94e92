"""Per-step metrics: each number is over the population its description names."""

from __future__ import annotations

import math

import pytest
import torch

from dapo.algo import PolicyLossStats
from dapo.trainer import Trainer
from dapo.trainer.batch import Sample
from dapo.trainer.sampler import SamplingReport
from dapo.trainer.step_metrics import rollout_metrics, update_metrics
from dapo.trainer.update_stats import UpdateStats
from tests.trainer.conftest import tiny_config


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


def test_entropy_is_reported_when_the_first_mini_batch_has_no_loss_token(tiny_model_dir, reward_file, tmp_path):
    """Without an old-log-prob pass, entropy comes from the first update's forward. A first
    mini-batch whose every response overlong filtering masked (possible without dynamic sampling)
    has no token to report it on; the next update, still on pi_old (the empty one made no step),
    reports it instead of the step logging none."""
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "algorithm.dynamic_sampling=false",
                                  "algorithm.overlong_filtering=true", "algorithm.old_logprobs=rollout",
                                  "checkpoint.every_steps=0", "eval.every_steps=0"))
    try:
        generate_round = trainer.generate_round

        def first_groups_all_truncated(record, problems, round_index):
            samples = generate_round(record, problems, round_index)
            first_groups = sorted({s.group_id for s in samples})[: trainer.cfg.trainer.mini_batch_prompts]
            for sample in samples:  # (the others as ended: a tiny model's 12 tokens may all be truncated)
                truncated = sample.group_id in first_groups
                sample.truncated, sample.loss_weight = truncated, 0.0 if truncated else 1.0
            return samples

        expected = []
        update = trainer.policy.update

        def record_entropy_on_pi_old(mini_batch, *args, **kwargs):
            if not expected and any(s.loss_weight for s in mini_batch):
                expected.append(trainer.policy.compute_logprobs(mini_batch))
            return update(mini_batch, *args, **kwargs)

        trainer.generate_round, trainer.policy.update = first_groups_all_truncated, record_entropy_on_pi_old
        metrics = trainer.step_once().metrics
        assert metrics["actor/empty_updates"] == 1 and metrics["actor/updates"] == 1
        assert math.isclose(metrics["actor/entropy"], expected[0].entropy_sum / expected[0].tokens, rel_tol=1e-5)
    finally:
        trainer.close()


def test_a_mean_of_plus_and_minus_ones_that_is_zero_is_logged_as_zero():
    """A running mean left 8.3e-17 beside eval/score_mean's 0.0 (a ±1 user reward, half right)."""
    from dapo.rewards.types import RewardResult
    from dapo.trainer.step_metrics import reward_function_metrics

    scores = [1.0, -1.0, -1.0, 1.0, 1.0, -1.0, 1.0, -1.0, -1.0, 1.0, -1.0, 1.0]
    results = [RewardResult(0.0, False, "", "", extra={"f/score": score, "f/third": score / 3}) for score in scores]
    metrics = reward_function_metrics(results)
    assert metrics["reward/f/score"] == 0.0 and metrics["reward/f/third"] == 0.0


def test_reward_function_metrics_average_huge_values_without_overflow():
    """A sum of two finite 1e308s is inf: the mean is taken as it goes."""
    from dapo.rewards.types import RewardResult
    from dapo.trainer.step_metrics import reward_function_metrics

    results = [RewardResult(0.0, False, "", "", extra={"f/big": value}) for value in (1e308, 1e308, -1e308, 1e308)]
    assert reward_function_metrics(results) == {"reward/f/big": pytest.approx(0.5e308), "reward_failures/f": 0.0}


def test_a_reward_function_s_failures_are_counted_by_name_beside_the_mean_of_what_it_scored():
    """reward/f/score averaged the responses f scored: 0.5 while f failed on most looked healthy, and
    rollout/reward_errors sums every function's failures."""
    from dapo.rewards.types import RewardResult
    from dapo.trainer.step_metrics import reward_function_metrics

    results = [RewardResult(1.0, True, "", "", extra={"f/score": 1.0, "g/score": 0.5}),
               RewardResult(0.0, False, "", "", error=True, extra={"g/score": 0.5}, failed=["f"]),
               RewardResult(0.0, False, "", "", error=True, failed=["f", "g"]),
               RewardResult(0.0, False, "", "", timed_out=True, failed=["h", "math-verify"])]
    assert reward_function_metrics(results) == {
        "reward/f/score": 1.0, "reward/g/score": 0.5, "reward_failures/f": 2.0, "reward_failures/g": 1.0,
        "reward_failures/h": 1.0, "reward_failures/math-verify": 1.0}


def test_rollout_metrics_are_each_over_their_population_by_hand():
    """Score, accuracy, length and truncation over every generated response; reward and overlong
    penalty over the trained ones; group ratios over the groups generated."""
    def sample(group: int, length: int, score: float, truncated: bool = False, reward: float | None = None) -> Sample:
        return Sample(group, str(group), [1], [5] * length, [0.0] * length, truncated, score=score, acc=score > 0,
                      reward=score if reward is None else reward)
    trained = [sample(0, 2, 1.0), sample(0, 8, -1.0, truncated=True, reward=-1.5)]
    filtered = [sample(1, 4, -1.0), sample(1, 6, -1.0)]  # all wrong
    report = SamplingReport(gen_rounds=2, groups_generated=2, groups_kept=1, groups_all_wrong=1,
                            generated=trained + filtered)
    metrics = rollout_metrics(report, trained, [])
    assert {key: metrics[key] for key in (
        "rollout/score_mean", "rollout/acc", "rollout/response_length_mean", "rollout/response_length_max",
        "rollout/response_tokens", "rollout/truncation_rate", "rollout/reward_mean", "rollout/overlong_penalty_mean",
        "sampling/filtered_ratio", "sampling/all_wrong_ratio", "sampling/groups_trained", "sampling/gen_rounds",
    )} == pytest.approx({
        "rollout/score_mean": -0.5, "rollout/acc": 0.25, "rollout/response_length_mean": 5.0,
        "rollout/response_length_max": 8.0, "rollout/response_tokens": 20.0, "rollout/truncation_rate": 0.25,
        "rollout/reward_mean": -0.25, "rollout/overlong_penalty_mean": -0.25,
        "sampling/filtered_ratio": 0.5, "sampling/all_wrong_ratio": 0.5, "sampling/groups_trained": 1.0,
        "sampling/gen_rounds": 2.0,
    })


def test_update_metrics_weigh_clip_fractions_by_tokens_and_average_losses_by_update():
    def stats(tokens: int, clipped_high: int, loss: float, grad_norm: float, kl: float) -> UpdateStats:
        zero = torch.tensor(0.0)
        policy = PolicyLossStats(token_count=torch.tensor(tokens), clip_low_count=zero,
                                 clip_high_count=torch.tensor(clipped_high), dual_clip_count=zero,
                                 approx_kl_sum=torch.tensor(0.1 * tokens), ratio_sum=torch.tensor(float(tokens)))
        return UpdateStats(loss=loss, pg_loss=loss, policy=policy, grad_norm=grad_norm, ref_kl_sum=torch.tensor(kl))
    metrics = update_metrics([stats(10, 1, 0.5, 2.0, 1.0), stats(30, 6, 1.5, 4.0, 0.2)], [], lr=1e-6)
    assert {key: metrics[key] for key in ("actor/loss", "actor/grad_norm", "actor/clip_frac_high", "actor/approx_kl",
                                          "actor/ratio_mean", "actor/kl_ref", "actor/updates")} == pytest.approx({
        "actor/loss": 1.0, "actor/grad_norm": 3.0, "actor/clip_frac_high": 7 / 40, "actor/approx_kl": 0.1,
        "actor/ratio_mean": 1.0, "actor/kl_ref": 1.2 / 40, "actor/updates": 2.0,
    })
