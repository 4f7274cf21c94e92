"""Where ``dapo eval`` saves an evaluation: beside a run's checkpoint, or under runs/eval/."""

from __future__ import annotations

from pathlib import Path


def earlier_evaluation(save_dir: Path) -> list[str]:
    """The files of an earlier ``dapo eval`` in ``save_dir``, which an evaluation saved there replaces."""
    from dapo.trainer.summary import EVAL_OUTPUTS

    return [name for name in EVAL_OUTPUTS if (save_dir / name).exists()]


def default_eval_dir(model: Path, is_checkpoint: bool) -> Path:
    """RUN_DIR/eval/step-N for a run's checkpoint RUN_DIR/checkpoints/step-N, else runs/eval/<name>;
    where an earlier evaluation is saved there (another k, other data), the first of <dir>-2, -3, ...
    that holds none: a second ``dapo eval`` of a checkpoint wrote over the first one's samples."""

    if is_checkpoint and model.resolve().parent.name == "checkpoints":
        first = model.resolve().parent.parent / "eval" / model.resolve().name
    else:
        first = Path("runs") / "eval" / (model.name or "model")
    candidate, number = first, 1
    while earlier_evaluation(candidate):
        number += 1
        candidate = first.with_name(f"{first.name}-{number}")
    return candidate
