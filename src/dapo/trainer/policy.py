"""The policy worker: log-probs, the DAPO update and optimizer state for one model.

This is the seam for scale-out: the loop only calls ``compute_logprobs``, ``update``,
``state_dict``/``load_state_dict`` and reads ``model``. A sharded (FSDP) worker keeps the same
methods and all-reduces the mini-batch normalisers ``num_tokens``/``num_seqs`` before ``update``.
"""

from __future__ import annotations

import contextlib
import math
import warnings

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor
from transformers import PreTrainedModel

from dapo.algo import (
    aggregate_loss,
    call_policy_loss,
    kl_penalty,
    tis_weights,
)
from dapo.config import AlgorithmConfig, TrainerConfig
from dapo.config.checks import ConfigError
from dapo.lora import adapters_off, has_lora
from dapo.rollout.batching import within_lengths
from dapo.trainer import optim
from dapo.trainer.batch import (
    Sample,
    check_update_inputs,
    collate,
    fill_normalisers,
    iter_micro_batches,
    split_rows,
)
from dapo.trainer.fsdp import all_ranks_true, reshard_all, same_count
from dapo.trainer.mixed_precision import Bf16ComputeWeights, cast_parameters
from dapo.trainer.native_forward import native_forward_reason
from dapo.trainer.packed_attention import use_packed_attention
from dapo.trainer.policy_checkpoint import PolicyCheckpointing
from dapo.trainer.response_logits import (
    add_diagnostics,
    response_logits,
    response_logprobs,
    response_logprobs_and_entropy,
)
from dapo.trainer.sequence_parallel import (
    SequenceGroup,
    check_sequence_parallel_attention,
    shard_packed,
)
from dapo.trainer.shared_prompt import check_shared_prompt
from dapo.trainer.update_stats import PEER_NONFINITE_LOSS, LogprobPass, UpdateStats


class PolicyWorker(PolicyCheckpointing):
    broken: str | None = None  # as RayPolicyGroup's: one process's policy never is

    def __init__(
        self,
        model: PreTrainedModel,
        algo: AlgorithmConfig,
        trainer: TrainerConfig,
        pad_token_id: int,
        temperature: float,
        total_steps: int,
        norm_const: float,
        ref_model: PreTrainedModel | None = None,
        sequence: SequenceGroup | None = None,
    ) -> None:
        """``ref_model``: the KL penalty's frozen reference (algorithm.kl_coef > 0), None without
        one; a LoRA policy needs none (its base model is the reference, :meth:`_ref_logprobs`).
        ``sequence``: this rank's sequence-parallel group (trainer.sequence_parallel_size > 1),
        whose ranks get the same samples and compute a chunk of each packed row each."""
        self.model, self.ref_model, self.sequence = model, ref_model, sequence
        self.algo, self.cfg = algo, trainer
        self.pad_token_id, self.temperature, self.norm_const = pad_token_id, temperature, norm_const
        self.device = next(model.parameters()).device
        self.optimizer = optim.build_optimizer(model, trainer)
        self.scheduler = optim.build_scheduler(self.optimizer, trainer, total_steps)
        self.num_nonfinite_skipped = 0
        self.version = 0  # optimizer updates applied since this worker was built
        optim.set_up_loss_scaling(self.optimizer, self._float16())
        # trainer.param_dtype=bf16: FSDP2 casts a sharded policy's weights itself (shard_policy)
        self.bf16_weights = (
            Bf16ComputeWeights(model) if trainer.param_dtype == "bf16" and not isinstance(model, FSDPModule) else None
        )
        # frozen: no updates to keep in float32; a sharded one's mixed precision computes in bf16 (shard_policy)
        if trainer.param_dtype == "bf16" and ref_model is not None and not isinstance(ref_model, FSDPModule):
            cast_parameters(ref_model.parameters(), torch.bfloat16)
        if trainer.shared_prompt:  # before any rollout, not at the first update
            check_shared_prompt(model)
        self.native_policy = self._runs_native(model)
        self.native_ref = ref_model is not None and self._runs_native(ref_model)
        if trainer.packing:  # sdpa/eager: causal attention per sequence, no row-wide mask
            for packed_model in (model, ref_model):
                if packed_model is not None:
                    use_packed_attention(packed_model)
                    if sequence is not None:  # the same, between the all-to-alls of a chunk
                        check_sequence_parallel_attention(packed_model, sequence.size)

    def _runs_native(self, model: PreTrainedModel) -> bool:
        """Whether ``model``'s shared-prompt forward is dapo-rl's own (trainer.forward)."""
        if self.cfg.forward == "hf" or self.cfg.layout != "shared_prompt":
            return False
        reason = native_forward_reason(model)
        if self.cfg.forward == "native" and reason:
            raise ConfigError(f"trainer.forward=native does not compute this model: {reason}; "
                             "set trainer.forward=hf (or auto, which picks Hugging Face's forward for it)")
        # auto: where it was measured faster and resumes bit for bit (CPU; CUDA on an H200)
        return reason is None and (self.cfg.forward == "native" or self.device.type in ("cpu", "cuda"))

    def _compute_weights(self) -> contextlib.AbstractContextManager:
        """The weights passes run on: bf16 copies (trainer.param_dtype=bf16), or the weights."""
        return self.bf16_weights.computing() if self.bf16_weights is not None else contextlib.nullcontext()

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.cfg.autocast == "none":
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if self.cfg.autocast == "bf16" else torch.float16
        # FSDP2 gathers each layer's weights for its own forward; autocast's cast cache would keep a
        # bf16 copy of every layer's until the model call ends: the whole model on each rank
        return torch.autocast(device_type=self.device.type, dtype=dtype,
                              cache_enabled=not isinstance(self.model, FSDPModule))

    def _collate(self, micro: list[Sample]) -> dict[str, torch.Tensor]:
        """A micro-batch's tensors on this worker's device, in trainer.layout (with a sequence
        group, this rank's chunk of the packed row: :func:`~dapo.trainer.sequence_parallel.shard_packed`)."""
        tensors = collate(micro, self.pad_token_id, self.cfg.layout)
        if self.sequence is not None:
            tensors = shard_packed(tensors, self.sequence, self.pad_token_id)
        return {k: v.to(self.device) for k, v in tensors.items()}

    def _response_logits(self, model: PreTrainedModel, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        """:func:`~dapo.trainer.response_logits.response_logits` under trainer.autocast, with
        dapo-rl's own shared-prompt forward where it computes ``model``."""
        with self._autocast():
            return response_logits(model, tensors, self.native_ref if model is self.ref_model else self.native_policy,
                                   self.sequence, self.cfg.native_cpu_kernels, self.cfg.native_gpu_kernels)

    def _logprobs(self, logits: torch.Tensor, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        return response_logprobs(logits, tensors, self.temperature, self.cfg.fused_logprobs)

    def compute_logprobs(self, samples: list[Sample]) -> LogprobPass:
        """Log-probs of each response under the current model at the rollout temperature, with
        the entropy and rollout/trainer mismatch sums over response tokens."""
        result, flat = self.flat_logprobs(samples)
        result.logprobs = split_rows(flat.numpy(), [len(s.response_ids) for s in samples])
        return result

    @torch.no_grad()
    def flat_logprobs(self, samples: list[Sample]) -> tuple[LogprobPass, torch.Tensor]:
        """:meth:`compute_logprobs`'s pass, its log-probs (``logprobs`` left empty) as one float32
        CPU tensor, the responses back to back in the order of ``samples``: what a policy rank
        sends the driver, for which a Python float per token costs seconds a step to pickle."""
        model = self.model
        was_training = model.training
        model.eval()
        result, pieces = LogprobPass(), [torch.zeros(0, dtype=torch.float32)]
        with self._compute_weights():
            for micro in self._micro_batches(samples):
                if not micro:  # this rank has run out of samples; the others still need it
                    self._empty_loss()
                    continue
                tensors = self._collate(micro)
                logits = self._response_logits(model, tensors)
                # the entropy the diagnostics sum comes from the same pass over the logits
                logprobs, entropy = response_logprobs_and_entropy(logits, tensors, self.temperature,
                                                                  self.cfg.fused_logprobs)
                add_diagnostics(logprobs, entropy, tensors, result)
                if self.sequence is not None:  # each rank's chunk (zeros elsewhere): the group's sum is whole
                    dist.all_reduce(logprobs, group=self.sequence.group)
                mask = within_lengths(tensors["response_lengths"], logprobs.shape[1])  # each row's first len(response)
                pieces.append(logprobs.float()[mask].cpu())  # one device-to-host copy per micro-batch
        reshard_all(model)
        model.train(was_training)
        return result, torch.cat(pieces)

    def update(
        self,
        mini_batch: list[Sample],
        num_tokens: float | None = None,
        num_seqs: float | None = None,
        on_policy: bool = False,
        diagnose: bool | None = None,
        say_skipped: bool = True,
    ) -> UpdateStats:
        """One optimizer update on a mini-batch, accumulated over token-budget micro-batches.

        ``num_tokens``/``num_seqs`` are the GLOBAL normalisers of the mini-batch (all micro-batches
        and all data-parallel ranks); they default to this worker's whole mini-batch.
        ``on_policy``: this is the only update since the rollout, so pi_old IS the current policy
        and old log-probs are this forward's own log-probs, detached (ratio exactly 1), except for
        samples that hold theirs (dynamic sampling's surplus, generated a policy ago); the separate
        old-log-prob pass is skipped and its diagnostics are taken here instead.
        ``diagnose``: collect entropy and mismatch sums from this update's forward (default: on_policy).
        An update dropped for a non-finite loss or gradient has why in the stats' ``skip_reason``,
        said here once (``say_skipped``; a policy rank's is said by the Ray driver, for all ranks).
        """
        stats = self._update(mini_batch, num_tokens, num_seqs, on_policy, diagnose)
        if stats.skipped and say_skipped:
            warnings.warn(stats.skip_message, stacklevel=1)
        return stats

    def _update(self, mini_batch: list[Sample], num_tokens: float | None, num_seqs: float | None, on_policy: bool,
                diagnose: bool | None) -> UpdateStats:
        num_tokens, num_seqs = fill_normalisers(mini_batch, num_tokens, num_seqs)
        stats = self.accumulate_gradients(mini_batch, num_tokens, num_seqs, on_policy, diagnose)
        if stats.skipped:
            return stats
        if num_tokens == 0:
            self.optimizer.zero_grad(set_to_none=True)
            stats.empty = True
            return stats
        stats.grad_norm = self.clip_gradients()
        if not math.isfinite(stats.grad_norm):
            return self._skip(stats, f"gradient norm is {stats.grad_norm}{optim.rescale_after(self.optimizer, overflow=True)}")
        optim.rescale_after(self.optimizer, overflow=False)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        optim.stop_if_weights_not_finite(self.model, self.version + 1)
        self.version += 1
        return stats

    def accumulate_gradients(
        self,
        mini_batch: list[Sample],
        num_tokens: float | None = None,
        num_seqs: float | None = None,
        on_policy: bool = False,
        diagnose: bool | None = None,
    ) -> UpdateStats:
        """Zero the gradients, then backpropagate this worker's share of a mini-batch, micro-batch
        by micro-batch, each loss normalised by the GLOBAL ``num_tokens``/``num_seqs``."""
        num_tokens, num_seqs = check_update_inputs(mini_batch, num_tokens, num_seqs, on_policy)
        diagnose = on_policy if diagnose is None else diagnose
        stats = UpdateStats(diagnostics=LogprobPass() if diagnose else None)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        # Length-sorted micro-batches carry less padding; the loss is a sum over tokens with a
        # global normaliser, so their order does not change the gradient.
        by_length = sorted(mini_batch, key=lambda s: (len(s.prompt_ids) + len(s.response_ids)))
        nonfinite = None  # why the update is skipped: a loss that was not finite, on this rank or another
        with self._compute_weights():
            for micro in self._micro_batches(by_length):
                if micro:
                    loss, pg_loss = self._micro_batch_loss(micro, num_tokens, num_seqs, stats, on_policy)
                else:
                    loss = pg_loss = self._empty_loss(reference=self._kl_penalty)
                total, policy_gradient = torch.stack([loss.detach(), pg_loss.detach()]).tolist()  # one device sync
                # decided by all ranks together, so that none is left waiting in a collective
                if not all_ranks_true(math.isfinite(total)):
                    nonfinite = f"loss is {total}" if not math.isfinite(total) else PEER_NONFINITE_LOSS
                    break
                (loss if self.loss_scale == 1.0 else loss * self.loss_scale).backward()
                if self.bf16_weights is not None:
                    self.bf16_weights.fold_gradients()  # float32 sums: bf16 ones would round small terms away
                stats.loss += total
                stats.pg_loss += policy_gradient
        if nonfinite is not None:  # skipped once the float32 weights are back
            reshard_all(self.model)  # its forward ran, its backward will not
            # entropy and mismatch of the micro-batches before it alone (the shortest responses:
            # they run first) would read as the mini-batch's; the next update measures instead
            stats.diagnostics = None
            return self._skip(stats, nonfinite)
        return stats

    @property
    def _kl_penalty(self) -> bool:
        """Whether the loss has the KL term to the reference: a frozen copy of the initial policy,
        or for a LoRA policy its own base model (read at each use: tests set them later)."""
        return self.algo.kl_coef > 0 and (self.ref_model is not None or has_lora(self.model))

    @property
    def loss_scale(self) -> float:
        """The factor the loss is multiplied by before backward (1 unless computing in float16)."""
        return optim.loss_scale(self.optimizer)

    def clip_gradients(self) -> float:
        """Clip the gradient norm to trainer.grad_clip; the norm before clipping (of the true,
        unscaled gradients). Under FSDP the gradients are shards (DTensors) and the norm is that
        of the whole, all ranks together."""
        if (scale := self.loss_scale) != 1.0:
            torch._foreach_div_([p.grad for p in self.model.parameters() if p.grad is not None], scale)
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        if isinstance(norm, DTensor):
            norm = norm.full_tensor()
        return float(norm)

    def _micro_batches(self, samples: list[Sample]) -> list[list[Sample]]:
        """Token-budget micro-batches, padded with empty ones to the count of the rank with most."""
        micro_batches = list(iter_micro_batches(samples, self.cfg.micro_batch_tokens, self.cfg.layout))
        return micro_batches + [[]] * (same_count(len(micro_batches)) - len(micro_batches))

    def _empty_loss(self, reference: bool = False) -> torch.Tensor:
        """A zero loss through a one-token prompt and response of pad tokens: an empty micro-batch
        still makes the model calls of a real one in this layout (with ``reference``, an update's
        reference forward too), so it joins FSDP's collectives.
        (An overflowed float16 logit of the pad token would make 0 * inf a NaN that skips the step.)"""
        tensors = self._collate([Sample(-1, "", [self.pad_token_id], [self.pad_token_id], [0.0], False)])
        logits = self._response_logits(self.model, tensors).float()
        if reference:
            self._ref_logprobs(tensors)
        return logits.nan_to_num(0.0, 0.0, 0.0).sum() * 0.0

    @torch.no_grad()
    def _ref_logprobs(self, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        """The reference's log-probs; a sharded one's root unit is resharded after its forward-only
        pass, which would otherwise keep its full weights (:func:`~dapo.trainer.fsdp.reshard_all`).
        A LoRA policy without a reference copy is its own: its forward with the adapters off
        (:func:`dapo.lora.adapters_off`; its root stays gathered for the policy's backward)."""
        if self.ref_model is None:
            with adapters_off(self.model):
                return self._logprobs(self._response_logits(self.model, tensors), tensors)
        logprobs = self._logprobs(self._response_logits(self.ref_model, tensors), tensors)
        reshard_all(self.ref_model)
        return logprobs

    def end_step(self) -> None:
        """Advance the learning-rate schedule by one training step (after the step's updates)."""
        with warnings.catch_warnings():
            # a step without updates (no group with signal) still moves the schedule
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step\\(\\)` before")
            self.scheduler.step()

    def _skip(self, stats: UpdateStats, why: str) -> UpdateStats:
        """A non-finite loss or gradient never reaches the weights: drop this update, ``why`` in
        its stats (said once by :meth:`update`, or for a rank by the Ray driver)."""
        self.optimizer.zero_grad(set_to_none=True)
        self.num_nonfinite_skipped += 1
        stats.skip_reason = why
        return stats

    def _micro_batch_loss(
        self, micro: list[Sample], num_tokens: float, num_seqs: float, stats: UpdateStats, on_policy: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(the loss to minimise, its policy-gradient part)."""
        tensors = self._collate(micro)
        logits = self._response_logits(self.model, tensors)
        if self.algo.entropy_coef != 0 or stats.diagnostics is not None:
            # one pass over the logits for both (and one backward, for an entropy bonus); without a
            # bonus, nothing flows back through the entropy and the backward is the log-probs' alone
            logprobs, entropy = response_logprobs_and_entropy(logits, tensors, self.temperature, self.cfg.fused_logprobs)
        else:
            logprobs, entropy = self._logprobs(logits, tensors), None
        mask = tensors["response_mask"]
        if on_policy:  # pi_old is this forward's policy, but where a sample holds its own (carried over)
            given = tensors["has_old_logprobs"].to(logprobs.device)[:, None]
            tensors["old_logprobs"] = torch.where(given, tensors["old_logprobs"], logprobs.detach())
        if stats.diagnostics is not None:
            add_diagnostics(logprobs, entropy, tensors, stats.diagnostics)
        weights = None
        if self.algo.tis_cap is not None:
            weights = tis_weights(tensors["old_logprobs"], tensors["rollout_logprobs"], self.algo.tis_cap)
        loss, pg = call_policy_loss(
            self.algo.policy_loss,
            logprobs,
            tensors["old_logprobs"],
            tensors["advantages"],
            mask,
            clip_ratio_low=self.algo.clip_ratio_low,
            clip_ratio_high=self.algo.clip_ratio_high,
            clip_ratio_c=self.algo.clip_ratio_c,
            loss_agg_mode=self.algo.loss_agg_mode,
            num_tokens=num_tokens,
            num_seqs=num_seqs,
            norm_const=self.norm_const,
            importance_weights=weights,
        )
        pg_loss = loss
        agg = {"num_tokens": num_tokens, "num_seqs": num_seqs, "norm_const": self.norm_const}
        if self.algo.entropy_coef != 0:
            loss = loss - self.algo.entropy_coef * aggregate_loss(entropy, mask, self.algo.loss_agg_mode, **agg)
        if self._kl_penalty:  # so do empty micro-batches (_empty_loss)
            kl = kl_penalty(logprobs, self._ref_logprobs(tensors), self.algo.kl_estimator, mask)
            loss = loss + self.algo.kl_coef * aggregate_loss(kl, mask, self.algo.loss_agg_mode, **agg)
            kl_sum = kl.detach().sum()  # (0 at masked positions: kl_penalty zeroes their log-ratio); no device sync
            stats.ref_kl_sum = kl_sum if stats.ref_kl_sum is None else stats.ref_kl_sum + kl_sum
        stats.policy = pg if stats.policy is None else stats.policy + pg
        return loss, pg_loss

    def _float16(self) -> bool:
        """Whether the passes compute in float16 (autocast or a float16 policy): loss scaling."""
        return self.cfg.autocast == "fp16" or next(self.model.parameters()).dtype == torch.float16

    def close(self) -> None:
        """Nothing to release in this process."""

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])
