"""The loop's state is in one place: ``Trainer.state_dict()`` (step, group ids, sampler cursor and
surplus, RNG) plus the policy's own state is everything the next step depends on."""

from __future__ import annotations

import copy
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from dapo import config
from dapo.trainer import Trainer
from dapo.trainer.rng import set_rng_state
from dapo.trainer.run_state import RunState
from tests.trainer.conftest import tiny_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"


def _comparable(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if not k.startswith(("time/", "perf/"))}


def test_state_dicts_moved_in_memory_reproduce_the_next_step(tiny_model_dir, reward_file, tmp_path):
    """A second trainer given the first one's loop and policy state (no checkpoint on disk) makes
    the same next step: same samples and rewards, same loss, same updated weights."""
    extra = ("checkpoint.every_steps=0", "trainer.gen_prompts_per_round=8")  # 8 > 4 per step: surplus groups
    first = Trainer(tiny_config(tiny_model_dir, tmp_path / "a", reward_file, *extra))
    second = Trainer(tiny_config(tiny_model_dir, tmp_path / "b", reward_file, *extra))
    try:
        for _ in range(2):
            first.step_once()
        assert first.sampler.surplus, "no surplus groups carried: the test would not cover them"
        # copies, as a checkpoint would hold (a state_dict shares the optimizer's tensors)
        first.reward_watch.streak = {"rewards.parity": 2}  # a reward that failed everywhere for 2 steps...
        loop_state, policy_state = copy.deepcopy(first.state_dict()), copy.deepcopy(first.policy.state_dict())
        second.model.load_state_dict(first.model.state_dict())
        second.policy.load_state_dict(policy_state)
        # a resuming process starts from other random streams: the loaded state must set them all
        torch.manual_seed(12345), random.seed(12345), np.random.seed(12345)
        second.load_state_dict(loop_state)
        drawn = (torch.rand(4), random.random(), np.random.rand(4))
        set_rng_state(loop_state["rng"])
        assert torch.equal(drawn[0], torch.rand(4)) and drawn[1] == random.random()
        assert np.array_equal(drawn[2], np.random.rand(4))
        set_rng_state(loop_state["rng"])
        assert second.step == 2 and second.engine_version is None  # the engine syncs before its next use
        # ...has its count restored, not restarted
        assert second.reward_watch.streak == first.reward_watch.streak == loop_state["reward_failure_streak"]
        replayed = second.step_once()
        set_rng_state(loop_state["rng"])
        original = first.step_once()
        assert _comparable(replayed.metrics) == _comparable(original.metrics)
        assert [r.score for r in replayed.reward_results] == [r.score for r in original.reward_results]
        assert all(torch.equal(a, b) for a, b in zip(first.model.parameters(), second.model.parameters()))
        assert second.state_dict()["next_group_id"] == first.state_dict()["next_group_id"]
    finally:
        first.close()
        second.close()


def test_per_step_data_is_returned_not_kept_on_the_trainer(tiny_model_dir, reward_file, tmp_path):
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "logging.completions_per_step=2"))
    try:
        trainer.step_once()
        before = {name: id(value) for name, value in vars(trainer).items()}
        result = trainer.step_once()
        # a step rebinds only the loop's own state on the trainer (per-step data is returned)
        rebound = {name for name, value in vars(trainer).items() if before.get(name) != id(value)}
        assert rebound <= {"step", "next_group_id", "engine_version", "updates_made"}, rebound
        assert len(result.completions) == 2 and result.reward_results
        assert result.metrics["time/generate"] == result.timer["generate"] > 0
        # the run directory is handed values; it holds no reference back to the trainer
        assert isinstance(trainer.state, RunState) and all(v is not trainer for v in vars(trainer.state).values())
    finally:
        trainer.close()


def test_the_documented_hand_driven_loop_runs_and_its_checkpoint_resumes(tiny_model_dir, reward_file, tmp_path,
                                                                          monkeypatch, capsys):
    """docs/extending.md's "Driving the loop from Python" block, run as written on the tiny model."""
    text = DOC.read_text()
    code = re.search(r"## Driving the loop from Python.*?```python\n(.*?)```", text, re.S).group(1)
    run_dir = tmp_path / "by-hand"
    real_load_config = config.load_config

    def tiny_load_config(files, overrides):  # the block's own overrides, on the tiny model
        assert files == [config.builtin_config_path("default")]
        return tiny_config(tiny_model_dir, run_dir, reward_file, *overrides, f"output_dir={run_dir}",
                           "checkpoint.every_steps=0")

    monkeypatch.setattr(config, "load_config", tiny_load_config)
    exec(compile(code, "docs/extending.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "step 1: acc" in printed and "eval/avg@2" in printed
    monkeypatch.setattr(config, "load_config", real_load_config)
    resumed = Trainer(tiny_config(tiny_model_dir, run_dir, reward_file, "checkpoint.every_steps=0"))
    try:
        steps_done = len([line for line in printed.splitlines() if line.startswith("step ")])
        assert resumed.resume() and resumed.step == steps_done
    finally:
        resumed.close()


@pytest.mark.parametrize("mini_batch_prompts", [4, 2])  # one update a step (pi_old from its forward), two
def test_surplus_groups_train_against_the_policy_that_sampled_them(tiny_model_dir, reward_file, tmp_path,
                                                                   mini_batch_prompts):
    """With old_logprobs=recompute, dynamic sampling's surplus is trained a step after it was
    sampled: its pi_old is the sampling step's policy, taken before that step's update (it was the
    next step's, and the clipped ratio ignored the step of training in between)."""
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "algorithm.old_logprobs=recompute",
                                  f"trainer.mini_batch_prompts={mini_batch_prompts}", "trainer.gen_prompts_per_round=8",
                                  "checkpoint.every_steps=0", "eval.every_steps=0"))
    try:
        sampling_policy = copy.deepcopy(trainer.model.state_dict())
        trainer.step_once()
        carry = trainer.sampler.to_carry(trainer.step)  # the next step (step_once counted this one)
        assert carry, "no surplus groups carried: the test would not cover them"
        updated = copy.deepcopy(trainer.model.state_dict())
        trainer.model.load_state_dict(sampling_policy)
        expected = {id(s): lp.tolist() for s, lp in zip(carry, trainer.policy.compute_logprobs(carry).logprobs)}
        trainer.model.load_state_dict(updated)
        trained_with = {}
        update = trainer.policy.update

        def record_pi_old(mini_batch, *args, **kwargs):
            trained_with.update({id(s): s.old_logprobs.tolist() for s in mini_batch if s.carried_over})
            return update(mini_batch, *args, **kwargs)

        passes: list[list] = []
        compute_logprobs = trainer.policy.compute_logprobs

        def record_pass(samples):
            passes.append(list(samples))
            return compute_logprobs(samples)

        trainer.policy.update, trainer.policy.compute_logprobs = record_pi_old, record_pass
        trainer.step_once()
        assert trained_with and trained_with == {key: expected[key] for key in trained_with}
        # and no forward pass recomputes what they hold
        assert not [s for samples in passes for s in samples if id(s) in trained_with]
    finally:
        trainer.close()


def test_surplus_from_a_rollout_pi_old_step_keeps_its_sampling_policy_under_recompute(tiny_model_dir, reward_file,
                                                                                       tmp_path):
    """Surplus sampled in a step run with old_logprobs=rollout holds no forward of its policy; a
    run resumed with recompute trains it against its behaviour log-probs (that policy's), not
    against a recompute by the next step's policy."""
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "algorithm.old_logprobs=rollout",
                                  "trainer.gen_prompts_per_round=8", "checkpoint.every_steps=0",
                                  "eval.every_steps=0"))
    try:
        trainer.step_once()
        carry = trainer.sampler.to_carry(trainer.step)
        assert carry and not any(len(s.old_logprobs) for s in carry), "the test needs surplus without pi_old"
        trainer.cfg.algorithm.old_logprobs = "recompute"  # as a resume with the setting changed
        trained_with = {}
        update = trainer.policy.update

        def record_pi_old(mini_batch, *args, **kwargs):
            trained_with.update({id(s): s.old_logprobs.tolist() for s in mini_batch if s.carried_over})
            return update(mini_batch, *args, **kwargs)

        trainer.policy.update = record_pi_old
        trainer.step_once()
        expected = {id(s): s.rollout_logprobs.tolist() for s in carry}
        assert trained_with and trained_with == {key: expected[key] for key in trained_with}
    finally:
        trainer.close()


def test_the_truncation_warning_is_said_once_not_every_step(tmp_path, recwarn):
    state = RunState(config.load_config([], [f"output_dir={tmp_path}", "logging.tensorboard=false"]))
    try:
        for rate in (0.9, 0.95, 0.2, 0.97):
            state.warn_if_truncating({"rollout/truncation_rate": rate})
        said = [w for w in recwarn if "hit rollout.max_response_length" in str(w.message)]
        assert len(said) == 1 and str(said[0].message).startswith("90% of responses")
    finally:
        state.lock.release()
    # 383 of 384 responses is not "100% of responses" (the rate rounds down, to a tenth)
    state = RunState(config.load_config([], [f"output_dir={tmp_path / 'b'}", "logging.tensorboard=false"]))
    try:
        with pytest.warns(UserWarning, match=r"^99\.7% of responses hit"):
            state.warn_if_truncating({"rollout/truncation_rate": 383 / 384})
    finally:
        state.lock.release()


def test_a_shards_only_checkpoint_records_the_models_own_dropout_rates(tmp_path):
    """model_config.json (a checkpoint without the Hugging Face export) holds the config the model
    came with, not the zeroed dropout rates the policy trains with; training keeps its zeros."""
    from types import SimpleNamespace

    from transformers import LlamaConfig, LlamaForCausalLM

    from dapo.trainer.dropout import disable_dropout

    model = LlamaForCausalLM(LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                                         num_attention_heads=2, attention_dropout=0.25))
    disable_dropout(model)
    saved: dict[str, str] = {}
    trainer = SimpleNamespace(
        cfg=SimpleNamespace(checkpoint=SimpleNamespace(hf_export="final")), step=2, model=model, policy=None,
        tokenizer=None, state_dict=dict, best_checkpoint=None, _best_step=lambda: None,
        _checkpoint_state=lambda final, evaluation_owed=False, export_owed=False: {},
        state=SimpleNamespace(save=lambda step, state, policy, tokenizer, model_config_json, hf_export, best_step:
                              saved.update(json=model_config_json)))
    Trainer.save_checkpoint(trainer)
    assert '"attention_dropout": 0.25' in saved["json"]
    assert model.config.attention_dropout == 0.0


def test_a_checkpoint_is_durable_after_the_log_lines_it_counts(tmp_path, monkeypatch):
    """Power-loss order: metrics.jsonl and completions.jsonl are fsynced before the checkpoint
    that records their line counts; the new checkpoints/ folder's entry in the run directory,
    the checkpoint's files and its rename into checkpoints/ are fsynced too."""
    import os
    from types import SimpleNamespace

    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    run_dir = (tmp_path / "run").resolve()
    state = RunState(config.load_config([], [f"output_dir={run_dir}", "logging.tensorboard=false"]))
    try:
        state.logger.log(1, {"reward/mean": 0.5})
        state.logger.log_completions(1, [{"prompt": "p", "response": "r", "reward": 1.0}])
        policy = SimpleNamespace(save_checkpoint=lambda directory, tokenizer, hf_export: {})
        checkpoint = state.save(1, {"step": 1}, policy, None, "{}", hf_export=False)
    finally:
        state.lock.release()
    order = {path: index for index, path in enumerate(synced)}  # a path's last fsync
    state_file = next(path for path in synced if path.endswith("/trainer_state.pt"))
    for log in ("metrics.jsonl", "completions.jsonl"):
        assert order[str(run_dir / log)] < order[state_file], (log, synced)
    assert str(run_dir) in order  # checkpoints/ made: its entry in the run directory
    assert order[str(run_dir / "checkpoints")] > order[state_file]  # the rename that publishes it
    assert checkpoint == run_dir / "checkpoints" / "step-000001"


@pytest.mark.parametrize("exported", [False, True])
def test_a_checkpoint_without_the_models_config_json_records_it_in_model_config_json(tmp_path, exported):
    """Policy ranks' shards without the Hugging Face export (checkpoint.hf_export=final) hold no
    config.json: model_config.json is what a resume checks the checkpoint's model against. With
    the export, config.json is that, and no second copy is written."""
    from types import SimpleNamespace

    from dapo.trainer.run_dir import MODEL_CONFIG_FILE

    def save_checkpoint(directory, tokenizer, hf_export):
        (directory / "shards").mkdir()
        if exported:
            (directory / "config.json").write_text('{"model_type": "exported"}')
        return {}

    state = RunState(config.load_config([], [f"output_dir={tmp_path / 'run'}", "logging.tensorboard=false"]))
    try:
        checkpoint = state.save(1, {"step": 1}, SimpleNamespace(save_checkpoint=save_checkpoint), None,
                                '{"model_type": "recorded"}', hf_export=exported)
    finally:
        state.lock.release()
    assert (checkpoint / MODEL_CONFIG_FILE).is_file() is not exported
    if not exported:
        assert json.loads((checkpoint / MODEL_CONFIG_FILE).read_text()) == {"model_type": "recorded"}


def test_a_resumed_progress_bar_leaves_out_the_updates_earlier_steps_skipped(tiny_model_dir, reward_file, tmp_path):
    """Steps with no group to train on make no update and shrink the bar's total; a resume
    rebuilt the bar as if every earlier step had made all its updates (4/8 where 0/4 were made)."""
    run = tmp_path / "run"
    constant = ("trainer.total_steps=2", "eval.before_training=false", "eval.every_steps=0")
    with pytest.warns(UserWarning, match="no group with mixed outcomes"):
        first = Trainer(tiny_config(tiny_model_dir, run, reward_file, *constant, fn="always_right"))
        first.train()
    assert first.updates_made == 0 and first.policy.version == 0 and first.updates_per_step == 2
    # the same, and (it read -2/-2 and -N/-M) fewer updates a step, and a resume past the last step
    for extra, expected in ((), (0, 2)), (("trainer.mini_batch_prompts=4",), (0, 1)), (("trainer.total_steps=1",), (0, 0)):
        resumed = Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=3", "logging.progress=true",
                                      *extra, fn="always_right"))
        try:
            assert resumed.resume() and resumed.updates_made == 0
            with resumed.state.progress(resumed.step, resumed.updates_made):
                [bar] = resumed.state._progress.tasks
                assert (bar.completed, bar.total) == expected, extra  # step 3's updates alone
        finally:
            resumed.close()


def test_a_resumed_progress_bar_counts_the_updates_earlier_steps_made(tiny_model_dir, reward_file, tmp_path):
    """The count a checkpoint keeps (updates_made) is what the bar starts from after a resume, with
    the same and with fewer updates a step (the test above: runs that made none)."""
    run = tmp_path / "run"
    first = Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=2", "eval.before_training=false",
                                "eval.every_steps=0"))
    first.train()
    made = first.policy.version
    assert made > 0 and first.updates_made == made, "pick settings whose steps make updates"
    for extra, per_step in ((), first.updates_per_step), (("trainer.mini_batch_prompts=4",), 1):
        resumed = Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=3", "logging.progress=true",
                                      "eval.every_steps=0", *extra))
        try:
            assert resumed.resume() and resumed.updates_made == made
            with resumed.state.progress(resumed.step, resumed.updates_made):
                [bar] = resumed.state._progress.tasks
                assert (bar.completed, bar.total) == (made, made + per_step), extra
        finally:
            resumed.close()


def test_updates_with_no_loss_token_are_not_counted_as_made_on_the_bar(tiny_model_dir, reward_file, tmp_path):
    """Every response cut at the length limit and overlong filtering on: each update is empty
    (actor/updates 0), and the bar read 8/8 updates all the same; they come off its total now."""
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "trainer.total_steps=2",
                                  "rollout.max_response_length=1", "algorithm.overlong_soft_punishment=false",
                                  "algorithm.dynamic_sampling=false", "algorithm.overlong_filtering=true",
                                  "eval.before_training=false", "eval.every_steps=0", "logging.progress=true"))
    advanced: list[int] = []
    trainer.state.bar_advance = advanced.append
    trainer.train()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [row["actor/updates"] for row in rows if "actor/updates" in row] == [0, 0], "pick settings that truncate all"
    assert advanced == [] and trainer.updates_made == 0 and trainer.policy.version == 0


def test_the_bar_names_the_step_whose_accuracy_it_shows_once_that_step_is_logged(tiny_model_dir, reward_file,
                                                                                   tmp_path):
    """A finished run's bar read 'step 4/4 | step 3 acc ...': the last step's own line never came."""
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "trainer.total_steps=2",
                                  "logging.progress=true"))
    try:
        with trainer.state.progress(0):
            [bar] = trainer.state._progress.tasks
            trainer.state.bar_step(1)
            assert bar.description == "step 1/2"
            trainer.state.log(1, {"rollout/acc": 0.5, "sampling/gen_rounds": 2.0})
            assert bar.description == "step 1/2 | step 1 acc 0.50 rounds 2"
            trainer.state.bar_step(2)  # running step 2: step 1's numbers until it is logged
            assert bar.description == "step 2/2 | step 1 acc 0.50 rounds 2"
            trainer.state.log(2, {"rollout/acc": 0.75, "sampling/gen_rounds": 1.0})
            assert bar.description == "step 2/2 | step 2 acc 0.75 rounds 1"
    finally:
        trainer.close()


def test_a_step_without_signal_names_the_scorers_that_failed_and_whether_verdicts_were_lost():
    """A bonus function that raised on every response, beside a verifier that judged them all: the
    step said "320 of 320 responses could not be scored", though every verdict stood and the groups
    were dropped because every answer was wrong."""
    from dapo.rewards.types import RewardResult
    from dapo.trainer.loop import _failures_note

    bonus_failed = [RewardResult(score=-1.5, acc=False, error=True, failed=["raises"]) for _ in range(320)]
    assert _failures_note(bonus_failed) == " (every response judged; bonus scorers failed: raises on 320 of 320 responses)"
    unjudged = [RewardResult(score=-1.0, acc=False, error=True, failed=["math_verify"], unmeasured_by="math_verify"),
                RewardResult(score=1.0, acc=True)]
    assert _failures_note(unjudged) == (": 1 of 2 responses could not be judged (rollout/reward_errors, "
                                        "rollout/reward_timeouts; failed: math_verify on 1)")
    assert _failures_note([RewardResult(score=1.0, acc=True)]) == ""


@pytest.mark.parametrize("autocast", ["none", "fp16"])
@pytest.mark.parametrize("skip", ["loss", "gradient"])
def test_the_non_finite_streak_passes_over_steps_without_an_update_and_names_the_kept_weights(autocast, skip):
    """A step with no group to train neither ends nor extends the streak, and the stop names the
    step whose weights the skips kept. float16's loss scaling skips gradient overflows by design:
    not counted; its non-finite losses are (a diverged float16 run went on skipping forever)."""
    from dapo.errors import NonFiniteError
    from dapo.trainer.loop_state import LoopState
    from dapo.trainer.step_metrics import update_metrics
    from dapo.trainer.update_stats import PEER_NONFINITE_LOSS, UpdateStats

    loop = LoopState.__new__(LoopState)
    loop.cfg = config.load_config([config.builtin_config_path("default")], ["trainer.max_nonfinite_steps=2",
                                                                             f"trainer.autocast={autocast}"])
    reasons = ["loss is nan", PEER_NONFINITE_LOSS] if skip == "loss" else ["gradient norm is inf", "gradient norm is nan"]
    made, skipped, nothing = (update_metrics([UpdateStats(skip_reason=reason) for reason in why], [], 1e-6)
                              for why in (["", ""], reasons, []))
    assert (made["actor/updates"], skipped["actor/skipped_updates"], nothing["actor/skipped_updates"]) == (2, 2, 0)
    assert skipped["actor/skipped_nonfinite_loss"] == (2 if skip == "loss" else 0)
    stops = []
    for loop.step, metrics in enumerate([made, skipped, nothing, made, skipped, nothing, skipped], start=1):
        stops.append(loop._count_nonfinite(metrics))
    if autocast == "fp16" and skip == "gradient":
        assert stops == [None] * 7
    else:
        assert stops[:6] == [None] * 6 and isinstance(stops[6], NonFiniteError)
        assert "the last 2 steps that tried one was skipped" in str(stops[6]) and "since step 4" in str(stops[6])
