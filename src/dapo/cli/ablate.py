"""``dapo ablate``: the DAPO paper's ablation, reproduced at small scale on the built-in task.

The paper (Table 1, AIME avg@32, Qwen2.5-32B) adds one technique at a time:
    naive GRPO 30 -> +overlong filtering 36 -> +clip-higher 38 -> +soft overlong punishment 41
    -> +token-level loss 42 -> +dynamic sampling 50.
Here every variant gets the same compute: the same budget of generated groups (prompts x G
responses), since generation dominates a step's cost. Dynamic sampling spends part of its budget
on groups it filters out, so it makes fewer optimizer updates from the same generation.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from dapo.config import builtin_config_path, load_config

# Cumulative, in the paper's order; each entry lists the overrides that turn its technique on.
VARIANTS: list[tuple[str, list[str]]] = [
    ("naive GRPO", [
        "algorithm.clip_ratio_high=0.2",
        "algorithm.loss_agg_mode=seq-mean-token-mean",
        "algorithm.dynamic_sampling=false",
        "algorithm.overlong_filtering=false",
        "algorithm.overlong_soft_punishment=false",
    ]),
    ("+ overlong filtering", ["algorithm.overlong_filtering=true"]),
    ("+ clip-higher", ["algorithm.clip_ratio_high=0.28"]),
    ("+ soft overlong punishment", ["algorithm.overlong_soft_punishment=true"]),
    ("+ token-level loss", ["algorithm.loss_agg_mode=token-mean"]),
    ("+ dynamic sampling (DAPO)", ["algorithm.dynamic_sampling=true"]),
]

# The built-in task with a tight length limit: a typical correct trace is 25-34 tokens, so the
# long tail (wrong, rambling responses) is truncated at 40 (overlong shaping acts), soft
# punishment starts above 34 (typical correct answers are untouched, as in the paper), lengths
# vary (the loss aggregation acts) and many groups are all-correct or all-wrong (dynamic sampling).
ABLATION_TASK = [
    "rollout.max_response_length=40",
    "algorithm.overlong_buffer_len=6",
    "eval.k=4",
    "eval.max_problems=100",
    "logging.progress=false",
    "logging.tensorboard=false",
    "checkpoint.every_steps=0",
    "eval.every_steps=0",
    "eval.before_training=false",
]


@dataclass
class RunCurve:
    variant: str
    seed: int
    generated: list[float] = field(default_factory=list)  # cumulative generated groups at each eval
    accuracy: list[float] = field(default_factory=list)  # held-out avg@k at each eval
    steps: list[int] = field(default_factory=list)  # training step of each entropy value
    entropy: list[float] = field(default_factory=list)


def run_variant(name: str, overrides: list[str], seed: int, steps: int, output_dir: Path, evals: int) -> RunCurve:
    """Train one variant for the compute of ``steps`` plain steps, evaluating ``evals`` times."""
    from dapo.trainer import Trainer

    run_dir = output_dir / f"{name.strip('+ ').replace(' ', '_').replace('(', '').replace(')', '')}-seed{seed}"
    cfg = load_config(
        [builtin_config_path("default")],
        ABLATION_TASK + overrides + [f"trainer.seed={seed}", f"output_dir={run_dir}", "checkpoint.resume=never",
                                     f"trainer.total_steps={steps * 20}"],
    )
    trainer = Trainer(cfg)
    budget = steps * cfg.trainer.prompts_per_step
    key = f"eval/avg@{cfg.eval.k}"
    curve = RunCurve(name, seed, [0.0], [trainer.evaluate()[key]])
    generated, next_eval = 0.0, budget / evals
    while generated < budget:
        metrics = trainer.step_once()
        generated += metrics["sampling/groups_generated"]
        if "actor/entropy" in metrics:
            curve.steps.append(trainer.step)
            curve.entropy.append(metrics["actor/entropy"])
        if generated >= next_eval or generated >= budget:
            metrics.update(trainer.evaluate())
            curve.generated.append(generated)
            curve.accuracy.append(metrics[key])
            next_eval += budget / evals
        trainer.state.log(trainer.step, metrics)
    trainer.state.close()
    trainer.scorer.close()
    return curve


def summarise(curves: list[RunCurve]) -> str:
    """Markdown table: final and best held-out avg@k per variant, mean +- std over seeds."""
    lines = ["| variant | final avg@k | best avg@k | training steps | seeds |", "|---|---|---|---|---|"]
    for name, _ in VARIANTS:
        runs = [c for c in curves if c.variant == name]
        if not runs:
            continue
        final = [c.accuracy[-1] for c in runs]
        best = [max(c.accuracy) for c in runs]
        steps = [len(c.entropy) for c in runs]

        def fmt(values: list[float]) -> str:
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            return f"{statistics.mean(values):.1%} ± {spread:.1%}"

        lines.append(f"| {name} | {fmt(final)} | {fmt(best)} | {statistics.mean(steps):.0f} | {len(runs)} |")
    return "\n".join(lines) + "\n"


def plot(curves: list[RunCurve], output: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (acc_ax, ent_ax) = plt.subplots(1, 2, figsize=(14, 5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (name, _) in enumerate(VARIANTS):
        for run_index, curve in enumerate(c for c in curves if c.variant == name):
            label = name if run_index == 0 else None
            acc_ax.plot(curve.generated, curve.accuracy, color=colors[index % len(colors)], marker="o", label=label, alpha=0.8)
            ent_ax.plot(curve.steps, curve.entropy, color=colors[index % len(colors)], label=label, alpha=0.8)
    acc_ax.set(xlabel="generated groups (compute)", ylabel="held-out avg@k", title="accuracy vs compute")
    ent_ax.set(xlabel="training step", ylabel="entropy (nats/token)", title="policy entropy")
    for ax in (acc_ax, ent_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(output, dpi=90)
    plt.close(fig)


def run_ablation(seeds: int, steps: int, output_dir: str, overrides: list[str], evals: int = 4) -> str:
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    curves: list[RunCurve] = []
    active: list[str] = []
    for name, variant_overrides in VARIANTS:
        active = active + variant_overrides
        for seed in range(seeds):
            curve = run_variant(name, active + list(overrides), seed, steps, out, evals)
            curves.append(curve)
            print(f"{name:28s} seed {seed}: avg@k {curve.accuracy[0]:.1%} -> {curve.accuracy[-1]:.1%}", flush=True)
    table = summarise(curves)
    (out / "results.md").write_text(table)
    (out / "curves.json").write_text(json.dumps([c.__dict__ for c in curves]))
    plot(curves, out / "ablation.png")
    print(table)
    print(f"wrote {out / 'results.md'} and {out / 'ablation.png'}")
    return table
