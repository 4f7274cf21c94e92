"""The model.generate engine, the vLLM engine's optional-dependency behaviour, and the factory."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest
import torch
from conftest import PAD_ID, VOCAB_SIZE
from rollout_helpers import LetterTokenizer, reference_filtered_logprobs, teacher_forced_logprobs

from dapo.config.schema import RolloutConfig
from dapo.rollout import HFGenerateEngine, NativeEngine, SamplingParams, create_engine
from dapo.rollout.vllm_engine import VLLM_MISSING, VLLMEngine

PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12, 13], [3]]
HAS_VLLM = importlib.util.find_spec("vllm") is not None


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_hf_engine_logprobs_match_teacher_forced_forward(qwen2: torch.nn.Module, temperature: float) -> None:
    params = SamplingParams(n=2, temperature=temperature, max_new_tokens=8, stop_token_ids=[1, 2, 3], seed=0)
    result = HFGenerateEngine(qwen2, PAD_ID).generate(PROMPTS, params)
    assert [c.prompt_index for c in result.completions] == [0, 0, 1, 1, 2, 2]
    for completion in result.completions:
        reference = teacher_forced_logprobs(qwen2, PROMPTS[completion.prompt_index], completion, temperature)
        assert torch.allclose(reference, torch.tensor(completion.logprobs, dtype=torch.float64), atol=1e-4)


def test_hf_engine_should_stop_ends_a_generation_within_a_few_decode_steps(qwen2: torch.nn.Module) -> None:
    """A policy rank's hf engine asks Ray whether the driver cancelled its call (a Ctrl-C in an
    evaluation, whose checkpoint waits behind it): asked every few decode steps, True ends generate()
    at once; False never does and samples what an engine that is never asked samples."""
    from dapo.rollout.base import STOP_CHECK_EVERY, GenerationStopped

    engine, params = HFGenerateEngine(qwen2, PAD_ID), SamplingParams(n=2, max_new_tokens=64, seed=0)
    asked: list[int] = []
    engine.should_stop = lambda: asked.append(1) is None and len(asked) > 2
    with pytest.raises(GenerationStopped, match=f"step {3 * STOP_CHECK_EVERY} of 64"):
        engine.generate(PROMPTS, params)
    assert len(asked) == 3
    engine.should_stop = lambda: False
    asked_never = engine.generate(PROMPTS, params).completions
    engine.should_stop = None
    never_asked = engine.generate(PROMPTS, params).completions
    assert [c.token_ids for c in asked_never] == [c.token_ids for c in never_asked]
    assert all(len(c.token_ids) == 64 for c in asked_never)


@pytest.mark.parametrize(("temperature", "top_k", "top_p"), [(1.0, 5, 1.0), (0.7, 0, 0.8), (1.3, 7, 0.6)])
def test_hf_engine_logprobs_are_of_the_warped_distribution_without_keeping_every_steps_scores(
        qwen2: torch.nn.Module, monkeypatch, temperature: float, top_k: int, top_p: float) -> None:
    # output_scores kept (rows, vocab) per step for the whole generation: 40 GB at 64 rows x 1024
    # tokens of a 152k vocabulary; the log-probs are now taken step by step
    generate = qwen2.generate

    def without_scores(*args, **kwargs):
        assert not kwargs["generation_config"].output_scores
        return generate(*args, **kwargs)

    monkeypatch.setattr(qwen2, "generate", without_scores)
    params = SamplingParams(n=2, temperature=temperature, top_k=top_k, top_p=top_p, max_new_tokens=8,
                            stop_token_ids=[1, 2, 3], seed=0)
    for completion in HFGenerateEngine(qwen2, PAD_ID).generate(PROMPTS, params).completions:
        ids = torch.tensor([PROMPTS[completion.prompt_index] + completion.token_ids])
        with torch.no_grad():
            logits = qwen2(ids).logits[0, len(PROMPTS[completion.prompt_index]) - 1 : -1]
        reference = [float(reference_filtered_logprobs(row, temperature, top_k, top_p)[token])
                     for row, token in zip(logits, completion.token_ids)]
        assert completion.logprobs == pytest.approx(reference, abs=1e-4)


def test_hf_engine_ignores_the_models_shipped_sampling_settings(qwen2: torch.nn.Module) -> None:
    """A model's generation_config (Qwen2.5-Instruct ships repetition_penalty=1.05) must not
    change what the engine samples from or the behaviour log-probs it reports."""
    shipped = copy.deepcopy(qwen2.generation_config)
    qwen2.generation_config.update(repetition_penalty=1.3, temperature=0.7, top_k=5, eos_token_id=3)
    try:
        params = SamplingParams(n=2, temperature=1.0, max_new_tokens=8, stop_token_ids=[1, 2], seed=0)
        for completion in HFGenerateEngine(qwen2, PAD_ID).generate(PROMPTS, params).completions:
            reference = teacher_forced_logprobs(qwen2, PROMPTS[completion.prompt_index], completion, 1.0)
            assert torch.allclose(reference, torch.tensor(completion.logprobs, dtype=torch.float64), atol=1e-4)
        assert qwen2.generation_config.repetition_penalty == 1.3  # the model's own, given back
    finally:
        qwen2.generation_config = shipped


def test_hf_engine_unseeded_calls_draw_new_samples(qwen2: torch.nn.Module) -> None:
    params = SamplingParams(n=4, temperature=1.5, max_new_tokens=8, stop_token_ids=[1, 2, 3])
    engine = HFGenerateEngine(qwen2, PAD_ID)
    first, second = (engine.generate(PROMPTS, params).completions for _ in range(2))
    assert [c.token_ids for c in first] != [c.token_ids for c in second]


def test_hf_engine_stops_truncates_and_reproduces(qwen2: torch.nn.Module) -> None:
    engine = HFGenerateEngine(qwen2, PAD_ID)
    stop_ids = list(range(0, VOCAB_SIZE, 10))
    params = SamplingParams(n=8, temperature=1.5, max_new_tokens=10, stop_token_ids=stop_ids, seed=3)
    result = engine.generate(PROMPTS, params)
    assert {c.finish_reason for c in result.completions} == {"stop", "length"}
    for completion in result.completions:
        assert not set(completion.token_ids[:-1]) & set(stop_ids)
        assert (completion.finish_reason == "stop") == (completion.token_ids[-1] in stop_ids)
        assert completion.finish_reason == "stop" or len(completion.token_ids) == 10
    again = engine.generate(PROMPTS, params)
    assert [c.token_ids for c in again.completions] == [c.token_ids for c in result.completions]


def test_hf_engine_stop_strings(qwen2: torch.nn.Module) -> None:
    tokenizer = LetterTokenizer()
    params = SamplingParams(n=6, temperature=1.5, max_new_tokens=12, stop_strings=["ab"], seed=0)
    for completion in HFGenerateEngine(qwen2, PAD_ID, tokenizer).generate(PROMPTS, params).completions:
        text = tokenizer.decode(completion.token_ids)
        assert (completion.finish_reason == "stop") == text.endswith("ab")
        assert "ab" not in text[:-1]


def test_factory_builds_the_named_engine(qwen2: torch.nn.Module) -> None:
    class Tokenizer:
        pad_token_id = 7

    native = create_engine(RolloutConfig(engine="native"), qwen2, Tokenizer())
    assert isinstance(native, NativeEngine) and native.pad_token_id == 7
    assert isinstance(create_engine(RolloutConfig(engine="hf"), qwen2, Tokenizer()), HFGenerateEngine)


@pytest.mark.skipif(HAS_VLLM, reason="vllm is installed")
def test_vllm_without_the_extra_is_a_clear_error(qwen2: torch.nn.Module) -> None:
    with pytest.raises(RuntimeError, match=r"pip install 'dapo-rl\[vllm\]'"):
        create_engine(RolloutConfig(engine="vllm"), qwen2, None, model_path="unused")
    with pytest.raises(RuntimeError) as error:
        VLLMEngine("unused", RolloutConfig(engine="vllm"))
    assert str(error.value) == VLLM_MISSING


@pytest.mark.skipif(not (HAS_VLLM and torch.cuda.is_available()), reason="needs vllm and a CUDA GPU")
def test_vllm_engine_logprobs_and_weight_sync(qwen2: torch.nn.Module, tmp_path: Path) -> None:
    qwen2.save_pretrained(tmp_path)
    cfg = RolloutConfig(engine="vllm", vllm_gpu_memory_utilization=0.2)
    engine = VLLMEngine(str(tmp_path), cfg, dtype="float32", max_model_len=128)
    params = SamplingParams(n=2, temperature=0.7, max_new_tokens=8, stop_token_ids=[1], seed=0)
    result = engine.generate(PROMPTS, params)
    assert [c.prompt_index for c in result.completions] == [0, 0, 1, 1, 2, 2]
    for completion in result.completions:
        reference = teacher_forced_logprobs(qwen2, PROMPTS[completion.prompt_index], completion, 0.7)
        assert torch.allclose(reference, torch.tensor(completion.logprobs, dtype=torch.float64), atol=1e-3)
    with torch.no_grad():
        for param in qwen2.parameters():
            param.add_(torch.randn_like(param) * 0.5)
    engine.sync_weights(qwen2)
    for completion in engine.generate(PROMPTS, params).completions:
        reference = teacher_forced_logprobs(qwen2, PROMPTS[completion.prompt_index], completion, 0.7)
        assert torch.allclose(reference, torch.tensor(completion.logprobs, dtype=torch.float64), atol=1e-3)


@pytest.mark.parametrize("engine_kind", ["native", "native-generic", "hf"])
@pytest.mark.parametrize("max_new_tokens", [1, 4])
def test_a_stop_token_sampled_on_the_last_allowed_step_is_a_stop_not_a_truncation(qwen2, engine_kind, max_new_tokens):
    """(Overlong filtering masks truncated responses out of the loss: a response that ended
    properly on its last allowed token must not be one.) max_new_tokens=1 never decodes after
    the prefill."""
    engines = {"native": lambda: NativeEngine(qwen2, PAD_ID), "hf": lambda: HFGenerateEngine(qwen2, PAD_ID),
               "native-generic": lambda: NativeEngine(qwen2, PAD_ID, fast_forward=False)}
    engine = engines[engine_kind]()
    free = engine.generate([[5, 6, 7]], SamplingParams(n=1, max_new_tokens=max_new_tokens, seed=11)).completions[0]
    last = free.token_ids[-1]
    assert free.finish_reason == "length" and last not in free.token_ids[:-1], "pick another seed"
    params = SamplingParams(n=1, max_new_tokens=max_new_tokens, seed=11, stop_token_ids=[last])
    stopped = engine.generate([[5, 6, 7]], params).completions[0]
    assert stopped.token_ids == free.token_ids and stopped.finish_reason == "stop"


@pytest.mark.parametrize("engine_kind", ["native-generic", "hf"])
def test_a_dynamic_rope_grown_by_an_earlier_call_does_not_change_a_later_ones_samples(engine_kind):
    """Dynamic NTK RoPE keeps the frequencies a longer call grew it to, and restores its own only
    for a call shorter than max_position_embeddings: a prompt of that length or more was rotated
    by the earlier call's frequencies, so one seed and one batch sampled other tokens, with other
    log-probs, after a longer generation than before it. Both Hugging Face paths sample as a fresh
    model does."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(
        vocab_size=VOCAB_SIZE, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, max_position_embeddings=16,
        rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0})).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 2:
                parameter.normal_(0, 0.3)
    prompts, params = [list(range(3, 23))], SamplingParams(n=2, max_new_tokens=6, seed=0)  # 20 tokens > 16

    def make(model):
        return NativeEngine(model, PAD_ID, fast_forward=False) if engine_kind == "native-generic" else HFGenerateEngine(model, PAD_ID)

    fresh = make(copy.deepcopy(model)).generate(prompts, params).completions
    engine = make(model)
    engine.generate([list(range(3, 30))], SamplingParams(max_new_tokens=60, seed=1))  # grows it to 86 positions
    assert model.model.rotary_emb.max_seq_len_cached > 80
    later = engine.generate(prompts, params).completions
    assert [c.token_ids for c in later] == [c.token_ids for c in fresh]
    assert [c.logprobs for c in later] == [c.logprobs for c in fresh]


@pytest.mark.parametrize("rope", [
    {"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": [1.0] * 4, "long_factor": [8.0] * 4,
     "original_max_position_embeddings": 12},
    {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 8.0},
], ids=["longrope", "dynamic"])
@pytest.mark.parametrize("engine_kind", ["native", "hf"])
def test_a_short_row_rotates_as_alone_beside_a_row_past_a_length_following_ropes_threshold(engine_kind, rope):
    """Longrope (Phi-3's) and dynamic NTK RoPE pick their frequencies from a call's longest
    position: Hugging Face's forward rotated a short row batched with one past the threshold (12
    here) by the long row's frequencies, so its samples and log-probs were of another policy than
    the trainer's, which rotates each sequence as alone (0.10-6.2 nats off per token here). Each row
    now rotates by its own positions, as generated alone."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=VOCAB_SIZE, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, max_position_embeddings=12, rope_parameters=rope)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 2:
                parameter.normal_(0, 0.3)
    short, long_prompt = [5, 6, 7, 8], list(range(3, 23))  # 4 + 6 tokens stay under 12; 20 pass it
    engine = NativeEngine(model, PAD_ID) if engine_kind == "native" else HFGenerateEngine(model, PAD_ID)
    params = SamplingParams(n=2, max_new_tokens=6, seed=0)
    result = engine.generate([short, long_prompt], params)
    if engine_kind == "native":
        assert engine.last_path == "hf"  # the fast decoder's one table refuses such a RoPE past its threshold
    rows = result.completions if rope["rope_type"] == "longrope" else result.completions[:2]
    for completion in rows:
        # (a longrope row whose prompt passes the threshold rotates by the long factors throughout,
        # as the trainer's forward rotates it; a dynamic one past it cannot: its cached keys keep
        # the frequencies of their own step, as in Hugging Face's generation alone)
        prompt = [short, long_prompt][completion.prompt_index]
        reference = teacher_forced_logprobs(model, prompt, completion, 1.0)
        error = (reference - torch.tensor(completion.logprobs, dtype=torch.float64)).abs().max().item()
        assert error < 1e-4, f"prompt {completion.prompt_index}: {error:.3g}"
