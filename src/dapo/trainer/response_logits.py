"""The logits that predict each response token, in every micro-batch layout, and what the policy
worker's passes read off them: log-probs, entropy and the rollout/trainer mismatch.

Layouts (:mod:`dapo.trainer.batch`): padded and shared-prompt give (B, R, V); the padding-free
row (trainer.packing) gives (1, N, V), the N response tokens back to back, where the model sees
no padding and computes output logits only at those N positions. :func:`response_logprobs` and
:func:`response_logprobs_and_entropy` return the padded (B, R) layout either way.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from dapo.algo import logprobs_and_entropy_from_logits, logprobs_from_logits
from dapo.rollout.batching import within_lengths
from dapo.rollout.rope_groups import rope_per_row
from dapo.trainer.native_forward import native_shared_prompt_logits
from dapo.trainer.packed_attention import packed_logits
from dapo.trainer.sequence_parallel import SequenceGroup
from dapo.trainer.shared_prompt import shared_prompt_logits
from dapo.trainer.update_stats import LogprobPass


def response_logits(model: PreTrainedModel, tensors: dict[str, torch.Tensor], native: bool,
                    sequence: SequenceGroup | None = None, cpu_kernels: bool = False,
                    gpu_kernels: bool = False) -> torch.Tensor:
    """Logits that predict each response token of a collated micro-batch (layout above);
    ``native``: the shared-prompt layout runs dapo-rl's own forward (trainer.forward), with its
    fused CPU kernels where ``cpu_kernels`` (trainer.native_cpu_kernels), its fused GPU ones
    where ``gpu_kernels`` (trainer.native_gpu_kernels);
    ``sequence``: a packed row's chunk, this rank's of its sequence-parallel group."""
    if "prompt_input_ids" in tensors:
        if native:
            return native_shared_prompt_logits(model, tensors, cpu_kernels, gpu_kernels)
        return shared_prompt_logits(model, tensors)
    if "packed_input_ids" in tensors:
        return packed_logits(model, tensors, sequence)
    # longrope/dynamic RoPE: each row rotates at its own length, not the longest row's (as alone)
    with rope_per_row(model, tensors["attention_mask"]):
        out = model(
            input_ids=tensors["input_ids"],
            attention_mask=tensors["attention_mask"],
            position_ids=tensors["position_ids"],
            logits_to_keep=tensors["responses"].shape[1] + 1,
            use_cache=False,
        )
    return out.logits[:, :-1, :]


def response_logprobs(logits: torch.Tensor, tensors: dict[str, torch.Tensor], temperature: float,
                      fused: bool = True) -> torch.Tensor:
    """log pi(response token) at the rollout temperature, (B, R); ``fused``: on a GPU in the
    fused kernels of dapo.algo.logprobs_triton (trainer.fused_logprobs)."""
    labels = tensors.get("packed_labels", tensors["responses"])
    return padded(logprobs_from_logits(logits, labels, temperature=temperature, fused=fused), tensors)


def response_logprobs_and_entropy(
    logits: torch.Tensor, tensors: dict[str, torch.Tensor], temperature: float, fused: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`response_logprobs` and the policy's entropy at each response position (B, R) in one
    pass over the logits, for the diagnostics and for a loss that trains both (an entropy bonus):
    their backward writes one gradient of the logits, not three."""
    labels = tensors.get("packed_labels", tensors["responses"])
    logprobs, entropy = logprobs_and_entropy_from_logits(logits, labels, temperature=temperature, fused=fused)
    return padded(logprobs, tensors), padded(entropy, tensors)


def padded(per_token: torch.Tensor, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """Per-token values in the padded (B, R) response layout: as they are when computed padded;
    placed at (packed_rows, packed_cols), zeros elsewhere (masked out), when computed packed (1, N)."""
    if "packed_rows" not in tensors:
        return per_token
    out = per_token.new_zeros(tensors["responses"].shape)
    return out.index_put((tensors["packed_rows"], tensors["packed_cols"]), per_token[0])


@torch.no_grad()
def add_diagnostics(logprobs: torch.Tensor, entropy: torch.Tensor, tensors: dict, into: LogprobPass) -> None:
    """Add entropy sums over the loss's tokens (overlong-filtered responses left out, as the
    loss and its entropy bonus leave them), and rollout/trainer mismatch sums over every token
    of the responses sampled this step (filtered or not: the engine sampled them all). The
    entropy is the log-probs' pass's own (:func:`response_logprobs_and_entropy`: no second pass
    over the logits)."""
    mask = within_lengths(tensors["response_lengths"], logprobs.shape[1])
    if "sequence_chunk_mask" in tensors:  # a sequence-parallel rank sums its chunk's tokens alone
        mask = mask & tensors["sequence_chunk_mask"]
    in_loss = tensors["response_mask"] > 0  # (zero past each response's length)
    entropy = entropy.detach()
    mask = mask & tensors["sampled_this_step"].to(mask.device)[:, None]
    # log(pi_old_trainer / pi_rollout) per token: the engine/trainer mismatch; masked by where, not
    # by a product: a padding position's -inf log-prob (a model that masks its pad token) times 0 is NaN
    delta = torch.where(mask, logprobs.detach() - tensors["rollout_logprobs"], 0.0)
    sums = [torch.where(in_loss, entropy, 0.0).sum(), in_loss.sum(), delta.abs().sum(),
            (delta.exp() - 1 - delta).sum(), mask.sum()]
    # one device-to-host copy, in the sums' own dtype (no float64 on MPS); the counts are exact
    # in float32 up to 2^24 tokens a micro-batch
    dtype = torch.promote_types(entropy.dtype, delta.dtype)
    entropy_sum, tokens, abs_sum, kl_sum, mismatch_tokens = torch.stack([x.to(dtype) for x in sums]).tolist()
    into.entropy_sum += entropy_sum
    into.tokens += tokens
    into.mismatch_abs_sum += abs_sum
    into.mismatch_kl_sum += kl_sum
    into.mismatch_tokens += mismatch_tokens
