"""What a user sees at the end of ``dapo train``, and ``dapo eval`` on any model directory."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from dapo.config import DAPOConfig
from dapo.data import PromptEncoder
from dapo.rewards import RewardScorer
from dapo.rollout import create_engine
from dapo.trainer.evaluate import evaluate, unique_problems
from dapo.trainer.loop import TrainSummary
from dapo.trainer.metrics import read_metrics
from dapo.trainer.setup import (
    load_model_and_tokenizer,
    load_run_data,
    make_sampling_params,
    resolve_device,
    stop_token_ids_of,
    vllm_options,
)


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
    device = resolve_device(cfg.trainer.device)
    model, tokenizer, model_path = load_model_and_tokenizer(cfg.model, device)
    data = load_run_data(cfg)
    if data.eval is None:
        raise FileNotFoundError("data.eval_files is empty: nothing to evaluate on")
    problems = unique_problems(data.eval.problems, cfg.eval.max_problems)
    encoded = PromptEncoder(tokenizer, cfg.data).encode(problems)
    engine = create_engine(cfg.rollout, model, tokenizer, model_path=str(model_path), **vllm_options(cfg, model))
    params = make_sampling_params(cfg, stop_token_ids_of(model, tokenizer), evaluation=True)
    with RewardScorer(cfg.reward) as scorer:
        return evaluate(engine, tokenizer, scorer, encoded.token_ids, problems, params).metrics
