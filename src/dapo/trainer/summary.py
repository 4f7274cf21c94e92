"""What a user sees at the end of ``dapo train``, and ``dapo eval`` on any model directory."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from dapo.config import DAPOConfig
from dapo.rewards import RewardScorer
from dapo.trainer.evaluate import evaluate_held_out
from dapo.trainer.loop import TrainSummary
from dapo.trainer.metrics import read_metrics
from dapo.trainer.setup import build_run


def print_summary(summary: TrainSummary) -> None:
    """Held-out accuracy before and after training, side by side."""
    before = summary.eval_before
    if before is None:  # resumed run: the baseline was logged by the first attempt
        evals = [m for m in read_metrics(summary.run_dir) if any(k.startswith("eval/avg@") for k in m)]
        before = {k: v for k, v in evals[0].items() if k.startswith("eval/")} if evals and evals[0]["step"] == 0 else None
    after = summary.eval_after or {}
    table = Table(title=f"dapo-rl: {summary.steps} steps in {summary.seconds:.0f} s, run dir {summary.run_dir}")
    table.add_column("held-out metric")
    table.add_column("before", justify="right")
    table.add_column("after", justify="right")
    for key in sorted(set(before or {}) | set(after)):
        fmt = "{:.1%}" if "@" in key or "rate" in key else "{:.1f}"
        table.add_row(key, fmt.format(before[key]) if before and key in before else "-",
                      fmt.format(after[key]) if key in after else "-")
    Console().print(table)


def evaluate_model(cfg: DAPOConfig) -> dict[str, float]:
    """avg@k / pass@k / maj@k of ``cfg.model.path`` (an HF directory or checkpoint) on data.eval_files."""
    run = build_run(cfg)
    with RewardScorer(cfg.reward) as scorer:
        return evaluate_held_out(cfg, run, scorer).metrics
