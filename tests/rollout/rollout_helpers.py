"""Reference computations for the rollout tests."""

from __future__ import annotations

import torch

from dapo.rollout.base import Completion


def teacher_forced_logprobs(model: torch.nn.Module, prompt: list[int], completion: Completion, temperature: float) -> torch.Tensor:
    """log softmax(logits / T)[token] from one unpadded forward over prompt + response."""
    ids = torch.tensor([prompt + completion.token_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].double()
    logprobs = torch.log_softmax(logits / temperature, dim=-1)
    return logprobs.gather(-1, torch.tensor(completion.token_ids).unsqueeze(-1)).squeeze(-1)


def reference_filtered_logprobs(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """Behaviour log-probs (V,) of one row by the textbook definition, in float64, token by token:
    keep the top_k most likely, then the smallest most-likely prefix with mass >= top_p; renormalise."""
    probs = torch.softmax(logits.double() / temperature, dim=-1)
    order = torch.argsort(probs, descending=True).tolist()
    if top_k > 0:
        order = order[:top_k]
    kept_mass = probs[order].sum()
    support, mass = [], 0.0
    for token in order:
        support.append(token)
        mass += float(probs[token] / kept_mass)
        if mass >= top_p:
            break
    result = torch.full_like(probs, float("-inf"))
    result[support] = torch.log(probs[support] / probs[support].sum())
    return result


class LetterTokenizer:
    """Decodes token id i to the letter 'abc'[i % 3], so stop strings like "ab" occur often."""

    def decode(self, token_ids: list[int], skip_special_tokens: bool = False, clean_up_tokenization_spaces: bool = False) -> str:
        return "".join("abc"[i % 3] for i in token_ids)
