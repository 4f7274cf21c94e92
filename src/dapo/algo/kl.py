"""Per-token KL penalty estimators against a frozen reference policy (Schulman, "Approximating KL
Divergence", 2020).

DAPO itself removes the KL term (beta = 0, Section 2.3: the policy is expected to move far from
the initial model in long-CoT RL); these exist for users who turn ``kl_coef`` on.

With samples o_t ~ pi_theta and log-ratio x = log pi_ref(o_t) - log pi_theta(o_t), each estimator
approximates KL(pi_theta || pi_ref) per token:

- "k1" = log pi_theta - log pi_ref = -x: unbiased, high variance, can be negative.
- "abs" = |log pi_theta - log pi_ref|: a non-negative heuristic (not an unbiased estimator).
- "k2" = 0.5 * (log pi_theta - log pi_ref)^2: biased but low variance, non-negative; its
  expectation matches the KL to second order when the policies are close ("mse" in verl).
- "k3" = exp(x) - x - 1: unbiased (E[exp(x)] = 1) and always >= 0, low variance ("low_var_kl"
  in verl); as in verl, x is clamped to [-20, 20] before exp (else exp overflows, to inf and a
  NaN gradient, when pi_theta puts little mass where pi_ref puts a lot: x > 88 in float32, or a
  -inf log-prob at a masked position) and the result to [-10, 10].
"""

from __future__ import annotations

import torch
from torch import Tensor

KL_ESTIMATORS = ("k1", "abs", "k2", "k3")
K3_CLAMP = 10.0
K3_LOG_RATIO_CLAMP = 20.0


def kl_penalty(logprobs: Tensor, ref_logprobs: Tensor, estimator: str, mask: Tensor | None = None) -> Tensor:
    """Per-token KL(pi_theta || pi_ref) estimate, same shape as ``logprobs``; see module docstring.
    ``mask`` (response_mask): the log-ratio is 0 where it is 0, before any estimator, so that a
    padding position's -inf log-probs (a model that masks its pad token) send no NaN back through
    k2's square (the aggregation drops the value, not its gradient)."""
    if logprobs.shape != ref_logprobs.shape:
        raise ValueError(f"logprobs {tuple(logprobs.shape)} != ref_logprobs {tuple(ref_logprobs.shape)}")
    log_ratio = logprobs - ref_logprobs
    if mask is not None:
        log_ratio = torch.where(mask != 0, log_ratio, 0.0)
    if estimator == "k1":
        return log_ratio
    if estimator == "abs":
        return log_ratio.abs()
    if estimator == "k2":
        return 0.5 * log_ratio.square()
    if estimator == "k3":
        ref_minus_policy = torch.clamp(-log_ratio, -K3_LOG_RATIO_CLAMP, K3_LOG_RATIO_CLAMP)
        k3 = torch.exp(ref_minus_policy) - ref_minus_policy - 1.0
        return torch.clamp(k3, -K3_CLAMP, K3_CLAMP)
    raise ValueError(f"unknown KL estimator {estimator!r}; valid: {list(KL_ESTIMATORS)}")
