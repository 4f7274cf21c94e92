"""The rollout engine follows training: an engine on its own copy of the weights (as vLLM holds
one) samples from the trainer's current weights at every generate(), training and evaluation."""

from __future__ import annotations

import copy

import pytest
import torch

from dapo.rollout import NativeEngine, native
from dapo.rollout.llama_weights import LlamaWeights
from dapo.trainer import Trainer
from tests.trainer.conftest import tiny_config


class PrivateCopyEngine(NativeEngine):
    """A native engine on a deep copy of the policy; records, at each generate(), whether its
    weights equal the trainer's, and how many policy updates had been made by then."""

    def __init__(self, trainer: Trainer) -> None:
        super().__init__(copy.deepcopy(trainer.model), trainer.engine.pad_token_id, trainer.tokenizer)
        self.trainer = trainer
        self.calls: list[tuple[int, bool]] = []
        self.syncs = 0

    def generate(self, prompt_token_ids, params):
        current = self.trainer.model.state_dict()
        same = all(torch.equal(t, current[name]) for name, t in self.model.state_dict().items())
        self.calls.append((self.trainer.policy.version, same))
        return super().generate(prompt_token_ids, params)

    def sync_weights(self, model):
        self.syncs += 1
        super().sync_weights(model)


def test_an_engine_with_its_own_weights_always_samples_the_current_policy(tiny_model_dir, reward_file, tmp_path):
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "checkpoint.every_steps=0")
    trainer = Trainer(cfg)
    engine = trainer.engine = PrivateCopyEngine(trainer)
    trainer.train()
    versions = [version for version, _ in engine.calls]
    assert versions[-1] > 0 and len(set(versions)) >= 3  # rollouts and evaluations after updates
    assert all(same for _, same in engine.calls), engine.calls
    assert engine.syncs == 4  # before its first use (swapped in), then once per step (each made updates), none more
    rows = [r for r in (trainer.state.logger.path.read_text().splitlines()) if "time/weight_sync" in r]
    assert len(rows) == 3


def test_resume_syncs_the_engine_before_its_first_use(tiny_model_dir, reward_file, tmp_path):
    run = tmp_path / "run"
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=2")).train()
    trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=3"))
    engine = trainer.engine = PrivateCopyEngine(trainer)  # holds the INITIAL weights, as vLLM would
    trainer.train()
    assert engine.calls and all(same for _, same in engine.calls), engine.calls


def test_an_engine_swapped_in_after_updates_gets_the_current_weights(tiny_model_dir, reward_file, tmp_path):
    """Trainer.engine = ... after a step: the new engine (built from model.path, as a fresh vLLM
    would be) held the initial weights and was only woken, sampling a stale policy."""
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "checkpoint.every_steps=0"))
    engine = PrivateCopyEngine(trainer)  # a copy of the initial weights
    try:
        trainer.step_once()
        assert trainer.policy.version > 0
        trainer.engine = engine
        trainer.step_once()
    finally:
        trainer.close()
    assert engine.calls and all(same for _, same in engine.calls), engine.calls


def test_the_engine_sleeps_once_a_step_after_its_generation_rounds_and_before_the_update(
        tiny_model_dir, reward_file, tmp_path):
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "trainer.gen_prompts_per_round=2"))
    engine, calls = trainer.engine, []

    class Recording:
        def __getattr__(self, name):
            attribute = getattr(engine, name)
            if name in ("generate", "sleep", "sync_weights"):
                def recorded(*args, **kwargs):
                    calls.append(name)
                    return attribute(*args, **kwargs)
                return recorded
            return attribute

    trainer.engine = Recording()
    trainer.engine_version = trainer.policy.version  # the same engine behind it: current
    update = trainer.policy.update
    trainer.policy.update = lambda *args, **kwargs: calls.append("update") or update(*args, **kwargs)
    try:
        trainer.step_once()
    finally:
        trainer.close()
    rounds = calls.index("sleep")
    assert rounds >= 2 and set(calls[:rounds]) == {"generate"}  # several rounds (2 prompts each), then sleep
    assert calls.count("sleep") == 1 and calls[rounds + 1] == "update" and calls[-1] == "sync_weights"


def test_an_engine_already_current_is_woken_outside_the_timed_generation(tiny_model_dir, reward_file, tmp_path):
    """After a step without an update the weights need no sync, but a vLLM that slept through the
    update must still wake (weights back from CPU, KV cache reallocated): in the weight sync's
    time, not inside the next generate() (time/generate, perf/gen_tokens_per_s)."""
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file))
    engine, calls = trainer.engine, []

    class Recording:
        def __getattr__(self, name):
            attribute = getattr(engine, name)
            if name in ("wake_up", "sync_weights"):
                return lambda *args, **kwargs: calls.append(name) or attribute(*args, **kwargs)
            return attribute

    trainer.engine, trainer.engine_version = Recording(), None  # behind, as after a resume
    try:
        trainer.sync_engine()  # behind: the weights load (which wakes it)
        trainer.sync_engine()  # current: woken only
    finally:
        trainer.close()
    assert calls == ["sync_weights", "wake_up"]


def _prepared_weights_are_current(engine: NativeEngine) -> bool:
    """Whether the native engine's kept weights compute what those it would prepare from its model
    now compute: every projection (packed weights and biases) on a probe input, norms, RoPE.
    Prepared under inference mode, as generate() prepares them: the same bf16 weight packed outside
    it (from a parameter that needs a gradient) gave an output one bf16 ulp off (same packed
    values, other rounding in oneDNN's matmul), which is not staleness."""
    with torch.inference_mode():
        return _same_outputs(engine)


def _same_outputs(engine: NativeEngine) -> bool:
    kept, (dtype, rows, _) = engine._weights, engine._weights_key
    fresh = LlamaWeights(engine.model, rows, dtype)
    hidden = engine.model.config.hidden_size
    probe = torch.randn(rows, hidden, generator=torch.Generator().manual_seed(0)).to(kept.dtype)
    pairs = [(kept.lm_head(probe), fresh.lm_head(probe)), (kept.rope_tables(16), fresh.rope_tables(16))]
    for ours, theirs in zip(kept.layers, fresh.layers):
        attention_out = probe.new_ones(rows, ours.o_proj.weight.shape[1])
        pairs += [(ours.qkv(probe), theirs.qkv(probe)), (ours.o_proj(attention_out), theirs.o_proj(attention_out)),
                  (ours.down_proj(ours.gate_up(probe)), theirs.down_proj(theirs.gate_up(probe)))]
        pairs += [(a, b) for a, b in [(ours.input_norm, theirs.input_norm), (ours.post_norm, theirs.post_norm)]
                  if a is not None]
    return all(torch.equal(a, b) for a, b in pairs)


@pytest.mark.parametrize("native_dtype", ["bfloat16", "model"])
def test_the_trainers_own_engine_keeps_prepared_weights_only_while_they_are_current(
        tiny_model_dir, reward_file, tmp_path, monkeypatch, native_dtype):
    """The trainer's native engine shares the policy's tensors: its prepared (bf16, fused,
    packed) weights are reused by a step's later generation rounds and by evaluation's chunks,
    and never outlive an update."""
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "trainer.gen_prompts_per_round=2",
                                  "eval.every_steps=1", "checkpoint.every_steps=0", f"rollout.native_dtype={native_dtype}"))
    engine, current, builds = trainer.engine, [], []
    real_build = native.LlamaWeights
    monkeypatch.setattr(native, "LlamaWeights", lambda *args: builds.append(1) or real_build(*args))
    generate = engine.generate

    def checked(*args, **kwargs):
        result = generate(*args, **kwargs)
        current.append(_prepared_weights_are_current(engine))
        return result

    engine.generate = checked
    try:
        trainer.train()
    finally:
        trainer.close()
    assert engine.compute_dtype == (torch.bfloat16 if native_dtype == "bfloat16" else None)
    assert engine.last_path == "llama"
    assert len(current) >= 6 and all(current), current
    assert len(builds) < len(current)  # kept across calls


def test_the_ray_engine_wakes_its_ranks_once_after_they_slept():
    """sync_engine wakes the engine before every generation round: on Ray ranks that was a call
    to every rank per round; now one after a sleep, none after weights woke them."""
    from types import SimpleNamespace

    from dapo.trainer.ray_policy import RayRolloutEngine

    calls = []
    engine = RayRolloutEngine(SimpleNamespace(_on_all=calls.append, sync_engines=lambda: calls.append("sync")))
    engine.wake_up()
    engine.sleep()
    engine.wake_up()
    engine.wake_up()
    engine.sleep()
    engine.sync_weights(None)
    engine.wake_up()
    assert calls == ["sleep_engine", "wake_engine", "sleep_engine", "sync"]


def test_close_releases_the_policy_when_an_earlier_part_fails_to_close(tiny_model_dir, reward_file, tmp_path):
    """close() stopped at the first part that raised (the run directory's, e.g. wandb.finish under a
    second Ctrl-C): the engine and the policy's ranks were never released."""
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file))
    closed = []
    state_close, policy_close = trainer.state.close, trainer.policy.close

    def interrupted() -> None:
        state_close()
        raise KeyboardInterrupt

    trainer.state.close = interrupted
    trainer.policy.close = lambda: closed.append("policy") or policy_close()
    with pytest.raises(KeyboardInterrupt):
        trainer.close()
    assert closed == ["policy"]
