"""The ``model.generate`` baseline engine (``rollout.engine: hf``).

Behaviour log-probs are log_softmax(scores_t)[token_t] of the processed scores (after Hugging
Face's own temperature, top-k and top-p warpers), the distribution actually sampled from, as
:func:`compute_transition_scores` with ``normalize_logits=True`` computes. They are taken step by
step by a logits processor placed after the warpers (``output_scores`` would keep every step's
(rows, vocab) scores: 40 GB for 64 rows of 1024 tokens over Qwen's 152k vocabulary). Stop strings
are applied afterwards on the decoded tokens. ``should_stop``, asked every few decode steps by a
stopping criterion, ends a call the driver cancelled, as in the native engine.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
from transformers import (
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    StoppingCriteria,
    StoppingCriteriaList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from dapo.rollout.base import (
    STOP_CHECK_EVERY,
    GenerationResult,
    GenerationStopped,
    SamplingParams,
    Weights,
    copy_weights,
)
from dapo.rollout.batching import (
    build_completions,
    check_request,
    eval_mode,
    left_pad,
    left_pad_mask,
    model_device,
)
from dapo.rollout.hf_compat import rope_length_threshold
from dapo.rollout.rope_groups import rope_rows_alone
from dapo.rollout.stopping import cut_at_stop_string


class HFGenerateEngine:
    """Rollout engine on ``model.generate``; slower than :class:`NativeEngine`, kept as a reference."""

    def __init__(self, model: nn.Module, pad_token_id: int, tokenizer: Any | None = None) -> None:
        self.model = model
        self.pad_token_id = pad_token_id
        self.tokenizer = tokenizer
        # asked every few decode steps: True stops generate() (GenerationStopped); a policy rank sets
        # it to Ray's "was this call cancelled" (ray_rank.stop_when_cancelled)
        self.should_stop: Callable[[], bool] | None = None

    def _generation_config(self, params: SamplingParams) -> GenerationConfig:
        # Every sampling setting explicit; generate() fills the rest from the model's own
        # generation_config, which generate() below swaps for a neutral one. No warpers here:
        # generate() would put them after the processors it is given (see _processors).
        return GenerationConfig(
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=params.max_new_tokens,
            eos_token_id=list(params.stop_token_ids) or None,
            pad_token_id=self.pad_token_id,
        )

    @staticmethod
    def _processors(params: SamplingParams, recorder: _StepLogprobs) -> LogitsProcessorList:
        """Hugging Face's warpers in generate()'s own order, then the log-prob recorder."""
        processors: list[LogitsProcessor] = []
        if params.temperature != 1.0:
            processors.append(TemperatureLogitsWarper(params.temperature))
        if params.top_k > 0:
            processors.append(TopKLogitsWarper(top_k=params.top_k))
        if params.top_p < 1.0:
            processors.append(TopPLogitsWarper(top_p=params.top_p))
        return LogitsProcessorList([*processors, recorder])

    def generate(self, prompt_token_ids: list[list[int]], params: SamplingParams) -> GenerationResult:
        """Sample ``params.n`` responses per prompt; completions are prompt-major."""
        check_request(self.model, self.pad_token_id, prompt_token_ids, params)
        if params.stop_strings and self.tokenizer is None:
            raise ValueError(f"stop_strings={params.stop_strings!r} need a tokenizer: pass tokenizer= to the engine")
        start = time.perf_counter()
        if not prompt_token_ids:
            return GenerationResult([], 0.0, 0)
        device = model_device(self.model)
        input_ids, pad_lengths = left_pad(prompt_token_ids, self.pad_token_id, device)
        input_ids = input_ids.repeat_interleave(params.n, dim=0)
        attention_mask = left_pad_mask(pad_lengths.repeat_interleave(params.n), input_ids.shape[1])
        seeded = params.seed is not None  # unseeded calls draw from (and advance) the global RNG
        with (torch.inference_mode(), eval_mode(self.model), _neutral_generation_config(self.model),
              torch.random.fork_rng(devices=_cuda_devices(), enabled=seeded)):
            if seeded:
                torch.manual_seed(params.seed)
            recorder, stop_criterion = _StepLogprobs(), _WhenAsked(self.should_stop)
            # each row rotated as alone by a RoPE that follows length, from the module's own
            # frequencies (not those an earlier, longer call grew): dapo.rollout.rope_groups
            with rope_rows_alone(self.model, rope_length_threshold(self.model)):
                sequences = self.model.generate(
                    input_ids=input_ids, attention_mask=attention_mask, generation_config=self._generation_config(params),
                    logits_processor=self._processors(params, recorder), stopping_criteria=StoppingCriteriaList([stop_criterion]),
                )
            if stop_criterion.stopped_at is not None:
                raise GenerationStopped(f"generation stopped at decode step {stop_criterion.stopped_at} of {params.max_new_tokens}")
            response_ids = sequences[:, input_ids.shape[1] :]
            logprobs = recorder.logprobs(response_ids)
        rows = [self._finish(ids, lps, params) for ids, lps in zip(response_ids.tolist(), logprobs.tolist())]
        completions = build_completions([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], params.n)
        num_tokens = sum(len(c.token_ids) for c in completions)
        return GenerationResult(completions, time.perf_counter() - start, num_tokens)

    def _finish(self, token_ids: list[int], logprobs: list[float], params: SamplingParams) -> tuple[list[int], list[float], bool]:
        """Cut a padded generate() row after its first stop token or stop string."""
        length, stopped = len(token_ids), False
        stop_ids = set(params.stop_token_ids)
        for position, token in enumerate(token_ids):
            if token in stop_ids:
                length, stopped = position + 1, True
                break
        if params.stop_strings:
            cut = cut_at_stop_string(token_ids[:length], params.stop_strings, self.tokenizer)
            if cut is not None:
                length, stopped = cut, True
        return token_ids[:length], logprobs[:length], stopped

    def sync_weights(self, model: Weights) -> None:
        if model is not self.model:
            copy_weights(self.model, model)

    def sleep(self) -> None:
        """Nothing to release."""

    def wake_up(self) -> None:
        """Nothing to re-acquire."""

    def close(self) -> None:
        """Nothing to release: the model is the trainer's."""


class _StepLogprobs(LogitsProcessor):
    """Called last on each step's scores: keeps that step's log-softmax (one (rows, vocab) tensor)
    until the next step, whose input ends with the token sampled from it, and gathers its log-prob."""

    def __init__(self) -> None:
        self.gathered: list[torch.Tensor] = []  # (rows,) log-probs of response tokens 0, 1, ...
        self.last: torch.Tensor | None = None  # the newest step's log-softmax, (rows, vocab)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.last is not None:
            self.gathered.append(self.last.gather(-1, input_ids[:, -1:]).squeeze(-1))
        self.last = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def logprobs(self, response_ids: torch.Tensor) -> torch.Tensor:
        """(rows, steps) log-probs of ``response_ids``, the last step's included."""
        steps = response_ids.shape[1]
        done = len(self.gathered)
        if done < steps and self.last is not None:  # the last token: sampled from the newest step
            self.gathered.append(self.last.gather(-1, response_ids[:, done : done + 1]).squeeze(-1))
        if not steps:
            return response_ids.new_zeros(response_ids.shape, dtype=torch.float32)
        return torch.stack(self.gathered[:steps], dim=1)


class _WhenAsked(StoppingCriteria):
    """Ends every row once ``should_stop`` says so (asked every STOP_CHECK_EVERY decode steps)."""

    def __init__(self, should_stop: Callable[[], bool] | None) -> None:
        self.should_stop = should_stop
        self.steps = 0
        self.stopped_at: int | None = None  # the decode step it stopped at

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any) -> torch.BoolTensor:
        self.steps += 1
        stop = self.should_stop is not None and self.steps % STOP_CHECK_EVERY == 0 and bool(self.should_stop())
        if stop:
            self.stopped_at = self.steps
        return torch.full((input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device)


@contextlib.contextmanager
def _neutral_generation_config(model: nn.Module) -> Iterator[None]:
    """The model's ``generation_config`` replaced by the library defaults during the call: a
    shipped one (Qwen2.5-Instruct's ``repetition_penalty=1.05``, its ``eos_token_id``) would
    otherwise change the sampled distribution and the behaviour log-probs."""
    saved = getattr(model, "generation_config", None)
    model.generation_config = GenerationConfig()
    try:
        yield
    finally:
        model.generation_config = saved


def _cuda_devices() -> list[int]:
    """The CUDA devices whose generators a seeded call must leave as it found them: every one,
    since torch.manual_seed seeds them all, whichever device the model is on."""
    return list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
