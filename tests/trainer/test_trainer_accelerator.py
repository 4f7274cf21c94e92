"""The policy update and the whole loop on an accelerator (tests/accelerator.py: CUDA unless
DAPO_TEST_DEVICE says otherwise; skipped without one). Gradients are checked against the
hand-written float64 reference of test_trainer_loss_reference.py, computed on the CPU."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from transformers import AutoModelForCausalLM

from dapo.config import AlgorithmConfig, TrainerConfig
from dapo.trainer import Trainer
from dapo.trainer.metrics import read_metrics
from dapo.trainer.policy import PolicyWorker
from tests.accelerator import DEVICE, needs_accelerator
from tests.trainer.conftest import tiny_config
from tests.trainer.test_trainer_e2e import assert_sigkill_then_resume_is_bit_identical, documented
from tests.trainer.test_trainer_loss_reference import (
    CLIP_HIGH,
    CLIP_LOW,
    DUAL_CLIP_C,
    NORM_CONST,
    grouped_samples,
    reference_gradient,
)

pytestmark = needs_accelerator

# (layout, micro-batch token budget, trainer.forward)
LAYOUTS = [("padded", 100_000, "hf"), ("padded", 24, "hf"), ("packed", 30, "hf"),
           ("shared_prompt", 40, "hf"), ("shared_prompt", 40, "native")]


def cpu_reference(tiny_model_dir) -> tuple[torch.nn.Module, list, dict[str, torch.Tensor]]:
    """The float64 model, its samples and their token-mean gradient, all on the CPU."""
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation="sdpa").double()
    samples = grouped_samples(base)
    reference_model = copy.deepcopy(base)
    reference_model.train()
    return base, samples, reference_gradient(reference_model, samples, "token-mean")


def device_worker(model, layout: str = "padded", budget: int = 100_000, forward: str = "hf", **trainer) -> PolicyWorker:
    settings = dict(lr=1.0, warmup_steps=0, weight_decay=0.0, grad_clip=1e12) | trainer
    config = TrainerConfig(prompts_per_step=3, mini_batch_prompts=3, micro_batch_tokens=budget,
                           packing=layout == "packed", shared_prompt=layout == "shared_prompt", forward=forward,
                           device=str(DEVICE), **settings)
    algo = AlgorithmConfig(clip_ratio_low=CLIP_LOW, clip_ratio_high=CLIP_HIGH, clip_ratio_c=DUAL_CLIP_C)
    return PolicyWorker(model.to(DEVICE), algo, config, pad_token_id=0, temperature=1.0, total_steps=1,
                        norm_const=NORM_CONST)


def relative_errors(model, reference: dict[str, torch.Tensor]) -> dict[str, float]:
    return {name: float((p.grad.cpu().double() - reference[name]).abs().max() / reference[name].abs().max())
            for name, p in model.named_parameters()}


def cosine(model, reference: dict[str, torch.Tensor]) -> float:
    grad = torch.cat([p.grad.cpu().double().flatten() for p in model.parameters()])
    exact = torch.cat([reference[name].flatten() for name, _ in model.named_parameters()])
    return float(grad @ exact / (grad.norm() * exact.norm()))


@pytest.mark.parametrize(("layout", "budget", "forward"), LAYOUTS)
def test_float64_gradients_on_the_device_equal_the_hand_written_loss(tiny_model_dir, layout, budget, forward):
    base, samples, reference = cpu_reference(tiny_model_dir)
    model = copy.deepcopy(base)
    worker = device_worker(model, layout, budget, forward)
    assert worker.native_policy == (forward == "native")
    worker.accumulate_gradients(samples)
    # Qwen2's RMSNorm computes in float32 even in a float64 model; the device's float32 kernels round
    # otherwise than the CPU's that computed the reference: H200, 2.8e-7 (a wrong normaliser: > 1e-2)
    tolerance = 1e-6
    errors = relative_errors(model, reference)
    assert max(errors.values()) < tolerance, errors


def test_auto_takes_dapo_rl_forward_on_cuda(tiny_model_dir):
    """trainer.forward=auto: dapo-rl's forward where it was measured faster and resumes bit for
    bit (the CPU; CUDA, on an H200), Hugging Face's on other devices."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation="sdpa")
    worker = device_worker(model, "shared_prompt", 40, "auto")
    assert worker.native_policy == (DEVICE.type in ("cpu", "cuda"))


# bf16 and fp16 autocast over float32 weights, and bf16 compute copies (trainer.param_dtype): the
# direction of the gradient is the float64 one's up to the 8- or 11-bit mantissa's rounding. fp16
# needs its loss scaling: the token-mean's per-token gradients (1/N each) would flush to zero.
@pytest.mark.parametrize("precision", [{"autocast": "bf16"}, {"autocast": "fp16"},
                                       {"autocast": "none", "param_dtype": "bf16"}], ids=["bf16", "fp16", "bf16-weights"])
@pytest.mark.parametrize(("layout", "budget", "forward"), [LAYOUTS[1], LAYOUTS[4]])
def test_low_precision_gradients_on_the_device_point_the_float64_way(tiny_model_dir, precision, layout, budget,
                                                                     forward):
    base, samples, reference = cpu_reference(tiny_model_dir)
    model = copy.deepcopy(base).float()
    worker = device_worker(model, layout, budget, forward, **precision)
    stats = worker.accumulate_gradients(samples)
    if precision["autocast"] == "fp16":
        assert worker.loss_scale > 1.0
        for p in model.parameters():
            p.grad /= worker.loss_scale  # what the optimizer step unscales
    assert math.isfinite(stats.loss) and all(p.grad.dtype == torch.float32 for p in model.parameters())
    assert cosine(model, reference) > 0.999


def test_a_step_below_bf16_resolution_moves_the_float32_weights_on_the_device(tiny_model_dir):
    """trainer.param_dtype=bf16 on the device: AdamW's first step at lr 1e-6 (about 1e-6 per weight,
    far below bf16's spacing) lands in the float32 master weights."""
    base, samples, _ = cpu_reference(tiny_model_dir)
    model = copy.deepcopy(base).float()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    worker = device_worker(model, autocast="none", param_dtype="bf16", lr=1e-6)
    stats = worker.update(samples)
    assert not stats.skipped and math.isfinite(stats.grad_norm)
    for name, p in model.named_parameters():
        step = (p.detach().cpu() - before[name]).abs()
        assert p.dtype == torch.float32 and step.max() <= 1.15e-6, name
        if p.dim() == 2:
            assert (step > 0.5e-6).float().mean() > 0.5, name


# the default layout (shared prompts; trainer.forward=auto: Hugging Face's forward on a GPU), padding,
# and the shared prompts through dapo-rl's forward
@pytest.mark.parametrize("layout", [[], ["trainer.shared_prompt=false"], ["trainer.forward=native"]],
                         ids=["shared-prompt", "padded", "native-forward"])
def test_a_few_steps_on_the_device_log_finite_metrics_and_loadable_checkpoints(tiny_model_dir, reward_file, tmp_path,
                                                                              layout):
    run_dir = tmp_path / "run"
    cfg = tiny_config(tiny_model_dir, run_dir, reward_file, f"trainer.device={DEVICE}", *layout)
    summary = Trainer(cfg).train()
    assert summary.steps == 3 and summary.eval_before and summary.eval_after
    step_rows = [row for row in read_metrics(run_dir) if "actor/loss" in row]
    assert [row["step"] for row in step_rows] == [1, 2, 3]
    for row in step_rows:
        for key, value in row.items():
            assert key == "step" or (documented(key) and math.isfinite(value)), (key, value)
    # pi_old is the device engine's bf16 log-probs (old_logprobs=rollout): the trainer's agree
    assert all(abs(row["actor/ratio_mean"] - 1) < 0.1 for row in step_rows)
    model = AutoModelForCausalLM.from_pretrained(run_dir / "checkpoints" / "step-000003")
    assert next(model.parameters()).device.type == "cpu" and all(p.isfinite().all() for p in model.parameters())


# Hugging Face's forward and dapo-rl's (trainer.forward=auto's on CPU and CUDA), whose resumed
# weights differed on an H200 in their last bits before its repeated rows' backward was made
# ordered (native_forward._rows; bit-identical there since, 2026-12-04)
@pytest.mark.parametrize("forward", ["hf", "native"])
def test_sigkill_mid_step_then_resume_on_the_device_is_bit_identical(tiny_model_dir, tmp_path, forward):
    settings = [f"trainer.device={DEVICE}", f"trainer.forward={forward}"]
    assert_sigkill_then_resume_is_bit_identical(tiny_model_dir, tmp_path, settings)
