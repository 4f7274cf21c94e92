"""Scale-out: policy ranks on Ray actors, driven by the single controller (the Trainer's loop).

The driver keeps the DAPO loop (dynamic sampling, rewards, advantages, metrics, checkpoints,
evaluation). Each of ``resources.world_size`` :class:`PolicyRank` actors holds an FSDP2 shard of
the policy (gloo on CPU, NCCL on GPU; only rank 0 reads the weights, the others receive their
shards from it) and a rollout engine: a full copy of the current weights, or its slice of a vLLM
tensor-parallel engine. The driver talks to them through :class:`RayPolicyGroup` (the
:class:`PolicyWorker` calls the loop makes) and :class:`RayRolloutEngine` (a rollout engine):

- generate: the prompts are dealt to the engines, equal in number and balanced by prompt tokens;
  each prompt samples with its own seed, as in one native or vLLM engine (hf: each engine's share
  with a seed of its own); completions come back in prompt order. An
  engine is one rank's, or with ``rollout.vllm_tensor_parallel_size`` > 1 a vLLM tensor-parallel
  group of consecutive ranks, each holding a slice of the weights and given the same prompts.
- update: each mini-batch is dealt to the ranks balanced by token count; the normalisers
  ``num_tokens``/``num_seqs`` are those of the WHOLE mini-batch (the driver has it all), and FSDP
  sums the ranks' gradients, so the token-level loss is exact (see :mod:`dapo.trainer.fsdp`).
- weight sync: after a step's updates every rank all-gathers the full weights into its engine,
  one tensor at a time (peak: one full tensor).
- checkpoints: every rank writes its shard of the model, optimizer and scheduler state (DCP) and
  its RNG states, and rank 0 the Hugging Face export gathered from the shards; a resume reads
  them back. Nothing full-size passes through the driver (see :mod:`dapo.trainer.checkpoint`).

The rank actor itself is :mod:`dapo.trainer.ray_rank`; where Ray places the ranks,
:mod:`dapo.trainer.ray_placement`; how the driver calls the ranks without
ever waiting for good on a fault, :mod:`dapo.trainer.ray_faults`; how log-probs travel back,
:mod:`dapo.trainer.ray_transport`. ``import ray`` happens only in these modules' functions, and
only when more than one rank is asked for.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import math
import os
import re
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from dapo.algo import PolicyLossStats
from dapo.child_signals import children_spared
from dapo.config import DAPOConfig, ResourcesConfig
from dapo.config.loading import config_to_dict, with_absolute_paths
from dapo.errors import UserError
from dapo.ray_checks import RUNNING_CLUSTER, token_auth_problem
from dapo.rollout.base import GenerationResult, SamplingParams, prompt_seeds, request_seed
from dapo.trainer.batch import (
    Sample,
    check_update_inputs,
    deal_prompts,
    fill_normalisers,
    split_across_ranks,
)
from dapo.trainer.ray_faults import (
    RANK_DEATH_GRACE_S,
    PolicyRankDied,
    RankCalls,
    signals_deferred,
)
from dapo.trainer.ray_placement import node_placement_groups, rank_bundle, ranks_use_gpus
from dapo.trainer.ray_rank import RANK_SEED_STRIDE, PolicyRank, rank_device
from dapo.trainer.run_dir import RunDirError
from dapo.trainer.sharded_checkpoint import is_sharded, missing_shards, sharded_policy_state
from dapo.trainer.update_stats import PEER_NONFINITE_LOSS, LogprobPass, UpdateStats

RAY_INIT_CTRL_C = "Ctrl-C: stopping once Ray has started (or failed to); Ctrl-C again stops at once"

__all__ = ["RANK_DEATH_GRACE_S", "RANK_SEED_STRIDE", "PolicyRank", "PolicyRankDied", "RayPolicyGroup",
           "RayRolloutEngine", "rank_device"]


@contextlib.contextmanager
def keeping_sigterm_handler() -> Iterator[None]:
    """Keep the caller's SIGTERM handler over ``ray.init``, which installs its own (``sys.exit(15)``):
    the dapo CLI's unwinds with status 143 and says the run stopped (Ray's atexit shutdown runs
    either way); a SIGTERM that Ray's handler met while ``ray.init`` ran is handed to the caller's.
    A caller without a Python handler (SIG_DFL, a script) keeps Ray's, which unwinds."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main_thread else None
    try:
        yield
    except SystemExit as stop:
        # a SIGTERM while ray.init ran met Ray's handler: the caller's handles it as its own, put
        # back first and then left as it leaves itself (the CLI's: a second signal ends at once)
        if callable(previous) and stop.code == signal.SIGTERM:
            signal.signal(signal.SIGTERM, previous)
            handler, previous = previous, None
            handler(signal.SIGTERM, None)
        raise
    finally:
        if callable(previous):
            signal.signal(signal.SIGTERM, previous)


def stop_half_started_ray(ray: Any, stop: BaseException) -> None:
    """After ``ray.init`` raised (a Ctrl-C or SIGTERM while it started a local Ray): stop what it
    started. ``ray.shutdown`` knows only a node whose start finished; the one being started is the
    ``self`` of Ray's ``Node.__init__`` in the traceback. Its raylet is stopped as a shutdown stops
    it, with its agents: killed by Ray's reaper instead, it left them running for about a minute."""
    frame_locals = []
    error: BaseException | None = stop
    while error is not None:  # (Ray's SystemExit(15) is the context of the caller's handler's)
        traceback = error.__traceback__
        while traceback is not None:
            frame_locals.append(traceback.tb_frame.f_locals.get("self"))
            traceback = traceback.tb_next
        error = error.__context__
    with contextlib.suppress(Exception):  # (what failed here must not hide the stop)
        import ray._private.node as ray_node  # (Ray's own module: no public API names the node)

        for node in (candidate for candidate in frame_locals if isinstance(candidate, ray_node.Node)):
            node.kill_all_processes(check_alive=False, allow_graceful=True, wait=True)
    with contextlib.suppress(Exception):
        ray.shutdown()


def quiet_local_token_auth() -> None:
    """Before a local cluster's ``import ray``: Ray 2.59 and later start a local cluster with token
    authentication on and say so in a WARNING at every start ("Set RAY_AUTH_MODE=disabled to opt
    out") unless RAY_AUTH_MODE is set. Setting it to that default keeps the protection and drops
    the warning. Only before Ray is imported (its config reads the variable then: set later, the
    driver and the cluster disagree and every call fails), only where the user set no mode, and
    not for older Rays, where token mode is opt-in."""
    if "ray" in sys.modules or "RAY_AUTH_MODE" in os.environ:
        return
    try:
        major_minor = re.match(r"(\d+)\.(\d+)", importlib.metadata.version("ray"))
    except importlib.metadata.PackageNotFoundError:
        return
    if major_minor and (int(major_minor[1]), int(major_minor[2])) >= (2, 59):
        os.environ["RAY_AUTH_MODE"] = "token"


def start_ray(ray: Any, res: ResourcesConfig) -> None:
    """``ray.init``: a local Ray for the run's ranks (resources.ray_address=null) or the cluster at
    resources.ray_address. A Ctrl-C while it runs is held back until it returns: one that lands
    while Ray builds the driver's CoreWorker leaves it half-built, and the process segfaults when
    it exits (Ray 2.60). A second Ctrl-C stops at once. A stop half-way (a second Ctrl-C, a
    SIGTERM) stops what it started of a local Ray. (SIGTERM is not held back: Ray puts its own
    handler in while it starts, so a SIGTERM in that moment can still meet the half-built worker.)"""
    try:
        with keeping_sigterm_handler(), signals_deferred((signal.SIGINT,), RAY_INIT_CTRL_C):
            if res.ray_address is None:
                # rounded up: 3 ranks of 1.5 CPUs need 5 Ray CPUs, or the third never starts.
                # Spared: the GCS, raylet and agents, which the driver stops once its step is
                # checkpointed; the cost is ~1 s each at ray.shutdown, which SIGKILLs a process
                # that its SIGTERM (blocked) did not stop in a second.
                with children_spared():
                    ray.init(num_cpus=max(math.ceil(res.world_size * res.cpus_per_rank), 1),
                             include_dashboard=False, log_to_driver=True)
            else:
                ray.init(address=res.ray_address)
    except BaseException as stop:
        stop_half_started_ray(ray, stop)
        if (problem := ray_init_problem(stop, res.ray_address)) is not None:
            raise UserError(problem) from None
        raise


def ray_init_problem(error: BaseException, address: str | None) -> str | None:
    """What a failed ``ray.init`` means for the user, in dapo's settings (Ray's own messages name
    a ``--address`` flag or arguments dapo passes, or hide a refused token in a chained
    traceback); None for another failure."""
    if address is None and isinstance(error, ValueError) and "existing cluster" in str(error):
        return RUNNING_CLUSTER
    if address is not None and isinstance(error, ConnectionError) and (refused := token_auth_problem(error, address)):
        return refused
    if address is not None and address.strip() == "auto" and isinstance(error, ConnectionError):
        return ("resources.ray_address=auto joins the Ray cluster running on this machine (or the one the RAY_ADDRESS "
                "environment variable names), and none is running: start it (`ray start --head`), or set "
                "resources.ray_address=null to start a local Ray")
    return None


class RayPolicyGroup(RankCalls):
    """The policy ranks, seen from the driver as one :class:`dapo.trainer.policy.PolicyWorker`
    (how it calls them, and what it does when one fails: :class:`dapo.trainer.ray_faults.RankCalls`)."""

    def __init__(self, cfg: DAPOConfig) -> None:
        res = cfg.resources
        if res.ray_address is None:
            quiet_local_token_auth()
        import ray  # the scale-out extra: pip install 'dapo-rl[ray]'

        self._started_ray = not ray.is_initialized()
        if self._started_ray:
            start_ray(ray, res)
        self._ray = ray
        self.ranks, self.node_groups = [], []
        for attempt in range(1, res.start_attempts + 1):
            try:
                self.lr = self._start_ranks(cfg)
                break
            except PolicyRankDied as died:
                if attempt == res.start_attempts:
                    self.close()
                    raise
                self._stop_ranks()
                warnings.warn(f"{self.broken} ({type(died.__cause__).__name__}; Ray keeps its output in the "
                              "worker-*.err files of the session's logs): starting the policy ranks again (attempt "
                              f"{attempt + 1} of resources.start_attempts={res.start_attempts})", stacklevel=2)
                self.broken = None  # the dead group's; the new ranks take calls
            except BaseException:
                self.close()  # else the actors keep their CPUs/GPUs, and a retry in this process waits forever
                raise
        self.world_size, self.sequence_parallel_size = res.world_size, cfg.trainer.sequence_parallel_size
        # ranks per rollout engine: consecutive groups of this many ranks form one vLLM engine
        self.engine_tp = cfg.rollout.vllm_tensor_parallel_size if cfg.rollout.engine == "vllm" else 1
        self.version, self.num_nonfinite_skipped = 0, 0

    def _start_ranks(self, cfg: DAPOConfig) -> float:
        """Place and start the ranks, join them in a process group and set them up; their learning rate."""
        res, ray = cfg.resources, self._ray
        gpus = 1 if ranks_use_gpus(cfg, ray) else 0
        actor = ray.remote(num_cpus=res.cpus_per_rank, num_gpus=gpus)(PolicyRank)
        # the dapo CLI's (not --debug) one-line warnings, in the ranks' processes too
        warning_command = getattr(warnings.formatwarning, "dapo_command", None)
        config = with_absolute_paths(config_to_dict(cfg))  # a rank of another node runs elsewhere
        self.node_groups = node_placement_groups(ray, res.nnodes, res.devices_per_node, res.cpus_per_rank, gpus,
                                                  can_grow=not (self._started_ray and res.ray_address is None))
        self.ranks = [
            actor.options(scheduling_strategy=rank_bundle(self.node_groups, rank, res.devices_per_node)).remote(
                config, rank, res.world_size, warning_command)
            for rank in range(res.world_size)
        ]
        master = self._call([(self.ranks[0].rendezvous_address, ())])[0]
        return self._call([(r.setup, (master,)) for r in self.ranks])[0]  # set-up errors surface here

    def _on_all(self, method: str, *args: Any) -> list[Any]:
        return self._call([(getattr(rank, method), args) for rank in self.ranks])

    def _shares(self, samples: list[Sample]) -> list[list[Sample]]:
        """Each rank's share of ``samples``: one per sequence-parallel group (of consecutive ranks,
        trainer.sequence_parallel_size), the same to each of its ranks, which compute a chunk of
        each sequence each. Their log-probs come back alike from each, and their sums add up to
        the group's (each over its chunk's tokens)."""
        groups = split_across_ranks(samples, self.world_size // self.sequence_parallel_size)
        return [share for share in groups for _ in range(self.sequence_parallel_size)]

    def compute_logprobs(self, samples: list[Sample]) -> LogprobPass:
        """Each rank's share of ``samples``; its log-probs come back as one float32 array
        (:class:`dapo.trainer.ray_transport.LogprobRows`), cut into the samples' rows here."""
        shares = self._shares(samples)
        replies = self._call([(r.compute_logprobs, (s,)) for r, s in zip(self.ranks, shares)])
        by_sample = {id(s): lp for share, (_, rows) in zip(shares, replies) for s, lp in zip(share, rows.rows())}
        return LogprobPass.sum_of([sums for sums, _ in replies], [by_sample[id(s)] for s in samples])

    def update(self, mini_batch: list[Sample], num_tokens: float | None = None, num_seqs: float | None = None,
               on_policy: bool = False, diagnose: bool | None = None) -> UpdateStats:
        num_tokens, num_seqs = fill_normalisers(mini_batch, num_tokens, num_seqs)  # the WHOLE mini-batch's
        shares = self._shares(mini_batch)
        for share in shares:  # here, not on the ranks: one rank raising would leave the others in the update
            check_update_inputs(share, num_tokens, num_seqs, on_policy)
        parts: list[UpdateStats] = self._call([(r.update, (s, num_tokens, num_seqs, on_policy, diagnose))
                                               for r, s in zip(self.ranks, shares)])
        merged = UpdateStats(loss=sum(p.loss for p in parts), pg_loss=sum(p.pg_loss for p in parts),
                             grad_norm=parts[0].grad_norm, skip_reason=skip_reason_of(parts),
                             empty=parts[0].empty)  # decided on the global token count: alike on every rank
        sums = [p.policy for p in parts if p.policy is not None]
        merged.policy = PolicyLossStats.total(sums) if sums else None
        diagnostics = [p.diagnostics for p in parts if p.diagnostics is not None]
        if diagnostics:
            merged.diagnostics = LogprobPass.sum_of(diagnostics)
        if kl_sums := [p.ref_kl_sum for p in parts if p.ref_kl_sum is not None]:  # a rank of empty micro-batches has none
            merged.ref_kl_sum = torch.stack(kl_sums).sum()
        if merged.skipped:  # said once, here (the ranks said nothing), as one process says it (PolicyWorker.update)
            self.num_nonfinite_skipped += 1
            warnings.warn(merged.skip_message, stacklevel=1)
        elif not merged.empty:
            self.version += 1
        return merged

    def end_step(self) -> None:
        self.lr = self._on_all("end_step")[0]

    def sync_engines(self) -> None:
        self._on_all("sync_engine")

    def save_checkpoint(self, directory: Path, tokenizer: Any = None, hf_export: bool = True) -> dict[str, Any]:
        """Every rank writes its shards (and rank 0, with ``hf_export``, the Hugging Face export,
        with the ranks' own tokenizer) into ``directory``, the checkpoint being built; returns the
        driver's part of the policy state (counters, how it was written) for ``trainer_state.pt``."""
        self._on_all("save_checkpoint", os.path.abspath(directory), hf_export)  # a rank's OSError: RunState.save names it
        if missing := missing_shards(directory, self.world_size):  # never publish a checkpoint that cannot resume
            raise RunDirError(
                f"the policy ranks wrote their checkpoint shards, but {', '.join(missing[:4])} are not in {directory} "
                "as this driver sees it: on several nodes, output_dir must be on a filesystem every node shares "
                "(NFS, Lustre, a mounted bucket)")
        return sharded_policy_state(self.world_size, self.num_nonfinite_skipped)

    def save_rng(self, directory: Path) -> None:
        """Every rank writes its generators into ``directory`` (a checkpoint being built on the
        shards of a published one)."""
        self._on_all("save_rng", os.path.abspath(directory))

    def export_checkpoint(self, directory: Path) -> None:
        """Rank 0 writes the Hugging Face export (gathered from every rank's shard) into
        ``directory``, a checkpoint being built on the shards of a published one."""
        self._on_all("export_checkpoint", os.path.abspath(directory))

    def load_checkpoint(self, directory: Path, state: dict[str, Any]) -> None:
        """Every rank reads its shards from checkpoint ``directory``; ``state`` is what
        :meth:`save_checkpoint` returned (or one process's: rank 0 reads the checkpoint and sends
        each rank its shard). The engines still hold older weights: sync before use."""
        self.lr = self._on_all("load_checkpoint", os.path.abspath(directory), is_sharded(state))[0]
        self.num_nonfinite_skipped = state["num_nonfinite_skipped"]

    def close(self) -> None:
        """Stop the ranks, free their placement, and stop the local Ray this group started. Again
        (a notebook's ``trainer.close()`` after ``train()``, which closed it): nothing, where
        ``ray.kill`` would start a new local Ray to look for ranks that are gone."""
        if not self._ray.is_initialized():
            self.ranks, self.node_groups = [], []
            return
        if self._started_ray:
            # its shutdown frees the placement: a SIGTERM to the whole process group has killed its
            # GCS, and removing a group would wait 60 s for it
            self._stop_ranks(placement=False)
            self._started_ray = False  # (a Ray started later, by another trainer, is not this one's to stop)
            self._ray.shutdown()
            return
        self._stop_ranks()

    def _stop_ranks(self, placement: bool = True) -> None:
        """Kill the ranks and (``placement``) free the CPUs/GPUs placed for them."""
        ranks, groups, self.ranks, self.node_groups = self.ranks, self.node_groups, [], []
        for rank in ranks:
            self._ray.kill(rank)
        for group in groups if placement else ():
            self._ray.util.remove_placement_group(group)


def skip_reason_of(parts: list[UpdateStats]) -> str:
    """Why the ranks skipped an update (every rank skips it, all ranks deciding together), "" if
    they made it: the reason of the first rank that saw a non-finite loss or gradient, not of those
    that only learnt another's was (PEER_NONFINITE_LOSS)."""
    reasons = [part.skip_reason for part in parts if part.skip_reason]
    return next((reason for reason in reasons if reason != PEER_NONFINITE_LOSS), reasons[0] if reasons else "")


def _sampled(result: GenerationResult) -> list[list[int]]:
    return [c.token_ids for c in result.completions]


class RayRolloutEngine:
    """The ranks' engines as one rollout engine: each engine (one rank, or a vLLM tensor-parallel
    group of ranks) samples its share of the prompts (:func:`dapo.trainer.batch.deal_prompts`), each
    prompt with its own seed (:func:`prompt_seeds`), as one native or vLLM engine would give it: the
    samples do not depend on the number of ranks but through their logits' rounding (the hf
    engine, which draws a call's rows from one stream, samples with a seed of its rank's)."""

    def __init__(self, group: RayPolicyGroup) -> None:
        self.group = group
        self.asleep = False  # since sleep(), until the ranks' engines took weights or were woken

    def generate(self, prompt_token_ids: list[list[int]], params: SamplingParams) -> GenerationResult:
        tp = self.group.engine_tp  # ranks per engine: a vLLM tensor-parallel group, else 1
        shares = deal_prompts([len(p) for p in prompt_token_ids], self.group.world_size // tp)
        calls = [(engine, share) for engine, share in enumerate(shares) if share]  # more engines than prompts: some sit out
        seeds = prompt_seeds(params, len(prompt_token_ids))  # a prompt's, whichever engine samples it
        submissions = []
        for engine, share in calls:  # every rank of an engine gets the same prompts and seeds
            prompts = [prompt_token_ids[i] for i in share]
            # (seed: the hf engine's, which draws all its rows from one stream)
            engine_params = dataclasses.replace(params, seed=request_seed(params.seed, engine),
                                                request_seeds=None if seeds is None else [seeds[i] for i in share])
            submissions += [(self.group.ranks[engine * tp + j].generate, (prompts, engine_params)) for j in range(tp)]
        # a vLLM tensor-parallel engine's ranks all-reduce; each native or hf engine generates alone (a Ctrl-C cancels it)
        results = self.group._call(submissions, collective=tp > 1, cancellable=tp == 1)
        leaders = results[::tp]
        for index, result in enumerate(results):  # each engine's other ranks against its first
            if index % tp and _sampled(result) != _sampled(leaders[index // tp]):
                raise RuntimeError(f"the ranks of vLLM engine {calls[index // tp][0]} sampled different tokens "
                                   "(tensor-parallel ranks must compute identical samples)")
        completions = []
        for (_, share), result in zip(calls, leaders):
            for completion in result.completions:  # back to the caller's prompt indices
                completion.prompt_index = share[completion.prompt_index]
                completions.append(completion)
        completions.sort(key=lambda c: c.prompt_index)  # prompt-major, as every engine returns them (stable)
        seconds = max((r.seconds for r in leaders), default=0.0)  # the engines generate in parallel
        return GenerationResult(completions, seconds, sum(r.num_generated_tokens for r in leaders))

    def sync_weights(self, model: torch.nn.Module) -> None:
        """The ranks hold the trainer's weights: each gathers them into its own engine (which wakes it)."""
        self.group.sync_engines()
        self.asleep = False

    def sleep(self) -> None:
        """Every rank's engine releases its memory for the update, as the engine decides."""
        self.group._on_all("sleep_engine")
        self.asleep = True

    def wake_up(self) -> None:
        """Every rank's engine takes its memory back, if it slept: one call to the ranks a step,
        not one a generation round."""
        if self.asleep:
            self.group._on_all("wake_engine")
            self.asleep = False

    def close(self) -> None:
        """The ranks' engines end with their actors (``RayPolicyGroup.close``)."""
