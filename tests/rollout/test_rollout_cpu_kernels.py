"""The fused CPU decode kernels (dapo.rollout.cpu_kernels): their numbers against float64, the
decoder's use of them, and the fallback where they cannot be built."""

from __future__ import annotations

import os
import shutil
import time
import warnings
from types import SimpleNamespace

import pytest
import torch
from rollout_helpers import teacher_forced_logprobs
from transformers import Qwen2Config, Qwen2ForCausalLM

from dapo.config.schema import RolloutConfig
from dapo.rollout import NativeEngine, SamplingParams, cpu_kernels, llama_decoder
from dapo.rollout.decode_case import random_decode_case
from dapo.rollout.factory import create_engine
from dapo.rollout.llama_weights import LlamaWeights

KERNELS = cpu_kernels.cpu_decode_kernels()
needs_kernels = pytest.mark.skipif(KERNELS is None, reason=f"kernels unavailable: {cpu_kernels.unavailable_reason()}")
BF16_ROUNDING = 2**-8  # half a bf16 spacing, relative: the most one rounding of the result moves it


@pytest.mark.skipif(cpu_kernels.platform_reason(decode=True) is not None
                    or shutil.which(os.environ.get("CC") or "cc") is None,
                    reason="not a CPU the kernels are for, or no C compiler")
def test_the_kernels_build_and_pass_their_self_test_where_they_are_for():
    """The kernel tests below skip where the kernels are unavailable: on a CPU they are for, with a
    compiler, unavailable is a failure (a broken build or self-test), not a skip."""
    assert KERNELS is not None, cpu_kernels.unavailable_reason()


@needs_kernels
@pytest.mark.parametrize(("kv_heads", "groups", "head_dim"), [(2, 1, 32), (2, 2, 64), (1, 4, 128), (2, 7, 64),
                                                              (1, 16, 32), (3, 2, 256)])
@pytest.mark.parametrize("slot", [0, 5, 15, 16, 17, 100, 300])
def test_attention_matches_float64_to_one_bf16_rounding(kv_heads: int, groups: int, head_dim: int, slot: int):
    """Each output is float64 attention (of the RoPE'd queries and key rounded to bf16, as the
    torch path and the cache hold them) rounded once to bf16, give or take float32 sums; the key
    written into the cache is float64 RoPE rounded to bf16 and the value is the projection's."""
    case = random_decode_case(rows=5, kv_heads=kv_heads, groups=groups, head_dim=head_dim,
                                          capacity=slot + 9, slot=slot)
    reference = case.reference()
    out = KERNELS.attention(*case.arguments())
    assert out.shape == (5 * kv_heads, groups, head_dim) and out.dtype == torch.bfloat16
    error = (out.double() - reference).abs()
    assert (error <= reference.abs() * BF16_ROUNDING * 1.01 + 1e-4).all(), error.max()
    assert torch.equal(case.keys[:, slot].double(), case.rotated_key())
    assert torch.equal(case.values[:, slot], case.qkv[:, :, groups + 1].flatten(0, 1))


@needs_kernels
def test_attention_reads_neither_masked_slots_nor_slots_past_the_step():
    """A masked slot (bias -inf) has weight exactly 0 and slots past ``slot`` are not read: huge or
    NaN values there leave the output as it is (random_decode_case already fills them with 1e4)."""
    case = random_decode_case(rows=3, kv_heads=2, groups=2, head_dim=64, capacity=40, slot=29)
    out = KERNELS.attention(*case.arguments())
    case.keys[:, 30:] = float("nan")
    case.values[:, 30:] = float("nan")
    masked = case.bias == float("-inf")
    assert masked.any()
    case.values[masked] = 1e30
    assert torch.equal(KERNELS.attention(*case.arguments()), out)


@needs_kernels
def test_a_nan_key_reaches_the_output_as_in_torch():
    """A NaN score is not a zero weight: the pair whose key is NaN gets NaN outputs (torch's
    softmax propagates it), the other pairs stay finite."""
    case = random_decode_case(rows=2, kv_heads=2, groups=2, head_dim=64, capacity=30, slot=20)
    case.keys[1, 10] = float("nan")
    out = KERNELS.attention(*case.arguments())
    assert out[1].isnan().all() and not out[[0, 2, 3]].isnan().any()


@needs_kernels
def test_results_do_not_depend_on_the_thread_count():
    case = random_decode_case(rows=9, kv_heads=2, groups=2, head_dim=64, capacity=60, slot=50)
    hidden = torch.randn(300, 256).bfloat16()  # enough rows for rms_scale to split them
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        single = KERNELS.attention(*case.arguments()), KERNELS.rms_scale(hidden, 0.3)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(KERNELS.attention(*case.arguments()), single[0])
    assert torch.equal(KERNELS.rms_scale(hidden, 0.3), single[1])


@needs_kernels
@pytest.mark.parametrize("rows", [1, 7, 300])
def test_rms_scale_is_the_folded_rmsnorm_to_one_bf16_rounding(rows: int):
    """x / hypot(||x||, floor) per row: the decoder's folded RMSNorm (sqrt(n) and the weight are
    in the next matmul), rounded once to bf16."""
    hidden = torch.randn(rows, 896, generator=torch.Generator().manual_seed(rows)).mul(3).bfloat16()
    norm = torch.linalg.vector_norm(hidden.double(), dim=-1, keepdim=True)
    exact = hidden.double() / norm.hypot(torch.tensor(0.7, dtype=torch.float64))
    error = (KERNELS.rms_scale(hidden, 0.7).double() - exact).abs()
    assert (error <= exact.abs() * BF16_ROUNDING * 1.01 + 1e-7).all(), error.max()


@needs_kernels
def test_kernels_refuse_inputs_they_would_misread():
    case = random_decode_case(rows=3, kv_heads=2, groups=2, head_dim=64, capacity=20, slot=10)
    arguments = list(case.arguments())
    with pytest.raises(TypeError, match="bfloat16"):
        KERNELS.attention(case.qkv.float(), *arguments[1:])
    with pytest.raises(TypeError, match="contiguous"):
        KERNELS.attention(case.qkv, case.rope, case.positions, case.keys.mT.contiguous().mT, *arguments[4:])
    with pytest.raises(ValueError, match="slot 20 of capacity 20"):
        KERNELS.attention(*arguments[:6], 20, case.scale)
    with pytest.raises(ValueError, match="do not fit together"):
        KERNELS.attention(case.qkv, case.rope, case.positions[:2], *arguments[3:])
    case.positions[1] = case.rope.shape[0]  # one past the table: refused before anything is read
    with pytest.raises(ValueError, match="outside the RoPE table"):
        KERNELS.attention(*case.arguments())
    case.positions[1] = -1
    with pytest.raises(ValueError, match="outside the RoPE table"):
        KERNELS.attention(*case.arguments())
    with pytest.raises(ValueError, match="n % 16 == 0"):
        KERNELS.rms_scale(torch.zeros(2, 40, dtype=torch.bfloat16), 0.1)
    assert not KERNELS.supports(2, 48) and not KERNELS.supports(17, 64) and not KERNELS.supports(2, 512)
    assert KERNELS.supports(16, 128)


def _qwen2_head_dim_64() -> Qwen2ForCausalLM:
    """A tiny Qwen2 whose heads the kernels compute (head_dim 64, two query heads per KV head),
    its query and key projections scaled up so that attention is peaked: with a random model's
    near-uniform attention, a decode that skipped RoPE or used the wrong positions would change
    its logits by less than bf16 rounding does."""
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=50, hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=192, max_position_embeddings=256,
                         tie_word_embeddings=True)
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(8)
            layer.self_attn.k_proj.weight.mul_(8)
    assert model.config.hidden_size // model.config.num_attention_heads == 64
    return model


@needs_kernels
@pytest.mark.parametrize("rows", [2, 64])
def test_decode_steps_with_the_kernels_match_the_torch_ops(rows: int):
    """The same tokens fed to two bf16 decode sessions, one on the kernels and one on torch ops
    (float32 attention at 2 rows, bf16 at 64): logits agree to bf16 rounding (at most 0.06 and
    0.12 apart on this peaked model, where a decode without RoPE, at the slot instead of the
    position, or without the padding mask at 64 rows is 1.3, 1.0 and 0.5 off); the kernels
    session's cache is bf16 at every batch size."""
    model = _qwen2_head_dim_64()
    weights = LlamaWeights(model, rows, torch.bfloat16)
    generator = torch.Generator().manual_seed(1)
    prompts = torch.randint(3, 50, (rows, 9), generator=generator)
    pad_lengths = torch.randint(0, 4, (rows,), generator=generator)
    prompts[torch.arange(9) < pad_lengths[:, None]] = 0
    sessions = [llama_decoder.LlamaDecodeSession(weights, 60, rows, kernels) for kernels in (True, False)]
    assert sessions[0].cpu_kernels is KERNELS and sessions[0].attention_dtype == torch.bfloat16
    assert sessions[1].cpu_kernels is None
    logits = [session.prefill(prompts, pad_lengths) for session in sessions]
    for _ in range(45):  # past the first cache growth (9 + 32 slots)
        tokens = torch.randint(3, 50, (rows,), generator=generator)
        logits = [session.decode(tokens).float() for session in sessions]
        assert (logits[0] - logits[1]).abs().max() < 0.3
    assert sessions[0].capacity > 41


@needs_kernels
def test_bf16_generation_on_the_kernels_stays_close_to_the_float32_logprobs():
    """End to end: the engine says it ran the kernels, and each sampled token's
    behaviour log-prob is the float32 model's up to bf16 rounding."""
    model = _qwen2_head_dim_64()
    engine = NativeEngine(model, pad_token_id=0, compute_dtype=torch.bfloat16)
    prompts = [[3, 4, 5, 6], [7, 8]]
    result = engine.generate(prompts, SamplingParams(n=3, max_new_tokens=40, seed=5))
    assert engine.last_attention == "cpu kernel"
    for completion in result.completions:
        exact = teacher_forced_logprobs(model, prompts[completion.prompt_index], completion, 1.0)
        assert (torch.tensor(completion.logprobs) - exact).abs().max() < 0.1


def test_native_cpu_kernels_false_attends_with_torch(monkeypatch: pytest.MonkeyPatch):
    """rollout.native_cpu_kernels=false never asks for the kernels (here: asking would raise)."""
    def asked() -> None:
        raise AssertionError("the kernels were asked for")

    monkeypatch.setattr(llama_decoder, "cpu_decode_kernels", asked)
    engine = create_engine(RolloutConfig(native_dtype="bfloat16", native_cpu_kernels=False), _qwen2_head_dim_64(), None)
    result = engine.generate([[3, 4, 5]], SamplingParams(max_new_tokens=4))
    assert result.num_generated_tokens == 4 and engine.last_path == "llama" and engine.last_attention == "torch"


def forget_loaded_kernels() -> None:
    """The next call builds (or fails to build) and loads the library and the decode kernels again."""
    cpu_kernels._kernels_or_reason.cache_clear()
    cpu_kernels._library_or_reason.cache_clear()


def test_without_a_compiler_the_kernel_is_unavailable_and_decoding_falls_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path
):
    """No C compiler: cpu_decode_kernels() is None and says why (warning once on a CPU they are
    for; silent on others, whose reason is the CPU's), and bf16 generation attends with torch's ops."""
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(cpu_kernels, "_warned", False)
    forget_loaded_kernels()
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            assert cpu_kernels.cpu_decode_kernels() is None
            assert cpu_kernels.cpu_decode_kernels() is None
        reason, platform_reason = cpu_kernels.unavailable_reason(), cpu_kernels.platform_reason(decode=True)
        if platform_reason is None:
            assert "no C compiler" in reason and "no-such-cc" in reason
            assert len(said) == 1 and reason in str(said[0].message)
        else:
            assert reason == platform_reason and not said
        engine = NativeEngine(_qwen2_head_dim_64(), pad_token_id=0, compute_dtype=torch.bfloat16)
        engine.generate([[3, 4, 5]], SamplingParams(max_new_tokens=4))
        assert engine.last_attention == "torch"
    finally:
        forget_loaded_kernels()


def test_any_failure_to_build_falls_back_and_a_raising_warning_filter_raises_once(monkeypatch: pytest.MonkeyPatch):
    """An unexpected exception while building or loading is a reason, not a crash; under a filter
    that turns warnings into errors the first call raises (as asked) and later calls decode on."""
    def broken() -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(cpu_kernels, "_load", broken)
    monkeypatch.setattr(cpu_kernels, "platform_reason", lambda decode=False: None)
    monkeypatch.setattr(cpu_kernels, "_warned", False)
    forget_loaded_kernels()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(UserWarning, match="disk on fire"):
                cpu_kernels.cpu_decode_kernels()
            assert cpu_kernels.cpu_decode_kernels() is None
        assert "unexpectedly" in cpu_kernels.unavailable_reason()
    finally:
        forget_loaded_kernels()


@needs_kernels
def test_the_build_is_cached_by_source_flags_and_compiler(monkeypatch: pytest.MonkeyPatch, tmp_path):
    """The first build writes the library into the cache directory; the next process reuses it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    directory = tmp_path / "dapo-rl" / "kernels"
    directory.mkdir(parents=True)
    week_ago = time.time() - 8 * 24 * 3600
    for name in ("decode_bf16-0123456789abcdef.so", "cpu_kernels-0123456789abcdef.so", "other.so",
                 "cpu_kernels-fedcba9876543210.so"):
        (directory / name).write_bytes(b"")  # other versions' builds, and a file not the cache's
        if name != "cpu_kernels-fedcba9876543210.so":  # that one another version is using now
            os.utime(directory / name, (week_ago, week_ago))
    library = cpu_kernels._build()
    assert library.parent == directory and library.suffix == ".so"
    os.utime(library, (week_ago, week_ago))
    assert cpu_kernels._build() == library and library.stat().st_mtime > week_ago + 3600  # its use is recorded
    # no temporary left, and the builds unused for a week removed (not what is not a build)
    assert sorted(path.name for path in directory.iterdir()) == sorted(
        [library.name, "other.so", "cpu_kernels-fedcba9876543210.so"])
    monkeypatch.setenv("CC", "env cc")  # a compiler command with words (as "ccache gcc")
    assert cpu_kernels._build().parent == library.parent


def _swiglu_of_every_bf16(ops) -> list[torch.Tensor]:
    """SwiGLU's bf16 forward and backward over every bf16 bit pattern as ``up`` (NaNs, infinities,
    denormals included) with gate 30 (SiLU(30) is 30 in float32): 30 * up, a product of up to 12
    significant bits, rounded to bf16's 8: a tie in one case of 16."""
    up = torch.arange(-2**15, 2**15, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).view(256, 256)
    gate_up = torch.cat([torch.full_like(up, 30.0), up], dim=1).requires_grad_()
    out = ops.swiglu(torch.nn.SiLU(), gate_up)
    (grad,) = torch.autograd.grad(out, gate_up, up.flip(0))
    return [out.detach().view(torch.int16), grad.view(torch.int16)]


@needs_kernels
def test_without_avx512_bf16_the_training_kernels_build_and_round_to_bf16_bit_for_bit(monkeypatch, tmp_path):
    """A CPU with AVX-512 but not AVX512-BF16 (Intel Skylake-SP to Ice Lake): the library builds
    without it, the training kernels pass their self-test and round to bf16 in integer ops exactly
    as vcvtneps2bf16 does (compared on this CPU, which has it), and the bf16 decode kernels, which
    need it, are silently not used (not a CPU they are for)."""
    from dapo.trainer.fused_cpu_ops import fused_cpu_ops

    with_bf16 = fused_cpu_ops(torch.zeros(1))
    assert with_bf16 is not None
    expected = _swiglu_of_every_bf16(with_bf16)
    flags = cpu_kernels._cpu_flags() - {"avx512_bf16"}
    monkeypatch.setattr(cpu_kernels, "_cpu_flags", lambda: flags)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # this build, not the user's cache
    monkeypatch.setattr(cpu_kernels, "_warned", False)
    forget_loaded_kernels()
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            without_bf16 = fused_cpu_ops(torch.zeros(1))
            assert cpu_kernels.cpu_decode_kernels() is None
        assert not said and "avx512_bf16" in cpu_kernels.unavailable_reason()
        assert without_bf16 is not None and without_bf16 is not with_bf16  # another build, self-tested
        assert "-mavx512bf16" not in cpu_kernels._compiler_flags()
        got = _swiglu_of_every_bf16(without_bf16)
        assert all(torch.equal(a, b) for a, b in zip(got, expected))
    finally:
        forget_loaded_kernels()


def test_a_self_test_whose_error_is_nan_fails() -> None:
    """NaN compares false with everything: the self-test fails unless the error is below its bound."""
    nan_kernels = SimpleNamespace(attention=lambda *arguments: torch.tensor(float("nan")),
                                  rms_scale=lambda hidden, floor: hidden)
    assert "attention: max error nan against float64" in (cpu_kernels._self_test(nan_kernels) or "")
