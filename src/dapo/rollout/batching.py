"""Helpers shared by the in-process engines: left padding, eval mode, result assembly."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from dapo.rollout.base import Completion, FinishReason, SamplingParams
from dapo.rollout.sampling import validate_prompts, validate_sampling_params


def model_device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def vocab_size_of(model: nn.Module) -> int:
    return model.get_input_embeddings().num_embeddings


def check_request(
    model: nn.Module, pad_token_id: int, prompt_token_ids: list[list[int]], params: SamplingParams
) -> None:
    """Raise ValueError saying what is wrong with a generate() request."""
    validate_sampling_params(params)
    vocab_size = vocab_size_of(model)
    validate_prompts(prompt_token_ids, vocab_size)
    for token in params.stop_token_ids:
        if not 0 <= token < vocab_size:
            raise ValueError(f"stop token id {token} is outside the vocabulary [0, {vocab_size})")
    if not 0 <= pad_token_id < vocab_size:
        raise ValueError(f"pad_token_id={pad_token_id} is outside the vocabulary [0, {vocab_size})")


def left_pad(
    prompt_token_ids: list[list[int]], pad_token_id: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-align prompts in one (B, P) tensor; return it and each row's padding length (B,).

    Left padding puts every prompt's last token in the same column, so all rows decode into the
    same KV-cache slot at every step.
    """
    longest = max(len(p) for p in prompt_token_ids)
    pad_lengths = [longest - len(p) for p in prompt_token_ids]
    rows = [[pad_token_id] * pad + list(p) for pad, p in zip(pad_lengths, prompt_token_ids)]
    return (
        torch.tensor(rows, dtype=torch.long, device=device),
        torch.tensor(pad_lengths, dtype=torch.long, device=device),
    )


def within_lengths(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """(B, width) bool mask of rows right-padded to ``width``: True on the first ``lengths[i]``
    columns of row i (a response's own positions)."""
    return torch.arange(width, device=lengths.device)[None, :] < lengths[:, None]


def left_pad_mask(pad_lengths: torch.Tensor, width: int) -> torch.Tensor:
    """The attention mask (B, width) of rows left-padded by ``pad_lengths`` (B,): 0 on each row's
    padding columns, 1 on its tokens (Hugging Face's ``attention_mask``)."""
    slots = torch.arange(width, device=pad_lengths.device)
    return (slots[None, :] >= pad_lengths[:, None]).long()


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[None]:
    """Switch ``model`` to eval (no dropout) and restore its previous train/eval mode after."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def build_completions(
    token_ids: list[list[int]], logprobs: list[list[float]], stopped: list[bool], samples_per_prompt: int
) -> list[Completion]:
    """Completions in prompt-major order; row r belongs to prompt r // samples_per_prompt."""
    completions = []
    for row, (tokens, row_logprobs, did_stop) in enumerate(zip(token_ids, logprobs, stopped)):
        reason: FinishReason = "stop" if did_stop else "length"
        completions.append(Completion(row // samples_per_prompt, tokens, row_logprobs, reason))
    return completions
