"""NativeEngine: exact behaviour log-probs, stopping, truncation, seeding, padding, ordering."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from conftest import PAD_ID, VOCAB_SIZE, tiny_qwen2
from rollout_helpers import reference_filtered_logprobs, teacher_forced_logprobs
from transformers import GPT2Config, GPT2LMHeadModel, Qwen2Config, Qwen2ForCausalLM

from dapo.rollout import NativeEngine, SamplingParams, llama_decoder, llama_support
from dapo.rollout.base import prompt_seeds
from dapo.rollout.llama_weights import LlamaWeights
from dapo.rollout.native import kv_elements_per_token

PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15], [3], [20, 21, 22, 23]]


def _max_logprob_error(model: torch.nn.Module, engine: NativeEngine, params: SamplingParams) -> float:
    result = engine.generate(PROMPTS, params)
    errors = [
        (teacher_forced_logprobs(model, PROMPTS[c.prompt_index], c, params.temperature) - torch.tensor(c.logprobs, dtype=torch.float64)).abs().max().item()
        for c in result.completions
    ]
    return max(errors)


# (the generic path passes its cache by the keyword the installed transformers takes)
@pytest.mark.filterwarnings("error:`past_key_values` is deprecated:FutureWarning")
@pytest.mark.parametrize("fast_forward", [True, False])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("model_name", ["qwen2", "llama", "llama3_rope", "qwen2_yarn"])
def test_logprobs_match_teacher_forced_forward(model_name: str, temperature: float, fast_forward: bool, request: pytest.FixtureRequest) -> None:
    model = request.getfixturevalue(model_name)
    assert model.model.rotary_emb.rope_type == {"llama3_rope": "llama3", "qwen2_yarn": "yarn"}.get(model_name, "default")
    engine = NativeEngine(model, PAD_ID, fast_forward=fast_forward)
    # stop tokens make rows finish at different steps, so finished rows get dropped mid-batch
    params = SamplingParams(n=3, temperature=temperature, max_new_tokens=12, stop_token_ids=[1, 2, 3, 4], seed=0)
    assert _max_logprob_error(model, engine, params) < 1e-4
    assert engine.last_path == ("llama" if fast_forward else "hf")


def test_a_rope_that_follows_the_longest_position_takes_the_generic_path_past_its_threshold() -> None:
    """Dynamic NTK RoPE recomputes its frequencies once a call passes max_position_embeddings,
    which a table built once for all positions cannot follow: accepted up to it, refused past it,
    named, and served by Hugging Face's forward; also when the config no longer says so (the
    rotary module does)."""
    model = Qwen2ForCausalLM(Qwen2Config(
        vocab_size=VOCAB_SIZE, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, max_position_embeddings=16,
        rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}))
    assert llama_support.unsupported_reason(model, 15) is None  # 15 tokens computed, 16 with the last sampled
    assert "'dynamic'" in llama_support.unsupported_reason(model, 16)
    engine = NativeEngine(model.eval(), PAD_ID)
    engine.generate(PROMPTS, SamplingParams(max_new_tokens=16, seed=0))
    assert engine.last_path == "hf"
    model.config.rope_parameters = {"rope_type": "default", "rope_theta": 10000.0}
    assert "'dynamic'" in llama_support.unsupported_reason(model, 16)


def test_the_rope_table_of_a_low_precision_model_decoded_in_float32_is_float32s(qwen2_yarn) -> None:
    """The rotary module returns its input's dtype: the table must come from a float32 input (not
    be bf16's cos/sin cast up), as Hugging Face's float32 forward of those weights computes it."""
    model = qwen2_yarn.to(torch.bfloat16)
    session = llama_decoder.LlamaDecodeSession(LlamaWeights(model, 2, torch.float32), 40, 2)
    cos, sin = model.model.rotary_emb(torch.zeros(1, 1, dtype=torch.float32), torch.arange(40)[None])
    assert session.rope.dtype == torch.float32
    assert torch.equal(session.rope[:, 0, 0], cos[0])  # the first query head's cos at every position


def test_generic_path_serves_other_architectures() -> None:
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB_SIZE, n_embd=32, n_layer=2, n_head=2, n_positions=64)).eval()
    engine = NativeEngine(model, PAD_ID)
    assert _max_logprob_error(model, engine, SamplingParams(n=2, max_new_tokens=8, seed=1)) < 1e-4
    assert engine.last_path == "hf"


@pytest.mark.parametrize(("top_k", "top_p"), [(5, 1.0), (0, 0.7), (8, 0.5)])
def test_top_k_top_p_logprobs_are_renormalised(qwen2: torch.nn.Module, top_k: int, top_p: float) -> None:
    params = SamplingParams(n=2, temperature=0.8, top_k=top_k, top_p=top_p, max_new_tokens=6, seed=2)
    for completion in NativeEngine(qwen2, PAD_ID).generate(PROMPTS, params).completions:
        ids = torch.tensor([PROMPTS[completion.prompt_index] + completion.token_ids])
        with torch.no_grad():
            logits = qwen2(ids).logits[0, len(PROMPTS[completion.prompt_index]) - 1 : -1]
        for step, token in enumerate(completion.token_ids):
            reference = reference_filtered_logprobs(logits[step], 0.8, top_k, top_p)[token].item()
            assert completion.logprobs[step] == pytest.approx(reference, abs=1e-4)


def test_completions_are_prompt_major(qwen2: torch.nn.Module) -> None:
    result = NativeEngine(qwen2, PAD_ID).generate(PROMPTS, SamplingParams(n=3, max_new_tokens=4, seed=0))
    assert [c.prompt_index for c in result.completions] == [i for i in range(len(PROMPTS)) for _ in range(3)]


@pytest.mark.parametrize("fast_forward", [True, False])
def test_seed_reproducibility(qwen2: torch.nn.Module, fast_forward: bool) -> None:
    engine = NativeEngine(qwen2, PAD_ID, fast_forward=fast_forward)

    def tokens(seed: int) -> list[list[int]]:
        params = SamplingParams(n=4, max_new_tokens=10, stop_token_ids=[1], seed=seed)
        return [c.token_ids for c in engine.generate(PROMPTS, params).completions]

    assert tokens(7) == tokens(7)
    assert tokens(7) != tokens(8)


@pytest.mark.parametrize("fast_forward", [True, False])
def test_a_kv_cache_budget_decodes_the_prompts_in_chunks_that_keep_within_it(qwen2: torch.nn.Module,
                                                                             fast_forward: bool) -> None:
    """rollout.native_kv_cache_gib: a round's rows all decoded at once (dapo_recipe's 3072 rows of
    5120 tokens: 360 GiB on Qwen2.5-0.5B); within a budget, consecutive chunks of prompts, each of
    whose cache at full length fits it, prompt-major as one call's, their log-probs the model's."""
    config = qwen2.config
    head_dim = config.hidden_size // config.num_attention_heads
    params = SamplingParams(n=3, max_new_tokens=6, stop_token_ids=[1], seed=5)
    row_bytes = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * 4 * (8 + 6)  # float32
    whole = NativeEngine(qwen2, PAD_ID, fast_forward=fast_forward)
    engine = NativeEngine(qwen2, PAD_ID, fast_forward=fast_forward, max_kv_cache_bytes=2.5 * 3 * row_bytes)
    sessions: list[tuple[int, int]] = []
    open_session = engine._open_session
    engine._open_session = lambda longest, rows, packing: sessions.append((rows, packing)) or open_session(
        longest, rows, packing)
    result = engine.generate([*PROMPTS, [4, 5]], params)
    # 2 prompts x 3 samples a chunk (a third's would pass the budget); the last chunk's one prompt
    # decodes on the weights packed for the full chunks, not prepared again
    assert sessions == [(6, 6), (6, 6), (3, 6)]
    assert not fast_forward or engine._weights_key[1] == 6
    assert [c.prompt_index for c in result.completions] == [i for i in range(5) for _ in range(3)]
    assert result.num_generated_tokens == sum(len(c.token_ids) for c in result.completions)
    assert [c.token_ids for c in engine.generate([*PROMPTS, [4, 5]], params).completions] == [
        c.token_ids for c in result.completions]  # reproducible
    for c in result.completions:
        expected = teacher_forced_logprobs(qwen2, [*PROMPTS, [4, 5]][c.prompt_index], c, params.temperature)
        assert torch.allclose(torch.tensor(c.logprobs, dtype=torch.float64), expected, atol=1e-4)
    # a budget the whole call fits decodes it at once, as without one: the same samples
    roomy = NativeEngine(qwen2, PAD_ID, fast_forward=fast_forward, max_kv_cache_bytes=100 * 12 * row_bytes)
    assert [c.token_ids for c in roomy.generate(PROMPTS, params).completions] == [
        c.token_ids for c in whole.generate(PROMPTS, params).completions]
    tiny = NativeEngine(qwen2, PAD_ID, fast_forward=fast_forward, max_kv_cache_bytes=1)  # still one prompt a chunk
    assert len(tiny.generate(PROMPTS, params).completions) == 12


@pytest.mark.filterwarnings("ignore:rollout.native_dtype=bfloat16 has no effect")  # (the generic forward's)
@pytest.mark.parametrize("fast_forward", [True, False])
def test_a_kv_cache_budget_holds_for_the_dtype_the_cache_is_kept_in(qwen2: torch.nn.Module, fast_forward: bool,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A float32 model decoding with rollout.native_dtype=bfloat16 keeps its cache in float32 on
    the generic Hugging Face forward (the model's dtype) and, on the fast path on the CPU, in
    chunks of at most 32 rows (float32 attention there): the budget counts 4 bytes for them, not 2."""
    from dapo.rollout import hf_decoder

    prompts, params = [[5] * 20] * 4, SamplingParams(n=8, max_new_tokens=12, stop_token_ids=[], seed=0)
    budget = kv_elements_per_token(qwen2.config) * 2 * (20 + 12) * 8 * 2  # 2 prompts x 8 rows, in bf16
    cache_bytes: list[int] = []
    for session_class in (llama_decoder.LlamaDecodeSession, hf_decoder.HFDecodeSession):
        def spy(self, tokens, decode=session_class.decode):
            logits = decode(self, tokens)
            cache = self.cache if isinstance(self.cache, torch.Tensor) else [
                t for layer in self.cache.layers for t in (layer.keys, layer.values)]
            cache_bytes.append(sum(t.nbytes for t in ([cache] if isinstance(cache, torch.Tensor) else cache)))
            return logits
        monkeypatch.setattr(session_class, "decode", spy)
    engine = NativeEngine(qwen2, PAD_ID, compute_dtype=torch.bfloat16, fast_forward=fast_forward,
                          max_kv_cache_bytes=budget)
    result = engine.generate(prompts, params)
    assert engine.last_path == ("llama" if fast_forward else "hf")
    assert len(result.completions) == 32 and cache_bytes and max(cache_bytes) <= budget


@pytest.mark.parametrize("fast_forward", [True, False])
def test_a_prompt_s_samples_do_not_depend_on_the_prompts_beside_it_nor_on_the_chunks(qwen2: torch.nn.Module,
                                                                                    fast_forward: bool) -> None:
    """Each prompt samples from its own seed (prompt_seeds): alone with that seed, in another order,
    or one prompt a chunk under a KV-cache budget, it samples what it did in the whole call. All
    rows drew from one stream, so a prompt's samples changed with every other prompt of the call
    (eval.max_problems, another eval file, the ranks' shares of the prompts)."""
    engine = NativeEngine(qwen2, PAD_ID, fast_forward=fast_forward)
    params = SamplingParams(n=3, max_new_tokens=10, stop_token_ids=[1], seed=5)
    together = [c.token_ids for c in engine.generate(PROMPTS, params).completions]
    seeds = prompt_seeds(params, len(PROMPTS))
    for index, prompt in enumerate(PROMPTS):
        alone = engine.generate([prompt], dataclasses.replace(params, request_seeds=[seeds[index]]))
        assert [c.token_ids for c in alone.completions] == together[3 * index:3 * index + 3], index
    reversed_call = engine.generate(PROMPTS[::-1], dataclasses.replace(params, request_seeds=seeds[::-1]))
    assert [c.token_ids for c in reversed_call.completions] == [
        tokens for index in reversed(range(len(PROMPTS))) for tokens in together[3 * index:3 * index + 3]]
    one_a_chunk = NativeEngine(qwen2, PAD_ID, fast_forward=fast_forward, max_kv_cache_bytes=1)
    assert [c.token_ids for c in one_a_chunk.generate(PROMPTS, params).completions] == together
    assert len({tuple(tokens) for tokens in together}) > len(PROMPTS)  # a prompt's samples differ from each other
    with pytest.raises(ValueError, match="3 seeds for 4 prompts"):
        engine.generate(PROMPTS, dataclasses.replace(params, request_seeds=seeds[:3]))


def test_global_seed_makes_unseeded_generation_reproducible(qwen2: torch.nn.Module) -> None:
    engine = NativeEngine(qwen2, PAD_ID)
    runs = []
    for _ in range(2):
        torch.manual_seed(11)
        runs.append([c.token_ids for c in engine.generate(PROMPTS, SamplingParams(max_new_tokens=6)).completions])
    assert runs[0] == runs[1]


@pytest.mark.parametrize("fast_forward", [True, False])
def test_left_padding_matches_generating_each_prompt_alone(qwen2: torch.nn.Module, fast_forward: bool) -> None:
    engine = NativeEngine(qwen2, PAD_ID, fast_forward=fast_forward)
    params = SamplingParams(temperature=1e-3, max_new_tokens=8, seed=0)  # near-greedy
    batched = engine.generate(PROMPTS, params).completions
    for index, prompt in enumerate(PROMPTS):
        alone = engine.generate([prompt], params).completions[0]
        assert batched[index].token_ids == alone.token_ids
        assert batched[index].logprobs == pytest.approx(alone.logprobs, abs=1e-4)


def test_weight_updates_are_seen_without_rebuilding(qwen2: torch.nn.Module) -> None:
    engine = NativeEngine(qwen2, PAD_ID)
    params = SamplingParams(temperature=1e-3, max_new_tokens=6, seed=0)
    before = engine.generate(PROMPTS, params).completions
    with torch.no_grad():
        for param in qwen2.parameters():
            param.add_(torch.randn_like(param) * 0.5)
    after = engine.generate(PROMPTS, params).completions
    assert [c.token_ids for c in before] != [c.token_ids for c in after]
    for completion in after:
        reference = teacher_forced_logprobs(qwen2, PROMPTS[completion.prompt_index], completion, 1e-3)
        assert torch.allclose(reference, torch.tensor(completion.logprobs, dtype=torch.float64), atol=1e-2)


def test_sync_weights_copies_another_model(qwen2: torch.nn.Module) -> None:
    trainer_model = tiny_qwen2(seed=1)
    engine = NativeEngine(qwen2, PAD_ID)
    engine.sync_weights(trainer_model)
    for ours, theirs in zip(qwen2.parameters(), trainer_model.parameters()):
        assert torch.equal(ours, theirs)
    engine.sync_weights(qwen2)  # same object: nothing to do


def test_train_mode_is_restored(qwen2: torch.nn.Module) -> None:
    qwen2.train()
    NativeEngine(qwen2, PAD_ID).generate(PROMPTS, SamplingParams(max_new_tokens=2))
    assert qwen2.training


@pytest.mark.parametrize(
    ("prompts", "message"), [([[1, 2], []], "prompt 1 is empty"), ([[1, VOCAB_SIZE]], "outside the vocabulary")]
)
def test_bad_prompts_are_clear_errors(qwen2: torch.nn.Module, prompts: list[list[int]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NativeEngine(qwen2, PAD_ID).generate(prompts, SamplingParams())


def test_no_prompts_gives_no_completions(qwen2: torch.nn.Module) -> None:
    assert NativeEngine(qwen2, PAD_ID).generate([], SamplingParams()).completions == []


def test_kv_cache_growth_keeps_logprobs_exact(qwen2: torch.nn.Module, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llama_decoder, "_MIN_GROWTH_SLOTS", 2)  # grow several times
    engine = NativeEngine(qwen2, PAD_ID)
    params = SamplingParams(n=2, max_new_tokens=20, stop_token_ids=[1, 2], seed=4)
    assert _max_logprob_error(qwen2, engine, params) < 1e-4


def test_a_prefill_in_blocks_of_queries_keeps_logprobs_exact(qwen2: torch.nn.Module, monkeypatch: pytest.MonkeyPatch) -> None:
    """A prefill's attention over blocks of queries (long prompts: their scores took B x H x P^2
    floats three times over at once) gives the same samples and exact log-probs."""
    params = SamplingParams(n=2, max_new_tokens=8, stop_token_ids=[1, 2], seed=4)
    whole = NativeEngine(qwen2, PAD_ID).generate(PROMPTS, params)
    monkeypatch.setattr(llama_decoder, "_PREFILL_SCORES_BYTES", 1)  # one query a block
    blocks = llama_decoder.LlamaDecodeSession._query_blocks
    seen: list[int] = []
    monkeypatch.setattr(llama_decoder.LlamaDecodeSession, "_query_blocks",
                        lambda self, *args: seen.append(len(found := blocks(self, *args))) or found)
    engine = NativeEngine(qwen2, PAD_ID)
    blocked = engine.generate(PROMPTS, params)
    assert seen and min(seen) == max(len(p) for p in PROMPTS)  # one block per query
    assert [c.token_ids for c in blocked.completions] == [c.token_ids for c in whole.completions]
    assert _max_logprob_error(qwen2, engine, params) < 1e-4


def test_should_stop_ends_a_generation_within_a_few_decode_steps(qwen2: torch.nn.Module) -> None:
    """A policy rank's engine asks Ray whether the driver cancelled its call (a Ctrl-C in an
    evaluation); asked every few steps, True ends generate() at once, None or False never does."""
    from dapo.rollout.base import STOP_CHECK_EVERY, GenerationStopped

    engine = NativeEngine(qwen2, PAD_ID)
    asked: list[int] = []
    engine.should_stop = lambda: asked.append(1) is None and len(asked) > 2
    with pytest.raises(GenerationStopped, match=f"step {2 * STOP_CHECK_EVERY} of 64"):
        engine.generate(PROMPTS, SamplingParams(max_new_tokens=64, seed=0))
    engine.should_stop = lambda: False
    assert len(engine.generate(PROMPTS, SamplingParams(max_new_tokens=64, seed=0)).completions) == len(PROMPTS)


@pytest.mark.parametrize("growth_slots", [32, 2])
def test_bf16_decode_of_a_float32_policy_stays_close_to_the_float32_logprobs(
    qwen2, monkeypatch: pytest.MonkeyPatch, growth_slots: int
):
    """rollout.native_dtype=bfloat16: a faster behaviour policy whose log-probs differ from the
    trainer's float32 ones only by bf16 rounding (the trainer logs and TIS-corrects the rest).
    With 2-slot growth the cache is reallocated several times and the decode attends over
    masked, not-yet-written slots (its bf16 matmul path); prompts of unequal length are padded."""
    monkeypatch.setattr(llama_decoder, "_MIN_GROWTH_SLOTS", growth_slots)
    prompts = [[3, 4, 5, 6], [7, 8]]
    params = SamplingParams(n=3, temperature=1.0, max_new_tokens=12, seed=5)
    engine = NativeEngine(qwen2, pad_token_id=0, compute_dtype=torch.bfloat16)
    result = engine.generate(prompts, params)
    assert engine.last_path == "llama" and next(qwen2.parameters()).dtype == torch.float32
    for completion in result.completions:
        exact = teacher_forced_logprobs(qwen2, prompts[completion.prompt_index], completion, 1.0)
        behaviour = torch.tensor(completion.logprobs)
        assert (behaviour - exact).abs().max() < 0.1
    # and it really is a different (rounded) model, not the float32 path
    fp32 = NativeEngine(qwen2, pad_token_id=0).generate(prompts, params)
    assert any(a.logprobs != b.logprobs for a, b in zip(result.completions, fp32.completions))


def test_a_decode_dtype_the_generic_path_cannot_apply_is_said_once(qwen2, recwarn: pytest.WarningsRecorder):
    """Models the fast path does not run (here: fast_forward off, as for a Qwen3 or a LoRA
    wrapper) decode in their own dtype: rollout.native_dtype=bfloat16 must say it has no effect,
    once, not speed nothing up silently."""
    engine = NativeEngine(qwen2, pad_token_id=0, fast_forward=False, compute_dtype=torch.bfloat16)
    params = SamplingParams(n=2, max_new_tokens=4, seed=0)
    for _ in range(2):
        engine.generate([[3, 4, 5]], params)
    said = [str(w.message) for w in recwarn if "native_dtype" in str(w.message)]
    assert len(said) == 1 and "native_dtype=bfloat16 has no effect" in said[0] and "fast_forward=False" in said[0]
    assert engine.last_path == "hf"
    NativeEngine(qwen2, pad_token_id=0, fast_forward=False).generate([[3, 4, 5]], params)  # nothing asked: silent
    assert len([w for w in recwarn if "native_dtype" in str(w.message)]) == 1


def test_float16_decode_survives_a_large_residual_stream(qwen2):
    """rollout.native_dtype=float16 on a float32 policy: the folded RMSNorm's sum of squares must
    not overflow float16 (65504) when activations are large, as real LLMs' outlier dimensions are;
    an overflow zeroes the layer's input and samples garbage."""
    model = copy.deepcopy(qwen2)
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(2000.0)  # rms(x) ~ 1e2-1e3, sum(x^2) far past 65504
    prompt = [5, 6, 7, 8]
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=8, seed=0)
    engine = NativeEngine(model, pad_token_id=0, compute_dtype=torch.float16)
    for completion in engine.generate([prompt], params).completions:
        exact = teacher_forced_logprobs(model, prompt, completion, 1.0)
        assert (torch.tensor(completion.logprobs) - exact).abs().max() < 0.1
    assert engine.last_path == "llama"


def test_sync_weights_from_a_lazy_source_holds_one_full_tensor_at_a_time(qwen2: torch.nn.Module) -> None:
    """The policy ranks gather one full tensor at a time: the engine must copy each before the
    next is gathered, not collect them all (a second full model in memory at scale)."""
    trainer_model = tiny_qwen2(seed=2)
    alive, peak = [0], [0]

    def gathered():
        import weakref

        for name, tensor in trainer_model.state_dict().items():
            full = tensor.clone()
            alive[0] += 1
            peak[0] = max(peak[0], alive[0])
            weakref.finalize(full, lambda: alive.__setitem__(0, alive[0] - 1))
            yield name, full
            del full

    engine = NativeEngine(qwen2, PAD_ID)
    engine.sync_weights(gathered())
    assert peak[0] == 1
    for ours, theirs in zip(qwen2.state_dict().values(), trainer_model.state_dict().values()):
        assert torch.equal(ours, theirs)
    with pytest.raises(KeyError, match="not one of the engine model's"):
        engine.sync_weights(iter([("no.such.weight", torch.zeros(1))]))


@pytest.mark.parametrize("fast_forward", [True, False])
def test_non_finite_logits_stop_generation_instead_of_sampling_noise(qwen2: torch.nn.Module, fast_forward: bool) -> None:
    # a diverged policy (or a float16 decode that overflowed) sampled token 0 with log-prob NaN
    with torch.no_grad():
        qwen2.model.norm.weight[3] = float("nan")
    engine = NativeEngine(qwen2, PAD_ID, fast_forward=fast_forward)
    with pytest.raises(RuntimeError, match=r"logits were not finite \(row 0 .*diverged"):
        engine.generate([[5, 6], [7]], SamplingParams(n=1, max_new_tokens=3, seed=0))


def test_only_a_responses_own_positions_must_be_finite(qwen2: torch.nn.Module) -> None:
    """A finished row decodes on past its end until it is dropped (float16 may overflow there);
    what it samples there is discarded, so it is no reason to stop the run."""
    from dapo.rollout.native import _Outputs

    outputs = _Outputs(rows=2, max_new_tokens=4, device=torch.device("cpu"))
    outputs.finish([0], 2)
    outputs.logprobs[0, 3] = float("inf")  # past row 0's end
    engine = NativeEngine(qwen2, PAD_ID)
    engine._check_finite(outputs)
    outputs.logprobs[1, 3] = float("nan")  # inside row 1, which ran to the limit
    with pytest.raises(RuntimeError, match=r"not finite \(row 1 "):
        engine._check_finite(outputs)
