"""Atomic checkpoints that are also plain Hugging Face model directories.

A checkpoint ``<run>/checkpoints/step-000012/`` holds the weights (safetensors), model config
and tokenizer written by ``save_pretrained`` (so ``AutoModelForCausalLM.from_pretrained`` loads it
with no conversion), ``trainer_state.pt`` and the run's resolved ``dapo_config.yaml``.

- One process (``resources.world_size`` 1): ``trainer_state.pt`` holds everything else:
  optimizer, scheduler, RNG states, data cursor, dynamic-sampling carry-over, counters.
- Several policy ranks (FSDP2): every rank writes its own shard of the model and optimizer state,
  and the scheduler state, with ``torch.distributed.checkpoint`` into ``policy/`` (one
  ``__<rank>_0.distcp`` file per rank and DCP's ``.metadata``;
  :func:`~dapo.trainer.sharded_checkpoint.save_sharded_policy`), and reads it back on resume
  (:func:`~dapo.trainer.sharded_checkpoint.load_sharded_policy`; DCP reshards, so another number of ranks
  can resume it). Rank 0 writes the Hugging Face export, gathered from the shards one tensor at
  a time (:func:`dapo.trainer.hf_export.export_hf_from_shards`). ``trainer_state.pt`` then holds only the driver's state (step,
  sampler, RNG, counters): nothing full-size passes through the driver. The final checkpoint of
  a step already checkpointed, or one whose export comes after its shards (``export_owed``,
  ``checkpoint.hf_export=final``), is built on hard links to the published one
  (:func:`link_checkpoint`).

It is built in a hidden temporary directory (:func:`begin_checkpoint`), fsynced, and renamed into
place (:func:`publish_checkpoint`) once every writer has finished, so a run killed at any moment
(or a machine that loses power) leaves either the previous checkpoints or a complete new one,
never a half-written one; the next run removes the temporary directory.
"""

from __future__ import annotations

import fnmatch
import os
import pickle
import re
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from dapo.durable import current_umask, fsync_dir, fsync_tree, modes_as_umask, write_atomically
from dapo.errors import DamagedCheckpointError
from dapo.rollout.base import tied_duplicates
from dapo.trainer.hf_export import save_hf_model
from dapo.trainer.run_dir import STATE_FILE, checkpoints_root

CHECKPOINT_PATTERN = re.compile(r"^step-(\d+)$")
SET_ASIDE_PREFIX = "abandoned-"  # checkpoints/abandoned-<time>-<suffix>/: set_aside_checkpoints_after
BEST_LINK = "best"  # checkpoints/best -> step-NNNNNN: checkpoint.keep_best's (link_best)


# checkpoints/.setting-aside: the step a set-aside keeps up to, while it moves the later ones
# (set_aside_checkpoints_after): a run killed partway leaves them hidden, not resumable
SETTING_ASIDE = ".setting-aside"


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first; not those a set-aside left behind (killed
    while it moved them: the next one's moves them on)."""
    kept_up_to = _setting_aside(checkpoints_root(run_dir))
    return [p for p in _complete_checkpoints(run_dir) if kept_up_to is None or checkpoint_step(p) <= kept_up_to]


def _complete_checkpoints(run_dir: str | Path) -> list[Path]:
    root = checkpoints_root(run_dir)
    if not root.is_dir():
        return []
    found = [(checkpoint_step(p), p) for p in root.iterdir() if CHECKPOINT_PATTERN.match(p.name)]
    return [p for _, p in sorted(found) if (p / STATE_FILE).exists()]


def _setting_aside(root: Path) -> int | None:
    """The step an unfinished set-aside keeps up to, or None."""
    try:
        return int((root / SETTING_ASIDE).read_text())
    except (FileNotFoundError, NotADirectoryError, ValueError):  # (written atomically: a ValueError is a hand's)
        return None


def has_checkpoint(run_dir: str | Path, step: int) -> bool:
    """Whether the run holds a complete checkpoint of ``step`` (one :func:`list_checkpoints` lists,
    unless an unfinished set-aside hides it)."""
    return (checkpoints_root(run_dir) / checkpoint_name(step) / STATE_FILE).exists()


def how_to_resume(resume: str) -> str:
    """How a run stopped under ``checkpoint.resume=resume`` goes on from its newest checkpoint:
    the same command, unless it sets checkpoints aside ("never"); a named checkpoint is left for
    the run's own once it has one (dapo.config.run.CheckpointConfig.resume)."""
    return "checkpoint.resume=auto resumes" if resume == "never" else "the same command resumes"


def checkpoint_step(path: Path) -> int:
    """The step of checkpoint directory ``path`` (``step-000012`` -> 12)."""
    return int(CHECKPOINT_PATTERN.match(path.name).group(1))


def set_aside_checkpoints_after(run_dir: str | Path, step: int) -> Path | None:
    """Move the run's checkpoints of steps after ``step`` into ``checkpoints/abandoned-<time>-*/``:
    they belong to an attempt this run does not continue (it starts over, or goes on from an
    earlier checkpoint). There neither ``resume=auto`` nor ``keep_last`` sees them, so a crash
    cannot resume the abandoned attempt and retention cannot delete the new one's checkpoints in
    their favour; nothing is deleted. Returns the folder, or None when there were none.

    One rename each: a run killed partway would leave some under ``checkpoints/``, for the next
    ``resume=auto`` to resume. So the step kept up to is recorded first (:data:`SETTING_ASIDE`),
    :func:`list_checkpoints` leaves out the later ones while it is there, and the next set-aside
    (the next run's resume, or ``never``'s start) moves those left, whichever step it keeps."""
    root = checkpoints_root(run_dir)
    later = [path for path in _complete_checkpoints(run_dir) if checkpoint_step(path) > step]
    if not later:
        (root / SETTING_ASIDE).unlink(missing_ok=True)
        return None
    write_atomically(root / SETTING_ASIDE, str(step))
    folder = abandoned_folder(run_dir)
    for path in later:
        path.rename(folder / path.name)
    best = root / BEST_LINK
    if best.is_symlink() and os.readlink(best) in {path.name for path in later}:
        best.unlink()  # it would dangle (from_pretrained(best) failing) until link_best's next call
    fsync_dir(folder)  # a rename is durable once both directories are
    fsync_dir(root)
    (root / SETTING_ASIDE).unlink()
    fsync_dir(root)
    warnings.warn(
        f"moved {len(later)} checkpoint(s) after step {max(step, 0)} ({', '.join(p.name for p in later)}), of "
        f"an attempt this run does not continue, to {folder}; delete them when you no longer need them",
        stacklevel=2,
    )
    return folder


def abandoned_folder(run_dir: str | Path) -> Path:
    """A new ``checkpoints/abandoned-<time>-*/`` folder, for what an attempt this run does not continue
    left (its checkpoints, its logs): a new one even when two set-asides fall in one second."""
    root = checkpoints_root(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"{SET_ASIDE_PREFIX}{time.strftime('%Y%m%d-%H%M%S')}-", dir=root))
    os.chmod(folder, 0o777 & ~current_umask())  # mkdtemp's 0700 would hide them from the run directory's group
    return folder


def begin_checkpoint(run_dir: str | Path, step: int) -> Path:
    """A fresh, empty temporary directory to build checkpoint ``step`` in."""
    root = checkpoints_root(run_dir)
    if not root.is_dir():  # its entry in the run directory made durable too, not only what it holds
        root.mkdir(parents=True, exist_ok=True)
        fsync_dir(root.parent)
    tmp = root / f".tmp-{checkpoint_name(step)}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    return tmp


def link_checkpoint(source: Path, tmp: Path, leave_out: set[str]) -> None:
    """Fill ``tmp`` (from :func:`begin_checkpoint`) with hard links to the files of the published
    checkpoint ``source`` but those whose path in it matches a pattern of ``leave_out``
    (``trainer_state.pt``, ``policy/rng-rank*.pt``): a checkpoint built on it shares its shards
    rather than writing them again. Nothing in ``tmp`` may be written through a link: a published
    file would change. Copies where the filesystem has no hard links."""
    for folder, _, files in os.walk(source):
        relative = Path(folder).relative_to(source)
        (tmp / relative).mkdir(parents=True, exist_ok=True)
        for name in files:
            if any(fnmatch.fnmatchcase((relative / name).as_posix(), pattern) for pattern in leave_out):
                continue
            try:
                os.link(Path(folder) / name, tmp / relative / name)
            except OSError:  # (EPERM, EXDEV: a filesystem without links)
                shutil.copy2(Path(folder) / name, tmp / relative / name)


def publish_checkpoint(
    run_dir: str | Path, step: int, tmp: Path, trainer_state: dict[str, Any], config_yaml: str, keep_last: int,
    best_step: int | None = None,
) -> Path:
    """Add ``trainer_state`` and the config to ``tmp`` (whose other writers have all finished),
    fsync it, rename it into place as checkpoint ``step``, link ``checkpoints/best`` to checkpoint
    ``best_step`` (checkpoint.keep_best; :func:`link_best`), then delete all but the newest
    ``keep_last`` and that one."""
    root = checkpoints_root(run_dir)
    final = root / checkpoint_name(step)
    (tmp / "dapo_config.yaml").write_text(config_yaml)
    with open(tmp / STATE_FILE, "wb") as handle:
        torch.save(trainer_state, handle)
    modes_as_umask(tmp)  # readable as the run directory's other files are (safetensors writes 0600)
    fsync_tree(tmp)  # every file on disk before the rename publishes the checkpoint
    if final.exists():  # re-saving a step (e.g. final == last periodic): swap, then drop the old
        stale = root / f".old-step-{step:06d}-{os.getpid()}"
        final.rename(stale)
        tmp.rename(final)
        shutil.rmtree(stale, ignore_errors=True)
    else:
        tmp.rename(final)
    try:
        fsync_dir(root)
    except OSError as error:  # the checkpoint is in place: only a power loss before the kernel's own flush undoes it
        warnings.warn(f"checkpoint {final.name} is written, but flushing {root} to disk failed ({error}); a power "
                      "loss in the next seconds could lose it", stacklevel=2)
    link_best(run_dir, best_step)
    for old in list_checkpoints(run_dir)[:-keep_last]:
        if best_step is not None and old.name == checkpoint_name(best_step):
            continue
        # renamed first (atomically) to a name the next start cleans up: a kill during the delete
        # must not leave gigabytes that no checkpoint listing sees
        doomed = root / f".tmp-{old.name}-deleting-{os.getpid()}"
        try:
            old.rename(doomed)
        except OSError as error:  # checkpoint `step` is published: an old one left is no reason to stop the run
            warnings.warn(f"checkpoint {final.name} is written, but removing the older {old.name} failed ({error}); "
                          "it stays (checkpoint.keep_last)", stacklevel=2)
            continue
        shutil.rmtree(doomed, ignore_errors=True)
    return final


def checkpoint_name(step: int) -> str:
    """The directory name of checkpoint ``step`` (12 -> ``step-000012``)."""
    return f"step-{step:06d}"


def link_best(run_dir: str | Path, best_step: int | None) -> None:
    """Point the symbolic link ``checkpoints/best`` at checkpoint ``best_step`` (replaced
    atomically), or remove it when there is none, or that checkpoint is not in the run's
    checkpoints (set aside by a resume from an earlier one)."""
    root = checkpoints_root(run_dir)
    link, target = root / BEST_LINK, None if best_step is None else checkpoint_name(best_step)
    if link.exists() and not link.is_symlink():  # a copy that followed the link (cp -rL, rsync -L, a bucket)
        warnings.warn(f"{link} is a directory, not the link checkpoint.keep_best keeps (a copy of the run that "
                      f"followed it?): left as it is; the best checkpoint is {target or 'none yet'}", stacklevel=2)
        return
    try:
        if target is None or not (root / target).is_dir():
            link.unlink(missing_ok=True)
            return
        if link.is_symlink() and os.readlink(link) == target:
            return
        fresh = root / f".tmp-{BEST_LINK}-{os.getpid()}"  # (a killed run's is removed at the next start)
        fresh.unlink(missing_ok=True)
        fresh.symlink_to(target)  # relative: it still holds once the run directory is moved or copied
        fresh.replace(link)
        fsync_dir(root)
    except OSError as error:  # (a file system without symbolic links): the checkpoint is kept all the same
        warnings.warn(f"linking {link} to {target} failed ({error}); that checkpoint is kept from "
                      "checkpoint.keep_last's rotation all the same", stacklevel=2)


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    model: Any,
    tokenizer: Any,
    trainer_state: dict[str, Any],
    config_yaml: str,
    keep_last: int,
    best_step: int | None = None,
) -> Path:
    """Write checkpoint ``step`` of one process (``model`` whole in memory) atomically, then
    delete all but the newest ``keep_last`` and ``best_step`` (:func:`publish_checkpoint`)."""
    tmp = begin_checkpoint(run_dir, step)
    save_hf_model(tmp, model, tokenizer)
    return publish_checkpoint(run_dir, step, tmp, trainer_state, config_yaml, keep_last, best_step)


def load_model_weights(model: torch.nn.Module, checkpoint_dir: str | Path) -> None:
    """Load the safetensors weights of a checkpoint (single file or sharded) into ``model``."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    root = Path(checkpoint_dir)
    files = sorted(root.glob("model*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{root} holds no model*.safetensors weights")
    first = next(model.parameters())
    weights: dict[str, torch.Tensor] = {}
    for file in files:
        try:
            weights.update(load_file(str(file), device=str(first.device)))
        except SafetensorError as error:  # a checkpoint copied in part: its file, in one line
            raise DamagedCheckpointError(f"cannot read {file}: damaged or incomplete ({error}; copied in part?)",
                                         root) from error
    if set(weights) - set(model.state_dict()):
        # save_pretrained wrote some weights under their on-disk names (a MoE's experts, fused in
        # memory, are written one by one): transformers' own loader converts them back
        from transformers import AutoModelForCausalLM

        del weights
        loaded = AutoModelForCausalLM.from_pretrained(root, dtype=first.dtype, config=model.config)
        weights = {name: tensor.to(first.device) for name, tensor in loaded.state_dict().items()}
    load_full_weights(model, weights, f"checkpoint {root}")


def load_full_weights(model: torch.nn.Module, weights: dict[str, torch.Tensor], source: str) -> None:
    """Load a full (unsharded) state dict into ``model``: every key must match, except a tied
    output layer that the weights may omit."""
    missing, unexpected = model.load_state_dict(weights, strict=False)
    really_missing = sorted(set(missing) - tied_duplicates(model))
    if unexpected or really_missing:
        raise RuntimeError(f"{source} does not match the model: missing {really_missing}, unexpected {unexpected}")
    if getattr(model.config, "tie_word_embeddings", False):
        model.tie_weights()


# What every trainer_state.pt holds (TrainingLoop.state_dict and the policy's part; later keys have defaults)
REQUIRED_STATE_KEYS = frozenset({"policy", "step", "next_group_id", "sampler", "rng"})


def load_trainer_state(checkpoint_dir: str | Path, peek: bool = False, complete: bool = False) -> dict[str, Any]:
    """A checkpoint's ``trainer_state.pt``; ``peek``: memory-mapped, so that reading a field does
    not read the AdamW state it may hold (gigabytes for a large one-process policy). One that is no
    dict, or (``complete``: for a resume) lacks one of :data:`REQUIRED_STATE_KEYS`, is a
    :class:`DamagedCheckpointError` (a resume stopped by a KeyError said nothing of what to do)."""
    path = Path(checkpoint_dir) / STATE_FILE
    if not path.exists():
        raise FileNotFoundError(f"{checkpoint_dir} is not a dapo-rl checkpoint (no {STATE_FILE})")
    state = load_checkpoint_file(path, checkpoint_dir, mmap=peek)
    # overwritten, another tool's: damaged, with which checkpoint to resume instead
    if not isinstance(state, dict):
        raise DamagedCheckpointError(f"{path} is no dapo-rl trainer state (a {type(state).__name__}, not a dict)",
                                     Path(checkpoint_dir))
    if complete and (missing := sorted(REQUIRED_STATE_KEYS - set(state))):
        raise DamagedCheckpointError(f"{path} is no dapo-rl trainer state (no {', '.join(missing)})",
                                     Path(checkpoint_dir))
    return state


def load_checkpoint_file(path: Path, checkpoint_dir: str | Path, mmap: bool = False) -> Any:
    """One of a checkpoint's ``torch.save`` files (plain values and tensors only); a damaged one
    is a :class:`DamagedCheckpointError` naming it, which says which checkpoint to resume instead."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except PermissionError:
        raise  # (not damaged: its message names the file)
    except (RuntimeError, EOFError, OSError, ValueError, pickle.UnpicklingError) as error:  # a file cut short
        raise DamagedCheckpointError(f"cannot read {path}: damaged or incomplete ({load_error_detail(error)}; "
                                     "copied in part?)", Path(checkpoint_dir)) from error


def load_error_detail(error: BaseException) -> str:
    """What ``torch.load`` found wrong with a file, in a few words: for bytes that are no pickle,
    the unpickler's own finding, not the advice around it (to load with ``weights_only=False``,
    which runs whatever the bytes say: wrong for a damaged file, unsafe for a foreign one); for
    others their first sentence (miniz's goes on about what corrupts files)."""
    text = str(error)
    if "WeightsUnpickler error:" in text:
        found = text.split("WeightsUnpickler error:", 1)[1].strip().splitlines()
        return f"its bytes are no saved state: {found[0].strip() if found else 'unreadable'}"
    first = text.strip().splitlines()[0] if text.strip() else "no detail"
    return f"{type(error).__name__}: {first.split('. ')[0]}"
