"""Which checkpoint a run resumes from (``checkpoint.resume``): the run's newest, a named one, or,
when the run has gone on from the named one since (a rerun of the same command), the run's newest."""

from __future__ import annotations

import os
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from dapo.config import ModelConfig
from dapo.errors import DamagedCheckpointError
from dapo.trainer.checkpoint import (
    SET_ASIDE_PREFIX,
    checkpoint_step,
    list_checkpoints,
    load_trainer_state,
)
from dapo.trainer.run_dir import STATE_FILE, checkpoints_root, saved_section


@dataclass(frozen=True)
class ResumePoint:
    """The checkpoint a run resumes from, and how it was chosen."""

    path: Path
    # chosen by the run rather than named by the user: checkpoint.resume=auto, or a rerun of a
    # command naming where the run started, redirected to the run's own newest checkpoint
    automatic: bool


def resolve_resume(resume: str, run_dir: str | Path) -> ResumePoint | None:
    """``checkpoint.resume``: "auto" -> newest checkpoint of the run (or None), "never" -> None,
    anything else -> that checkpoint directory, which must exist, unless the run has gone on from it.

    A path outside the run's own checkpoints is where the run STARTS: once the run has
    checkpoints of its own that started from it (their ``started_from``), the newest of them is
    resumed instead, so that rerunning the same command after a crash goes on rather than back.
    A checkpoint of the run itself is a deliberate step back, honoured (the later ones are set
    aside) once: when the run has gone back to it and checkpointed since (their ``went_back_to``),
    a rerun of the command (a requeued job) resumes the newest instead, as above. Either holds
    after the named checkpoint is deleted (:func:`newest_descendant`)."""
    if resume == "never":
        return None
    own = list_checkpoints(run_dir)
    if resume == "auto":
        return ResumePoint(own[-1], automatic=True) if own else None
    path = Path(resume).expanduser()
    if (newest := newest_descendant(path, run_dir)) is not None:
        why = ("this run went back to it and has checkpointed since (resume a copy of it to go back again)"
               if is_own_checkpoint(path, run_dir) else "it started this run, which has checkpoints of its own since")
        warnings.warn(f"checkpoint.resume={resume!r}: {why}: resuming its newest, {newest}", stacklevel=2)
        return ResumePoint(newest, automatic=True)
    if not (path / STATE_FILE).exists():
        raise FileNotFoundError(resume_path_problem(resume))
    return ResumePoint(path, automatic=False)


def newest_descendant(path: Path, run_dir: str | Path) -> Path | None:
    """The run's newest checkpoint, if it descends from checkpoint ``path``: the run went back to
    ``path`` (one of its own) or started from it (another run's) and has checkpointed since (the
    newest records it as ``went_back_to`` / ``started_from``). ``path`` may be gone by then:
    checkpoint.keep_last deletes the run's older checkpoints, another run's the one this run
    started from, and a requeued job names it still."""
    own = list_checkpoints(run_dir)
    if not own or own[-1].resolve() == path.resolve():
        return None
    try:
        recorded = load_trainer_state(own[-1], peek=True)
    except DamagedCheckpointError:  # (what the named checkpoint is resumed for: it is set aside)
        return None
    if is_own_checkpoint(path, run_dir):
        return own[-1] if records_checkpoint(recorded.get("went_back_to"), path, run_dir) else None
    return own[-1] if recorded.get("started_from") in (str(path.resolve()), str(named_path(path))) else None


def named_path(path: Path) -> Path:
    """``path`` absolute, the links of the folders above it resolved but not its own name: a run
    started from, or gone back to, ``checkpoints/best`` (checkpoint.keep_best's link, which moves
    as the run goes on) records that name, so that a rerun of the command is known as one."""
    absolute = Path(os.path.abspath(path.expanduser()))
    return absolute.parent.resolve() / absolute.name


def checkpoint_record(path: Path, run_dir: str | Path) -> str:
    """How a checkpoint's ``went_back_to`` names checkpoint ``path`` of the run: relative to the run
    directory (``checkpoints/step-000003``), so that the record still names it once the run
    directory is moved or copied; absolute for a path outside the run directory."""
    named = named_path(path)
    try:
        return named.relative_to(Path(run_dir).resolve()).as_posix()
    except ValueError:
        return str(named)


def records_checkpoint(recorded: str | None, path: Path, run_dir: str | Path) -> bool:
    """Whether ``recorded``, a checkpoint's ``went_back_to`` (:func:`checkpoint_record`), names the
    run's checkpoint ``path``. A record from before they were relative is the absolute
    path of a checkpoint of the run where it was then: it is compared by its part under the
    run's ``checkpoints/`` (``step-000003``, ``abandoned-*/step-000003``), which moving or copying
    the run directory keeps."""
    if not recorded:
        return False
    if not Path(recorded).is_absolute():  # (a record of checkpoints/best before its name was kept: its target)
        return recorded in (checkpoint_record(path, run_dir), checkpoint_record(path.resolve(), run_dir))
    if recorded in (str(path.resolve()), str(named_path(path))):
        return True
    parts = Path(recorded).parts
    if "checkpoints" not in parts:
        return False
    tail = parts[len(parts) - parts[::-1].index("checkpoints"):]
    try:
        return path.resolve().relative_to(checkpoints_root(run_dir).resolve()).parts == tail
    except ValueError:
        return False


def resume_path_problem(resume: str, run_dir: str | Path | None = None) -> str | None:
    """Why ``checkpoint.resume`` (not auto or never) names no checkpoint to resume from, or None
    (also where it is gone but ``run_dir`` has gone on from it: :func:`newest_descendant`)."""
    path = Path(resume).expanduser()
    if (path / STATE_FILE).is_file() or (run_dir is not None and newest_descendant(path, run_dir) is not None):
        return None
    return (f"checkpoint.resume={resume!r} is not auto, never or a checkpoint directory (none with a {STATE_FILE} "
            "is there)")


def resume_adapter_problem(resume: str, run_dir: str | Path, model: ModelConfig) -> str | None:
    """Why the checkpoint this run would resume from holds other LoRA adapters than ``model``
    (the run's ``model`` config section) asks for: of another rank or alpha, on other layers, or
    adapters where it trains every weight, or the other way round; None when they agree (or the
    checkpoint saved no run config: the load says it then). From its ``dapo_config.yaml``, before
    Ray starts the ranks and they load the model (minutes for a 32B one); target lists that differ
    as written are compared by the layers they adapt, on the model built on the meta device."""
    try:
        with warnings.catch_warnings():  # the run says it again when it resumes
            warnings.simplefilter("ignore")
            point = resolve_resume(resume, run_dir)
    except Exception:  # noqa: BLE001 - unreadable or gone: the resume itself says how
        return None
    saved = saved_section(point.path, "model") if point is not None else {}
    if not saved:
        return None
    before, now = (_adapters_of(config) for config in (saved, asdict(model)))
    if before == now:
        return None
    layers = ""
    if before and now and [before[key] for key in _SIZE] == [now[key] for key in _SIZE]:
        layers = _layers_difference(point.path, model)
        if not layers:  # the same layers, or it cannot tell (None): the load compares them
            return None
    remedy = ("resume it with " + (" ".join(f"model.{key}={value}" for key, value in before.items()) if before
                                   else "model.lora_rank=0")
              + (", or start over: checkpoint.resume=never" + (" (or another output_dir)" if resume == "auto" else "")))
    said = (f"LoRA adapters of rank {before['lora_rank']}, alpha {before['lora_alpha']:g}, targets "
            f"{before['lora_target_modules']}" if before else "every weight trained (no LoRA adapters)")
    return f"cannot resume from {point.path}: it holds {said}, not what this run's model.lora_* ask{layers}; {remedy}"


_SIZE = ("lora_rank", "lora_alpha")


def _adapters_of(model: dict) -> dict:
    """The LoRA settings of a ``model`` config section, comparable (targets sorted), or {} without LoRA."""
    if not model.get("lora_rank"):
        return {}
    targets = model.get("lora_target_modules") or ["all-linear"]
    return {"lora_rank": model["lora_rank"], "lora_alpha": float(model.get("lora_alpha", 16.0)),
            "lora_target_modules": "[" + ",".join(sorted(targets)) + "]"}


def _layers_difference(checkpoint: Path, model: ModelConfig) -> str | None:
    """:func:`~dapo.lora.layers_difference` of the layers whose adapters ``checkpoint`` holds and
    those ``model.lora_target_modules`` adapt on the model built on the meta device (seconds, no
    weights read); None when either cannot be had."""
    import torch

    from dapo.lora import (
        ADAPTER_DIR,
        adapted_layers,
        apply_lora,
        layers_difference,
        saved_adapted_layers,
    )
    from dapo.trainer.setup import model_structure, resolve_model_path

    try:
        saved = saved_adapted_layers(checkpoint / ADAPTER_DIR)
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            structure = model_structure(resolve_model_path(model), model)
            apply_lora(structure, model.lora_rank, model.lora_alpha, model.lora_target_modules)
    except Exception:  # noqa: BLE001 - targets naming no layer, an unreadable model: the run says it
        return None
    return layers_difference(saved, adapted_layers(structure))


def is_set_aside(path: Path, run_dir: str | Path) -> bool:
    """Whether checkpoint ``path`` is one :func:`set_aside_checkpoints_after` moved away."""
    folder = path.resolve().parent
    return folder.name.startswith(SET_ASIDE_PREFIX) and folder.parent == checkpoints_root(run_dir).resolve()


def is_own_checkpoint(path: Path, run_dir: str | Path) -> bool:
    """Whether checkpoint ``path`` is one of the run's (set-aside ones in abandoned-*/ included)."""
    return checkpoints_root(run_dir).resolve() in path.resolve().parents


def damaged_checkpoint_remedy(damaged: Path, run_dir: str | Path) -> str:
    """What to do about checkpoint ``damaged``, which cannot be read: resume the run's checkpoint before
    it (the damaged one is then set aside), or, with none, start over or restore it."""
    own = [path for path in list_checkpoints(run_dir) if path.resolve() != damaged.resolve()]
    if not is_own_checkpoint(damaged, run_dir):
        return "Name another checkpoint in checkpoint.resume, or restore this one from a copy"
    earlier = [path for path in own if checkpoint_step(path) < checkpoint_step(damaged.resolve())]  # ("best": its target)
    if earlier:
        return (f"Resume from the checkpoint before it, checkpoint.resume={earlier[-1]} (the damaged one is then set "
                "aside), or restore it from a copy")
    return ("It is the run's only checkpoint: restore it from a copy, or start over with checkpoint.resume=never "
            "(it is then set aside)")
