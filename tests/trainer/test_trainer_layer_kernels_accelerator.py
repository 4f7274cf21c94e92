"""The fused GPU layer kernels (dapo.trainer.fused_gpu_ops) on CUDA (tests/accelerator.py; skipped
without a GPU; Triton's interpreter checks them on the CPU: test_trainer_fused_gpu_ops.py). At
Qwen2.5-0.5B's widths: RoPE rounds exactly as Hugging Face's eager arithmetic (bit for bit),
RMSNorm and SwiGLU to a spacing or two of it (float32: a few float32 spacings; another summation
order, another exp), gradients to float64's; dapo-rl's forward with them is
no further from float64 than on torch's ops, and gives the same bits twice (bit-identical resume)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from transformers import Qwen2Config, Qwen2ForCausalLM
from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm

from dapo.trainer.batch import collate
from dapo.trainer.fused_gpu_ops import fused_gpu_ops
from dapo.trainer.native_forward import native_shared_prompt_logits
from tests.accelerator import DEVICE, needs_accelerator
from tests.trainer.test_trainer_shared_prompt import make_group_samples

pytestmark = [needs_accelerator, pytest.mark.skipif(DEVICE.type != "cuda", reason="the kernels are CUDA's")]
SPACING = {torch.float32: 2**-23, torch.bfloat16: 2**-7}  # relative: one step of the dtype


def ops():
    found = fused_gpu_ops(torch.zeros(1, 8, device=DEVICE))
    assert found is not None, "the Triton layer kernels did not launch"
    return found


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_each_kernel_rounds_as_eager_and_differentiates_as_float64(dtype):
    torch.manual_seed(0)
    rows, hidden, heads, kv, head_dim, inter = 4096, 896, 14, 2, 64, 4864
    norm = Qwen2RMSNorm(hidden, eps=1e-6).to(DEVICE, dtype)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = (torch.randn(rows, hidden, device=DEVICE) * 3).to(dtype).requires_grad_()
    out, eager = ops().rms_norm(norm, x), norm(x)
    # r summed in another order: float32 a few spacings; bf16, where the normed value rounds to a
    # neighbour, one spacing there and one in the product, rarely
    bound = (2 if dtype == torch.bfloat16 else 4) * SPACING[dtype] * eager.double().abs()
    assert ((out.double() - eager.double()).abs() <= bound).all()
    if dtype == torch.bfloat16:
        assert (out != eager).float().mean() < 0.01
    h, w = x.detach().double().requires_grad_(), norm.weight.detach().double().requires_grad_()
    grad = torch.randn(rows, hidden, device=DEVICE).to(dtype)
    got = torch.autograd.grad(out, [x, norm.weight], grad)
    want = torch.autograd.grad(w * h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6), [h, w], grad.double())
    for a, b in zip(got, want):
        assert (a.double() - b).abs().max() <= (1e-2 if dtype == torch.bfloat16 else 1e-5) * b.abs().max()

    gate_up = (torch.randn(rows, 2 * inter, device=DEVICE) * 3).to(dtype).requires_grad_()
    out = ops().swiglu(nn.SiLU(), gate_up)
    eager = nn.functional.silu(gate_up[:, :inter]) * gate_up[:, inter:]
    bound = (2 * SPACING[dtype] if dtype == torch.bfloat16 else 1e-6) * eager.double().abs()  # float32: silu's exp
    assert ((out.double() - eager.double()).abs() <= bound + 1e-30).all()
    g = gate_up.detach().double().requires_grad_()
    grad = torch.randn(rows, inter, device=DEVICE).to(dtype)
    got, = torch.autograd.grad(out, [gate_up], grad)
    want, = torch.autograd.grad(nn.functional.silu(g[:, :inter]) * g[:, inter:], [g], grad.double())
    assert ((got.double() - want).abs() <= 2 * SPACING[dtype] * want.abs() + 1e-6 * want.abs().max()).all()

    qkv = torch.randn(rows, (heads + 2 * kv) * head_dim, device=DEVICE).to(dtype).requires_grad_()
    queries_keys = qkv[:, :(heads + kv) * head_dim].view(rows, heads + kv, head_dim)
    cos, sin = (torch.randn(rows, 1, head_dim, device=DEVICE).to(dtype) for _ in range(2))
    out = ops().rope(queries_keys, cos, sin)
    eager = queries_keys * cos + queries_keys.roll(head_dim // 2, dims=-1) * sin
    assert torch.equal(out, eager)  # each product rounded, then the sum, as eager (no fused multiply-add)
    q = qkv.detach().double().requires_grad_()
    qk = q[:, :(heads + kv) * head_dim].view(rows, heads + kv, head_dim)
    grad = torch.randn(out.shape, device=DEVICE).to(dtype)
    got, = torch.autograd.grad(out, [qkv], grad)
    want, = torch.autograd.grad(qk * cos.double() + qk.roll(head_dim // 2, dims=-1) * sin.double(), [q], grad.double())
    assert ((got.double() - want).abs() <= SPACING[dtype] * want.abs() + 1e-6 * want.abs().max()).all()


def test_the_forward_with_them_is_as_accurate_as_on_torchs_ops_and_deterministic():
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=96, hidden_size=128, intermediate_size=200, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                         tie_word_embeddings=True, attn_implementation="sdpa")).to(DEVICE)
    tensors = {k: v.to(DEVICE) for k, v in collate(make_group_samples(torch.Generator().manual_seed(3), groups=4), 0,
                                                   "shared_prompt").items()}

    def logits_and_grads(model, autocast: bool, kernels: bool):
        model = copy.deepcopy(model)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            logits = native_shared_prompt_logits(model, tensors, gpu_kernels=kernels)
        logits.double().pow(2).sum().backward()
        return logits.detach().double(), [p.grad.double() for p in model.parameters()]

    ops()
    fused32, fused32_grads = logits_and_grads(model, False, True)
    torch32, torch32_grads = logits_and_grads(model, False, False)
    assert (fused32 - torch32).abs().max() <= 2e-6 * torch32.abs().max()
    for a, b in zip(fused32_grads, torch32_grads):
        assert (a - b).abs().max() <= 1e-5 * b.abs().max()
    exact, exact_grads = logits_and_grads(model.double(), False, False)
    for autocast, source in ((True, model.float()), (False, copy.deepcopy(model).to(torch.bfloat16))):
        fused, fused_grads = logits_and_grads(source, autocast, True)
        ours, ours_grads = logits_and_grads(source, autocast, False)
        assert (fused - exact).abs().max() <= 1.5 * (ours - exact).abs().max(), autocast
        for fused_grad, ours_grad, exact_grad in zip(fused_grads, ours_grads, exact_grads):
            assert (fused_grad - exact_grad).norm() <= 1.5 * (ours_grad - exact_grad).norm() + 1e-9, autocast
        again, again_grads = logits_and_grads(source, autocast, True)
        assert torch.equal(again, fused) and all(torch.equal(a, b) for a, b in zip(again_grads, fused_grads))
