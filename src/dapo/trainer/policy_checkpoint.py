"""How a policy worker's state is saved and restored: weights (one process's Hugging Face
directory, LoRA adapters beside it; or several ranks' DCP shards), AdamW and the learning-rate
schedule, and the run's optimizer settings applied after a resume.

A mixin of :class:`dapo.trainer.policy.PolicyWorker`, which holds ``model``, ``optimizer``,
``scheduler``, ``cfg`` (trainer.*), ``num_nonfinite_skipped`` and ``_float16()``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from transformers import PreTrainedTokenizerBase

from dapo.trainer import optim
from dapo.trainer.policy_weights import (
    check_adapters_match,
    load_policy_weights,
    save_policy_weights,
)
from dapo.trainer.run_dir import has_saved_run_config
from dapo.trainer.sharded_checkpoint import is_sharded, load_sharded_policy, shard_whole_policy


class PolicyCheckpointing:
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
        built; always, whatever ``hf_export``: it holds the weights; with LoRA, merged, and the
        adapters in ``adapter/``: :mod:`dapo.trainer.policy_weights`); the optimizer/scheduler
        state, for the driver's ``trainer_state.pt``."""
        save_policy_weights(directory, self.model, tokenizer)
        return self.state_dict()

    def load_checkpoint(self, directory: Path, state: dict) -> None:
        """Restore weights, optimizer and scheduler from a checkpoint: one process's (weights in the
        HF files, the rest in ``state``), or the shards of several ranks (DCP reshards them)."""
        if is_sharded(state):
            self.load_shards(directory)
            self.num_nonfinite_skipped = state["num_nonfinite_skipped"]
        else:
            load_policy_weights(self.model, directory)
            self.load_state_dict(state)
            self.apply_config_to_optimizer(directory)

    def load_shards(self, directory: Path) -> None:
        """This rank's shard of model, optimizer and scheduler state from a checkpoint of several
        ranks (DCP reshards them); the run's optimizer settings then apply. Collective."""
        check_adapters_match(self.model, directory)
        load_sharded_policy(directory, self.model, self.optimizer, self.scheduler)
        self.apply_config_to_optimizer(directory)

    def load_whole(self, directory: Path, whole: tuple | None) -> None:
        """A one-process checkpoint into this rank's shards: rank 0 passes ``whole``, the policy,
        AdamW and schedule it read as one process does, the others None
        (:func:`~dapo.trainer.sharded_checkpoint.shard_whole_policy`); the run's optimizer
        settings then apply. Collective."""
        check_adapters_match(self.model, directory)
        shard_whole_policy(self.model, self.optimizer, self.scheduler, whole)
        self.apply_config_to_optimizer(directory)

    def apply_config_to_optimizer(self, checkpoint: Path | None = None) -> None:
        """After a resume from ``checkpoint``: the run's optimizer settings and schedule
        (:func:`dapo.trainer.optim.apply_config`), and loss scaling as this run computes. What
        changed is said here only where the checkpoint holds no run config (or is not named):
        from one that does, the resume's list of changed settings has said it, with the learning
        rate the schedule goes on at (:meth:`dapo.trainer.run_state.RunState.find_checkpoint`)."""
        changed = optim.apply_config(self.optimizer, self.scheduler, self.cfg)
        optim.set_up_loss_scaling(self.optimizer, self._float16())
        if changed and (checkpoint is None or not has_saved_run_config(checkpoint)):
            warnings.warn("resumed with this run's optimizer settings, not the checkpoint's: "
                          + ", ".join(sorted(set(changed))), stacklevel=2)
