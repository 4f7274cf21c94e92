"""The policy worker: log-probs, the DAPO update and optimizer state for one model.

This is the seam for scale-out: the loop only calls ``compute_logprobs``, ``update``,
``state_dict``/``load_state_dict`` and reads ``model``. A sharded (FSDP) worker keeps the same
methods and all-reduces the mini-batch normalisers ``num_tokens``/``num_seqs`` before ``update``.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from pathlib import Path

import torch
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from dapo.algo import (
    POLICY_LOSSES,
    aggregate_loss,
    entropy_from_logits,
    kl_penalty,
    logprobs_from_logits,
    tis_weights,
)
from dapo.config import AlgorithmConfig, TrainerConfig
from dapo.rollout.batching import within_lengths
from dapo.trainer import optim
from dapo.trainer.batch import Sample, collate, count_loss_tokens, iter_micro_batches
from dapo.trainer.checkpoint import (
    is_sharded,
    load_model_weights,
    load_sharded_policy,
    save_hf_model,
)
from dapo.trainer.fsdp import all_ranks_true, reshard_root, same_count
from dapo.trainer.mixed_precision import Bf16ComputeWeights, cast_parameters
from dapo.trainer.native_forward import native_forward_reason, native_shared_prompt_logits
from dapo.trainer.packed_attention import packed_logits, use_packed_attention
from dapo.trainer.shared_prompt import check_shared_prompt, shared_prompt_logits
from dapo.trainer.update_stats import LogprobPass, UpdateStats


class PolicyWorker:
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
    ) -> None:
        self.model, self.ref_model = model, ref_model
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
        if trainer.param_dtype == "bf16" and ref_model is not None:
            cast_parameters(ref_model.parameters(), torch.bfloat16)  # frozen: no updates to keep in float32
        if trainer.shared_prompt:  # before any rollout, not at the first update
            check_shared_prompt(model)
        self.native_policy = self._runs_native(model)
        self.native_ref = ref_model is not None and self._runs_native(ref_model)
        if trainer.packing:  # sdpa/eager: causal attention per sequence, no row-wide mask
            for packed_model in (model, ref_model):
                if packed_model is not None:
                    use_packed_attention(packed_model)

    def _runs_native(self, model: PreTrainedModel) -> bool:
        """Whether ``model``'s shared-prompt forward is dapo-rl's own (trainer.forward)."""
        if self.cfg.forward == "hf" or self.cfg.layout != "shared_prompt":
            return False
        reason = native_forward_reason(model)
        if self.cfg.forward == "native" and reason:
            raise ValueError(f"trainer.forward=native does not compute this model: {reason}; "
                             "set trainer.forward=hf (or auto, which picks Hugging Face's forward for it)")
        return reason is None and (self.cfg.forward == "native" or self.device.type == "cpu")

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
        """A micro-batch's tensors on this worker's device, in trainer.layout."""
        return {k: v.to(self.device) for k, v in collate(micro, self.pad_token_id, self.cfg.layout).items()}

    def _response_logits(self, model: PreTrainedModel, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        """Logits that predict each response token: (B, R, V) in the padded and shared-prompt
        layouts; (1, N, V), the N response tokens back to back, from the padding-free row
        (trainer.packing), where the model sees no padding and computes output logits only at
        those N positions. Read them with :meth:`_logprobs` / :meth:`_entropy`, which return the
        padded (B, R) layout either way."""
        with self._autocast():
            if "prompt_input_ids" in tensors:
                native = self.native_ref if model is self.ref_model else self.native_policy
                return (native_shared_prompt_logits if native else shared_prompt_logits)(model, tensors)
            if "packed_input_ids" in tensors:
                return packed_logits(model, tensors)
            out = model(
                input_ids=tensors["input_ids"],
                attention_mask=tensors["attention_mask"],
                position_ids=tensors["position_ids"],
                logits_to_keep=tensors["responses"].shape[1] + 1,
                use_cache=False,
            )
        return out.logits[:, :-1, :]

    def _logprobs(self, logits: torch.Tensor, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        """log pi(response token) at the rollout temperature, (B, R)."""
        labels = tensors.get("packed_labels", tensors["responses"])
        return _padded(logprobs_from_logits(logits, labels, temperature=self.temperature), tensors)

    def _entropy(self, logits: torch.Tensor, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        """Entropy of the policy at each response position at the rollout temperature, (B, R)."""
        return _padded(entropy_from_logits(logits, temperature=self.temperature), tensors)

    @torch.no_grad()
    def compute_logprobs(self, samples: list[Sample]) -> LogprobPass:
        """Log-probs of each response under the current model at the rollout temperature, with
        the entropy and rollout/trainer mismatch sums over response tokens."""
        model = self.model
        was_training = model.training
        model.eval()
        result = LogprobPass()
        with self._compute_weights():
            for micro in self._micro_batches(samples):
                if not micro:  # this rank has run out of samples; the others still need it
                    self._empty_loss()
                    continue
                tensors = self._collate(micro)
                logits = self._response_logits(model, tensors)
                logprobs = self._logprobs(logits, tensors)
                self._diagnose(logits, logprobs, tensors, result)
                rows = logprobs.float().cpu().tolist()  # one device-to-host copy per micro-batch
                result.logprobs.extend(row[: len(sample.response_ids)] for row, sample in zip(rows, micro))
        reshard_root(model)
        model.train(was_training)
        return result

    @torch.no_grad()
    def _diagnose(self, logits: torch.Tensor, logprobs: torch.Tensor, tensors: dict, into: LogprobPass) -> None:
        """Add entropy sums over the loss's tokens (overlong-filtered responses left out, as the
        loss and its entropy bonus leave them), and rollout/trainer mismatch sums over every token
        of the responses sampled this step (filtered or not: the engine sampled them all)."""
        mask = within_lengths(tensors["response_lengths"], logprobs.shape[1])
        in_loss = tensors["response_mask"] > 0  # (zero past each response's length)
        entropy = self._entropy(logits.detach(), tensors)
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

    def update(
        self,
        mini_batch: list[Sample],
        num_tokens: float | None = None,
        num_seqs: float | None = None,
        on_policy: bool = False,
        diagnose: bool | None = None,
    ) -> UpdateStats:
        """One optimizer update on a mini-batch, accumulated over token-budget micro-batches.

        ``num_tokens``/``num_seqs`` are the GLOBAL normalisers of the mini-batch (all micro-batches
        and all data-parallel ranks); they default to this worker's whole mini-batch.
        ``on_policy``: this is the only update since the rollout, so pi_old IS the current policy
        and old log-probs are this forward's own log-probs, detached (ratio exactly 1), except for
        samples that hold theirs (dynamic sampling's surplus, generated a policy ago); the separate
        old-log-prob pass is skipped and its diagnostics are taken here instead.
        ``diagnose``: collect entropy and mismatch sums from this update's forward (default: on_policy).
        """
        if num_tokens is None or num_seqs is None:
            num_tokens, num_seqs = count_loss_tokens(mini_batch)
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
        local_tokens, local_seqs = count_loss_tokens(mini_batch)
        num_tokens = local_tokens if num_tokens is None else num_tokens
        num_seqs = local_seqs if num_seqs is None else num_seqs
        if local_tokens > num_tokens or local_seqs > num_seqs:  # a normaliser of another batch
            raise ValueError(f"the mini-batch's global counts ({num_tokens} loss tokens, {num_seqs} sequences) are "
                             f"below this rank's share ({local_tokens}, {local_seqs})")
        if not on_policy and not all(s.old_logprobs for s in mini_batch):  # zeros would be log pi_old
            raise ValueError("an off-policy update needs every sample's old_logprobs (pi_old): compute them first "
                             "(compute_logprobs), or update on_policy")
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
                    loss = pg_loss = self._empty_loss()
                total, policy_gradient = torch.stack([loss.detach(), pg_loss.detach()]).tolist()  # one device sync
                # decided by all ranks together, so that none is left waiting in a collective
                if not all_ranks_true(math.isfinite(total)):
                    nonfinite = f"loss is {total}" if not math.isfinite(total) else "another rank's loss is not finite"
                    break
                (loss if self.loss_scale == 1.0 else loss * self.loss_scale).backward()
                if self.bf16_weights is not None:
                    self.bf16_weights.fold_gradients()  # float32 sums: bf16 ones would round small terms away
                stats.loss += total
                stats.pg_loss += policy_gradient
        if nonfinite is not None:  # skipped once the float32 weights are back
            reshard_root(self.model)  # its forward ran, its backward will not
            return self._skip(stats, nonfinite)
        return stats

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

    def _empty_loss(self) -> torch.Tensor:
        """A zero loss through a one-token prompt and response of pad tokens: an empty micro-batch
        still makes the model calls of a real one in this layout, so it joins FSDP's collectives.
        (An overflowed float16 logit of the pad token would make 0 * inf a NaN that skips the step.)"""
        pad = Sample(-1, "", [self.pad_token_id], [self.pad_token_id], [0.0], False)
        logits = self._response_logits(self.model, self._collate([pad])).float()
        return logits.nan_to_num(0.0, 0.0, 0.0).sum() * 0.0

    def end_step(self) -> None:
        """Advance the learning-rate schedule by one training step (after the step's updates)."""
        with warnings.catch_warnings():
            # a step without updates (no group with signal) still moves the schedule
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step\\(\\)` before")
            self.scheduler.step()

    def _skip(self, stats: UpdateStats, why: str) -> UpdateStats:
        """A non-finite loss or gradient never reaches the weights: drop this update."""
        self.optimizer.zero_grad(set_to_none=True)
        self.num_nonfinite_skipped += 1
        stats.skipped = True
        warnings.warn(f"skipped an optimizer update: {why}; weights left unchanged", stacklevel=2)
        return stats

    def _micro_batch_loss(
        self, micro: list[Sample], num_tokens: float, num_seqs: float, stats: UpdateStats, on_policy: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(the loss to minimise, its policy-gradient part)."""
        tensors = self._collate(micro)
        logits = self._response_logits(self.model, tensors)
        logprobs = self._logprobs(logits, tensors)
        mask = tensors["response_mask"]
        if on_policy:  # pi_old is this forward's policy, but where a sample holds its own (carried over)
            given = tensors["has_old_logprobs"].to(logprobs.device)[:, None]
            tensors["old_logprobs"] = torch.where(given, tensors["old_logprobs"], logprobs.detach())
        if stats.diagnostics is not None:
            self._diagnose(logits, logprobs, tensors, stats.diagnostics)
        weights = None
        if self.algo.tis_cap is not None:
            weights = tis_weights(tensors["old_logprobs"], tensors["rollout_logprobs"], self.algo.tis_cap)
        loss, pg = POLICY_LOSSES.lookup(self.algo.policy_loss)(
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
        if self.algo.entropy_coef > 0:
            entropy = self._entropy(logits, tensors)
            loss = loss - self.algo.entropy_coef * aggregate_loss(entropy, mask, self.algo.loss_agg_mode, **agg)
        if self.algo.kl_coef > 0 and self.ref_model is not None:
            with torch.no_grad():
                ref_logprobs = self._logprobs(self._response_logits(self.ref_model, tensors), tensors)
            kl = kl_penalty(logprobs, ref_logprobs, self.algo.kl_estimator)
            loss = loss + self.algo.kl_coef * aggregate_loss(kl, mask, self.algo.loss_agg_mode, **agg)
            kl_sum = torch.where(mask != 0, kl.detach(), 0.0).sum()  # over policy stats' tokens; no device sync
            stats.ref_kl_sum = kl_sum if stats.ref_kl_sum is None else stats.ref_kl_sum + kl_sum
        stats.policy = pg if stats.policy is None else stats.policy + pg
        return loss, pg_loss

    def state_dict(self) -> dict:
        return {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "num_nonfinite_skipped": self.num_nonfinite_skipped,
        }

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.num_nonfinite_skipped = state["num_nonfinite_skipped"]

    def save_checkpoint(self, directory: Path, tokenizer: PreTrainedTokenizerBase, hf_export: bool = True) -> dict:
        """Write the model's Hugging Face directory into ``directory`` (the checkpoint being
        built; always, whatever ``hf_export``: it holds the weights); the optimizer/scheduler
        state, for the driver's ``trainer_state.pt``."""
        save_hf_model(directory, self.model, tokenizer)
        return self.state_dict()

    def load_checkpoint(self, directory: Path, state: dict) -> None:
        """Restore weights, optimizer and scheduler from a checkpoint: one process's (weights in the
        HF files, the rest in ``state``), or the shards of several ranks (DCP reshards them)."""
        if is_sharded(state):
            self.load_shards(directory)
            self.num_nonfinite_skipped = state["num_nonfinite_skipped"]
        else:
            load_model_weights(self.model, directory)
            self.load_state_dict(state)
            self.apply_config_to_optimizer()

    def load_shards(self, directory: Path) -> None:
        """This rank's shard of model, optimizer and scheduler state from a checkpoint of several
        ranks (DCP reshards them); the run's optimizer settings then apply. Collective."""
        load_sharded_policy(directory, self.model, self.optimizer, self.scheduler)
        self.apply_config_to_optimizer()

    def apply_config_to_optimizer(self) -> None:
        """After a resume: the run's optimizer settings and schedule
        (:func:`dapo.trainer.optim.apply_config`), and loss scaling as this run computes."""
        changed = optim.apply_config(self.optimizer, self.scheduler, self.cfg)
        optim.set_up_loss_scaling(self.optimizer, self._float16())
        if changed:
            warnings.warn("resumed with this run's optimizer settings, not the checkpoint's: "
                          + ", ".join(sorted(set(changed))), stacklevel=2)

    def _float16(self) -> bool:
        """Whether the passes compute in float16 (autocast or a float16 policy): loss scaling."""
        return self.cfg.autocast == "fp16" or next(self.model.parameters()).dtype == torch.float16

    def close(self) -> None:
        """Nothing to release in this process."""

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])


def _padded(per_token: torch.Tensor, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """Per-token values in the padded (B, R) response layout: as they are when computed padded;
    placed at (packed_rows, packed_cols), zeros elsewhere (masked out), when computed packed (1, N)."""
    if "packed_rows" not in tensors:
        return per_token
    padded = per_token.new_zeros(tensors["responses"].shape)
    return padded.index_put((tensors["packed_rows"], tensors["packed_cols"]), per_token[0])
