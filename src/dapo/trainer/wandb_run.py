"""The Weights & Biases run a run directory logs to (``logging.wandb=true``)."""

from __future__ import annotations

import json
import uuid
import warnings
from pathlib import Path
from typing import Any

from dapo.durable import write_atomically
from dapo.errors import UserError

WANDB_RUN_FILE = "wandb_run.json"  # in the run directory: the W&B run this run logs to, and its group
# Every row's x-axis. Not wandb.log's step=: a resumed W&B run's steps start after its last one and
# a row logged at that step itself is dropped, which lost the evaluation of the step resumed at
# (the final one after a stop in it; an owed periodic one). The rows' own counter (_step) is W&B's.
STEP_METRIC = "trainer/step"


def open_wandb_run(run_dir: Path, project: str, config: dict, resumed_at: int | None, abandoned: list[int]) -> Any:
    """The W&B run of a run directory; every run directory's runs share one W&B group, an attempt
    that starts over (``resumed_at`` None) too. A resume goes on in the run it logged to when that
    run holds nothing the resume drops; otherwise W&B, which cannot delete logged rows, would show
    the abandoned points beside those logged again, so the attempt logs to a new run in the group,
    and says so (also when an attempt without W&B dropped them: :func:`retire_wandb_run`). Rows are
    plotted against :data:`STEP_METRIC`. None (with a warning) when wandb is not installed; a
    damaged ``wandb_run.json`` is an error naming it."""
    try:
        import wandb
    except ImportError:
        warnings.warn("logging.wandb=true but wandb is not installed; pip install wandb", stacklevel=3)
        return None
    path = run_dir / WANDB_RUN_FILE
    saved = _saved_run(path)
    group = saved["group"] if saved else f"{run_dir.name}-{uuid.uuid4().hex[:8]}"
    if saved and saved["id"] and resumed_at is not None and not abandoned:
        run = wandb.init(project=project, config=config, dir=str(run_dir), id=saved["id"], resume="allow", group=group)
    else:
        if saved and saved["id"]:
            held = (f"steps {abandoned[0]}-{abandoned[-1]} of the attempt this resume abandons" if resumed_at is not None
                    else "the attempt this run starts over from")
            warnings.warn(f"W&B run {saved['id']} holds {held}, and W&B cannot rewrite them: logging to a new run in "
                          f"W&B group {group!r}", stacklevel=3)
        elif saved and saved["retired"]:
            first, last = saved["abandoned"]
            warnings.warn(f"W&B run {saved['retired']} may hold steps {first}-{last}, which an attempt logging without "
                          f"W&B abandoned, and W&B cannot rewrite them: logging to a new run in W&B group {group!r}",
                          stacklevel=3)
        run = wandb.init(project=project, config=config, dir=str(run_dir), group=group)
    write_atomically(path, json.dumps({"id": run.id, "group": group}) + "\n")
    run.define_metric(STEP_METRIC)
    run.define_metric("*", step_metric=STEP_METRIC)
    return run


def retire_wandb_run(run_dir: Path, abandoned: list[int]) -> None:
    """An attempt logging without W&B (``logging.wandb=false``) dropped the rows of steps
    ``abandoned`` (its resume went back before them, or it started over): the run directory's W&B
    run may hold them, so the next attempt with W&B must not go on in it. Its id is set aside in
    ``wandb_run.json`` (the group is kept); nothing happens when there is no such run."""
    path = run_dir / WANDB_RUN_FILE
    try:
        saved = _saved_run(path)
    except UserError:  # (said when an attempt with W&B reads it: this one logs without)
        return
    if saved and saved["id"]:
        write_atomically(path, json.dumps({"group": saved["group"], "retired": saved["id"],
                                           "abandoned": [abandoned[0], abandoned[-1]]}) + "\n")


def _saved_run(path: Path) -> dict[str, Any] | None:
    """``wandb_run.json``: the W&B run (id, None once retired) and group a run directory logs to."""
    try:
        saved = json.loads(path.read_text()) if path.is_file() else None
        if saved is None:
            return None
        return {"id": None if saved.get("id") is None else str(saved["id"]), "group": str(saved["group"]),
                "retired": saved.get("retired"), "abandoned": [int(s) for s in saved.get("abandoned", [0, 0])][:2]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise UserError(f"{path} is damaged ({type(error).__name__}: {error}): it names the W&B run this run logs "
                        "to; delete it to log to a new W&B run") from error
