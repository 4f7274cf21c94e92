"""Per-step metrics from a step's samples and update statistics (meanings in metrics.METRICS)."""

from __future__ import annotations

import math

from dapo.algo import PolicyLossStats
from dapo.rewards.types import RewardResult
from dapo.trainer.batch import Sample
from dapo.trainer.sampler import SamplingReport
from dapo.trainer.update_stats import UpdateStats


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def rollout_metrics(report: SamplingReport, batch: list[Sample], results: list[RewardResult]) -> dict[str, float]:
    generated = report.generated
    lengths = [len(s.response_ids) for s in generated]
    groups = max(report.groups_generated, 1)
    filtered = report.groups_generated - report.groups_kept
    penalties = [s.reward - s.score for s in batch]
    sampling = {
        "sampling/gen_rounds": float(report.gen_rounds),
        "sampling/groups_generated": float(report.groups_generated),
        "sampling/groups_trained": float(len({s.group_id for s in batch})),
        "sampling/filtered_ratio": filtered / groups,
        "sampling/all_correct_ratio": report.groups_all_correct / groups,
        "sampling/all_wrong_ratio": report.groups_all_wrong / groups,
        "sampling/all_masked_ratio": report.groups_all_masked / groups,
        "sampling/groups_carried_in": float(report.groups_carried_in),
        "sampling/groups_carried_out": float(report.groups_carried_out),
        "sampling/groups_discarded": float(report.groups_discarded),
        "sampling/hit_round_limit": float(report.hit_round_limit),
    }
    if not generated:  # defensive: every step generates (carried-over groups are capped)
        return sampling
    trained = {"rollout/reward_mean": _mean([s.reward for s in batch]),
               "rollout/overlong_penalty_mean": _mean(penalties)} if batch else {}  # no batch: no number
    return {
        "rollout/score_mean": _mean([s.score for s in generated]),
        "rollout/acc": _mean([float(s.acc) for s in generated]),
        "rollout/response_length_mean": _mean([float(n) for n in lengths]),
        "rollout/response_length_max": float(max(lengths, default=0)),
        "rollout/response_tokens": float(sum(lengths)),
        # cut by the length limit; a response whose EOS is its last allowed token was not cut
        "rollout/truncation_rate": _mean([float(s.truncated) for s in generated]),
        **trained,
        "rollout/reward_timeouts": float(sum(r.timed_out for r in results)),
        "rollout/reward_errors": float(sum(r.error for r in results)),
        **reward_function_metrics(results),
        **sampling,
    }


def reward_function_metrics(results: list[RewardResult]) -> dict[str, float]:
    """``reward/<function>/<key>``: the mean of each score and metric user reward functions
    returned, over the responses that returned it: fsum(value / n), correctly rounded (a running
    mean left 8e-17 for a mean of +1s and -1s that is 0) and finite for finite values (a sum of
    two 1e308s is inf); and ``reward_failures/<function>``, the responses it timed out,
    raised or returned a bad value on (whose score the mean leaves out; a namespace of its own, so
    that no key a function returns collides with it)."""
    values: dict[str, list[float]] = {}
    for result in results:
        for key, value in result.extra.items():
            values.setdefault(key, []).append(value)
    means = {key: math.fsum(value / len(returned) for value in returned) for key, returned in values.items()}
    failing = {label for result in results for label in result.failed}
    scorers = sorted({key.partition("/")[0] for key in means} | failing)  # every function this step, math-verify if it failed
    return {**{f"reward/{key}": mean for key, mean in means.items()},
            **{f"reward_failures/{name}": float(sum(name in result.failed for result in results)) for name in scorers}}


def update_metrics(stats: list[UpdateStats], batch: list[Sample] | tuple, lr: float) -> dict[str, float]:
    """Token-weighted clip fractions, KL and ratio over all updates; loss and grad norm averaged.
    A step that made no update logs no loss, clip, ratio or gradient figures (not zeros)."""
    made = [s for s in stats if not s.skipped and not s.empty]
    metrics = {
        "actor/lr": lr,
        "actor/updates": float(len(made)),
        "actor/skipped_updates": float(sum(s.skipped for s in stats)),
        "actor/skipped_nonfinite_loss": float(sum(s.loss_not_finite for s in stats)),
        "actor/empty_updates": float(sum(s.empty for s in stats)),
        "actor/response_tokens": float(sum(len(s.response_ids) for s in batch)),
    }
    if batch:
        metrics["actor/advantage_abs_mean"] = _mean([abs(s.advantage) for s in batch])
    sums = [s.policy for s in made if s.policy is not None]
    if sums:
        metrics.update({
            "actor/loss": _mean([s.loss for s in made]),
            "actor/pg_loss": _mean([s.pg_loss for s in made]),
            **{f"actor/{name}": value for name, value in PolicyLossStats.total(sums).to_metrics().items()},
            "actor/grad_norm": _mean([s.grad_norm for s in made]),
        })
        with_kl = [s for s in made if s.ref_kl_sum is not None and s.policy is not None]
        if with_kl:  # token-weighted over the updates, like the clip fractions
            tokens = sum(float(s.policy.token_count) for s in with_kl)
            metrics["actor/kl_ref"] = sum(float(s.ref_kl_sum) for s in with_kl) / max(tokens, 1.0)
    return metrics
