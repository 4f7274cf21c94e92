"""trainer.param_dtype=bf16: forward and backward on bf16 copies of float32 master weights, the
micro-batches' gradients summed in float32, AdamW on the float32 weights."""

import copy
import math

import pytest
import torch
from transformers import AutoModelForCausalLM

from dapo.config import AlgorithmConfig, ConfigError, DAPOConfig, ModelConfig, TrainerConfig
from dapo.trainer.batch import count_loss_tokens, iter_micro_batches
from dapo.trainer.mixed_precision import Bf16ComputeWeights, cast_parameters
from dapo.trainer.policy import PolicyWorker
from tests.trainer.test_trainer_policy import make_samples

MICRO_BATCH_TOKENS = 24  # several micro-batches of make_samples' 12 responses


def make_worker(model, param_dtype: str = "bf16", lr: float = 1e-2, layout: str = "padded") -> PolicyWorker:
    trainer = TrainerConfig(prompts_per_step=3, mini_batch_prompts=3, micro_batch_tokens=MICRO_BATCH_TOKENS,
                            lr=lr, warmup_steps=0, weight_decay=0.0, grad_clip=1e9, param_dtype=param_dtype,
                            packing=layout == "packed", shared_prompt=layout == "shared_prompt")
    return PolicyWorker(model, AlgorithmConfig(), trainer, pad_token_id=0, temperature=1.0, total_steps=10,
                        norm_const=16.0)


def record_compute_dtype(model) -> set[torch.dtype]:
    """The dtypes of the weights the first layer's q_proj computes on, as the passes go."""
    seen: set[torch.dtype] = set()
    q_proj = model.model.layers[0].self_attn.q_proj
    q_proj.register_forward_pre_hook(lambda module, args: seen.add(module.weight.dtype))
    return seen


def off_policy_samples(model, seed: int):
    """make_samples' responses, their pi_old 0.1-0.3 nats off the model's (ratios 1.1-1.35: some
    clipped, most not)."""
    samples = make_samples(torch.Generator().manual_seed(seed))
    logprobs = make_worker(copy.deepcopy(model), param_dtype="none").compute_logprobs(samples).logprobs
    for index, (sample, own) in enumerate(zip(samples, logprobs)):
        sample.old_logprobs = [x - 0.1 * (1 + index % 3) for x in own.tolist()]
    return samples


# every micro-batch layout; gradient checkpointing (layers recomputed in backward, inside the swap);
# an on-policy update (pi_old from the same forward)
@pytest.mark.parametrize(("layout", "checkpointed", "on_policy"), [
    ("padded", False, False), ("packed", False, False), ("shared_prompt", False, False),
    ("padded", True, False), ("padded", False, True)])
def test_gradients_are_float32_sums_of_each_micro_batchs_bf16_gradients(tiny_model_dir, layout, checkpointed,
                                                                        on_policy):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    if checkpointed:
        model.activation_checkpointing_enable()  # as model.gradient_checkpointing=true does
    bf16_model = copy.deepcopy(model)
    cast_parameters(bf16_model.parameters(), torch.bfloat16)
    float32_model = copy.deepcopy(model)
    samples = off_policy_samples(model, 0)
    num_tokens, num_seqs = count_loss_tokens(samples)

    make_worker(model, layout=layout).accumulate_gradients(samples, num_tokens, num_seqs, on_policy)

    # the reference: a bf16 model's gradient of each micro-batch on its own, added up in float32
    reference_worker = make_worker(bf16_model, param_dtype="none", layout=layout)
    by_length = sorted(samples, key=lambda s: s.num_tokens)
    micro_batches = list(iter_micro_batches(by_length, MICRO_BATCH_TOKENS, layout))
    assert len(micro_batches) >= 3
    reference = {name: torch.zeros_like(p, dtype=torch.float32) for name, p in bf16_model.named_parameters()}
    for micro in micro_batches:
        reference_worker.accumulate_gradients(micro, num_tokens, num_seqs, on_policy)
        for name, p in bf16_model.named_parameters():
            reference[name] += p.grad.float()
    make_worker(float32_model, param_dtype="none", layout=layout).accumulate_gradients(
        samples, num_tokens, num_seqs, on_policy)
    float32_grads = dict(float32_model.named_parameters())
    computed_in_bf16 = False
    for name, p in model.named_parameters():
        assert p.dtype == torch.float32 and p.grad.dtype == torch.float32, name  # the master weights are back
        assert torch.equal(p.grad, reference[name]), name
        difference = (p.grad - float32_grads[name].grad).abs().max() / float32_grads[name].grad.abs().max()
        computed_in_bf16 |= bool(difference > 1e-3)  # float32 weights would agree to ~1e-6
    assert computed_in_bf16


def test_an_update_below_bf16_resolution_still_moves_the_float32_weights(tiny_model_dir):
    """At lr 1e-6 AdamW's first step moves each weight by about 1e-6, far below bf16's spacing
    (2^-8 |w|): bf16 weights would keep none of it; the float32 master weights keep all of it."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    worker = make_worker(model, lr=1e-6)
    samples = off_policy_samples(model, 1)
    compute_dtypes = record_compute_dtype(model)
    stats = worker.update(samples)
    assert not stats.skipped and math.isfinite(stats.grad_norm) and compute_dtypes == {torch.bfloat16}
    for name, p in model.named_parameters():
        assert p.dtype == torch.float32, name
        assert all(state.dtype == torch.float32 for state in worker.optimizer.state[p].values()
                   if state.dim() > 0), name
        step = (p.detach() - before[name]).abs()
        # AdamW's first step: lr x sign(g) (no weight decay), up to float32 rounding at |w| ~ 1
        assert step.max() <= 1.15e-6, name
        if p.dim() == 2:
            assert (step > 0.5e-6).float().mean() > 0.5, name
            # the same step added to bf16 weights, where |w| > 1e-3 (a spacing of 2^-17 or more): lost
            large = before[name].abs() > 1e-3
            bf16_weights = before[name][large].to(torch.bfloat16)
            stepped = bf16_weights + (p.detach() - before[name])[large].to(torch.bfloat16)
            assert large.float().mean() > 0.5 and torch.equal(stepped, bf16_weights), name


def test_a_nan_loss_leaves_the_float32_weights_and_no_gradient(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    before = copy.deepcopy(model.state_dict())
    worker = make_worker(model)
    samples = off_policy_samples(model, 2)
    samples[-1].advantage = math.nan  # the longest sample: its micro-batch comes after others' backward
    compute_dtypes = record_compute_dtype(model)
    with pytest.warns(UserWarning, match="skipped an optimizer update"):
        stats = worker.update(samples)
    assert stats.skipped and compute_dtypes == {torch.bfloat16}
    for name, p in model.named_parameters():
        assert p.dtype == torch.float32 and p.grad is None, name
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, before[name]), name


def test_an_error_inside_a_pass_gives_back_the_float32_weights_and_their_gradients(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    model.model.norm.weight.requires_grad_(False)  # frozen: cast too, or its matmul would mix dtypes
    weights = Bf16ComputeWeights(model)
    params = list(model.parameters())
    params[1].grad = torch.ones_like(params[1])  # a float32 gradient from before the pass
    with pytest.raises(RuntimeError, match="inside the pass"), weights.computing():
        assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
        model(input_ids=torch.tensor([[3, 4, 5]])).logits.float().sum().backward()
        weights.fold_gradients()
        raise RuntimeError("inside the pass")
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert model.model.norm.weight.grad is None
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in params if p.requires_grad)
    assert torch.all(params[1].grad != 1)  # the pass's gradient was added to the earlier one
    with weights.computing(), pytest.raises(RuntimeError, match="does not nest"), weights.computing():
        pass
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_the_frozen_reference_computes_on_bf16_weights_with_float32_rope(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    reference = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    trainer = TrainerConfig(prompts_per_step=3, mini_batch_prompts=3, warmup_steps=0, param_dtype="bf16")
    PolicyWorker(model, AlgorithmConfig(kl_coef=0.1), trainer, pad_token_id=0, temperature=1.0, total_steps=1,
                 norm_const=16.0, ref_model=reference)
    assert {p.dtype for p in reference.parameters()} == {torch.bfloat16}
    assert reference.model.rotary_emb.inv_freq.dtype == torch.float32  # model.to(bf16) would round it


def test_logprob_passes_run_on_the_bf16_copy(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    bf16_model = copy.deepcopy(model)
    cast_parameters(bf16_model.parameters(), torch.bfloat16)
    samples = off_policy_samples(model, 3)
    logprobs = make_worker(model).compute_logprobs(samples).logprobs
    bf16 = make_worker(bf16_model, param_dtype="none").compute_logprobs(samples).logprobs
    assert [row.tolist() for row in logprobs] == [row.tolist() for row in bf16]
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_bf16_weights_refuse_autocast_and_non_float32_master_weights(tiny_model_dir):
    with pytest.raises(ConfigError, match="trainer.autocast"):
        TrainerConfig(param_dtype="bf16", autocast="bf16")
    with pytest.raises(ConfigError, match="model.dtype=bfloat16 must be float32"):
        DAPOConfig(model=ModelConfig(dtype="bfloat16"), trainer=TrainerConfig(param_dtype="bf16"))
    with pytest.raises(ValueError, match="load it with model.dtype=float32"):
        make_worker(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.bfloat16))
