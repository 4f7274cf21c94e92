"""Scale-out on this CPU machine: `dapo train` with 2 policy ranks on a local Ray (FSDP2 over
gloo, each rank generating its share with its own engine), the same metric keys as 1 rank, sharded
checkpoints (each rank's DCP shard) with a Hugging Face export that `from_pretrained` loads, and an
exact resume from the shards after the driver is SIGKILLed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from dapo.rollout.base import SamplingParams
from dapo.trainer import Trainer
from dapo.trainer.checkpoint import load_trainer_state
from dapo.trainer.metrics import read_metrics
from dapo.trainer.run_dir import MODEL_CONFIG_FILE, SHARDED_DIR, RunDirError
from tests.trainer.conftest import tiny_config
from tests.trainer.test_trainer_e2e import assert_sigkill_then_resume_is_bit_identical

pytest.importorskip("ray")
TWO_RANKS = ["resources.devices_per_node=2", "trainer.num_threads=1"]


def unwind(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def logged_keys(run_dir) -> set[str]:
    return {key for row in read_metrics(run_dir) for key in row}


def assert_step_1_metrics_equal(one: dict, two: dict) -> None:
    """Step 1 samples from the same initial weights in either layout: what depends on the batch alone
    (rewards, lengths, dynamic sampling, clip counts) is equal, whatever rank held which response:
    sums over every rank's tokens, not a mean of the ranks' means; what the update computes (loss,
    entropy, the global grad norm, not one shard's) equal up to the order of float sums."""
    summed = ("actor/loss", "actor/pg_loss", "actor/grad_norm", "actor/approx_kl", "actor/ratio_mean", "actor/entropy")
    exact = [key for key in one if key.split("/")[0] in ("rollout", "reward", "sampling", "actor") and key not in summed]
    assert len(exact) > 25 and {"actor/clip_frac_low", "actor/response_tokens", "rollout/truncation_rate"} <= set(exact)
    assert {key: two[key] for key in exact} == {key: one[key] for key in exact}
    for key in summed:
        assert two[key] == pytest.approx(one[key], rel=1e-4, abs=1e-7), key


@pytest.mark.slow  # two Ray runs (about 13 s); the default suite keeps the ranks' update against one process
def test_two_ranks_train_log_the_same_metrics_as_one_and_export_a_loadable_model(tiny_model_dir, reward_file, tmp_path):
    # float32 engines and trainer, pi_old recomputed, every group sampled in its own step (no
    # surplus carried): the ranks' engines must sample from exactly the weights the ranks train
    # (after each step every rank gathers them, tensor by tensor)
    exact = ["rollout.native_dtype=model", "trainer.autocast=none", "algorithm.old_logprobs=recompute",
             "algorithm.keep_surplus_groups=false"]
    one = tmp_path / "one"
    Trainer(tiny_config(tiny_model_dir, one, reward_file, "trainer.num_threads=1", *exact)).train()
    two = tmp_path / "two"
    previous = signal.signal(signal.SIGTERM, unwind)  # as the dapo CLI's (exit_on_termination)
    try:
        trainer = Trainer(tiny_config(tiny_model_dir, two, reward_file, *TWO_RANKS, *exact, "checkpoint.hf_export=final"))
        # ray.init installed its own (exit status 15, no "stopped by SIGTERM"); the caller's is kept
        assert signal.getsignal(signal.SIGTERM) is unwind
    finally:
        signal.signal(signal.SIGTERM, previous)
    summary = trainer.train()
    assert summary.steps == 3 and summary.eval_after
    assert logged_keys(two) == logged_keys(one)
    mismatch = [r["mismatch/rollout_trainer_logprob_diff"] for r in read_metrics(two) if "actor/loss" in r]
    assert len(mismatch) == 3 and max(mismatch) < 1e-5, mismatch  # stale engine weights: ~1e-2 from step 2
    lrs = [[r["actor/lr"] for r in read_metrics(run) if "actor/lr" in r] for run in (one, two)]
    assert lrs[0] == lrs[1]  # the warm-up schedule, step by step
    assert_step_1_metrics_equal(*(next(r for r in read_metrics(run) if "actor/loss" in r) for run in (one, two)))
    rows = [r for r in read_metrics(two) if "actor/loss" in r]
    assert [r["actor/updates"] for r in rows] == [2, 2, 2]
    # every step generated at least one round of 6 prompts (how the prompts are split over the
    # ranks' engines is checked in test_trainer_ray_engine.py)
    assert all(r["sampling/groups_generated"] >= 6 for r in rows)
    # each rank wrote its shard (DCP); nothing full-size went through the driver, which holds none
    step_3 = two / "checkpoints" / "step-000003"
    assert sorted(p.name for p in (step_3 / SHARDED_DIR).glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    # each rank's own generators, beside its shard
    assert sorted(p.name for p in (step_3 / SHARDED_DIR).glob("rng-rank*.pt")) == ["rng-rank00000.pt", "rng-rank00001.pt"]
    # checkpoint.hf_export=final: the periodic checkpoints hold the shards alone, the final one the export too
    for periodic in ("step-000001", "step-000002"):
        files = {p.name for p in (two / "checkpoints" / periodic).iterdir()}
        assert SHARDED_DIR in files and not files & {"config.json", "model.safetensors"}, files
        assert MODEL_CONFIG_FILE in files  # what a resume checks the model against
    assert set(load_trainer_state(step_3)["policy"]) == {"sharded", "world_size", "num_nonfinite_skipped"}
    assert all(p.device.type == "meta" for p in trainer.model.parameters())
    final = AutoModelForCausalLM.from_pretrained(step_3)
    initial = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    moved = [name for (name, a), b in zip(final.named_parameters(), initial.parameters()) if not torch.equal(a, b)]
    assert moved, "the exported weights are the initial ones: the ranks' updates did not reach the export"
    # the two ranks' shards resume in one process too (DCP reshards them)
    one_process = Trainer(tiny_config(tiny_model_dir, two, reward_file, "trainer.num_threads=1", "trainer.total_steps=4"))
    try:
        assert one_process.resume() and one_process.step == 3
        resumed = one_process.model.state_dict()
        assert all(torch.equal(tensor, resumed[name]) for name, tensor in final.state_dict().items())
        assert one_process.policy.scheduler.last_epoch == 3 and one_process.policy.optimizer.state
    finally:
        one_process.close()
    # a periodic checkpoint (shards alone) resumes too: the run a crash interrupted goes on from it
    periodic = two / "checkpoints" / "step-000002"
    from_periodic = Trainer(tiny_config(tiny_model_dir, tmp_path / "from_periodic", reward_file,
                                        "trainer.num_threads=1", f"checkpoint.resume={periodic}"))
    try:
        assert from_periodic.resume() and from_periodic.step == 2
    finally:
        from_periodic.close()
    # ... and is still checked against the run's model
    (periodic / MODEL_CONFIG_FILE).write_text(json.dumps({**json.loads((periodic / MODEL_CONFIG_FILE).read_text()),
                                                         "hidden_size": 7}))
    other = Trainer(tiny_config(tiny_model_dir, tmp_path / "other", reward_file, f"checkpoint.resume={periodic}"))
    try:
        with pytest.raises(RunDirError, match="hidden_size 7"):
            other.resume()
    finally:
        other.close()


@pytest.mark.slow  # 40 s on 2 cores: a Ray run of two ranks killed, then resumed, then a reference run
def test_sigkill_of_the_driver_then_resume_is_bit_identical_with_two_ranks(tiny_model_dir, tmp_path):
    assert_sigkill_then_resume_is_bit_identical(tiny_model_dir, tmp_path, TWO_RANKS)


def test_one_rank_never_imports_ray(tiny_model_dir, reward_file, tmp_path):
    script = (
        "import sys; from tests.trainer.conftest import tiny_config; from dapo.trainer import Trainer; "
        f"Trainer(tiny_config(r'{tiny_model_dir}', r'{tmp_path / 'run'}', r'{reward_file}', 'trainer.total_steps=1')).train(); "
        "assert 'ray' not in sys.modules, 'the one-rank path imported ray'"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([os.path.join(root, "src"), root])}, cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.slow  # 9 s; a dead rank is named by the default suite's test_one_ranks_error_is_raised_at_once... too
def test_a_dead_policy_rank_stops_the_run_naming_it(tiny_model_dir, reward_file, tmp_path):
    import ray

    from dapo.trainer.ray_policy import PolicyRankDied

    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *TWO_RANKS))
    # the ranks of a node are placed together (a tensor-parallel engine must not span machines)
    [group] = trainer.policy.node_groups
    table = ray.util.placement_group_table(group)
    assert table["strategy"] == "STRICT_PACK" and len(table["bundles"]) == 2
    ray.kill(trainer.policy.ranks[1])
    with pytest.raises(PolicyRankDied, match=r"policy rank 1 \(Ray actor PolicyRank\) died while running \w+.*resume"):
        trainer.step_once()
    trainer.close()


@pytest.mark.slow  # 12 s: a Ray start and a failed load
def test_ranks_that_fail_to_set_up_are_stopped_with_the_ray_they_started(
    tiny_model_dir, reward_file, tmp_path, short_rank_death_grace
):
    """Else their CPUs stay taken, and a second Trainer in this process (a notebook) waits forever."""
    import shutil

    import ray

    broken = tmp_path / "broken-model"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "model.safetensors").write_bytes(b"\0" * 64)  # passes preflight; fails when the ranks load it
    with pytest.raises(Exception, match="(?i)safetensor|header|deserializ"):
        Trainer(tiny_config(broken, tmp_path / "run", reward_file, *TWO_RANKS))
    assert not ray.is_initialized()


@contextlib.contextmanager
def one_process_and_two_ranks(model_dir: Path, reward_file: Path, tmp_path: Path,
                              *overrides: str) -> Iterator[tuple[Trainer, Trainer]]:
    """The same config as one process and as two Ray ranks, both closed after (the first one also
    when the second fails to start)."""
    one = Trainer(tiny_config(model_dir, tmp_path / "one", reward_file, "trainer.num_threads=1", *overrides))
    try:
        two = Trainer(tiny_config(model_dir, tmp_path / "two", reward_file, *TWO_RANKS, *overrides))
        try:
            yield one, two
        finally:
            two.close()
    finally:
        one.close()


@pytest.mark.parametrize("loss_agg_mode", [
    "token-mean",  # normalised by the mini-batch's tokens
    pytest.param("seq-mean-token-mean", marks=pytest.mark.slow),  # by its responses (20 s more)
])
def test_the_ranks_update_equals_one_process_on_the_same_mini_batch(tiny_model_dir, reward_file, tmp_path,
                                                                     loss_agg_mode: str):
    """Values, not just keys: the driver sends the whole mini-batch's token and response counts (a
    rank normalising by its own share would double the gradient), the ranks' losses add up, and the
    gradient norm (clipped, across the shards) and the updated weights are one process's; so are
    every metric the step logs from the update (the ranks' sums, not rank 0's: pg_loss, clip
    counts, entropy and mismatch of the log-prob pass and of the update's own forward), the
    learning rate after the step, and what the engines sample from the synced weights. Before the
    update, the rollout: each prompt samples with its own seed whichever engine it is dealt to,
    so the ranks' engines (3 and 2 of the prompts) sample what one engine does with all 5."""
    from dapo.trainer.step_metrics import update_metrics
    from tests.trainer.test_trainer_policy import make_samples

    exact = ["trainer.autocast=none", "trainer.grad_clip=0.05", "trainer.micro_batch_tokens=24",
             "rollout.native_dtype=model",  # (float32 logits: the engines' batches round alike)
             f"algorithm.loss_agg_mode={loss_agg_mode}", "trainer.warmup_steps=2", "trainer.lr=1e-2"]
    with one_process_and_two_ranks(tiny_model_dir, reward_file, tmp_path, *exact) as (one, two):
        prompts, params = [[5 + i] * (i + 1) for i in range(5)], SamplingParams(n=2, max_new_tokens=8, seed=3)
        sampled = [[c.token_ids for c in trainer.engine.generate(prompts, params).completions] for trainer in (one, two)]
        assert sampled[0] == sampled[1] and len({tuple(tokens) for tokens in sampled[0]}) > 5
        results = []
        for trainer in (one, two):
            samples = make_samples(torch.Generator().manual_seed(0))
            before = trainer.policy.compute_logprobs(samples)
            for sample, logprobs in zip(samples, before.logprobs):  # ratios of 1.35, 1.05 and 0.74 in turn:
                sample.old_logprobs = [x + (-0.3, -0.05, 0.3)[i % 3] for i, x in enumerate(logprobs.tolist())]
            stats = trainer.policy.update(samples, diagnose=True)  # (clipped tokens on both ranks, both sides)
            result = {"stats": stats, "logged": update_metrics([stats], samples, trainer.policy.lr),
                      "version": trainer.policy.version,  # the updated weights, seen through their log-probs:
                      "after": torch.from_numpy(np.concatenate(trainer.policy.compute_logprobs(samples).logprobs)),
                      "sums": [(lp.tokens, lp.entropy_sum, lp.mismatch_abs_sum) for lp in (before, stats.diagnostics)]}
            trainer.policy.end_step()
            trainer.sync_engine()
            completions = trainer.engine.generate(prompts, params).completions
            results.append(result | {"lr": trainer.policy.lr, "sampled": [c.token_ids for c in completions],
                                     "sampled_logprobs": np.concatenate([c.logprobs for c in completions])})
        single, ranks = results
        assert single["stats"].grad_norm > 0.05  # the clip binds
        assert ranks["stats"].loss == pytest.approx(single["stats"].loss, rel=1e-5, abs=1e-7)
        assert ranks["stats"].grad_norm == pytest.approx(single["stats"].grad_norm, rel=1e-4)
        assert float((ranks["after"] - single["after"]).abs().max()) < 1e-4
        logged = single["logged"]
        assert ranks["logged"].keys() == logged.keys() and logged["actor/clip_frac_low"] > 0 < logged["actor/clip_frac_high"]
        for key, value in logged.items():  # the ranks' sums, not rank 0's: pg_loss, clip fractions, ratio, ...
            assert ranks["logged"][key] == pytest.approx(value, rel=1e-4, abs=1e-7), key
        for ranks_sums, single_sums in zip(ranks["sums"], single["sums"], strict=True):  # actor/entropy, mismatch/*
            assert ranks_sums == pytest.approx(single_sums, rel=1e-4) and single_sums[0] > 0
        assert ranks["version"] == single["version"] == 1
        assert ranks["lr"] == single["lr"] == pytest.approx(1e-2 * 2 / 3)  # the warm-up's second step
        assert ranks["sampled"] == single["sampled"] != sampled[0]  # the synced weights sample anew, alike
        assert float(np.abs(ranks["sampled_logprobs"] - single["sampled_logprobs"]).max()) < 1e-4
        # each rank draws its own random numbers (dropout masks); before, every rank drew rank 0's
        import ray

        draws = ray.get([rank.__ray_call__.remote(lambda _: torch.rand(4)) for rank in two.policy.ranks])
        assert not torch.equal(draws[0], draws[1])
        # each rank's engine copy, built on the meta device, holds the policy's buffers (RoPE's
        # inv_freq, which no weight sync carries): left empty, the tiny model's samples barely moved
        for held in ray.get([rank.__ray_call__.remote(engine_buffers_held) for rank in two.policy.ranks]):
            assert held and all(held.values()), held


def engine_buffers_held(rank) -> dict[str, bool]:
    """On a rank's actor: each of its engine model's buffers equal to its policy's."""
    policy = dict(rank.model.named_buffers())
    return {name: torch.equal(buffer, policy[name]) for name, buffer in rank.engine.model.named_buffers()}


# a Ray run of two ranks per case (about 11 s); the default suite keeps the one-process KL penalty's test
@pytest.mark.slow
@pytest.mark.parametrize("forward", ["auto", "hf"])
def test_two_ranks_kl_penalty_to_their_sharded_reference_equals_one_process(tiny_model_dir, reward_file, tmp_path,
                                                                            forward):
    """algorithm.kl_coef > 0 on two ranks: each holds an FSDP2 shard of the frozen reference (the
    initial policy) and runs it in every micro-batch, the empty ones of the rank with fewer too (else
    the other waits in the reference's all-gathers for good). Loss and actor/kl_ref are one
    process's: 0 KL at the first update (policy == reference), > 0 after it. With dapo-rl's own
    forward ("auto" picks it for this Qwen2) and with Hugging Face's (trainer.forward=hf)."""
    import ray
    from torch.distributed.tensor import DTensor

    from dapo.trainer.batch import Sample
    from dapo.trainer.step_metrics import update_metrics
    from tests.trainer.test_trainer_policy import make_samples

    # bf16 compute (the 32B recipe's): one process casts its reference to bf16, the ranks' mixed
    # precision gathers bf16 copies of float32 shards (casting the shards too made the first KL 1e-7)
    exact = ["trainer.autocast=none", "trainer.param_dtype=bf16", "trainer.micro_batch_tokens=24",
             "algorithm.kl_coef=0.1", "algorithm.kl_estimator=k3", f"trainer.forward={forward}"]
    with one_process_and_two_ranks(tiny_model_dir, reward_file, tmp_path, *exact) as (one, two):
        runs = []
        for trainer in (one, two):
            samples = make_samples(torch.Generator().manual_seed(0))
            # alone on one rank (as many tokens as the others together): 1 micro-batch against 4
            samples.append(Sample(3, "3", [5, 6, 7], list(range(10, 130)), [-1.0] * 120, False, advantage=1.0))
            metrics = []
            for _ in range(2):
                for sample, logprobs in zip(samples, trainer.policy.compute_logprobs(samples).logprobs):
                    sample.old_logprobs = logprobs
                metrics.append(update_metrics([trainer.policy.update(samples)], samples, trainer.policy.lr))
            runs.append(metrics)
        single, ranks = runs
        for one_process, two_ranks in zip(single, ranks):
            assert two_ranks["actor/loss"] == pytest.approx(one_process["actor/loss"], rel=1e-5, abs=1e-7)
            assert two_ranks["actor/kl_ref"] == pytest.approx(one_process["actor/kl_ref"], rel=1e-4, abs=1e-9)
        assert single[0]["actor/kl_ref"] == ranks[0]["actor/kl_ref"] == 0.0
        assert ranks[1]["actor/kl_ref"] > 1e-6
        # the penalty is in the ranks' loss (token-mean: kl_coef x the mean KL per loss token)
        penalty = ranks[1]["actor/loss"] - ranks[1]["actor/pg_loss"]
        # (a difference of two float32 losses near 0.83, whose ulp is 6e-8: within two ulps)
        assert penalty == pytest.approx(0.1 * ranks[1]["actor/kl_ref"], rel=1e-3, abs=1.2e-7)
        # each rank holds shards of a frozen reference, its root resharded after the update's forwards
        held = ray.get([rank.__ray_call__.remote(lambda r: [
            (isinstance(p, DTensor), p.requires_grad, r.policy.ref_model.training)
            for p in r.policy.ref_model.parameters()]) for rank in two.policy.ranks])
        assert all(flags == (True, False, False) for rank in held for flags in rank)


def test_one_ranks_error_is_raised_at_once_and_a_dead_rank_is_named(short_rank_death_grace):
    """A rank's own error (an out-of-memory on one GPU) is raised when it happens, without waiting
    for the ranks blocked in a collective with it; a rank that died is named even when the
    collective it broke fails first on a peer (before, the peer's error was raised)."""
    import time

    import ray

    from dapo.trainer.ray_policy import PolicyRankDied, RayPolicyGroup

    @ray.remote(num_cpus=0)
    class Rank:
        def ready(self) -> bool:
            return True

        def wait_for_peer(self) -> None:  # as a rank blocked in a collective
            time.sleep(300)

        def fail(self, delay_s: float) -> None:
            time.sleep(delay_s)
            raise torch.OutOfMemoryError("CUDA out of memory on this rank")

        def die(self, delay_s: float) -> None:
            time.sleep(delay_s)
            os._exit(1)

    ray.init(num_cpus=2, include_dashboard=False)
    try:
        group = object.__new__(RayPolicyGroup)
        group._ray, group.ranks = ray, [Rank.remote(), Rank.remote()]
        ray.get([rank.ready.remote() for rank in group.ranks])
        started = time.monotonic()
        with pytest.raises(torch.OutOfMemoryError, match="out of memory on this rank"):
            group._get([group.ranks[0].wait_for_peer.remote(), group.ranks[1].fail.remote(0.0)])
        assert time.monotonic() - started < 60  # the blocked rank sleeps 300 s
        assert group.broken  # a further call would wait behind the blocked rank: it raises instead
        with pytest.raises(RuntimeError, match="no further call"):
            group._get([group.ranks[1].ready.remote()])

        group.ranks, group.broken = [Rank.remote(), Rank.remote()], None
        ray.get([rank.ready.remote() for rank in group.ranks])
        with pytest.raises(PolicyRankDied, match=r"policy rank 1 \(Ray actor PolicyRank\) died while running die, fail"):
            group._call([(group.ranks[0].fail, (0.0,)), (group.ranks[1].die, (1.0,))])  # which call: said
    finally:
        ray.shutdown()


# 11-25 s of Ray
@pytest.mark.slow
def test_a_ctrl_c_while_the_ranks_generate_cancels_their_generation():
    """A Ctrl-C (or SIGTERM) during a multi-rank evaluation: the ranks went on generating their whole
    chunk, and the checkpoint of the trained step queued behind it (minutes, past a scheduler's
    grace). The driver cancels the call; an engine that checks for it (the native one) stops."""
    import threading
    import time

    import ray

    from dapo.trainer.ray_policy import RayPolicyGroup

    @ray.remote(num_cpus=0)
    class Rank:
        """A policy rank's native engine, wired as PolicyRank wires it, on a tiny random Qwen2."""

        def __init__(self) -> None:
            from transformers import Qwen2Config, Qwen2ForCausalLM

            from dapo.rollout import NativeEngine
            from dapo.trainer.ray_rank import stop_when_cancelled

            config = Qwen2Config(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                 num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1 << 18)
            self.engine = NativeEngine(Qwen2ForCausalLM(config), pad_token_id=0)
            stop_when_cancelled(self.engine)

        def ready(self) -> bool:
            return True

        def generate(self) -> int:  # some minutes of decoding, if nothing stops it
            from dapo.rollout import SamplingParams

            result = self.engine.generate([[1, 2, 3]], SamplingParams(max_new_tokens=200_000, seed=0))
            return len(result.completions[0].token_ids)

    ray.init(num_cpus=2, include_dashboard=False)
    # Python's Ctrl-C handler, also where this process started with SIGINT ignored (a background job's)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    try:
        group = object.__new__(RayPolicyGroup)
        group._ray, group.ranks = ray, [Rank.remote(), Rank.remote()]
        ray.get([rank.ready.remote() for rank in group.ranks])
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            group._get(group._submit([(rank.generate, ()) for rank in group.ranks]), collective=False, cancellable=True)
        started = time.monotonic()
        assert ray.get([rank.ready.remote() for rank in group.ranks], timeout=30) == [True, True]
        assert time.monotonic() - started < 30  # not behind the generation
    finally:
        signal.signal(signal.SIGINT, previous)
        timer.cancel()
        ray.shutdown()
