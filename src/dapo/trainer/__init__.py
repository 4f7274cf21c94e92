"""The DAPO trainer: the loop (``loop``), its policy worker, sampler, checkpoints and metrics.

The names below are imported on first use (PEP 562): a process that needs one light module of
the package (``dapo.trainer.allocator``, a rank's worker) does not pay for the loop's imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dapo.trainer.loop import Trainer, TrainSummary
    from dapo.trainer.summary import evaluate_model, print_summary

__all__ = ["TrainSummary", "Trainer", "evaluate_model", "print_summary"]

_HOME = {"Trainer": "loop", "TrainSummary": "loop", "evaluate_model": "summary", "print_summary": "summary"}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(f"dapo.trainer.{_HOME[name]}"), name)
    raise AttributeError(f"module 'dapo.trainer' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
