"""What a user sees at the end of ``dapo train``, and ``dapo eval`` on any model directory."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from dapo.config import ConfigError, DAPOConfig, save_config
from dapo.durable import write_atomically
from dapo.rewards import RewardScorer
from dapo.rewards.user_functions import RewardFunctionError
from dapo.trainer.allocator import apply_process_settings
from dapo.trainer.evaluate import NO_EVAL_DATA, EvalResult, evaluate_held_out
from dapo.trainer.loop import TrainSummary
from dapo.trainer.metrics import read_metrics
from dapo.trainer.run_state import problem_progress
from dapo.trainer.scoring import data_samples
from dapo.trainer.setup import build_run, eval_top_k

# the table's caption where avg@k is logged and maj@k is not
NO_VOTES = ("no maj@k: no answers were extracted to vote on (reward.verifier_weight=0, and the reward function "
            "correctness comes from returns no \"pred\")")


def _eval_metrics(row: dict) -> dict[str, float]:
    return {k: v for k, v in row.items() if k.startswith("eval/")}


def print_summary(summary: TrainSummary) -> None:
    """Held-out accuracy before and after training, side by side."""
    before, after = summary.eval_before, summary.eval_after
    if before is None or (after is None and summary.steps == summary.resumed_at):
        # a resumed run: the baseline was logged by the first attempt; one resumed from its final
        # checkpoint trains and evaluates nothing, its final evaluation logged at its last step
        evals = [m for m in read_metrics(summary.run_dir) if any(k.startswith("eval/avg@") for k in m)]
        if before is None:
            before = _eval_metrics(evals[0]) if evals and evals[0]["step"] == 0 else None
        if after is None and summary.steps == summary.resumed_at:
            after = next((_eval_metrics(m) for m in reversed(evals) if m["step"] == summary.steps), None)
    after = after or {}
    steps = f"{summary.steps} step{'s' if summary.steps != 1 else ''}"
    seconds = f"{summary.seconds:.{0 if summary.seconds >= 9.95 else 1}f} s"  # (a quick run's: not "in 0 s")
    this_attempt = (f"{steps} in {seconds}" if not summary.resumed_at else
                    f"{steps} ({summary.steps - summary.resumed_at} in {seconds} after the "
                    f"resume at step {summary.resumed_at})")
    if summary.updates == 0 and summary.steps > summary.resumed_at:  # every step skipped: the weights are unchanged
        this_attempt += ", no optimizer update (every step skipped its update: see the warnings above)"
    elif summary.skipped:
        this_attempt += (f", {summary.skipped} of {summary.updates + summary.skipped} optimizer updates skipped "
                         "(a non-finite loss or gradient norm: see the warnings above)")
    if not before and not after:  # data.eval_files=[]: no table of nothing
        Console().print(f"dapo-rl: {this_attempt}, run dir {summary.run_dir} (no held-out evaluation)")
        return
    evaluated = set(before or {}) | set(after)
    no_votes = any(k.startswith("eval/avg@") for k in evaluated) and not any("maj@" in k for k in evaluated)
    table = Table(title=f"dapo-rl: {this_attempt}, run dir {summary.run_dir}",
                  # (rather than a maj@k row that is silently missing)
                  caption=NO_VOTES if no_votes else None)
    table.add_column("held-out metric")
    table.add_column("before", justify="right")
    table.add_column("after", justify="right")
    for key in sorted(evaluated):
        # by the metric's own name, not the data_source inside eval/<data_source>/...: a source
        # named "curated" or "aime@24" must not print its num_problems as a percentage
        metric = key.rsplit("/", 1)[-1]
        fmt = ("{:.1%}" if "@" in metric or metric.endswith("_rate")
               else "{:.3f}" if metric == "score_mean" or (key.startswith("eval/reward/") and metric != "num_problems")
               else "{:.1f}")  # rewards: -1..1; (a data_source named "reward" has eval/reward/num_problems)
        table.add_row(key, fmt.format(before[key]) if before and key in before else "-",
                      fmt.format(after[key]) if key in after else "-")
    Console().print(table)
    if summary.best:
        Console().print(summary.best)


EVAL_OUTPUTS = ("generations.jsonl", "metrics.json", "config.yaml")  # what evaluate_model saves


def evaluate_model(cfg: DAPOConfig, save_dir: str | Path | None = None, progress: bool = True) -> EvalResult:
    """avg@k / pass@k / maj@k of ``cfg.model.path`` (an HF directory or checkpoint) on data.eval_files,
    saying which data, how many problems and which sampling. With ``save_dir``: every sample to
    ``generations.jsonl``, the metrics to ``metrics.json`` (with the eval data's ``data/eval_*``
    counts and ``eval.max_problems``) and the config used to ``config.yaml``.
    Where the scorer that decides correctness failed on every sample (no @k), raises
    :class:`~dapo.rewards.user_functions.RewardFunctionError` saying why, after saving."""
    apply_process_settings(cfg.trainer.num_threads, cfg.trainer.keep_freed_memory)  # (as the run's own evaluations)
    run = build_run(cfg, train_data=False)
    if run.data.eval is None:
        raise ConfigError(NO_EVAL_DATA)
    print(run.data.eval.describe("eval"))
    if cfg.resources.world_size > 1:  # a multi-rank run's config: its ranks are not started here
        print(f"note: the evaluation runs in this one process, not on the config's {cfg.resources.world_size} ranks; "
              "a multi-rank run's own evaluations seeded each problem as this one does (native and vLLM engines; "
              "not hf), but its engines batched the problems otherwise, and logits that round otherwise can "
              "sample otherwise: its avg@k may differ from this one's by sampling noise, not by the weights")
    e = cfg.eval
    top_k = eval_top_k(cfg)
    # only when it leaves problems out: "the first 500" of 30 problems says 500 are evaluated
    limit = f", the first {e.max_problems}" if 0 < e.max_problems < run.data.eval.num_problems("eval") else ""
    print(f"evaluating {cfg.model.path}{limit}: k={e.k} samples per problem, temperature {e.temperature}, "
          f"top_p {e.top_p}{f', top_k {top_k}' if top_k > 0 else ''}, "
          f"at most {cfg.rollout.max_response_length} tokens, {cfg.rollout.engine} engine")
    with RewardScorer(cfg.reward) as scorer, problem_progress(None, progress) as on_progress:
        scorer.check_data(data_samples(cfg, None, run.data.eval))
        result = evaluate_held_out(cfg, run, scorer, on_progress)
    if save_dir is not None:
        out = Path(save_dir)
        out.mkdir(parents=True, exist_ok=True)
        samples_file, metrics_file, config_file = (out / name for name in EVAL_OUTPUTS)
        write_atomically(samples_file, "".join(json.dumps(r) + "\n" for r in result.samples))
        # what the files held and what was dropped before the first max_problems were taken (the
        # sampling settings are config.yaml's)
        summary = {"model": cfg.model.path, "eval_files": cfg.data.eval_files, "num_problems": result.num_problems,
                   "max_problems": cfg.eval.max_problems, "data": run.data.eval.counts("eval"), "k": result.k,
                   "metrics": result.metrics}
        write_atomically(metrics_file, json.dumps(summary, indent=2) + "\n")
        save_config(cfg, config_file)
    if result.unscored:  # after saving: the samples show what the failing scorer was given
        raise RewardFunctionError(result.unscored)
    return result
