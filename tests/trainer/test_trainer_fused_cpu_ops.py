"""The fused CPU training kernels (dapo.trainer.fused_cpu_ops): each op's forward and backward
against float64, in float32 and under bf16 autocast; dapo-rl's training forward with them against
the same forward on torch's ops and against float64; and where they step aside."""

from __future__ import annotations

import copy
import functools
import warnings

import pytest
import torch
from torch import nn
from transformers import Qwen2Config, Qwen2ForCausalLM
from transformers.models.qwen2 import modeling_qwen2
from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm

from dapo.rollout import cpu_kernels
from dapo.trainer import fused_cpu_ops as fused_module
from dapo.trainer.batch import collate, count_loss_tokens
from dapo.trainer.fused_cpu_ops import FusedCpuOps, fused_cpu_ops, self_test
from dapo.trainer.native_forward import native_shared_prompt_logits
from tests.trainer.test_trainer_shared_prompt import make_group_samples, worker

OPS = fused_cpu_ops(torch.zeros(1))
needs_kernels = pytest.mark.skipif(OPS is None,
                                   reason=f"kernels unavailable: {cpu_kernels.unavailable_reason(decode=False)}")
ROUNDING = 2**-8  # half a bf16 spacing, relative: what one rounding to bf16 moves a value at most


def test_the_training_kernels_load_wherever_the_decode_kernels_do():
    """They are built into the same library: where it loads (its own test fails where it should and
    does not), a training kernel that does not bind or fails its self-test is a failure, not a skip."""
    if cpu_kernels.cpu_decode_kernels() is not None:
        assert OPS is not None and self_test(OPS) is None


@needs_kernels
def test_a_failed_decode_self_test_leaves_the_training_kernels_on(monkeypatch):
    """Each set binds and tests its own functions on the one library: the decode kernels failing
    theirs turns them off, not the training forward's."""
    monkeypatch.setattr(cpu_kernels, "_self_test", lambda kernels: "attention: max error 1 against float64")
    monkeypatch.setattr(cpu_kernels, "_warned", False)
    cpu_kernels._kernels_or_reason.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            assert cpu_kernels.cpu_decode_kernels() is None
        assert len(said) == 1 and "self-test" in str(said[0].message)
        assert fused_cpu_ops(torch.zeros(1)) is not None
    finally:
        cpu_kernels._kernels_or_reason.cache_clear()


@needs_kernels
@pytest.mark.parametrize("context", ["no_grad", "inference_mode"])
def test_their_self_test_passes_when_first_called_inside_a_forward(context: str, monkeypatch):
    """The first call comes from a forward under bf16 autocast, in a no-grad or inference-mode
    pass: the self-test must still check float32 outputs and their gradients."""
    monkeypatch.setattr(fused_module, "_bound", functools.cache(fused_module._bound.__wrapped__))
    with torch.autocast("cpu", dtype=torch.bfloat16), getattr(torch, context)(), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fused_cpu_ops(torch.zeros(1)) is not None


@needs_kernels
def test_a_failed_self_test_turns_them_off_with_one_warning(monkeypatch):
    """Even where warnings raise: the first forward sees the warning, later ones run torch's ops."""
    monkeypatch.setattr(fused_module, "_bound", functools.cache(fused_module._bound.__wrapped__))
    monkeypatch.setattr(fused_module, "self_test", lambda ops: "rms_norm: max error 1 against float64")
    monkeypatch.setattr(fused_module, "_failed_warned", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="failed their self-test"):
            fused_cpu_ops(torch.zeros(1))
        assert fused_cpu_ops(torch.zeros(1)) is None


def within_roundings(got: torch.Tensor, exact: torch.Tensor, scale: torch.Tensor, roundings: float) -> None:
    """|got - exact| <= roundings bf16 roundings of ``scale`` (the terms' magnitude), plus float32's."""
    error = (got.double() - exact).abs()
    bound = roundings * ROUNDING * scale + 1e-6 * scale + 1e-30
    assert (error <= bound).all(), f"max excess {(error / bound).max().item():.3g}"


def norm_case(width: int) -> tuple[Qwen2RMSNorm, torch.Tensor]:
    generator = torch.Generator().manual_seed(width)
    norm = Qwen2RMSNorm(width, eps=1e-6)
    with torch.no_grad():
        norm.weight.uniform_(-1.5, 1.5, generator=generator)
    return norm, (torch.randn(37, width, generator=generator) * 3).requires_grad_()


def rms_norm_float64(hidden: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return weight * hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + eps)


@needs_kernels
@pytest.mark.parametrize("width", [16, 40, 256])
@pytest.mark.parametrize("autocast", [False, True])
def test_rms_norm_forward_and_backward_match_float64(width: int, autocast: bool):
    """The norm's output (bf16 under autocast, the next matmul's input dtype: one rounding) and its
    gradients for the input and the weight, against float64 from the same inputs."""
    norm, hidden = norm_case(width)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out = OPS.rms_norm(norm, hidden)
        torch_out = norm(hidden).to(out.dtype)  # autocast's cast to the matmul's input
    assert type(out.grad_fn).__name__ == "_RMSNormBackward"  # the kernel, not the module it falls back to
    assert out.dtype == (torch.bfloat16 if autocast else torch.float32)
    exact = rms_norm_float64(hidden.double(), norm.weight.double(), norm.variance_epsilon)
    if autocast:
        within_roundings(out, exact, exact.abs(), 1)
        assert (out == torch_out).float().mean() > 0.98  # torch's arithmetic: the same value but near a tie
    else:
        within_roundings(out, exact, exact.abs().max(), 0)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out.dtype)
    got = torch.autograd.grad(out, [hidden, norm.weight], grad)
    expected = torch.autograd.grad(exact, [hidden, norm.weight], grad.double())
    for a, b in zip(got, expected):
        assert a.dtype == torch.float32
        within_roundings(a, b, b.abs().max(), 0)


def swiglu_float64(gate_up: torch.Tensor) -> torch.Tensor:
    gate, up = gate_up.double().chunk(2, dim=-1)
    return nn.functional.silu(gate) * up


@needs_kernels
@pytest.mark.parametrize("width", [24, 768])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_swiglu_forward_and_backward_match_float64(width: int, dtype: torch.dtype):
    """silu(gate) * up and the gradient of both halves: in bf16 within the two roundings torch
    makes (silu's output, then the product's), in float32 to float32 rounding; large |gate| too."""
    generator = torch.Generator().manual_seed(width)
    gate_up = (torch.randn(29, 2 * width, generator=generator) * 4).to(dtype)
    gate_up[0, :4] = torch.tensor([30.0, -30.0, 100.0, -100.0])
    gate_up.requires_grad_()
    out = OPS.swiglu(nn.SiLU(), gate_up)
    assert type(out.grad_fn).__name__ == "_SwiGLUBackward" and out.dtype == dtype and out.shape == (29, width)
    exact = swiglu_float64(gate_up)
    roundings = 2 if dtype == torch.bfloat16 else 0
    within_roundings(out, exact, exact.abs(), roundings)
    if dtype == torch.bfloat16:  # torch's own bf16 ops: the same values but near a tie
        gate, up = gate_up.chunk(2, dim=-1)
        assert (out == nn.functional.silu(gate) * up).float().mean() > 0.98
    grad = torch.randn(out.shape, generator=generator).to(dtype)
    (got,) = torch.autograd.grad(out, gate_up, grad)
    (expected,) = torch.autograd.grad(exact, gate_up, grad.double())
    # the terms' size: silu'(gate) = s + gate s (1 - s) cancels near gate = -1.28, in torch's formula too
    gate, up = gate_up.double().chunk(2, dim=-1)
    s = gate.sigmoid()
    scale = torch.cat([(grad.double() * up).abs() * (s + (gate * s * (1 - s)).abs()),
                       (grad.double() * nn.functional.silu(gate)).abs()], dim=-1)
    within_roundings(got, expected, scale, 2 * roundings)


@needs_kernels
@pytest.mark.parametrize("head_dim", [32, 64, 128])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rope_forward_and_backward_match_float64(head_dim: int, dtype: torch.dtype):
    """x cos + roll(x, d/2) sin on heads read from a wider projection (the query/key columns of
    Q/K/V), float32 out; the input's gradient in its dtype, rounded once."""
    generator = torch.Generator().manual_seed(head_dim)
    rows, heads = 23, 3
    qkv = torch.randn(rows, (heads + 1) * head_dim, generator=generator).to(dtype).requires_grad_()
    queries_keys = qkv[:, : heads * head_dim].view(rows, heads, head_dim)
    cos, sin = torch.randn(2, rows, 1, head_dim, generator=generator)
    out = OPS.rope(queries_keys, cos, sin)
    assert type(out.grad_fn).__name__ == "_RoPEBackward"
    assert out.dtype == torch.float32 and out.shape == (rows, heads, head_dim)
    x = queries_keys.double()
    terms = (x * cos.double(), x.roll(head_dim // 2, dims=-1) * sin.double())
    within_roundings(out, terms[0] + terms[1], terms[0].abs() + terms[1].abs(), 0)
    torch_out = queries_keys * cos + queries_keys.roll(head_dim // 2, dims=-1) * sin
    assert torch.equal(out, torch_out)  # the same products and sum in float32
    grad = torch.randn(out.shape, generator=generator)
    (got,) = torch.autograd.grad(out, qkv, grad)
    assert got.dtype == dtype and not got[:, heads * head_dim :].any()  # the value columns: no gradient
    parts = (grad.double() * cos.double(), (grad.double() * sin.double()).roll(-(head_dim // 2), dims=-1))
    exact = (parts[0] + parts[1]).flatten(1)
    scale = (parts[0].abs() + parts[1].abs()).flatten(1)
    within_roundings(got[:, : heads * head_dim], exact, scale, 1 if dtype == torch.bfloat16 else 0)


@needs_kernels
def test_a_nan_stays_in_its_row():
    """A NaN input gives NaN where torch's ops would, nowhere else (the trainer's NaN guard must see it)."""
    norm, hidden = norm_case(40)
    hidden = hidden.detach().clone()
    hidden[3, 7] = float("nan")
    out = OPS.rms_norm(norm, hidden)
    assert out[3].isnan().all() and out[torch.arange(37) != 3].isfinite().all()
    gate_up = torch.randn(4, 32)
    gate_up[1, 2] = float("nan")
    out = OPS.swiglu(nn.SiLU(), gate_up)
    assert out[1, 2].isnan() and out.isnan().sum() == 1


@needs_kernels
def test_replaced_or_hooked_modules_are_called_not_bypassed(monkeypatch):
    """A norm whose forward was replaced, or an activation with a hook, runs as itself."""
    norm, hidden = norm_case(16)
    monkeypatch.setattr(modeling_qwen2.Qwen2RMSNorm, "forward", lambda self, h: h * 2)
    torch.testing.assert_close(OPS.rms_norm(norm, hidden), hidden * 2)
    monkeypatch.undo()
    monkeypatch.setattr(nn.SiLU, "forward", lambda self, x: x * 3)  # a replaced activation class
    torch.testing.assert_close(OPS.swiglu(nn.SiLU(), gate_up := torch.randn(3, 32)), gate_up[:, :16] * 3 * gate_up[:, 16:])
    monkeypatch.undo()
    calls = []
    act_fn = nn.SiLU()
    act_fn.register_forward_hook(lambda module, args, out: calls.append(1))
    gate_up = torch.randn(3, 32)
    torch.testing.assert_close(OPS.swiglu(act_fn, gate_up), nn.functional.silu(gate_up[:, :16]) * gate_up[:, 16:])
    assert calls == [1]
    assert OPS.rope(torch.randn(3, 2, 48), torch.randn(3, 1, 48), torch.randn(3, 1, 48)) is None  # d/2 not 16k


def qwen2_head_dim_32() -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    return Qwen2ForCausalLM(Qwen2Config(vocab_size=96, hidden_size=128, intermediate_size=200, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                        tie_word_embeddings=True, attn_implementation="eager"))


def logits_and_grads(model: nn.Module, tensors: dict, autocast: bool, kernels: bool) -> tuple[torch.Tensor, list]:
    model = copy.deepcopy(model)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits = native_shared_prompt_logits(model, tensors, cpu_kernels=kernels)
    logits.double().pow(2).sum().backward()
    return logits.detach().double(), [p.grad.double() for p in model.parameters()]


@needs_kernels
def test_the_training_forward_with_kernels_is_as_accurate_as_with_torchs_ops(monkeypatch):
    """Float32: the logits and every gradient of torch's ops to float32 rounding. bf16 autocast:
    no further from float64 than torch's ops are (both round bf16 values; the kernels' differ near
    ties), which a wrong formula, a missing rounding or a wrong RoPE position would not be."""
    model = qwen2_head_dim_32()
    tensors = collate(make_group_samples(torch.Generator().manual_seed(3), groups=4), 0, "shared_prompt")
    # the C functions themselves, forward and backward (the wrappers fall back to torch's ops silently)
    ops = fused_cpu_ops(torch.zeros(1))  # the ones the forward gets now (a test may have reloaded the library)
    calls = dict.fromkeys(ops.functions, 0)

    def counting(name: str):
        function = ops.functions[name]

        def counted(*args):
            calls[name] += 1
            return function(*args)
        return counted

    for name in list(calls):
        monkeypatch.setitem(ops.functions, name, counting(name))
    fused32, fused32_grads = logits_and_grads(model, tensors, autocast=False, kernels=True)
    assert calls == {"rms_norm_forward": 5, "rms_norm_backward": 5, "swiglu_forward": 2, "swiglu_backward": 2,
                     "rope_forward": 2, "rope_backward": 2, "packed_attention_forward": 2,
                     "packed_attention_backward": 2, "packed_attention_scratch": 4}
    torch32, torch32_grads = logits_and_grads(model, tensors, autocast=False, kernels=False)
    torch.testing.assert_close(fused32, torch32, rtol=0, atol=2e-6 * torch32.abs().max())
    for a, b in zip(fused32_grads, torch32_grads):
        assert (a - b).abs().max() <= 1e-5 * b.abs().max()
    exact, exact_grads = logits_and_grads(model.double(), tensors, autocast=False, kernels=False)
    fused, fused_grads = logits_and_grads(model.float(), tensors, autocast=True, kernels=True)
    ours, ours_grads = logits_and_grads(model, tensors, autocast=True, kernels=False)
    assert (fused - exact).abs().max() <= 1.5 * (ours - exact).abs().max()
    for fused_grad, ours_grad, exact_grad in zip(fused_grads, ours_grads, exact_grads):
        assert (fused_grad - exact_grad).norm() <= 1.5 * (ours_grad - exact_grad).norm() + 1e-9


@needs_kernels
@pytest.mark.parametrize("enabled", [True, False])
def test_the_worker_uses_them_as_trainer_native_cpu_kernels_says(enabled: bool, monkeypatch):
    calls = []
    monkeypatch.setattr(FusedCpuOps, "swiglu", lambda self, act_fn, gate_up: calls.append(1) or swiglu_float64(gate_up).float())
    samples = make_group_samples(torch.Generator().manual_seed(4))
    w = worker(qwen2_head_dim_32(), "shared_prompt", 100_000, forward="native")
    w.cfg.native_cpu_kernels = enabled
    for sample, logprobs in zip(samples, w.compute_logprobs(samples).logprobs):
        sample.old_logprobs = logprobs
    assert len(calls) == (2 if enabled else 0)  # each layer's MLP
    w.accumulate_gradients(samples, *count_loss_tokens(samples))
    assert len(calls) == (4 if enabled else 0)


@needs_kernels
def test_checkpointed_layers_recompute_the_same_gradients_through_the_kernels(monkeypatch):
    """Gradient checkpointing runs each layer's kernels again in backward: the same gradients."""
    samples = make_group_samples(torch.Generator().manual_seed(6))
    for sample in samples:
        sample.old_logprobs = [-2.0] * len(sample.response_ids)
    grads, calls = [], []
    original = FusedCpuOps.swiglu
    monkeypatch.setattr(FusedCpuOps, "swiglu", lambda self, *args: calls.append(1) or original(self, *args))
    for recompute in (False, True):
        model = qwen2_head_dim_32()
        if recompute:
            model.activation_checkpointing_enable()
        calls.clear()
        worker(model, "shared_prompt", 100_000, forward="native").accumulate_gradients(samples)
        assert len(calls) == (4 if recompute else 2)  # each layer's MLP, again in backward where checkpointed
        grads.append([p.grad.clone() for p in model.parameters()])
    for a, b in zip(*grads):
        assert torch.equal(a, b)
