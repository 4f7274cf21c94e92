"""The native rollout engine: batched, KV-cached sampling on the trainer's own model (CPU or GPU).

Each prompt is encoded once and its KV cache repeated for its n samples. Every step samples one
token per live row with :func:`sample_next_tokens`, which also gives the behaviour log-prob
log pi_b(token) under the distribution actually sampled from; each row draws from a stream of its
own (its prompt's seed, :func:`dapo.rollout.base.prompt_seeds`, + its sample's index), so a
prompt's samples do not depend on the prompts beside it nor on the chunks the KV cache's budget
cuts the call into, but through its logits' rounding (a batch of another size can round them
otherwise: rarely in float32, more often in 16-bit). Rows that hit a stop token or stop
string are recorded as finished and dropped from the batch once enough of them accumulate, so
finished rows cost (almost) nothing. Llama-family models run a lean functional forward
(:mod:`dapo.rollout.llama_decoder`) on weights prepared for it (:mod:`dapo.rollout.llama_weights`),
kept across generate() calls while the model's weights stay as they were; others run their own
Hugging Face forward.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable
from typing import Any, Protocol

import torch
from torch import nn

from dapo.errors import NonFiniteError
from dapo.rollout import llama_decoder, llama_support
from dapo.rollout.base import (
    STOP_CHECK_EVERY,
    GenerationResult,
    GenerationStopped,
    SamplingParams,
    Weights,
    copy_weights,
    prompt_seeds,
)
from dapo.rollout.batching import (
    build_completions,
    check_request,
    eval_mode,
    left_pad,
    model_device,
    within_lengths,
)
from dapo.rollout.hf_decoder import HFDecodeSession
from dapo.rollout.llama_weights import LlamaWeights, model_tensors, weights_key
from dapo.rollout.sampling import RowDraws, random_seed, sample_next_tokens
from dapo.rollout.stopping import StopStringMatcher

# Drop finished rows once they are this fraction of the batch: dropping copies the KV cache,
# so doing it for every single finished row would cost more than computing a few dead rows.
_DROP_FINISHED_FRACTION = 0.2

class DecodeSession(Protocol):
    def prefill(self, input_ids: torch.Tensor, pad_lengths: torch.Tensor) -> torch.Tensor: ...
    def expand(self, repeats: int) -> None: ...
    def decode(self, tokens: torch.Tensor) -> torch.Tensor: ...
    def keep_rows(self, keep: torch.Tensor) -> None: ...


class _Outputs:
    """Per-row sampled tokens and log-probs, with where each row stopped."""

    def __init__(self, rows: int, max_new_tokens: int, device: torch.device) -> None:
        self.tokens = torch.zeros(rows, max_new_tokens, dtype=torch.long, device=device)
        self.logprobs = torch.zeros(rows, max_new_tokens, dtype=torch.float32, device=device)
        self.lengths = [max_new_tokens] * rows  # rows never stopped are cut at max_new_tokens
        self.stopped = [False] * rows

    def finish(self, rows: list[int], length: int) -> None:
        for row in rows:
            self.lengths[row], self.stopped[row] = length, True

    def as_lists(self) -> tuple[list[list[int]], list[list[float]]]:
        tokens, logprobs = self.tokens.tolist(), self.logprobs.tolist()
        return (
            [row[:n] for row, n in zip(tokens, self.lengths)],
            [row[:n] for row, n in zip(logprobs, self.lengths)],
        )


class NativeEngine:
    """Rollout engine on a reference to the trainer's model.

    Weight updates are seen without a copy: the fast path's prepared weights (cast, fused,
    packed) are rebuilt at the next generate() after ``sync_weights`` or after any in-place write
    the tensors' version counters record (optimizer steps, ``load_state_dict``); writes they do
    not record (through ``param.data``, a fused optimizer) need ``sync_weights``, as the trainer
    calls after every update (see :func:`dapo.rollout.llama_weights.weights_key`). ``sleep``
    releases them."""

    def __init__(
        self,
        model: nn.Module,
        pad_token_id: int,
        tokenizer: Any | None = None,
        *,
        fast_forward: bool = True,
        compute_dtype: torch.dtype | None = None,
        cpu_kernels: bool = True,
        max_kv_cache_bytes: float = 0.0,
    ) -> None:
        """``compute_dtype``: decode in this dtype (fast path only), e.g. bfloat16 for a float32
        policy; the behaviour log-probs are then those of the bf16 model, and the trainer sees the
        difference as rollout/trainer mismatch (corrected by algorithm.tis_cap, or made moot by
        algorithm.old_logprobs=rollout, which takes these log-probs as pi_old). ``cpu_kernels``:
        bf16 decoding on the CPU runs the fused kernels of :mod:`dapo.rollout.cpu_kernels` where
        they build and run (rollout.native_cpu_kernels). ``max_kv_cache_bytes``: decode a call's
        prompts in as few consecutive chunks as keep each chunk's KV cache at full length within
        it (0: all at once; rollout.native_kv_cache_gib)."""
        self.model = model
        self.max_kv_cache_bytes = max_kv_cache_bytes
        self.compute_dtype = compute_dtype
        self.pad_token_id = pad_token_id
        self.tokenizer = tokenizer
        self.fast_forward = fast_forward  # False forces the generic Hugging Face forward
        self.cpu_kernels = cpu_kernels
        self.last_path = ""  # "llama" or "hf": which forward the last generate() used
        self.last_attention = ""  # "cpu kernel" or "torch": what the last generate()'s decode steps attended with
        # asked every few decode steps: True stops generate() (GenerationStopped), as a policy rank's engine is
        # when the driver cancels its call (a Ctrl-C in an evaluation: the checkpoint waits behind it)
        self.should_stop: Callable[[], bool] | None = None
        self._weights: LlamaWeights | None = None  # the fast path's, prepared for _weights_key
        self._weights_key: object = None
        # the tensors _weights_key was read from, kept alive so that no new tensor can take a
        # storage address in the key while it is in use (replaced tensors are freed otherwise)
        self._key_tensors: list[torch.Tensor] = []

    def _open_session(self, max_length: int, rows: int, packing_rows: int | None = None) -> DecodeSession:
        """``packing_rows``: the rows the weights are packed for (a chunked call's full chunk, so that
        its smaller last chunk does not prepare them again); ``rows`` by default."""
        reason = llama_support.unsupported_reason(self.model, max_length) if self.fast_forward else "fast_forward=False"
        if reason is None:
            self.last_path = "llama"
            weights = self._prepared_weights(packing_rows or rows)
            session = llama_decoder.LlamaDecodeSession(weights, max_length, rows, self.cpu_kernels)
            self.last_attention = "torch" if session.cpu_kernels is None else "cpu kernel"
            return session
        if self.last_path != "hf" and self.compute_dtype not in (None, next(self.model.parameters()).dtype):
            warnings.warn(f"rollout.native_dtype={str(self.compute_dtype).removeprefix('torch.')} has no effect: "
                          f"the native engine's fast path does not run this model ({reason}), and its generic "
                          "Hugging Face forward decodes in the model's own dtype", stacklevel=3)
        self.last_path, self.last_attention = "hf", "torch"
        return HFDecodeSession(self.model)

    def generate(self, prompt_token_ids: list[list[int]], params: SamplingParams) -> GenerationResult:
        """Sample ``params.n`` responses per prompt; completions are prompt-major."""
        check_request(self.model, self.pad_token_id, prompt_token_ids, params)
        start = time.perf_counter()
        if not prompt_token_ids:
            return GenerationResult([], 0.0, 0)
        device = model_device(self.model)
        seeds = prompt_seeds(params, len(prompt_token_ids))
        if seeds is None:  # unseeded: from torch's global RNG
            seeds = prompt_seeds(dataclasses.replace(params, seed=random_seed()), len(prompt_token_ids))
        token_ids: list[list[int]] = []
        logprobs: list[list[float]] = []
        stopped: list[bool] = []
        chunk = self._prompts_per_chunk(prompt_token_ids, params)
        for first in range(0, len(prompt_token_ids), chunk):
            # each row draws from its own stream, seeded by its prompt's seed + its sample's index
            row_seeds = torch.tensor([seed + j for seed in seeds[first:first + chunk] for j in range(params.n)],
                                     dtype=torch.int64, device=device)
            outputs = self._generate_chunk(prompt_token_ids[first:first + chunk], params, row_seeds, device,
                                           packing_rows=chunk * params.n)
            chunk_tokens, chunk_logprobs = outputs.as_lists()
            token_ids += chunk_tokens
            logprobs += chunk_logprobs
            stopped += outputs.stopped
        completions = build_completions(token_ids, logprobs, stopped, params.n)
        return GenerationResult(completions, time.perf_counter() - start, sum(map(len, token_ids)))

    def _generate_chunk(self, prompt_token_ids: list[list[int]], params: SamplingParams,
                        row_seeds: torch.Tensor, device: torch.device, packing_rows: int) -> _Outputs:
        """Sample ``params.n`` responses to each of ``prompt_token_ids``, in one KV cache."""
        matcher = StopStringMatcher(params.stop_strings, self.tokenizer)
        with torch.inference_mode(), eval_mode(self.model):
            input_ids, pad_lengths = left_pad(prompt_token_ids, self.pad_token_id, device)
            # the longest sequence the forward computes: the last sampled token is never fed back
            # (a window or RoPE threshold of exactly this length holds the whole generation)
            longest = input_ids.shape[1] + params.max_new_tokens - 1
            session = self._open_session(longest, len(prompt_token_ids) * params.n, packing_rows)
            logits = session.prefill(input_ids, pad_lengths)
            if params.n > 1:
                session.expand(params.n)
                logits = logits.repeat_interleave(params.n, dim=0)
            outputs = _sample_loop(session, logits, params, matcher, row_seeds, self.should_stop)
        self._check_finite(outputs)
        return outputs

    def _prompts_per_chunk(self, prompt_token_ids: list[list[int]], params: SamplingParams) -> int:
        """How many prompts decode together: all, or as many as keep their n rows' KV cache at
        full length (the longest prompt + max_new_tokens, 2 x layers x KV heads x head size per
        position, in the dtype the session caches in) within max_kv_cache_bytes; at least one.
        The fast path on the CPU caches a 16-bit chunk of at most 32 rows in float32 (its faster
        attention there, :data:`llama_decoder.FLOAT32_ATTENTION_MAX_ROWS`; even where the fused
        kernels would keep it 16-bit): such a chunk, the last one included, is budgeted at 4 bytes."""
        model_dtype = next(self.model.parameters()).dtype
        longest = max(map(len, prompt_token_ids)) + params.max_new_tokens
        fast = self.fast_forward and llama_support.unsupported_reason(self.model, longest - 1) is None
        dtype = (self.compute_dtype or model_dtype) if fast else model_dtype  # (HF's forward: the model's)
        row_bytes = kv_elements_per_token(self.model.config) * dtype.itemsize * longest
        prompts, budget = len(prompt_token_ids), self.max_kv_cache_bytes
        chunk = prompts_per_chunk(prompts, row_bytes, params.n, budget)
        if fast and dtype.itemsize < 4 and model_device(self.model).type == "cpu":
            float32_prompts = min(chunk, llama_decoder.FLOAT32_ATTENTION_MAX_ROWS // params.n)
            if budget and float32_prompts * params.n * row_bytes * 4 / dtype.itemsize > budget:
                chunk = min(chunk, prompts_per_chunk(prompts, row_bytes * 4 / dtype.itemsize, params.n, budget))
        return chunk

    def _prepared_weights(self, rows: int) -> LlamaWeights:
        """The fast path's weights for ``rows`` decode rows: the kept ones while the model's
        weights, the compute dtype and the row count are those they were prepared for."""
        tensors = model_tensors(self.model)
        key = weights_key(tensors, self.compute_dtype, rows)
        if key is None or self._weights is None or key != self._weights_key:
            self._release_weights()  # the old set goes before the new one is built: one copy at a time
            self._weights = LlamaWeights(self.model, rows, self.compute_dtype)
            self._weights_key, self._key_tensors = key, [t.detach() for t in tensors]
        return self._weights

    def _release_weights(self) -> None:
        self._weights, self._weights_key, self._key_tensors = None, None, []

    def _check_finite(self, outputs: _Outputs) -> None:
        """A NaN or infinite logit samples noise with a NaN log-prob, which would reach the loss.
        Only each response's own positions count: a finished row decodes on past its end until
        it is dropped, and what it samples there is discarded (unwritten positions hold 0)."""
        logprobs = outputs.logprobs
        lengths = torch.tensor(outputs.lengths, device=logprobs.device)
        bad = ~torch.isfinite(logprobs) & within_lengths(lengths, logprobs.shape[1])
        if not bool(bad.any()):
            return
        row = int(bad.any(dim=1).nonzero()[0])
        on_fast_path = self.last_path == "llama" and self.compute_dtype is not None
        decode_dtype = self.compute_dtype if on_fast_path else next(self.model.parameters()).dtype
        why = ("float16 decoding overflowed: use bfloat16 (rollout.native_dtype, model.dtype)"
               if decode_dtype == torch.float16 else "the weights may have diverged (NaN or inf)")
        raise NonFiniteError(f"the policy's next-token logits were not finite (row {row} of the batch): {why}")

    def sync_weights(self, model: Weights) -> None:
        """Copy ``model``'s weights in (none to copy from the trainer's own model, whose tensors
        this engine holds); the prepared weights are rebuilt at the next generate()."""
        self._release_weights()
        if model is not self.model:
            copy_weights(self.model, model)

    def sleep(self) -> None:
        """Release the prepared weights (the KV cache lives only during generate())."""
        self._release_weights()

    def wake_up(self) -> None:
        """Nothing to re-acquire: generate() prepares the weights it needs."""

    def close(self) -> None:
        """Release the prepared weights (the model is the trainer's)."""
        self._release_weights()


def kv_elements_per_token(config: Any) -> int:
    """What a decoding row caches per position: 2 (keys and values) x layers x KV heads x head size."""
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return 2 * config.num_hidden_layers * (getattr(config, "num_key_value_heads", None) or heads) * head_dim


def prompts_per_chunk(prompts: int, row_bytes: float, samples: int, budget_bytes: float) -> int:
    """How many of ``prompts`` decode together when their ``samples`` rows each cache ``row_bytes``
    at full length and the chunk's cache keeps within ``budget_bytes`` (0: no limit); at least one."""
    if not budget_bytes:
        return prompts
    return max(1, min(prompts, int(budget_bytes // (row_bytes * samples))))


def _sample_loop(
    session: DecodeSession,
    logits: torch.Tensor,
    params: SamplingParams,
    matcher: StopStringMatcher,
    row_seeds: torch.Tensor,
    should_stop: Callable[[], bool] | None = None,
) -> _Outputs:
    """Sample up to max_new_tokens per row, each from its own stream (``row_seeds``, int64: see
    :func:`~dapo.rollout.sampling.counter_uniforms`); record stops; drop finished rows in batches; raise
    GenerationStopped when ``should_stop`` says so (asked every STOP_CHECK_EVERY steps)."""
    device = logits.device
    outputs = _Outputs(len(logits), params.max_new_tokens, device)
    draws = RowDraws(row_seeds, params.max_new_tokens)
    row_ids = torch.arange(len(logits), device=device)  # batch position -> output row
    live = torch.ones(len(logits), dtype=torch.bool, device=device)
    stop_ids = torch.tensor(params.stop_token_ids, dtype=torch.long, device=device)
    all_rows = True  # no row dropped yet: the batch's rows are the output rows, in order
    for step in range(params.max_new_tokens):
        if should_stop is not None and step % STOP_CHECK_EVERY == 0 and should_stop():
            raise GenerationStopped(f"generation stopped at decode step {step} of {params.max_new_tokens}")
        tokens, logprobs = sample_next_tokens(logits, params.temperature, params.top_k, params.top_p, None,
                                              draws.at(step))
        if all_rows:  # a plain copy, cheaper than an indexed write
            outputs.tokens[:, step] = tokens
            outputs.logprobs[:, step] = logprobs
        else:
            outputs.tokens[row_ids, step] = tokens
            outputs.logprobs[row_ids, step] = logprobs
        hit = _stop_hits(tokens, stop_ids, matcher, row_ids, live)
        if hit is not None and bool(hit.any()):
            outputs.finish(row_ids[hit].tolist(), step + 1)
            live &= ~hit
            num_live = int(live.sum())
            if num_live == 0:
                break
            if len(live) - num_live >= _DROP_FINISHED_FRACTION * len(live):
                keep = live.nonzero().squeeze(1)
                session.keep_rows(keep)
                row_ids, live, tokens = row_ids[keep], live[keep], tokens[keep]
                draws.keep(keep)
                all_rows = False
        if step + 1 < params.max_new_tokens:
            logits = session.decode(tokens)
    return outputs


def _stop_hits(
    tokens: torch.Tensor,
    stop_ids: torch.Tensor,
    matcher: StopStringMatcher,
    row_ids: torch.Tensor,
    live: torch.Tensor,
) -> torch.Tensor | None:
    """Live rows whose newest token is a stop token or completes a stop string (None: no stopping)."""
    hit = None
    if len(stop_ids):
        hit = torch.isin(tokens, stop_ids) & live
    if matcher:
        live_index = live.nonzero().squeeze(1)
        string_hits = matcher.push(row_ids[live_index].tolist(), tokens[live_index].tolist())
        string_hit = torch.zeros_like(live)
        string_hit[live_index] = torch.tensor(string_hits, dtype=torch.bool, device=live.device)
        hit = string_hit if hit is None else hit | string_hit
    return hit
