"""Group-relative advantage estimators (outcome rewards, no value network).

DAPO (arXiv 2503.14476, Eq. 1 / the GRPO objective it builds on) samples a group of G responses
o_1..o_G per prompt q, scores each with a rule-based verifier, and uses the group-normalised score

    A_i = (R_i - mean({R_j}_{j=1..G})) / (std({R_j}_{j=1..G}) + eps)

as the advantage of every token of o_i. The registry also holds the variants users expect:

- ``grpo``: the formula above; std is the unbiased sample std (as in the verl reference run).
  A group of one sample gets mean 0 and std 1, so A = R / (1 + eps).
- ``dr_grpo`` (Dr.GRPO, Liu et al. 2025): A_i = R_i - mean(R), no division by the std.
  A group of one gets mean 0, so A = R.
- ``rloo`` (REINFORCE Leave-One-Out): A_i = R_i - mean_{j != i} R_j = G/(G-1) * (R_i - mean(R)).
  A group of one has no other sample to form a baseline; we give it advantage 0 (no signal) rather
  than the raw score (verl keeps the raw score there).
- ``opo`` (OPO, Hao et al. 2025, "On-Policy RL with Optimal reward baseline"): A_i = R_i - b, with the
  length-weighted group baseline b = sum_j L_j R_j / sum_j L_j (L_j: response j's tokens), the
  baseline that minimises the gradient variance when it grows with length; a group of one gets
  b = 0 (A = R, as verl's ``opo``), a group of empty responses the plain mean. It names the optional
  argument ``response_lengths``, which an estimator is given only when it takes it.
- ``reinforce_pp_baseline`` (REINFORCE++ with a group baseline): A_i = R_i - mean(R) (group of
  one: mean 0), then whitened over the whole batch of responses: (x - mean(x)) / (std(x) + eps),
  unbiased batch std. verl whitens over response tokens instead, so long responses weigh more in
  its statistics; we whiten over responses because this function sees no token mask. Even with
  equal lengths T the two differ by Bessel's correction over N*T tokens rather than N responses:
  ours = verl's * sqrt(N*T*(N-1) / ((N*T-1)*N)), 6% smaller at N=8, T=100; < 0.1% from N=1000.
  Whitening shifts a constant group's zero advantages by -mean(x) / (std(x) + eps): before
  whitening they are exactly zero (that is the quantity Dynamic Sampling relies on).

Groups are identified by arbitrary integer ids in any order (they need not be contiguous); all
statistics are computed with scatter/index_add over the ids, with no Python loop per group.

Exactness: group means are computed as min(R) + mean(R - min(R)), so a group whose scores are all
equal yields an advantage of exactly 0 (a plain float mean of 0.1, 0.1, 0.1 is not exactly 0.1).
Statistics are computed in float64 and the result is cast back to the dtype of ``scores``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch
from torch import Tensor

from dapo.algo.registry import PluginError, Registry, defined_at, passed_arguments

# fn(scores_f64 (N,), group_ids (N,), eps) -> advantages (N,), called only through
# :func:`compute_advantages`, whose signature is the list (:data:`ADVANTAGE_CALL`).
AdvantageEstimator = Callable[[Tensor, Tensor, float], Tensor]

ADVANTAGE_ESTIMATORS: Registry[AdvantageEstimator] = Registry("advantage estimator")


def register_advantage(name: str) -> Callable[[AdvantageEstimator], AdvantageEstimator]:
    """Register ``fn(scores_f64 (N,), group_ids (N,), eps) -> advantages (N,)`` under ``name``."""
    return ADVANTAGE_ESTIMATORS.register(name)


def _shifted_by_group_min(scores: Tensor, inverse: Tensor, num_groups: int) -> Tensor:
    """R_i - min of i's group (``inverse``: each response's group index): a constant group's are
    exactly 0, so a mean taken as min + mean of these is exactly its score (see Exactness above)."""
    group_min = torch.full((num_groups,), float("inf"), dtype=scores.dtype, device=scores.device)
    return scores - group_min.scatter_reduce(0, inverse, scores, reduce="amin")[inverse]


def _group_centred_scores(scores: Tensor, group_ids: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Per response: (R_i - group mean, unbiased group std, group size G).

    A group of one sample gets mean 0 (so the centred score is R_i itself) and std 1.
    """
    unique_ids, inverse = torch.unique(group_ids, return_inverse=True)
    num_groups = unique_ids.numel()
    sizes = torch.bincount(inverse, minlength=num_groups).to(scores.dtype)
    shifted = _shifted_by_group_min(scores, inverse, num_groups)
    shift_mean = torch.zeros_like(sizes).index_add(0, inverse, shifted) / sizes
    centred = shifted - shift_mean[inverse]
    sq_dev = torch.zeros_like(sizes).index_add(0, inverse, centred.square())
    group_std = torch.sqrt(sq_dev / (sizes - 1).clamp_min(1))
    size = sizes[inverse]
    singleton = size == 1
    centred = torch.where(singleton, scores, centred)
    std = torch.where(singleton, torch.ones_like(scores), group_std[inverse])
    return centred, std, size


@register_advantage("grpo")
def grpo_advantages(scores: Tensor, group_ids: Tensor, eps: float) -> Tensor:
    """GRPO / DAPO: A_i = (R_i - mean_group(R)) / (std_group(R) + eps)."""
    centred, std, _ = _group_centred_scores(scores, group_ids)
    return centred / (std + eps)


@register_advantage("dr_grpo")
def dr_grpo_advantages(scores: Tensor, group_ids: Tensor, eps: float) -> Tensor:
    """Dr.GRPO: A_i = R_i - mean_group(R) (no std normalisation; ``eps`` unused)."""
    centred, _, _ = _group_centred_scores(scores, group_ids)
    return centred


@register_advantage("rloo")
def rloo_advantages(scores: Tensor, group_ids: Tensor, eps: float) -> Tensor:
    """RLOO: A_i = R_i - mean_{j != i} R_j = G/(G-1) (R_i - mean_group(R)); G = 1 gives 0."""
    centred, _, size = _group_centred_scores(scores, group_ids)
    scale = torch.where(size > 1, size / (size - 1).clamp_min(1), torch.zeros_like(size))
    return centred * scale


@register_advantage("opo")
def opo_advantages(scores: Tensor, group_ids: Tensor, eps: float, *, response_lengths: Tensor) -> Tensor:
    """OPO: A_i = R_i - sum_j L_j R_j / sum_j L_j over the group of i; G = 1 gives A = R (``eps`` unused)."""
    unique_ids, inverse = torch.unique(group_ids, return_inverse=True)
    weights = response_lengths.to(device=scores.device, dtype=scores.dtype)
    weight_sums = torch.zeros(unique_ids.numel(), dtype=scores.dtype, device=scores.device).index_add(0, inverse, weights)
    weights = torch.where(weight_sums[inverse] > 0, weights, torch.ones_like(weights))  # empty responses: the mean
    weight_sums = torch.zeros_like(weight_sums).index_add(0, inverse, weights)
    shifted = _shifted_by_group_min(scores, inverse, unique_ids.numel())  # a constant group's advantages: exactly 0
    baseline = torch.zeros_like(weight_sums).index_add(0, inverse, weights * shifted) / weight_sums
    singleton = torch.bincount(inverse, minlength=unique_ids.numel())[inverse] == 1
    return torch.where(singleton, scores, shifted - baseline[inverse])


@register_advantage("reinforce_pp_baseline")
def reinforce_pp_baseline_advantages(scores: Tensor, group_ids: Tensor, eps: float) -> Tensor:
    """REINFORCE++-baseline: x_i = R_i - mean_group(R); A = (x - mean(x)) / (std(x) + eps) over the batch."""
    centred, _, _ = _group_centred_scores(scores, group_ids)
    if centred.numel() < 2:
        return centred - centred.mean()  # std of one value is undefined; the centred value is 0
    return (centred - centred.mean()) / (centred.std(unbiased=True) + eps)


def _check_inputs(scores: Tensor, group_ids: Tensor, eps: float) -> None:
    if scores.dim() != 1 or not scores.is_floating_point():
        raise ValueError(f"scores must be a 1-D float tensor, got shape {tuple(scores.shape)} dtype {scores.dtype}")
    if group_ids.shape != scores.shape:
        raise ValueError(f"group_ids shape {tuple(group_ids.shape)} != scores shape {tuple(scores.shape)}")
    if group_ids.is_floating_point() or group_ids.dtype == torch.bool:
        raise ValueError(f"group_ids must be an integer tensor, got {group_ids.dtype}")
    if scores.numel() == 0:
        raise ValueError("scores is empty: there are no responses to compute advantages for")
    if not bool(torch.isfinite(scores).all()):
        raise ValueError("scores contain NaN or inf; fix the reward function before training")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")


def compute_advantages(
    estimator: str, scores: Tensor, group_ids: Tensor, eps: float = 1e-6, *, response_lengths: Tensor | None = None,
) -> Tensor:
    """Per-response advantages (N,) of ``scores`` (N,) grouped by ``group_ids`` (N,).

    Args:
        estimator: a key of :data:`ADVANTAGE_ESTIMATORS` ("grpo", "dr_grpo", "rloo",
            "reinforce_pp_baseline", or a user-registered name).
        scores: float rewards R_i, one per response.
        group_ids: integer id of each response's group (its prompt); any values, any order.
        eps: added to the std in the denominator (grpo, reinforce_pp_baseline).
        response_lengths: each response's token count (N,), integer; given to an estimator that
            takes a parameter of that name (:data:`OPTIONAL_ADVANTAGE_ARGUMENTS`: ``opo``), only.

    Returns:
        Advantages with the dtype of ``scores``; see the module docstring for each formula.

    The one call of ``ADVANTAGE_ESTIMATORS[estimator]``: the trainer's step and the plugin
    rehearsal (:mod:`dapo.algo.rehearsal`) both call here, so this signature is the one list of
    what an estimator is passed (:data:`ADVANTAGE_CALL`), forwarded in its order, and a plugin is
    rehearsed with the arguments the step passes it. (``eps``'s default is for direct calls; both
    pass algorithm.advantage_eps, which tests/trainer/test_trainer_plugins.py checks.)
    """
    estimate = ADVANTAGE_ESTIMATORS.lookup(estimator)
    _check_inputs(scores, group_ids, eps)
    optional = _optional_arguments(estimator, estimate, response_lengths=response_lengths)
    if "response_lengths" in optional and optional["response_lengths"].shape != scores.shape:
        raise ValueError(f"response_lengths shape {tuple(optional['response_lengths'].shape)} != scores shape "
                         f"{tuple(scores.shape)}")
    advantages = estimate(scores.to(torch.float64), group_ids, eps, **optional)
    _check_result(estimator, estimate, advantages, scores)
    return advantages.to(scores.dtype)


# The keyword arguments of compute_advantages an estimator is given only when it names them (one
# written for (scores, group_ids, eps) needs none of them)
OPTIONAL_ADVANTAGE_ARGUMENTS = ("response_lengths",)
# How an advantage estimator is called, (positional argument names, keyword argument names): read
# off compute_advantages, the one call there is, for the config's check of a plugin's signature
# (dapo.config.training) and docs/extending.md's table, which its test compares.
_POSITIONAL, _KEYWORDS = passed_arguments(compute_advantages)
ADVANTAGE_CALL: tuple[tuple[str, ...], tuple[str, ...]] = (
    _POSITIONAL, tuple(name for name in _KEYWORDS if name not in OPTIONAL_ADVANTAGE_ARGUMENTS))


def _optional_arguments(name: str, estimate: AdvantageEstimator, **given: Tensor | None) -> dict[str, Tensor]:
    """Of ``given`` (the optional arguments), those ``estimate`` has a parameter for; PluginError
    for one it takes that this call does not give (a direct call of compute_advantages without it)."""
    try:
        parameters = inspect.signature(estimate).parameters
    except (TypeError, ValueError):  # no Python signature: it takes none
        return {}
    taken = {key: value for key, value in given.items() if key in parameters}
    if missing := [key for key, value in taken.items() if value is None]:
        raise PluginError(f"advantage estimator {name!r} ({defined_at(estimate)}) takes {missing}, not given: pass "
                          f"compute_advantages(..., {missing[0]}=...), as the trainer does")
    return taken  # type: ignore[return-value]


def _check_result(name: str, estimate: AdvantageEstimator, advantages: object, scores: Tensor) -> None:
    """A registered estimator (a plugin's) must return one finite advantage per response: a
    shorter result would leave responses at advantage 0 unnoticed, a (N, 1) one fail far from it."""
    what = f"advantage estimator {name!r} ({defined_at(estimate)})"
    if not isinstance(advantages, Tensor):
        raise PluginError(f"{what} returned a {type(advantages).__name__}, not a tensor of shape "
                          f"({scores.numel()},): one advantage per response")
    if advantages.shape != scores.shape:
        raise PluginError(f"{what} returned shape {tuple(advantages.shape)} for {scores.numel()} responses: "
                          f"it must return shape ({scores.numel()},), one advantage per response")
    if advantages.dtype == torch.bool or advantages.is_complex():
        raise PluginError(f"{what} returned a {advantages.dtype} tensor: advantages are real numbers")
    if not bool(torch.isfinite(advantages).all()):
        bad = int((~torch.isfinite(advantages)).sum())
        raise PluginError(f"{what} returned NaN or inf for {bad} of {scores.numel()} responses (their scores are "
                          "all finite)")

