"""The rollout-engine interface: what every generation backend takes and returns."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

import torch

from dapo.lora import merged_weights


@dataclass
class SamplingParams:
    """How to sample. Log-probs are reported under the distribution actually sampled from
    (after temperature, top-k and top-p), i.e. the behaviour policy of the rollout."""

    n: int = 1  # samples per prompt
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 disables top-k
    max_new_tokens: int = 256
    stop_token_ids: list[int] = field(default_factory=list)  # EOS etc.; the stop token is kept
    stop_strings: list[str] = field(default_factory=list)  # response is cut after the match
    # Same seed + same inputs -> same samples; equal prompts in one batch never share their
    # samples. The native and vLLM engines give prompt i a seed of its own, request_seed(seed, i)
    # (its j-th sample: that seed + j), so a prompt's samples do not depend on the other prompts
    # of the call nor on how an engine splits them (the native engine's chunks, the ranks' shares)
    # but through the logits' rounding, which a batch of another size can change (rarely in
    # float32, more often in 16-bit); the hf engine draws all rows from one stream seeded by seed,
    # so its do.
    seed: int | None = None
    # Each prompt's own seed, in place of request_seed(seed, i) (native and vLLM engines; one per
    # prompt): evaluation seeds a problem by its (data_source, uid), so that its samples do not
    # depend on which other problems are evaluated with it.
    request_seeds: list[int] | None = None


STOP_CHECK_EVERY = 8  # decode steps between two calls of an engine's should_stop


class GenerationStopped(RuntimeError):
    """generate() was stopped by its engine's ``should_stop`` (the driver cancelled the call)."""


# What an engine's sync_weights takes: the trainer's model, or its weights by (Hugging Face)
# name: a mapping, or (name, tensor) pairs streamed one at a time (a sharded policy gathers each
# tensor only when the engine reaches it).
Weights = torch.nn.Module | Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]]


def named_weights(weights: Weights) -> Iterable[tuple[str, torch.Tensor]]:
    """(name, tensor) pairs, whichever form :data:`Weights` they come in; a model's LoRA adapters
    merged into its weights, under the base model's names (:func:`dapo.lora.merged_weights`)."""
    if isinstance(weights, torch.nn.Module):
        return merged_weights(weights)
    return weights.items() if isinstance(weights, Mapping) else weights


def copy_weights(target: torch.nn.Module, weights: Weights) -> None:
    """Copy ``weights`` into ``target``'s tensors one at a time, as they come: a lazy source
    (the policy ranks gather one full tensor at a time) never holds more than one full tensor
    alive. Every name must be one of ``target``'s, and every one of its tensors but a tied output
    layer (:func:`tied_duplicates`) must be given."""
    params = target.state_dict()
    given = set()
    with torch.no_grad():
        for name, tensor in named_weights(weights):
            if name not in params:
                raise KeyError(f"weight {name!r} is not one of the engine model's")
            params[name].copy_(tensor)
            del tensor  # freed before the source gathers the next one
            given.add(name)
    if missing := sorted(set(params) - given - tied_duplicates(target)):
        raise KeyError(f"weights for {missing} were not given")


def checkpoint_format(model: torch.nn.Module, weights: Iterable[tuple[str, torch.Tensor]]) -> Iterator[tuple[str, torch.Tensor]]:
    """``weights``, named and laid out as in ``model`` (a transformers model) in memory, under the
    names and layout that ``save_pretrained`` writes and vLLM loads. transformers 5 converts some
    weights on load: a MoE's experts (Qwen3-MoE, Mixtral, DeepSeek) are fused into one tensor per
    layer in memory and written back one expert at a time. Streamed one tensor at a time, or a
    layer at a time for a model whose conversion splits one checkpoint tensor in memory (its parts
    are written back joined); other models' weights pass unchanged."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import revert_weight_conversion
    except ImportError:  # transformers 4 keeps the checkpoint's layout in memory
        yield from weights
        return
    conversions = getattr(model, "_weight_conversions", None) or get_model_conversion_mapping(model, add_legacy=False)
    if not conversions:
        yield from weights
        return
    joins = any(len(getattr(conversion, "target_patterns", ())) > 1 for conversion in conversions)
    for _, group in itertools.groupby(weights, key=lambda item: _layer_of(item[0]) if joins else item[0]):
        yield from revert_weight_conversion(model, dict(group)).items()


def _layer_of(name: str) -> str:
    """``model.layers.3.mlp.experts.down_proj`` -> ``model.layers.3``: the prefix up to the first
    numbered module, or the whole name of a weight outside numbered modules."""
    parts = name.split(".")
    numbered = next((i for i, part in enumerate(parts) if part.isdigit()), None)
    return name if numbered is None else ".".join(parts[: numbered + 1])


def tied_duplicates(model: torch.nn.Module) -> set[str]:
    """Second names of tied parameters (``lm_head.weight`` of a tied output layer), which
    save_pretrained does not write."""
    every = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    return every - {name for name, _ in model.named_parameters()}


_MASK64 = (1 << 64) - 1


def prompt_seeds(params: SamplingParams, num_prompts: int) -> list[int] | None:
    """The sampling seed of each of ``num_prompts`` prompts: ``params.request_seeds``, or
    :func:`request_seed` of ``params.seed`` and the prompt's index (None: unseeded)."""
    if params.request_seeds is not None:
        if len(params.request_seeds) != num_prompts:
            raise ValueError(f"SamplingParams.request_seeds holds {len(params.request_seeds)} seeds for "
                             f"{num_prompts} prompts: give one per prompt")
        return list(params.request_seeds)
    if params.seed is None:
        return None
    return [request_seed(params.seed, index) for index in range(num_prompts)]  # type: ignore[misc]


def request_seed(seed: int | None, request_index: int) -> int | None:
    """The sampling seed of request ``request_index`` in a generate() call seeded with ``seed``.

    splitmix64 of the pair, cut to 62 bits (a non-negative int64): reproducible, distinct per
    request, and far apart, so that vLLM's seeds for a request's n samples (``seed + j``, j < n)
    do not run into those of another request. None (unseeded) stays None.
    """
    if seed is None:
        return None
    x = (seed * 0x9E3779B97F4A7C15 + request_index + 1) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (x ^ (x >> 31)) >> 2


FinishReason = Literal["stop", "length"]


@dataclass
class Completion:
    """One sampled response. ``token_ids`` includes the stop token when one ended it."""

    prompt_index: int  # index into the prompt list given to generate()
    token_ids: list[int]
    logprobs: list[float]  # behaviour log-prob of each sampled token, same length as token_ids
    finish_reason: FinishReason  # "length": cut at max_new_tokens (truncated)


@dataclass
class GenerationResult:
    """Completions ordered prompt-major: prompt 0's n samples, then prompt 1's, ..."""

    completions: list[Completion]
    seconds: float
    num_generated_tokens: int


class RolloutEngine(Protocol):
    def generate(self, prompt_token_ids: list[list[int]], params: SamplingParams) -> GenerationResult:
        """Sample ``params.n`` responses for each prompt."""
        ...

    def sync_weights(self, model: Weights) -> None:
        """Load the trainer's current weights in place (no engine rebuild): its model, or its
        weights by name (a sharded policy's gathered full state dict). The loop calls it before
        every generate() that follows an update; engines on the trainer's own model return at once."""
        ...

    def sleep(self) -> None:
        """Release accelerator memory between rollouts (no-op where not applicable)."""
        ...

    def wake_up(self) -> None:
        """Re-acquire memory released by sleep()."""
        ...

    def close(self) -> None:
        """Release what the engine holds (weights, KV cache, workers) for good; no-op where it
        holds nothing beyond generate(). The Trainer calls it in ``close()``."""
        ...
