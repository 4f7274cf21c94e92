"""The DAPO trainer: the loop (``loop``), its policy worker, sampler, checkpoints and metrics."""

from dapo.trainer.loop import Trainer, TrainSummary
from dapo.trainer.summary import evaluate_model, print_summary

__all__ = ["TrainSummary", "Trainer", "evaluate_model", "print_summary"]
