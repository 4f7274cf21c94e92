"""The fused GPU layer kernels (dapo.trainer.fused_gpu_ops over dapo.trainer.layer_kernels_triton),
run on the CPU by Triton's interpreter (TRITON_INTERPRET=1, set before Triton compiles anything,
so in a fresh process): each op's forward against Hugging Face's eager module (float32 to its
rounding; bf16 and under bf16 autocast to a spacing per rounding: the interpreter truncates to
bf16 where a GPU rounds to nearest, which the accelerator test holds to eager's exact roundings)
and its backward against float64, at
widths and head counts that are not powers of two, RoPE on a strided view of the fused QKV
output; and dapo-rl's training forward with them against the same forward on torch's ops
(float32) and against float64 (bf16 weights, bf16 autocast). Skipped where Triton is not
installed (a GPU run also checks them: tests/trainer/test_trainer_layer_kernels_accelerator.py)."""

from __future__ import annotations

import textwrap

import pytest
import torch

from dapo.trainer import fused_gpu_ops
from dapo.trainer import native_forward as native_module
from dapo.trainer.batch import count_loss_tokens
from tests.trainer.test_trainer_fused_cpu_ops import qwen2_head_dim_32
from tests.trainer.test_trainer_shared_prompt import make_group_samples, worker
from tests.triton_interpreter import (
    NO_COMPILER,
    assert_warns_once_and_declines,
    needs_triton,
    run_in_interpreter,
)

CHECK = textwrap.dedent("""
    import copy
    import torch
    from torch import nn
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm
    from dapo.trainer import layer_kernels_triton, native_forward
    from dapo.trainer.batch import collate
    from dapo.trainer.fused_gpu_ops import FusedGpuOps
    from tests.trainer.test_trainer_shared_prompt import make_group_samples

    from dapo.trainer.fused_gpu_ops import _launches
    assert _launches(torch.device("cpu"))  # the probe runs each kernel once, forward and backward
    ops = FusedGpuOps(layer_kernels_triton)
    # a rounding's relative error at most: half a spacing in float32; a whole one in bf16, which the
    # interpreter truncates to
    ROUNDING = {torch.float32: 2**-24, torch.bfloat16: 2**-7}
    torch.manual_seed(0)
    checked = 0

    def grads(out, inputs, grad):
        return torch.autograd.grad(out, inputs, grad)

    # RMSNorm: (residual dtype, weight dtype, autocast) as the three precisions run it
    for rows, width in ((7, 40), (1030, 24)):  # 1030 rows: more than the backward's 512 blocks
        for hidden_dtype, weight_dtype, autocast in ((torch.float32, torch.float32, False),
                                                     (torch.float32, torch.float32, True),
                                                     (torch.bfloat16, torch.bfloat16, False)):
            norm = Qwen2RMSNorm(width, eps=1e-6).to(weight_dtype)
            with torch.no_grad():
                norm.weight.uniform_(0.5, 1.5)
            hidden = (torch.randn(rows, width) * 3).to(hidden_dtype).requires_grad_()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                out = ops.rms_norm(norm, hidden)
                eager = norm(hidden)
            out_dtype = torch.bfloat16 if autocast or hidden_dtype == torch.bfloat16 else torch.float32
            assert out.dtype == out_dtype, (out.dtype, autocast)
            eager = eager.to(out_dtype).double()
            # float32: another summation order of the mean; bf16: the normed value and the product rounded
            bound = 3 * ROUNDING[out_dtype] * eager.abs() + 1e-6
            assert ((out.double() - eager).abs() <= bound).all(), ("rms_norm", width, hidden_dtype, autocast)
            h, w = hidden.detach().double().requires_grad_(), norm.weight.detach().double().requires_grad_()
            exact = w * h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
            grad = torch.randn(rows, width).to(out_dtype)
            got = grads(out, [hidden, norm.weight], grad)
            expected = grads(exact, [h, w], grad.double())
            assert got[0].dtype == hidden_dtype and got[1].dtype == weight_dtype
            for a, b in zip(got, expected):  # float32 sums; bf16: a rounding of each input and output
                tolerance = 1e-5 if out_dtype == torch.float32 and hidden_dtype == torch.float32 else 2e-2
                assert (a.double() - b).abs().max() <= tolerance * b.abs().max(), ("rms_norm grad", width, hidden_dtype)
            checked += 1

    # SwiGLU: silu(gate) * up, eager rounding silu's output, then the product
    for dtype in (torch.float32, torch.bfloat16):
        for width in (24, 1500):  # 1500: two column blocks, the second partial
            gate_up = (torch.randn(5, 2 * width) * 3).to(dtype).requires_grad_()
            out = ops.swiglu(nn.SiLU(), gate_up)
            gate, up = gate_up.chunk(2, dim=-1)
            eager = (nn.functional.silu(gate) * up).double()
            assert out.dtype == dtype
            # silu and the product rounded, eager and here (float32: silu as g sigma(g), a rounding more)
            bound = (1e-6 if dtype == torch.float32 else 3 * ROUNDING[dtype]) * eager.abs() + 1e-30
            assert ((out.double() - eager).abs() <= bound).all(), ("swiglu", dtype)
            x = gate_up.detach().double().requires_grad_()
            exact = nn.functional.silu(x[:, :width]) * x[:, width:]
            grad = torch.randn(5, width).to(dtype)
            got, = grads(out, [gate_up], grad)
            expected, = grads(exact, [x], grad.double())
            error = (got.double() - expected).abs() - 4 * ROUNDING[dtype] * expected.abs()
            assert error.max() <= 1e-6 * expected.abs().max(), ("swiglu grad", dtype, width)
            checked += 1
    odd = torch.randn(3, 7)  # not gate and up halves: torch's ops, which say so
    try:
        ops.swiglu(nn.SiLU(), odd)
    except RuntimeError as error:
        assert "size of tensor" in str(error), error
    else:
        raise AssertionError("an odd width reached the kernel")

    # RoPE on the query and key heads of a fused QKV output (rows at its stride), d not a power of two
    for dtype, table_dtype in ((torch.float32, torch.float32), (torch.bfloat16, torch.float32),
                               (torch.bfloat16, torch.bfloat16)):
        for heads, kv, head_dim in ((3, 1, 64), (4, 2, 80)):
            qkv = torch.randn(6, (heads + 2 * kv) * head_dim).to(dtype).requires_grad_()
            queries_keys = qkv[:, :(heads + kv) * head_dim].view(6, heads + kv, head_dim)
            cos, sin = (torch.randn(6, 1, head_dim).to(table_dtype) for _ in range(2))
            out = ops.rope(queries_keys, cos, sin)
            eager = queries_keys * cos + queries_keys.roll(head_dim // 2, dims=-1) * sin
            assert out.dtype == eager.dtype and out.is_contiguous()
            # each product rounded, then the sum: float32 exactly as eager, bf16 a spacing per rounding
            terms = (queries_keys * cos).abs() + (queries_keys.roll(head_dim // 2, dims=-1) * sin).abs()
            bound = 0 if out.dtype == torch.float32 else 4 * ROUNDING[out.dtype] * terms.double()
            assert ((out.double() - eager.double()).abs() <= bound).all(), ("rope", dtype, table_dtype, head_dim)
            x = qkv.detach().double().requires_grad_()
            qk = x[:, :(heads + kv) * head_dim].view(6, heads + kv, head_dim)
            exact = qk * cos.double() + qk.roll(head_dim // 2, dims=-1) * sin.double()
            grad = torch.randn(out.shape).to(out.dtype)
            got, = grads(out, [qkv], grad)
            expected, = grads(exact, [x], grad.double())
            assert got.dtype == dtype and got[:, (heads + kv) * head_dim:].abs().max() == 0  # values: no gradient
            error = (got.double() - expected).abs() - 2 * ROUNDING[dtype] * expected.abs()
            assert error.max() <= 1e-6 * expected.abs().max(), ("rope grad", dtype, table_dtype, head_dim)
            checked += 1

    # dapo-rl's training forward with the kernels (forced on the CPU: the interpreter runs them)
    native_forward.fused_gpu_ops = lambda hidden: ops if hidden.dtype != torch.float64 else None
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=96, hidden_size=96, intermediate_size=200, num_hidden_layers=2,
                                         num_attention_heads=3, num_key_value_heads=1, max_position_embeddings=128,
                                         tie_word_embeddings=True, attn_implementation="sdpa"))
    tensors = collate(make_group_samples(torch.Generator().manual_seed(3), groups=3), 0, "shared_prompt")
    calls = {"rms_norm": 0, "swiglu": 0, "rope": 0}
    for name in calls:
        kernel = getattr(layer_kernels_triton, name + "_forward")
        def counted(*args, name=name, kernel=kernel):
            calls[name] += 1
            return kernel(*args)
        setattr(layer_kernels_triton, name + "_forward", counted)

    def logits_and_grads(model, autocast, kernels):
        model = copy.deepcopy(model)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = native_forward.native_shared_prompt_logits(model, tensors, gpu_kernels=kernels)
        logits.double().pow(2).sum().backward()
        return logits.detach().double(), [p.grad.double() for p in model.parameters()]

    fused32, fused32_grads = logits_and_grads(model, False, True)
    assert calls == {"rms_norm": 5, "swiglu": 2, "rope": 2}, calls
    torch32, torch32_grads = logits_and_grads(model, False, False)
    assert (fused32 - torch32).abs().max() <= 2e-6 * torch32.abs().max()
    for a, b in zip(fused32_grads, torch32_grads):
        assert (a - b).abs().max() <= 1e-5 * b.abs().max()
    exact, exact_grads = logits_and_grads(model.double(), False, False)
    for case in ({"autocast": True}, {"bf16": True}):
        source = model.to(torch.bfloat16) if "bf16" in case else model.float()
        fused, fused_grads = logits_and_grads(source, case.get("autocast", False), True)
        ours, ours_grads = logits_and_grads(source, case.get("autocast", False), False)
        # no further from float64 than torch's ops, but for the interpreter's truncation to bf16,
        # whose one-sided errors add up (1.0-1.9x torch's here; a GPU's: the accelerator test)
        assert (fused - exact).abs().max() <= 2.5 * (ours - exact).abs().max(), case
        for fused_grad, ours_grad, exact_grad in zip(fused_grads, ours_grads, exact_grads):
            assert (fused_grad - exact_grad).norm() <= 2.5 * (ours_grad - exact_grad).norm() + 1e-9, case
        model.float()
    print("checked", checked)
""")


@needs_triton
def test_the_fused_layer_kernels_equal_eager_and_float64_in_triton_interpreter():
    assert "checked 16" in run_in_interpreter(CHECK, timeout=600)


def test_kernels_that_fail_to_launch_leave_torchs_ops_with_a_warning(monkeypatch):
    """Triton builds its launcher with the system's C compiler at the first launch: a machine
    without one fails there. The forward then runs on torch's ops, said once."""

    class Unbuildable:
        @staticmethod
        def rms_norm_forward(*args):
            raise NO_COMPILER

    monkeypatch.setattr(fused_gpu_ops, "_kernels", lambda: Unbuildable)
    assert_warns_once_and_declines(fused_gpu_ops._launches)


def test_they_run_on_cuda_only_and_never_in_float64():
    assert fused_gpu_ops.fused_gpu_ops(torch.zeros(2, 4)) is None  # the CPU has its own (fused_cpu_ops)
    assert fused_gpu_ops.fused_gpu_ops(torch.zeros(2, 4, dtype=torch.float64)) is None


@pytest.mark.parametrize("enabled", [True, False])
def test_the_worker_uses_them_as_trainer_native_gpu_kernels_says(enabled: bool, monkeypatch):
    """The flag reaches the forward of both passes (old log-probs and the update)."""
    asked = []
    monkeypatch.setattr(native_module, "fused_gpu_ops", lambda hidden: asked.append(1))
    samples = make_group_samples(torch.Generator().manual_seed(4))
    w = worker(qwen2_head_dim_32(), "shared_prompt", 100_000, forward="native")
    w.cfg.native_cpu_kernels = False
    w.cfg.native_gpu_kernels = enabled
    for sample, logprobs in zip(samples, w.compute_logprobs(samples).logprobs):
        sample.old_logprobs = logprobs
    assert len(asked) == (1 if enabled else 0)
    w.accumulate_gradients(samples, *count_loss_tokens(samples))
    assert len(asked) == (2 if enabled else 0)
