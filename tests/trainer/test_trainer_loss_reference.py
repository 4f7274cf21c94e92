"""The update's gradient against an independent float64 reference: the model run on one sequence
at a time and DAPO's loss written out by hand, for every loss aggregation and every batch layout.
The other trainer tests compare the worker with itself (another budget, layout or rank count),
which a shared error (a shifted logit, a wrong normaliser) would pass."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import AutoModelForCausalLM

from dapo.config import AlgorithmConfig, TrainerConfig
from dapo.trainer.batch import Sample
from dapo.trainer.policy import PolicyWorker

CLIP_LOW, CLIP_HIGH, DUAL_CLIP_C, NORM_CONST = 0.2, 0.28, 3.0, 16.0


RATIOS = [0.5, 0.79, 0.9, 1.1, 1.25, 1.3, 2.0, 5.0]  # each side of 1 - eps_low, 1 + eps_high and c
# pi_old / pi_rollout of truncated importance sampling, each side of its cap
TIS_CAP, TIS_RATIOS = 2.0, [0.25, 0.8, 1.0, 1.5, 3.0]


def response_logprobs(model: torch.nn.Module, sample: Sample) -> torch.Tensor:
    """log pi(response token | prefix), one sequence alone (no padding, no batch)."""
    logits = model(input_ids=torch.tensor([sample.prompt_ids + sample.response_ids])).logits[0]
    start, length = len(sample.prompt_ids), len(sample.response_ids)
    logprobs = torch.log_softmax(logits[start - 1 : start + length - 1], dim=-1)
    return logprobs.gather(-1, torch.tensor(sample.response_ids)[:, None])[:, 0]


def grouped_samples(model: torch.nn.Module) -> list[Sample]:
    """3 groups of 4 responses of 1-12 tokens sharing their group's prompt, two of them
    overlong-filtered (loss weight 0). pi_old is set so that the ratios are RATIOS in turn: every
    clip binds somewhere, and a wrong clip bound changes the gradient (float32 values: as stored)."""
    generator = torch.Generator().manual_seed(7)
    samples = []
    for group in range(3):
        prompt = torch.randint(3, 90, (2 + group,), generator=generator).tolist()
        for k in range(4):
            response = torch.randint(3, 90, (1 + 3 * k + group,), generator=generator).tolist()
            samples.append(Sample(group, str(group), list(prompt), response, [-1.0] * len(response), False,
                                  advantage=float(k) - 1.5))
    with torch.no_grad():
        for index, sample in enumerate(samples):
            ratios = torch.tensor([RATIOS[(index + j) % len(RATIOS)] for j in range(len(sample.response_ids))])
            sample.old_logprobs = (response_logprobs(model, sample) - ratios.double().log()).float().tolist()
    samples[3].loss_weight = samples[7].loss_weight = 0.0
    return samples


def with_rollout_mismatch(samples: list[Sample]) -> list[Sample]:
    """The samples with rollout log-probs set so that pi_old / pi_rollout is TIS_RATIOS in turn."""
    for index, sample in enumerate(samples):
        ratios = torch.tensor([TIS_RATIOS[(index + j) % len(TIS_RATIOS)] for j in range(len(sample.response_ids))])
        sample.rollout_logprobs = (torch.tensor(sample.old_logprobs).double() - ratios.double().log()).float().numpy()
    return samples


def tis_weight(sample: Sample) -> torch.Tensor:
    """w_t = min(pi_old / pi_rollout, cap), from the float32 log-probs as stored."""
    log_ratio = torch.tensor(sample.old_logprobs) - torch.tensor(sample.rollout_logprobs)
    return torch.exp(log_ratio).clamp(max=TIS_CAP).double()


def reference_gradient(model: torch.nn.Module, samples: list[Sample], mode: str,
                       tis: bool = False) -> dict[str, torch.Tensor]:
    """d/dtheta of the mini-batch loss: per token max(-A r, -A clip(r, 1-eps_low, 1+eps_high)),
    capped at -A c when A < 0 (dual-clip), r = exp(log pi - log pi_old), times the TIS weight
    (``tis``); summed over the loss tokens and divided by their count (token-mean), or per
    response then over responses."""
    kept = [s for s in samples if s.loss_weight > 0]
    num_tokens, num_seqs = sum(len(s.response_ids) for s in kept), len(kept)
    total = torch.zeros((), dtype=torch.float64)
    for s in kept:
        ratio = torch.exp(response_logprobs(model, s) - torch.tensor(s.old_logprobs, dtype=torch.float64))
        advantage = s.advantage
        token_loss = torch.maximum(-advantage * ratio, -advantage * ratio.clamp(1 - CLIP_LOW, 1 + CLIP_HIGH))
        if advantage < 0:
            token_loss = torch.minimum(token_loss, torch.full_like(token_loss, -advantage * DUAL_CLIP_C))
        if tis:
            token_loss = token_loss * tis_weight(s)
        total = total + {
            "token-mean": token_loss.sum() / num_tokens,
            "seq-mean-token-mean": token_loss.mean() / num_seqs,
            "seq-mean-token-sum": token_loss.sum() / num_seqs,
            "seq-mean-token-sum-norm": token_loss.sum() / (num_seqs * NORM_CONST),
        }[mode]
    total.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters()}


def reference_worker(model: torch.nn.Module, layout: str, budget: int, mode: str = "token-mean",
                     tis_cap: float | None = None, grad_clip: float = 1e12) -> PolicyWorker:
    trainer = TrainerConfig(prompts_per_step=3, mini_batch_prompts=3, micro_batch_tokens=budget, lr=1.0,
                            warmup_steps=0, weight_decay=0.0, grad_clip=grad_clip, packing=layout == "packed",
                            shared_prompt=layout == "shared_prompt")
    algo = AlgorithmConfig(loss_agg_mode=mode, clip_ratio_low=CLIP_LOW, clip_ratio_high=CLIP_HIGH,
                           clip_ratio_c=DUAL_CLIP_C, tis_cap=tis_cap)
    return PolicyWorker(model, algo, trainer, pad_token_id=0, temperature=1.0, total_steps=1, norm_const=NORM_CONST)


def reference_case(model_dir, mode: str, tis: bool = False) -> tuple[torch.nn.Module, list[Sample], dict]:
    """(the float64 model, the samples of :func:`grouped_samples`, with a rollout mismatch for
    ``tis``, and their :func:`reference_gradient`, taken on a copy of the model)."""
    base = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa").double()
    samples = grouped_samples(base)
    if tis:
        samples = with_rollout_mismatch(samples)
    reference_model = copy.deepcopy(base)
    reference_model.train()
    return base, samples, reference_gradient(reference_model, samples, mode, tis)


def assert_gradients_match(model: torch.nn.Module, reference: dict, tolerance: float, what: str) -> None:
    for name, parameter in model.named_parameters():
        error = (parameter.grad - reference[name]).abs().max() / reference[name].abs().max().clamp_min(1e-30)
        assert error < tolerance, f"{what}: {name} off by {float(error):.1e} (relative)"


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
def test_every_layout_and_micro_batch_split_gives_the_hand_written_loss_gradient(tiny_model_dir, mode):
    base, samples, reference = reference_case(tiny_model_dir, mode)
    for layout, budget in [("padded", 100_000), ("padded", 24), ("packed", 30), ("shared_prompt", 40)]:
        model = copy.deepcopy(base)
        reference_worker(model, layout, budget, mode).accumulate_gradients(samples)
        # (the shared-prompt layout's two calls agree with one sequence's to 5e-8 relative in float64,
        # not 1e-15 as the others: float32 rounding somewhere in them, not found yet; 1e-6, as its own
        # equality test with the padded layout allows, is still far below any normaliser's error)
        tolerance = 1e-6 if layout == "shared_prompt" else 1e-9
        assert_gradients_match(model, reference, tolerance, f"{layout} (budget {budget})")


@pytest.mark.parametrize(("layout", "budget"), [("padded", 24), ("packed", 30)])
def test_truncated_importance_sampling_weights_each_token_by_min_of_old_over_rollout_and_the_cap(
    tiny_model_dir, layout, budget
):
    """algorithm.tis_cap: each token's loss times min(pi_old / pi_rollout, cap). Weights of 1/4 to 3
    (capped at 2): the inverse ratio, no cap or no weight at all each give another gradient."""
    base, samples, reference = reference_case(tiny_model_dir, "token-mean", tis=True)
    model = copy.deepcopy(base)
    reference_worker(model, layout, budget, tis_cap=TIS_CAP).accumulate_gradients(samples)
    assert_gradients_match(model, reference, 1e-9, layout)


def test_gradient_clipping_reports_the_true_norm_and_scales_the_gradient_to_the_bound(tiny_model_dir):
    """trainer.grad_clip: the logged grad norm is the whole gradient's before clipping, and the
    gradient the optimizer steps with is scaled down to the bound (torch's max / (norm + 1e-6))."""
    base, samples, reference = reference_case(tiny_model_dir, "token-mean")
    reference_norm = torch.sqrt(sum((grad**2).sum() for grad in reference.values())).item()
    bound = 1e-3
    assert reference_norm > 10 * bound  # so the clip binds
    model = copy.deepcopy(base)
    worker = reference_worker(model, "padded", 24, grad_clip=bound)
    worker.accumulate_gradients(samples)
    assert worker.clip_gradients() == pytest.approx(reference_norm, rel=1e-9)
    clipped_norm = torch.sqrt(sum((p.grad**2).sum() for p in model.parameters())).item()
    assert clipped_norm == pytest.approx(bound * reference_norm / (reference_norm + 1e-6), rel=1e-9)
