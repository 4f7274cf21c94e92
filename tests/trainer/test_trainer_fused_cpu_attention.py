"""The fused CPU attention of the training forward (dapo.trainer.fused_cpu_attention): forward and
backward against float64 on packed shared-prompt layouts (empty responses, prompts with no
responses, one to seven query heads per KV head), the same numbers on any thread count, NaN kept
where torch keeps it, the cases it declines, and the windowed models it leaves to the grids."""

from __future__ import annotations

import copy

import pytest
import torch
import transformers

from dapo.rollout import cpu_kernels
from dapo.trainer.batch import collate
from dapo.trainer.fused_cpu_attention import attention_reference, attention_segments, sees
from dapo.trainer.fused_cpu_ops import fused_cpu_ops
from dapo.trainer.native_forward import native_shared_prompt_logits
from tests.trainer.test_trainer_shared_prompt import make_group_samples

OPS = fused_cpu_ops(torch.zeros(1))
needs_kernels = pytest.mark.skipif(OPS is None,
                                   reason=f"kernels unavailable: {cpu_kernels.unavailable_reason(decode=False)}")
ROUNDING = 2**-8  # half a bf16 spacing, relative


def layout(prompt_lengths: list[int], row_lengths: list[int], row_prompts: list[int]):
    """Segments of left-padded prompts and right-padded continuations, as collate lays them out."""
    width = max(prompt_lengths)
    prompt_mask = torch.arange(width) >= width - torch.tensor(prompt_lengths)[:, None]
    continuation_mask = torch.arange(max(row_lengths)) < torch.tensor(row_lengths)[:, None]
    return attention_segments(prompt_mask, continuation_mask, torch.tensor(row_prompts))


LAYOUTS = {
    "groups": ([5, 3, 1], [6, 6, 2, 0, 9, 1, 4], [0, 0, 1, 1, 2, 0, 2]),
    "a_prompt_without_responses": ([4, 2], [3, 5], [1, 1]),
    "long_rows": ([17], [33, 40, 1], [0, 0, 0]),
    # segments past the backward's block of 64 query tokens: a prompt of 70, rows of 130, 65 and 64 (one whole block)
    "blocks": ([70, 3], [130, 0, 65, 64], [0, 1, 1, 0]),
}
# query heads per KV head: 2, 1, 4, 4, 3, 7 (Qwen2.5-0.5B's: head pairs and a lone head in one group) and 2,
# the last with a head of 336 (past 256, and five 64-column blocks and a 16-column one)
HEADS = {"gqa_4_2_64": (4, 2, 64), "mha_2_2_32": (2, 2, 32), "gqa_8_2_16": (8, 2, 16), "mqa_4_1_128": (4, 1, 128),
         "gqa_6_2_64": (6, 2, 64), "gqa_14_2_64": (14, 2, 64), "gqa_2_1_336": (2, 1, 336)}


def inputs(segments, heads: tuple[int, int, int], value_dtype: torch.dtype, seed: int = 0):
    query_heads, kv_heads, head_dim = heads
    generator = torch.Generator().manual_seed(seed)
    tokens = segments.num_tokens
    queries_keys = torch.randn(tokens, query_heads + kv_heads, head_dim, generator=generator, requires_grad=True)
    # the values as the forward passes them: the last columns of the Q/K/V matmul's output, a strided view
    qkv = torch.randn(tokens, (query_heads + 2 * kv_heads) * head_dim, generator=generator).to(value_dtype)
    qkv.requires_grad_()
    return queries_keys, qkv, qkv[:, (query_heads + kv_heads) * head_dim:], (*heads, head_dim**-0.5)


@needs_kernels
@pytest.mark.parametrize("value_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("heads", list(HEADS.values()), ids=list(HEADS))
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_forward_and_gradients_match_float64(name: str, heads: tuple[int, int, int], value_dtype: torch.dtype):
    """float32 to float32 rounding; bf16 values: the output and the values' gradient rounded once
    to bf16 (the queries' and keys' gradients stay float32)."""
    segments = layout(*LAYOUTS[name])
    queries_keys, qkv, values, full_heads = inputs(segments, heads, value_dtype)
    out = OPS.attention(queries_keys, values, segments, full_heads)
    assert out is not None and out.dtype == value_dtype
    exact_qk, exact_values = (t.detach().double().requires_grad_() for t in (queries_keys, values))
    exact = attention_reference(exact_qk, exact_values, segments, full_heads)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(value_dtype)
    got_qk, got_qkv = torch.autograd.grad(out, [queries_keys, qkv], grad)
    exact_grad_qk, exact_grad_values = torch.autograd.grad(exact, [exact_qk, exact_values], grad.double())
    got_values = got_qkv[:, -values.shape[1]:].double()
    assert not got_qkv[:, :-values.shape[1]].any()  # the queries' and keys' columns get theirs through RoPE
    rounding = ROUNDING if value_dtype == torch.bfloat16 else 0.0
    assert ((out.double() - exact).abs() <= rounding * exact.abs() + 1e-5 * exact.abs().max()).all()
    assert (got_qk.double() - exact_grad_qk).abs().max() <= 1e-5 * exact_grad_qk.abs().max()
    assert ((got_values - exact_grad_values).abs()
            <= rounding * exact_grad_values.abs() + 1e-5 * exact_grad_values.abs().max()).all()


def test_the_reference_mask_is_the_shared_prompt_layouts():
    """Prompt 0 (2 tokens) and prompt 1 (1 token); row 0 (2 tokens) after prompt 1, row 1 (1 token) after prompt 0."""
    visible = sees(layout([2, 1], [2, 1], [1, 0])).int()
    assert visible.tolist() == [[1, 0, 0, 0, 0, 0],
                                [1, 1, 0, 0, 0, 0],
                                [0, 0, 1, 0, 0, 0],
                                [0, 0, 1, 1, 0, 0],
                                [0, 0, 1, 1, 1, 0],
                                [1, 1, 0, 0, 0, 1]]


@needs_kernels
@pytest.mark.parametrize("name", ["groups", "blocks"])
def test_the_same_numbers_on_any_thread_count(name: str):
    """Each prompt's keys sum their responses' gradients in one thread, in a fixed order."""
    segments = layout(*LAYOUTS[name])
    results = []
    threads = torch.get_num_threads()
    try:
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            queries_keys, qkv, values, heads = inputs(segments, (4, 2, 64), torch.bfloat16)
            out = OPS.attention(queries_keys, values, segments, heads)
            results.append([out, *torch.autograd.grad(out.float().sum(), [queries_keys, qkv])])
    finally:
        torch.set_num_threads(threads)
    for other in results[1:]:
        assert all(torch.equal(a, b) for a, b in zip(results[0], other))


@needs_kernels
def test_backward_memory_grows_with_the_keys_not_queries_times_keys():
    """A thread's backward scratch for Qwen2.5-0.5B's heads (G = 7, d = 64), a 512-token prompt and
    4096-token responses: p and ds of one block of 64 query tokens, about 19 MB (all of a response's
    lines at once would be 2 G L (P + L) floats, 1 GB)."""
    floats = OPS.functions["packed_attention_scratch"](512, 4096, 7, 64, 1)
    assert floats * 4 < 32 * 2**20
    assert OPS.functions["packed_attention_scratch"](512, 8192, 7, 64, 1) < 2.2 * floats  # linear in the keys


@needs_kernels
def test_a_nan_query_makes_its_own_outputs_nan_only():
    """As torch's softmax: the NaN reaches the loss (where the NaN guard stops the step), and no other token."""
    segments = layout(*LAYOUTS["groups"])
    queries_keys, _, values, heads = inputs(segments, (4, 2, 64), torch.float32)
    with torch.no_grad():
        queries_keys[7, 1, 3] = float("nan")  # token 7, query head 1
    out = OPS.attention(queries_keys, values, segments, heads).view(segments.num_tokens, 4, 64)
    assert out[7, 1].isnan().all()
    out[7, 1] = 0.0
    assert not out.isnan().any()


@needs_kernels
def test_what_it_declines():
    segments = layout(*LAYOUTS["groups"])
    queries_keys, _, values, heads = inputs(segments, (4, 2, 64), torch.float32)
    assert OPS.attention(queries_keys.bfloat16(), values, segments, heads) is None  # rotated q/k are float32
    assert OPS.attention(queries_keys, values.half(), segments, heads) is None
    odd, _, odd_values, odd_heads = inputs(segments, (4, 2, 24), torch.float32)  # a head of 24: not 16k
    assert OPS.attention(odd, odd_values, segments, odd_heads) is None
    assert OPS.attention(queries_keys[:-1], values[:-1], segments, heads) is None  # not the layout's tokens


@needs_kernels
@pytest.mark.parametrize("window", [3, "longest", 4096])
def test_a_windowed_model_attends_on_the_grids_where_a_sequence_is_longer_than_its_window(monkeypatch, window):
    """Mistral's sliding window is not the kernel's mask: the forward leaves it to the grids where
    a key leaves a window; where none does (Mistral's default window of 4096, a window as long as
    the longest sequence) attention is causal, and the kernel computes it (it never did)."""
    torch.manual_seed(0)
    samples = make_group_samples(torch.Generator().manual_seed(3))
    longest = max(len(s.prompt_ids) + len(s.response_ids) for s in samples)
    model = transformers.MistralForCausalLM(transformers.MistralConfig(
        vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, sliding_window=longest if window == "longest" else window,
        attn_implementation="eager"))
    tensors = collate(samples, 0, "shared_prompt")
    calls = []
    ops = fused_cpu_ops(torch.zeros(1))  # those the forward loads now (a test that reloads them makes new ones)
    forward = ops.functions["packed_attention_forward"]
    monkeypatch.setitem(ops.functions, "packed_attention_forward", lambda *args: calls.append(1) or forward(*args))
    with_kernels = native_shared_prompt_logits(copy.deepcopy(model), tensors, cpu_kernels=True)
    assert len(calls) == (0 if window == 3 else model.config.num_hidden_layers)
    torch.testing.assert_close(with_kernels, native_shared_prompt_logits(model, tensors), rtol=0, atol=1e-5)
