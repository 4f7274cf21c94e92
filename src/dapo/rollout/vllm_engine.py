"""vLLM rollout engine for GPUs (``rollout.engine: vllm``, needs the ``vllm`` extra).

Colocated with training: the engine lives in the trainer's process and on its GPU
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``), takes ``gpu_memory_utilization`` of the GPU, and with
``enable_sleep_mode`` releases it between rollouts (``sleep(level=1)`` offloads weights to CPU
and drops the KV cache; ``wake_up`` restores them). Weights are pushed each step through the
model's ``load_weights`` (no engine rebuild). Behaviour log-probs are requested with
``SamplingParams(logprobs=0)`` (the sampled token only) and ``logprobs_mode="processed_logprobs"``,
so they are taken after temperature / top-k / top-p like :func:`sample_next_tokens`.

``import vllm`` happens only when the engine is built, so the package imports without it.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from dapo.config.schema import RolloutConfig
from dapo.rollout.base import Completion, GenerationResult, SamplingParams
from dapo.rollout.sampling import validate_sampling_params

VLLM_MISSING = "rollout.engine=vllm needs the vllm extra: pip install 'dapo-rl[vllm]' on a CUDA machine"


def import_vllm() -> Any:
    """Import vllm, or raise RuntimeError saying how to get it."""
    try:
        import vllm
    except ImportError as error:
        raise RuntimeError(VLLM_MISSING) from error
    return vllm


class VLLMEngine:
    """Rollout engine on a colocated vLLM ``LLM`` built from ``model_path``."""

    def __init__(self, model_path: str, cfg: RolloutConfig, *, dtype: str = "auto", seed: int = 0, max_model_len: int | None = None) -> None:
        vllm = import_vllm()
        if not torch.cuda.is_available():
            raise RuntimeError("rollout.engine=vllm needs a CUDA GPU; use rollout.engine=native on CPU")
        # Keep the engine core in this process so weight sync can reach the model directly.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self._vllm = vllm
        self.cfg = cfg
        self.sleep_between_rollouts = cfg.vllm_sleep_between_rollouts
        self.logprobs_are_processed = True
        kwargs: dict[str, Any] = dict(
            model=model_path,
            dtype=dtype,
            seed=seed,
            gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
            tensor_parallel_size=cfg.vllm_tensor_parallel_size,
            enable_sleep_mode=cfg.vllm_sleep_between_rollouts,
            max_model_len=max_model_len,
            enable_prefix_caching=False,  # weights change every step; cached prefixes go stale
        )
        try:
            self.llm = vllm.LLM(logprobs_mode="processed_logprobs", **kwargs)
        except TypeError:  # vLLM older than logprobs_mode: log-probs are of the raw logits
            self.logprobs_are_processed = False
            warnings.warn(
                "this vLLM has no logprobs_mode: behaviour log-probs ignore temperature/top-k/top-p",
                stacklevel=2,
            )
            self.llm = vllm.LLM(**kwargs)
        self.asleep = False

    def _sampling_params(self, params: SamplingParams) -> Any:
        return self._vllm.SamplingParams(
            n=params.n,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else -1,
            max_tokens=params.max_new_tokens,
            stop_token_ids=list(params.stop_token_ids),
            stop=list(params.stop_strings) or None,
            include_stop_str_in_output=True,
            seed=params.seed,
            logprobs=0,  # only the sampled token's log-prob
            detokenize=bool(params.stop_strings),
        )

    def generate(self, prompt_token_ids: list[list[int]], params: SamplingParams) -> GenerationResult:
        """Sample ``params.n`` responses per prompt; completions are prompt-major."""
        validate_sampling_params(params)
        if self.asleep:
            self.wake_up()
        start = time.perf_counter()
        prompts = [{"prompt_token_ids": list(ids)} for ids in prompt_token_ids]
        outputs = self.llm.generate(prompts, self._sampling_params(params), use_tqdm=False)
        completions = []
        for prompt_index, request in enumerate(outputs):
            for sample in request.outputs:
                completions.append(_completion(prompt_index, sample))
        if self.sleep_between_rollouts:
            self.sleep()
        num_tokens = sum(len(c.token_ids) for c in completions)
        return GenerationResult(completions, time.perf_counter() - start, num_tokens)

    def _model(self) -> nn.Module:
        """The vLLM model object in this process (engine core in-process, V0 or V1)."""
        executor = self.llm.llm_engine.model_executor
        worker = executor.driver_worker
        worker = getattr(worker, "worker", worker)  # V1 wraps the worker
        return worker.model_runner.model

    def sync_weights(self, model: nn.Module) -> None:
        """Push the trainer's weights into vLLM in place (``load_weights`` maps HF names)."""
        if self.asleep:
            self.llm.wake_up(tags=["weights"])  # weights first: the KV cache is not needed yet
        weights: Iterable[tuple[str, torch.Tensor]] = ((name, p.detach()) for name, p in model.state_dict().items())
        try:
            self._model().load_weights(weights)
        except AttributeError:  # engine core in another process: ship the tensors by RPC
            state = {name: p.detach().cpu() for name, p in model.state_dict().items()}
            self.llm.collective_rpc(_load_weights_rpc, args=(state,))
        if self.asleep:
            self.llm.wake_up(tags=["kv_cache"])
            self.asleep = False

    def sleep(self) -> None:
        """Offload weights to CPU and free the KV cache so training can use the GPU memory."""
        if self.cfg.vllm_sleep_between_rollouts and not self.asleep:
            self.llm.sleep(level=1)
            self.asleep = True

    def wake_up(self) -> None:
        if self.asleep:
            self.llm.wake_up()
            self.asleep = False


def _load_weights_rpc(worker: Any, state: dict[str, torch.Tensor]) -> None:
    worker.model_runner.model.load_weights(state.items())


def _completion(prompt_index: int, sample: Any) -> Completion:
    """Convert a vLLM CompletionOutput; its logprobs are one {token: Logprob} dict per token."""
    token_ids = list(sample.token_ids)
    logprobs = [float(step[token].logprob) for token, step in zip(token_ids, sample.logprobs or [])]
    if len(logprobs) != len(token_ids):
        raise RuntimeError(f"vLLM returned {len(logprobs)} log-probs for {len(token_ids)} tokens")
    reason = "stop" if sample.finish_reason == "stop" else "length"
    return Completion(prompt_index, token_ids, logprobs, reason)
