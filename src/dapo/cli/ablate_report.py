"""``dapo ablate``'s report: each run's curve and diagnostics (:class:`RunCurve`), the tables of
seed means (:func:`summarise`) and the figure (:func:`plot`).

Besides accuracy, each run reports what the techniques had to act on (run means of per-step
metrics): the truncated share (overlong filtering and soft punishment), groups without signal
(dynamic sampling), clip fractions (clip-higher), response lengths (token-level loss), entropy.
What was generated is averaged over every step, a step without a policy update included (see
:func:`run_mean`): before, such steps (every group without signal, under dynamic sampling) were
left out of every column, and the no-signal share read low for the runs that had most of them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# Per-step metrics averaged over a run: (column name, how to read one value from a step's
# metrics, None where the step has none, how to format the run means in the table).
DIAGNOSTICS: list[tuple[str, Callable[[dict[str, float]], float | None], str]] = [
    ("truncated", lambda m: m.get("rollout/truncation_rate"), ".1%"),
    ("no-signal groups", lambda m: m.get("sampling/filtered_ratio"), ".1%"),  # all-masked ones too
    ("clip-high frac", lambda m: m.get("actor/clip_frac_high"), ".2%"),
    ("clip-low frac", lambda m: m.get("actor/clip_frac_low"), ".2%"),
    ("response length", lambda m: m.get("rollout/response_length_mean"), ".2f"),
    ("entropy", lambda m: m.get("actor/entropy"), ".2f"),
]
# Columns measured by a policy update: a step without one has none (None), not a zero (it
# clipped no token, but of none; it measured no entropy). The others describe the step's
# generated responses, which every step has and whose compute every step spent.
UPDATE_COLUMNS = frozenset({"clip-high frac", "clip-low frac", "entropy"})


@dataclass
class RunCurve:
    """One run of one variant and seed: its held-out accuracy against compute, and per step what it
    generated and the diagnostics (saved as its ``curve.json``)."""

    variant: str
    seed: int
    generated: list[float] = field(default_factory=list)  # cumulative generated groups at each eval
    accuracy: list[float] = field(default_factory=list)  # held-out avg@k at each eval
    # Steps that updated the policy (at least one optimizer update; each makes
    # prompts_per_step / mini_batch_prompts of them): was `updates`, described as optimizer steps.
    trained_steps: int = 0
    optimizer_updates: int = 0  # optimizer updates made (actor/updates summed over the run)
    steps: list[int] = field(default_factory=list)  # every step of the run (each generates)
    step_groups: list[float] = field(default_factory=list)  # groups generated at each of those steps
    step_tokens: list[int] = field(default_factory=list)  # response tokens generated at each of those steps
    # DIAGNOSTICS at those steps; None where a step has no value (UPDATE_COLUMNS without an update)
    diagnostics: dict[str, list[float | None]] = field(default_factory=dict)

    @property
    def generated_groups(self) -> float:
        """The compute the run actually spent, in groups (its last step may pass the budget)."""
        return sum(self.step_groups)

    @property
    def generated_tokens(self) -> int:
        """The compute the run actually spent, in generated response tokens."""
        return sum(self.step_tokens)


def run_mean(curve: RunCurve, column: str) -> float | None:
    """A run's mean of a DIAGNOSTICS column, None when no step has a value. What was generated
    (truncated, no-signal groups, response length) over every step, weighted by the groups it
    generated: the share of all the run's generated groups or responses, a step that made no
    update (all its groups without signal) counted as the compute it spent. What an update
    measured (clip fractions, entropy) over the steps that updated, each step once."""
    values = curve.diagnostics.get(column, [])
    if column in UPDATE_COLUMNS:
        measured = [v for v in values if v is not None]
        return statistics.mean(measured) if measured else None
    weighted = [(v, w) for v, w in zip(values, curve.step_groups) if v is not None and w > 0]
    total = sum(w for _, w in weighted)
    return sum(v * w for v, w in weighted) / total if total else None


def variants_in_order(curves: list[RunCurve]) -> list[str]:
    """The variants of ``curves`` in the order their runs came (the ablation's, technique by technique)."""
    return list(dict.fromkeys(curve.variant for curve in curves))


def _mean_spread(values: list[float], fmt: str = ".1%") -> str:
    """Mean ± sample standard deviation (n - 1) over seeds; the value alone for one seed."""
    if len(values) == 1:
        return f"{values[0]:{fmt}}"
    return f"{statistics.mean(values):{fmt}} ± {statistics.stdev(values):{fmt}}"


def summarise(curves: list[RunCurve]) -> str:
    """Two markdown tables, mean ± std over seeds: held-out avg@k with the compute each run
    actually spent (groups and response tokens generated: a dynamic-sampling run's last step may
    pass the budget) and its steps (of them, those that updated the policy), and the run-mean
    diagnostics (:func:`run_mean`)."""
    accuracy = ["| variant | final avg@k | best avg@k | gain over base | generated groups | generated tokens "
                "| steps (updated) | seeds |",
                "|---|---|---|---|---|---|---|---|"]
    acted_on = ["| variant | " + " | ".join(column for column, _, _ in DIAGNOSTICS) + " |",
                "|---" * (len(DIAGNOSTICS) + 1) + "|"]
    for name in variants_in_order(curves):
        runs = [c for c in curves if c.variant == name]
        if not runs:
            continue
        final = [c.accuracy[-1] for c in runs]
        gain = [c.accuracy[-1] - c.accuracy[0] for c in runs]
        steps = f"{statistics.mean(len(c.steps) for c in runs):.0f} ({statistics.mean(c.trained_steps for c in runs):.0f})"
        accuracy.append(
            f"| {name} | {_mean_spread(final)} | {_mean_spread([max(c.accuracy) for c in runs])} | "
            f"{_mean_spread(gain)} | {_mean_spread([c.generated_groups for c in runs], '.0f')} | "
            f"{_mean_spread([c.generated_tokens for c in runs], '.0f')} | {steps} | {len(runs)} |"
        )
        cells = []
        for column, _, fmt in DIAGNOSTICS:
            run_means = [m for c in runs if (m := run_mean(c, column)) is not None]
            cells.append(_mean_spread(run_means, fmt) if run_means else "-")
        acted_on.append(f"| {name} | " + " | ".join(cells) + " |")
    return ("Mean ± sample standard deviation (n - 1) over seeds.\n\n" + "\n".join(accuracy)
            + "\n\nWhat the techniques act on (run means: truncated, no-signal groups and response "
            "length over every generated group, clip fractions and entropy over the steps that updated):\n\n"
            + "\n".join(acted_on) + "\n")


def _seed_mean(series: list[list[float]] | list[list[float | None]]) -> list[float]:
    """Element-wise mean over runs (of a series by training step), as long as the shortest run;
    over the runs with a value at that point (NaN, a gap in the plot, where none has one: a step
    without an update)."""
    length = min(len(s) for s in series)
    means = []
    for i in range(length):
        values = [s[i] for s in series if s[i] is not None]
        means.append(statistics.mean(values) if values else math.nan)
    return means


def _seed_mean_over_compute(generated: list[list[float]], accuracy: list[list[float]]) -> tuple[list[float], list[float]]:
    """Mean accuracy over runs against compute: each run's curve read (linearly interpolated)
    at every run's evaluation points up to the least compute any run reached. Runs are evaluated at
    different compute (a dynamic-sampling step can pass two evaluation points at once, giving a run
    fewer points): pairing their points by index averaged one seed's final accuracy with another's
    mid-run one."""
    import numpy as np

    end = min(points[-1] for points in generated)
    grid = sorted({x for points in generated for x in points if x <= end})
    means = np.mean([np.interp(grid, points, values) for points, values in zip(generated, accuracy, strict=True)], axis=0)
    return grid, means.tolist()


def plot(curves: list[RunCurve], output: Path, task: str) -> None:
    """2x2 figure, seed means per variant: accuracy vs compute, entropy, truncation, length vs step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dapo.cli.plot import save_figure

    fig, axes = plt.subplots(2, 2, figsize=(14, 9))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    panels = [("entropy", axes[0][1], "entropy (nats/token)"), ("truncated", axes[1][0], "truncated share"),
              ("response length", axes[1][1], "mean response length (tokens)")]
    names = variants_in_order(curves)
    for index, name in enumerate(names):
        runs = [c for c in curves if c.variant == name]
        if not runs:
            continue
        color = colors[index % len(colors)]
        axes[0][0].plot(*_seed_mean_over_compute([c.generated for c in runs], [c.accuracy for c in runs]),
                        color=color, marker="o", label=name)
        for column, ax, _ in panels:
            ax.plot(_seed_mean([c.steps for c in runs]), _seed_mean([c.diagnostics[column] for c in runs]),
                    color=color, label=name, alpha=0.85)
    axes[0][0].set(xlabel="generated groups (compute)", ylabel="held-out avg@k", title="accuracy vs compute")
    for column, ax, ylabel in panels:
        ax.set(xlabel="training step", ylabel=ylabel, title=column)
    for ax in axes.flat:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"dapo ablate --task {task}: seed means over {max(1, len(curves) // max(1, len(names)))} seeds")
    fig.tight_layout()
    save_figure(fig, output)
    plt.close(fig)
