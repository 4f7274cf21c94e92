"""Faults on the policy ranks must not hang the driver: a rank's error that leaves its peers
inside a collective (a vLLM tensor-parallel engine's ranks mid-generate, the weight sync's
all-gather), and the calls that would queue behind them. Faults are injected inside the rank
actors (their engines' methods replaced through ``__ray_call__``)."""

from __future__ import annotations

import re
import threading
import time
import warnings
from pathlib import Path

import pytest
import torch

from dapo.trainer import Trainer
from dapo.trainer.run_state import os_error_behind
from tests.trainer.conftest import tiny_config

pytest.importorskip("ray")
TWO_RANKS = ["resources.devices_per_node=2", "trainer.num_threads=1"]


def call_in_thread(fn, timeout_s: float):
    """``fn()``'s result or exception, or ``"hung"`` after ``timeout_s``."""
    outcome: list = ["hung"]

    def run() -> None:
        try:
            outcome[0] = fn()
        except BaseException as error:  # noqa: BLE001 - handed back to the test
            outcome[0] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout_s)
    return outcome[0]


def on_rank(trainer: Trainer, rank: int, fn) -> None:
    import ray

    ray.get(trainer.policy.ranks[rank].__ray_call__.remote(fn))


@pytest.mark.slow  # 40 s on 2 cores: two Ray runs of two ranks
@pytest.mark.parametrize("engine_tp", [2, 1])
def test_a_final_evaluation_that_fails_on_one_rank_does_not_hang_the_run(tiny_model_dir, reward_file, tmp_path,
                                                                         engine_tp):
    """A rank's engine fails mid-generate in the final evaluation. engine_tp=2 (both ranks one
    vLLM tensor-parallel engine): its peer stays blocked in the engine's collective, and the
    fallback checkpoint (every rank into DCP's collectives) would wait on it forever; the run
    must stop with the evaluation's error instead, saying there is no checkpoint of the last
    steps. (A sleeping native engine stands in for the blocked peer.) engine_tp=1: the other
    rank's own engine only takes longer than the grace to finish its share; the fallback
    checkpoint waits for it and is written."""
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *TWO_RANKS,
                                  "checkpoint.every_steps=0", "trainer.total_steps=1"))
    try:
        trainer.step = 1  # the last step is done and no periodic checkpoint holds it
        trainer.policy.engine_tp = engine_tp

        def fail(self) -> None:
            def generate(prompts, params):
                raise RuntimeError("engine failed on this rank")
            self.engine.generate = generate

        def block(self) -> None:
            generate = self.engine.generate

            def slow_generate(prompts, params):  # tp 2: as a rank waiting in the engine's all-reduce for good
                time.sleep(600 if engine_tp == 2 else 15)
                return generate(prompts, params)
            self.engine.generate = slow_generate

        on_rank(trainer, 0, fail)
        on_rank(trainer, 1, block)
        started = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outcome = call_in_thread(trainer._final_evaluation, timeout_s=120)
        assert outcome != "hung", "the fallback checkpoint waited on a rank blocked in a collective"
        assert isinstance(outcome, RuntimeError) and "engine failed on this rank" in str(outcome), outcome
        assert time.monotonic() - started < 90
        checkpoint = tmp_path / "run" / "checkpoints" / "step-000001"
        if engine_tp == 2:
            assert trainer.policy.broken
            assert any("no checkpoint of step 1" in str(w.message) for w in caught), [str(w.message) for w in caught]
            assert not checkpoint.exists()
            with pytest.raises(RuntimeError, match="no further call"):  # raised, not queued behind the blocked rank
                trainer.policy.end_step()
        else:
            assert not trainer.policy.broken and checkpoint.is_dir()
    finally:
        trainer.close()


# (the iterator form in the slow suite, -m slow: 9 s of Ray for the same gather)
@pytest.mark.parametrize("through", [pytest.param("iterator", marks=pytest.mark.slow), "generator"])
def test_an_engine_that_fails_mid_sync_leaves_no_rank_in_the_weights_gather(tiny_model_dir, reward_file, tmp_path,
                                                                            through):
    """One rank's engine fails while loading the gathered weights: the other ranks, mid-way
    through the all-gathers, must not wait in the next one for good (its peer finishes the
    gathers it left), so the error is raised and the ranks still take calls. ``generator``: the
    engine reads them through a generator of its own by ``yield from`` (vLLM's, through
    checkpoint_format), which, closed on the error, closed the gathers before they were drained."""
    from tests.trainer.test_trainer_policy import make_samples

    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *TWO_RANKS))
    try:
        def fail_mid_sync(self) -> None:
            def sync_weights(gathered):
                def renamed():
                    yield from gathered
                for _ in renamed() if through == "generator" else gathered:  # the first tensor gathered
                    raise RuntimeError("engine failed loading weights")
            self.engine.sync_weights = sync_weights

        on_rank(trainer, 1, fail_mid_sync)
        outcome = call_in_thread(trainer.policy.sync_engines, timeout_s=120)
        assert isinstance(outcome, RuntimeError) and "engine failed loading weights" in str(outcome), outcome
        assert trainer.policy.broken is None  # every rank finished the call
        on_rank(trainer, 1, lambda self: delattr(self.engine, "sync_weights"))
        trainer.policy.sync_engines()  # the ranks' collectives still pair up
        samples = make_samples(torch.Generator().manual_seed(0))
        assert len(trainer.policy.compute_logprobs(samples).logprobs) == len(samples)
    finally:
        trainer.close()


@pytest.mark.slow  # about 10 s; the default suite keeps the engine's mid-sync failure
def test_uneven_shares_and_a_skipped_update_keep_the_ranks_in_step(tiny_model_dir, reward_file, tmp_path):
    """Not faults, but paths where one rank could enter a collective the other does not: a
    mini-batch or log-prob pass with a rank holding no sample, a non-finite loss on one rank's share
    only (every rank skips the update), the weight sync after it, and a generate with fewer prompts
    than ranks."""
    from dapo.rollout.base import SamplingParams
    from tests.trainer.test_trainer_policy import make_samples

    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *TWO_RANKS))
    policy = trainer.policy
    try:
        samples = make_samples(torch.Generator().manual_seed(0))
        for sample, logprobs in zip(samples, policy.compute_logprobs(samples).logprobs):
            sample.old_logprobs = logprobs
        one = samples[:1]  # rank 1's share is empty
        assert len(policy.compute_logprobs(one).logprobs) == 1
        stats = call_in_thread(lambda: policy.update(one), timeout_s=120)
        assert not isinstance(stats, (str, BaseException)) and not stats.skipped and policy.version == 1, stats
        samples[-1].old_logprobs = [float("nan")] * len(samples[-1].old_logprobs)  # on one rank's share
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            stats = call_in_thread(lambda: policy.update(samples), timeout_s=120)
        assert not isinstance(stats, (str, BaseException)) and stats.skipped, stats
        # said once, by the driver, with the reason of the rank that saw the NaN (not once per rank, in theirs)
        assert [str(w.message) for w in caught if "skipped" in str(w.message)] == [
            "skipped an optimizer update: loss is nan; weights left unchanged"]
        assert policy.version == 1 and policy.num_nonfinite_skipped == 1
        assert call_in_thread(policy.sync_engines, timeout_s=120) is None
        samples[-1].old_logprobs = [float(samples[0].old_logprobs[0])] * len(samples[-1].response_ids)
        assert not call_in_thread(lambda: policy.update(samples), timeout_s=120).skipped
        result = call_in_thread(lambda: trainer.engine.generate([[5, 6, 7]], SamplingParams(n=2, max_new_tokens=4)), 120)
        assert [c.prompt_index for c in result.completions] == [0, 0]
    finally:
        trainer.close()


@pytest.mark.slow  # 9 s: a fault form (the default suite keeps the engine's mid-sync failure)
def test_an_export_that_fails_on_rank_0_leaves_no_rank_in_a_gather(tiny_model_dir, reward_file, tmp_path):
    """Rank 0 fails writing the Hugging Face export (a full disk) after its first tensor: the other
    rank, mid-way through the export's all-gathers, must not wait in the next one for good (rank 0
    finishes the gathers it left), so the error is raised at once, not after the grace, and the
    ranks still take calls (before, the group was left broken)."""
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *TWO_RANKS))
    try:
        def fail_mid_export(self) -> None:
            from dapo.trainer import hf_export

            def add(writer, name, tensor):
                raise OSError("No space left on device")
            hf_export._SafetensorsWriter.add = add

        on_rank(trainer, 0, fail_mid_export)
        started = time.monotonic()
        outcome = call_in_thread(lambda: trainer.policy.save_checkpoint(tmp_path / "ckpt", hf_export=True), 120)
        # RunState.save finds the OSError behind it: "No space left on device (checkpoint step N not written ...)"
        assert (cause := os_error_behind(outcome)) is not None and "No space left" in str(cause), outcome
        assert time.monotonic() - started < 60
        assert trainer.policy.broken is None  # every rank finished the call
        trainer.policy.sync_engines()  # the ranks' collectives still pair up
    finally:
        trainer.close()


def test_a_malformed_row_and_a_broken_reward_function_are_named_before_ray_starts_the_ranks(
        tiny_model_dir, reward_file, tmp_path, monkeypatch):
    """The ranks started, and loaded the model (minutes on a cluster), before the data was read and
    the reward workers started: one process names both at once."""
    from dapo.data import DataError
    from dapo.rewards import RewardFunctionError
    from dapo.trainer import ray_policy

    def no_ranks(self, cfg):
        raise AssertionError("the policy ranks were started")

    monkeypatch.setattr(ray_policy.RayPolicyGroup, "__init__", no_ranks)
    bad_rows = tmp_path / "bad.jsonl"
    bad_rows.write_text('{"prompt": "1+1=", "answer": "2"}\n{"prompt": "2+2="}\n')
    cfg = tiny_config(tiny_model_dir, tmp_path / "a", reward_file, *TWO_RANKS, f"data.train_files=[{bad_rows}]",
                      "data.prompt_key=prompt", "data.answer_key=answer")
    with pytest.raises(DataError, match=r"bad\.jsonl line 2: missing ground truth"):
        Trainer(cfg)
    broken = tmp_path / "broken.py"
    broken.write_text("def fn(response, ground_truth, extra):\n    return 'high'\n")
    with pytest.raises(RewardFunctionError, match="returned a bad value"):
        Trainer(tiny_config(tiny_model_dir, tmp_path / "b", broken, *TWO_RANKS, fn="fn"))


# A plugin module (imported by each rank as its set-up reads the config) that crashes policy rank 1's
# process the first time only, from a thread of its own, as glibc's heap checks abort in gloo's threads.
CRASHING_PLUGIN = """
import os, pathlib, threading, time
crashed = pathlib.Path(__file__).with_name("crashed")
if os.environ.get("RANK") == "1" and not crashed.exists():
    crashed.write_text("rank 1")
    threading.Thread(target=os.abort).start()
    time.sleep(60)
"""


@pytest.mark.slow  # 20-35 s of Ray each; the default suite names a dead rank (test_trainer_ray.py)
@pytest.mark.parametrize("start_attempts", [2, 1])
def test_a_rank_that_dies_while_the_ranks_start_is_started_again(tiny_model_dir, reward_file, tmp_path,
                                                                  start_attempts):
    """The ranks hold nothing while they start: a rank's crash there (seen in CI: a rare heap
    corruption in a fresh rank process) starts them all again, saying so, up to
    resources.start_attempts times; the run then trains as ever. With 1, the death stops the run,
    and nothing of the group is left (its Ray stopped)."""
    import ray

    from dapo.trainer.ray_policy import PolicyRankDied
    from tests.trainer.test_trainer_policy import make_samples

    plugin = tmp_path / "crash_once.py"
    plugin.write_text(CRASHING_PLUGIN)
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *TWO_RANKS, f"algorithm.plugins=[{plugin}]",
                      f"resources.start_attempts={start_attempts}")
    if start_attempts == 1:
        with pytest.raises(PolicyRankDied, match=r"policy rank 1 \(Ray actor PolicyRank\) died while running setup"):
            Trainer(cfg)
        assert (tmp_path / "crashed").exists() and not ray.is_initialized()
        return
    with pytest.warns(UserWarning, match=r"policy rank 1 \(Ray actor PolicyRank\) died while running setup "
                                         r"\(ActorDiedError.*starting the policy ranks again \(attempt 2 of "
                                         r"resources.start_attempts=2\)"):
        trainer = Trainer(cfg)
    try:
        assert (tmp_path / "crashed").read_text() == "rank 1"
        # the dead rank's log shows what each of its threads ran, the main thread's set-up (the plugin's import
        # in its config check) as well as the thread that crashed
        logs = Path(ray._private.worker._global_node.get_logs_dir_path())
        [crash] = [text for log in logs.glob("worker-*.err") if "Fatal Python error: Aborted" in (text := log.read_text())]
        assert re.search(r"crash_once\.py\", line \d+ in <module>\n(.*\n)*.*ray_rank\.py\", line \d+ in setup\n", crash), crash[-3000:]
        assert len(trainer.policy.ranks) == 2 and trainer.policy.broken is None
        samples = make_samples(torch.Generator().manual_seed(0))
        assert len(trainer.policy.compute_logprobs(samples).logprobs) == len(samples)  # both ranks in the collectives
        states = sorted(group["state"] for group in ray.util.placement_group_table().values())
        assert states == ["CREATED", "REMOVED"]  # the first start's placement freed (its CPUs), the new one's held
    finally:
        trainer.close()
