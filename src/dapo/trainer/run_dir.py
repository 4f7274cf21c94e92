"""Run directories that protect themselves.

- One run per directory: ``dapo train`` holds an exclusive ``flock`` on ``RUN_DIR/.lock`` (with
  its pid written inside) for as long as it runs; a second run on the same directory stops at
  once, naming the pid. The kernel drops the lock when the process dies, SIGKILL included; a run
  that ends removes the file (a killed run's is left, and reused by the next).
- Leftovers of killed runs (``checkpoints/.tmp-step-*`` and ``.old-step-*``, half-written or
  half-swapped checkpoints) are removed by the next run, which holds the lock, so none is live.
- A checkpoint resumed into a run must be of the same model (architecture, and model.path and
  training data for a directory reused with checkpoint.resume=auto; for LoRA adapters, the base
  weights, wherever they are: :mod:`dapo.trainer.base_weights`): the refusal names the difference.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import warnings
from pathlib import Path
from typing import IO, Any

import yaml

from dapo.config.loading import absolute_local_path
from dapo.durable import fsync_dir
from dapo.errors import UserError
from dapo.trainer.base_weights import base_weights_difference

LOCK_FILE = ".lock"
_LOCK_ATTEMPTS = 100  # a lock file removed each time it is locked: runs releasing it lose no race this often
STATE_FILE = "trainer_state.pt"  # a checkpoint is complete once this is in it (written last)
SHARDED_DIR = "policy"  # a checkpoint's DCP shards of model, optimizer and scheduler (several ranks)
# A checkpoint without the Hugging Face export keeps its model config here (not as config.json,
# which would make the directory look like a loadable model directory without weights).
MODEL_CONFIG_FILE = "model_config.json"
SAVED_RUN_CONFIG = "dapo_config.yaml"  # a checkpoint's copy of its run's resolved config
# Model config fields whose difference makes a checkpoint's weights unusable.
ARCHITECTURE_FIELDS = ("model_type", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                       "num_key_value_heads", "intermediate_size", "tie_word_embeddings")
# Config fields whose difference makes an automatic resume continue a different run.
RUN_IDENTITY_FIELDS = (("model", "path"), ("data", "train_files"))


def checkpoints_root(run_dir: str | Path) -> Path:
    """The folder of a run's checkpoints: ``step-NNNNNN``, set-aside ``abandoned-*``, ``best``."""
    return Path(run_dir) / "checkpoints"


class RunDirError(UserError, RuntimeError):
    """The run directory cannot be used as asked; the message says why and what to do."""


class RunDirLock:
    """An exclusive lock on a run directory for the life of one run (a context manager too).

    The file is removed on release, while still locked, so that a finished run leaves no
    ``.lock`` behind that looks stale. That opens a race the acquisition closes: a second run
    that opened the file before the release removed it gets its lock once the first lets go, on
    a file no longer at the path, while a third could create and lock a new one. So a lock counts
    only if, once ``flock`` returns, the path still names the locked file (same inode); else the
    file is opened again, as it is now."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK_FILE
        self._handle: IO[str] | None = self._acquire(run_dir)
        self._handle.seek(0)
        self._handle.truncate()
        self._handle.write(f"{os.getpid()}\n")
        self._handle.flush()

    def _acquire(self, run_dir: Path) -> IO[str]:
        for _ in range(_LOCK_ATTEMPTS):
            handle = open(self.path, "a+")  # noqa: SIM115 (held until release)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked = True
            except BlockingIOError:
                locked = False
            except BaseException:
                handle.close()
                raise
            if not self._names(handle):  # removed (released) or replaced since it was opened: again
                handle.close()
                continue
            if locked:
                return handle
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise RunDirError(
                f"output_dir {run_dir} is in use by another dapo train (pid {holder}); wait for it to "
                "finish, or give this run another output_dir"
            )
        raise RunDirError(f"could not lock {self.path}: it was removed or replaced between its opening and its "
                          f"locking {_LOCK_ATTEMPTS} times in a row (a program other than dapo train removing it?)")

    def _names(self, handle: IO[str]) -> bool:
        """Whether the lock file's path names the file ``handle`` has open."""
        try:
            at_path = os.stat(self.path)
        except FileNotFoundError:
            return False
        opened = os.fstat(handle.fileno())
        return (at_path.st_dev, at_path.st_ino) == (opened.st_dev, opened.st_ino)

    def release(self) -> None:
        """Remove the lock file, then unlock it: a run that opened it before then finds it gone
        once locked, and opens a new one (see the class docstring). Not a file that is no longer
        this lock's (someone removed it and another run made its own)."""
        if self._handle is not None:
            if self._names(self._handle):  # (nothing else unlinks it while this lock is held)
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None

    def __enter__(self) -> RunDirLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def remove_stale_checkpoint_temps(run_dir: Path) -> int:
    """Delete the temporary checkpoint directories of killed runs; how many were deleted. A run
    killed while swapping a re-saved step in (``step-N`` renamed to ``.old-step-N-<pid>``, the new
    one not yet renamed into place) has its complete old ``step-N`` put back, not deleted."""
    root = checkpoints_root(run_dir)
    stale = [p for pattern in (".tmp-step-*", ".old-step-*") for p in root.glob(pattern)] if root.is_dir() else []
    for link in root.glob(".tmp-best-*") if root.is_dir() else []:  # checkpoint.keep_best's link, half made
        link.unlink(missing_ok=True)
    removed = 0
    for path in stale:
        replaced = root / path.name[len(".old-"):].rsplit("-", 1)[0]  # .old-step-000004-123 -> step-000004
        if path.name.startswith(".old-") and not replaced.exists() and (path / STATE_FILE).is_file():
            path.rename(replaced)
            fsync_dir(root)
            warnings.warn(f"restored checkpoint {replaced}, left half-swapped by a killed run", stacklevel=2)
        else:
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    if removed:
        warnings.warn(f"removed {removed} incomplete checkpoint(s) left by a run stopped while writing them, in {root}", stacklevel=2)
    return removed


def saved_model_config(checkpoint: Path) -> dict[str, Any]:
    """The model config a checkpoint was written with: its Hugging Face ``config.json``, or in a
    checkpoint without the export (the ranks' shards alone, ``checkpoint.hf_export=final``)
    ``model_config.json``; empty for a shards-only checkpoint written before that file existed
    (DCP's load still refuses mismatched shapes)."""
    for name in ("config.json", MODEL_CONFIG_FILE):
        if (checkpoint / name).is_file():
            return json.loads((checkpoint / name).read_text())
    return {}


def _local_paths(value: Any) -> Any:
    """A path, or a list of them, with the entries that name local files made absolute."""
    if isinstance(value, list):
        return [absolute_local_path(entry) if isinstance(entry, str) else entry for entry in value]
    return absolute_local_path(value) if isinstance(value, str) else value


# Settings a resume does not report as changed: where the run writes and what it resumes from, and
# the run's identity (model.path, data.train_files), which checkpoint_mismatch and the data cursor report.
_UNREPORTED_SETTINGS = ("output_dir", "checkpoint.resume", "python_path",
                        *(f"{section}.{name}" for section, name in RUN_IDENTITY_FIELDS))


def _saved_run_config(checkpoint: Path) -> dict[str, Any] | None:
    """The run config ``checkpoint`` was saved with (its ``dapo_config.yaml``), or None."""
    saved_config_file = checkpoint / SAVED_RUN_CONFIG
    return (yaml.safe_load(saved_config_file.read_text()) or {}) if saved_config_file.exists() else None


def has_saved_run_config(checkpoint: Path) -> bool:
    """Whether ``checkpoint`` holds the run config it was saved with: a resume from it names every
    setting changed since (:func:`changed_settings`), the optimizer's among them."""
    return (checkpoint / SAVED_RUN_CONFIG).is_file()


def saved_section(checkpoint: Path, section: str) -> dict[str, Any]:
    """One section (``trainer``) of the run config ``checkpoint`` was saved with; empty without one."""
    saved = (_saved_run_config(checkpoint) or {}).get(section)
    return saved if isinstance(saved, dict) else {}


def changed_settings(checkpoint: Path, run_config: dict) -> list[str]:
    """The settings of ``run_config`` other than those ``checkpoint`` was saved with (its
    ``dapo_config.yaml``), as ``key before -> now``: they apply from the resumed step. The only
    report of them, the optimizer's (trainer.lr, betas, weight_decay, the schedule) included
    (:meth:`dapo.trainer.policy.PolicyWorker.apply_config_to_optimizer` says those only for a
    checkpoint without its run config). A setting the saved config lacks is one dapo-rl added
    since: not a change the user made (every upgrade's new fields were said as ``None -> default``)."""
    saved_run = _saved_run_config(checkpoint)
    if saved_run is None:
        return []
    saved, now = _flat(saved_run), _flat(run_config)
    changes = []
    for key in sorted(set(saved) | set(now)):
        if key not in saved and _added_since(key, saved_run):
            continue
        before, after = saved.get(key), now.get(key)
        # compared as absolute paths where they name local files, said as written: a setting that is
        # no path (algorithm.policy_loss=gspo) may name a folder of the working directory all the same
        if _local_paths(before) != _local_paths(after) and not key.startswith(_UNREPORTED_SETTINGS):
            changes.append(f"{key} {_short(before)} -> {_short(after)}")
    return changes


def _added_since(key: str, saved_run: dict) -> bool:
    """Whether the setting ``key`` (``section.field[.entry]``) is of a field the saved run config
    lacks, one added to dapo-rl since, not an entry of a mapping it holds (a new
    data.chat_template_kwargs.enable_thinking is a change)."""
    node: Any = saved_run
    for part in key.split(".")[:2]:
        if not isinstance(node, dict) or part not in node:
            return True
        node = node[part]
    return False


def _flat(tree: dict, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` as ``{"a.b": 1}`` (lists are values)."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def checkpoint_mismatch(checkpoint: Path, model_config: Any, run_config: dict, automatic: bool) -> str | None:
    """Why ``checkpoint`` cannot be resumed into this run, or None when it can."""
    saved_model = saved_model_config(checkpoint)
    differences = [
        f"{name} {saved_model.get(name)!r} (checkpoint) != {getattr(model_config, name, None)!r} (this run)"
        for name in ARCHITECTURE_FIELDS
        if name in saved_model and saved_model.get(name) != getattr(model_config, name, None)
    ]
    saved_run = _saved_run_config(checkpoint)
    if saved_run is not None:
        for section, name in RUN_IDENTITY_FIELDS:
            # as absolute paths: checkpoints save them so, and an older one or the command may not
            before, now = (_local_paths(config.get(section, {}).get(name)) for config in (saved_run, run_config))
            if (section, name) == ("model", "path") and run_config.get("model", {}).get("lora_rank", 0) > 0:
                # a LoRA checkpoint holds adapters of model.path's base weights: compared by the weights
                if (why := base_weights_difference(checkpoint, str(before), str(now))) is not None:
                    differences.append(why)
                elif before != now:
                    warnings.warn(f"model.path {now!r} holds the base weights the checkpoint's LoRA adapters were "
                                  f"trained on (at {before!r} then): resuming on them", stacklevel=3)
                continue
            if before == now:
                continue
            if (section, name) == ("model", "path") and base_weights_difference(checkpoint, str(before), str(now)) is None:
                # every weight trained: model.path gives the tokenizer and the KL reference, the same weights moved
                warnings.warn(f"model.path {now!r} holds the base weights this run started from (at {before!r} "
                              f"then): resuming {checkpoint.name}", stacklevel=3)
                continue
            if automatic:
                differences.append(f"{section}.{name} {before!r} (checkpoint) != {now!r} (this run)")
            elif (section, name) == ("model", "path"):  # named, so taken; but the new path was ignored unsaid
                warnings.warn(f"model.path {now!r} differs from the checkpoint's run's ({before!r}): training goes on "
                              f"from {checkpoint.name}'s weights; model.path gives only the tokenizer and, with "
                              "algorithm.kl_coef > 0, the KL penalty's reference model", stacklevel=3)
    return "; ".join(differences) or None
