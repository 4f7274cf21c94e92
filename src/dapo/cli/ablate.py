"""``dapo ablate``: the DAPO paper's ablation, reproduced at small scale on a built-in task.

The paper (Table 1, AIME avg@32, Qwen2.5-32B) adds one technique at a time:
    naive GRPO 30 -> +overlong filtering 36 -> +clip-higher 38 -> +soft overlong punishment 41
    -> +token-level loss 42 -> +dynamic sampling 50.
Here every variant gets the same compute: the same budget of generated groups (prompts x G
responses), since generation dominates a step's cost. Dynamic sampling spends part of its budget
on groups it filters out, so it makes fewer optimizer updates from the same generation. A run
ends with the step that reaches the budget, and a dynamic-sampling step generates whole rounds
(trainer.gen_prompts_per_round groups each) until its batch is full: its last step can pass the
budget (by up to ~15% at the sizes of docs/benchmarks.md's ablation). Stopping mid-step would leave a batch short, so each
run's actual compute, groups and response tokens generated, is reported next to its results.

A run that finished leaves its curve in ``<run dir>/curve.json`` with its config: rerunning the
same command (after a Ctrl-C, say) reuses every finished run whose config and built-in base model are unchanged and runs
the rest; ``--fresh`` reruns them all.

The report (tables, figure, what each column means): :mod:`dapo.cli.ablate_report`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dapo.cli.ablate_report import DIAGNOSTICS, RunCurve, plot, summarise
from dapo.cli.args import float32_on_this_cpu
from dapo.config import ConfigError, DAPOConfig, builtin_config_path, load_config
from dapo.config.loading import config_to_dict, parse_override, set_dotted, yaml_text
from dapo.durable import write_atomically
from dapo.errors import NonFiniteError, UserError
from dapo.rewards.user_functions import RewardFunctionError

# Cumulative, in the paper's order; each entry lists the overrides that turn its technique on. (So the
# last, "DAPO", keeps overlong filtering on; the recipes leave it off, as verl's public DAPO recipe.)
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

# Tasks to ablate on, each named after the built-in base model it starts from; its data is the
# task that model's recipe was SFT-ed on (data.builtin_* from the recipe: :func:`task_overrides`).
# The length limit puts the soft-punishment zone (L_max - L_cache, L_max] beyond every correct
# trace, as in the paper, so truncation and soft punishment catch only responses that ramble.
DEFAULT_TASK = "rare-trace"
ABLATION_TASKS: dict[str, list[str]] = {
    # 1-3 digit addition, but the base model guesses the sum directly in ~9 answers of 10 and
    # only seldom opens the far more accurate step-by-step trace ("Steps: ..."): as in reasoning
    # RL, the policy has to explore into a rare, longer strategy, and responses grow from ~16
    # to ~38 tokens as it does. Accuracy starts near 3%: at first 3 groups in 4 have no signal.
    "rare-trace": ["rollout.max_response_length=56", "algorithm.overlong_buffer_len=8"],
    # 1-2 digit +, -, *: from trivial (3+4, groups all-correct) to hard (2-digit products, mostly
    # all-wrong); correct traces run 10-47 tokens.
    "mixed": ["rollout.max_response_length=56", "algorithm.overlong_buffer_len=8"],
}


def task_overrides(task: str) -> list[str]:
    """The built-in model ``task`` names, the data its recipe was SFT-ed on, the task's limits."""
    if task not in ABLATION_TASKS:
        raise ValueError(f"unknown ablation task {task!r}; choose one of {sorted(ABLATION_TASKS)}")
    from dapo.builtin import BUILTIN_RECIPES  # lazy: torch is not needed to list the tasks

    return [f"model.path=builtin:{task}", *BUILTIN_RECIPES[task].data_overrides(), *ABLATION_TASKS[task]]


# Every task: mini-batches of 2 prompts give the paper's 16 gradient steps per rollout step, so
# the policy drifts from pi_old within a step and the clip range has ratios to act on; one
# evaluation seed for every run, so variants and seeds are compared on the same samples.
ABLATION_COMMON = [
    "trainer.mini_batch_prompts=2",
    # A constant lr (the ablation of docs/benchmarks.md was measured at 5e-5): the run ends on a generation
    # budget, so the embedded default's cosine decay would follow the step cap, not the run.
    "trainer.lr=5e-5",
    "trainer.lr_schedule=constant",
    "eval.k=4",
    "eval.max_problems=200",
    "eval.seed=0",
    "logging.progress=false",
    "logging.tensorboard=false",
    "checkpoint.every_steps=0",
    "eval.every_steps=0",
    "eval.before_training=false",
]

# Keys each run sets itself, after the user's overrides: the option that sets each instead.
ABLATION_OWNED_KEYS = {"trainer.seed": "--seeds (runs seeds 0..N-1)", "output_dir": "--output-dir",
                       "checkpoint.resume": "--fresh (finished runs are reused, others start over)",
                       "trainer.total_steps": "--steps (the generation budget ends a run)"}


def variant_config(
    index: int, seed: int, steps: int, run_dir: Path, overrides: list[str], task: str = DEFAULT_TASK
) -> DAPOConfig:
    """The config of VARIANTS[index] on ``task``: the task, every technique up to ``index``,
    then the user's ``overrides`` (refused for the keys the ablation sets itself: ABLATION_OWNED_KEYS)."""
    if owned := sorted(key for key in ABLATION_OWNED_KEYS if _sets(overrides, key)):
        raise ConfigError("dapo ablate sets " + ", ".join(f"{key} (use {ABLATION_OWNED_KEYS[key]})" for key in owned)
                         + " itself for every run: drop the override")
    task_settings = task_overrides(task)
    techniques = [o for _, variant_overrides in VARIANTS[: index + 1] for o in variant_overrides]
    return load_config(
        [builtin_config_path("default")],
        task_settings + ABLATION_COMMON + techniques + list(overrides) + [
            f"trainer.seed={seed}", f"output_dir={yaml_text(str(run_dir))}", "checkpoint.resume=never",
            f"trainer.total_steps={steps * 20}",  # a cap only: the generation budget ends the run
        ],
    )


def _sets(overrides: list[str], dotted_key: str) -> bool:
    """Whether ``overrides`` set ``dotted_key``: by name, or inside a whole section (trainer={seed: 7})."""
    tree: dict[str, Any] = {}
    for text in overrides:
        set_dotted(tree, *parse_override(text))
    for part in dotted_key.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return False
        tree = tree[part]
    return True


def _accuracy(metrics: dict[str, float], key: str, variant: str) -> float:
    """``metrics[key]``, the held-out accuracy; an evaluation whose scorer failed on every sample
    measured none (it warned why): the ablation stops rather than plot a 0."""
    if key not in metrics:
        raise UserError(f"variant {variant}: the held-out evaluation measured no {key}: the scorer that decides "
                        "correctness failed on every sample (see the warning above)")
    return metrics[key]


def run_variant(cfg: DAPOConfig, name: str, steps: int, evals: int) -> RunCurve:
    """Train with ``cfg`` for the generation budget of ``steps`` plain steps, evaluating ``evals`` times."""
    from dapo.trainer import Trainer

    trainer = Trainer(cfg)
    try:
        trainer.resume()  # checkpoint.resume=never: a fresh start, an earlier attempt's metric lines dropped
        budget = steps * cfg.trainer.prompts_per_step
        key = f"eval/avg@{cfg.eval.k}"
        baseline = trainer.evaluate()
        trainer.record_start(baseline)  # step 0's row, as `dapo train` logs it: dapo plot shows the start
        curve = RunCurve(name, cfg.trainer.seed, [0.0], [_accuracy(baseline, key, name)])
        curve.diagnostics = {column: [] for column, _, _ in DIAGNOSTICS}
        generated, next_eval = 0.0, budget / evals
        while generated < budget:
            result = trainer.step_once()
            metrics = result.metrics
            groups = metrics["sampling/groups_generated"]
            generated += groups
            curve.trained_steps += int(metrics.get("actor/updates", 0) > 0)
            curve.optimizer_updates += int(metrics.get("actor/updates", 0))
            curve.steps.append(trainer.step)
            curve.step_groups.append(groups)
            curve.step_tokens.append(round(metrics.get("rollout/response_tokens", 0.0)))
            for column, read, _ in DIAGNOSTICS:
                curve.diagnostics[column].append(read(metrics))
            if generated >= next_eval or generated >= budget:
                metrics.update(trainer.evaluate())
                curve.generated.append(generated)
                curve.accuracy.append(_accuracy(metrics, key, name))
                next_eval += budget / evals
            # logged with its completions; a reward failing on everything or every update skipped for
            # a non-finite loss past their limits stops the ablation, as it stops `dapo train`
            try:
                trainer.record_step(result)
            except (RewardFunctionError, NonFiniteError) as error:  # which of the runs stopped, and where
                raise type(error)(f"variant {name}, seed {cfg.trainer.seed} ({cfg.output_dir}): {error}") from error
    finally:
        trainer.close()
    return curve


CURVE_FILE = "curve.json"  # in a run's directory once it has finished: its curve and config
# 2: every step's diagnostics and compute recorded (format 1 left out steps without an update)
CURVE_FORMAT = 2


def _run_record(cfg: DAPOConfig, steps: int, evals: int) -> dict:
    """What a finished run's curve depends on besides the code: its config and budget (as JSON
    reads them back), and for a built-in base model its recipe's cache key: ``builtin:rare-trace``
    names another model once its recipe, tokenizer or SFT texts change, and a curve of the old one
    must not be reused for it."""
    record = {"config": config_to_dict(cfg), "steps": steps, "evals": evals, "curve_format": CURVE_FORMAT}
    if cfg.model.path.partition(":")[0] == "builtin":
        from dapo.builtin import recipe_for_model_path

        record["base_model"] = recipe_for_model_path(cfg.model.path).cache_key()
    return json.loads(json.dumps(record))


def finished_curve(cfg: DAPOConfig, steps: int, evals: int) -> RunCurve | None:
    """The curve a finished run of exactly this config and budget saved, or None."""
    try:
        saved = json.loads((Path(cfg.output_dir) / CURVE_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("run") != _run_record(cfg, steps, evals):
        return None
    try:
        return RunCurve(**saved["curve"])
    except TypeError:  # another format's fields
        return None


def save_curve(cfg: DAPOConfig, steps: int, evals: int, curve: RunCurve) -> None:
    """Written once the run has finished, atomically: an interrupted run leaves none."""
    write_atomically(Path(cfg.output_dir) / CURVE_FILE,
                     json.dumps({"run": _run_record(cfg, steps, evals), "curve": curve.__dict__}))


def _run_dir(output_dir: Path, name: str, seed: int) -> Path:
    slug = name.strip("+ ").replace(" ", "_").replace("(", "").replace(")", "")
    return output_dir / f"{slug}-seed{seed}"


def run_ablation(
    seeds: int, steps: int, output_dir: str, overrides: list[str], evals: int = 4, task: str = DEFAULT_TASK,
    fresh: bool = False,
) -> str:
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise UserError(f"--output-dir {output_dir} is a file: name a folder for the runs, tables and plot")
    default, demo_overrides = [str(builtin_config_path("default"))], task_overrides(task) + overrides
    float32 = float32_on_this_cpu(load_config(default, demo_overrides), default, demo_overrides, "ablate")
    # every run's config first: an override one variant refuses fails now, not after hours of the others
    # (and before the output folder is made: a refused command leaves nothing behind)
    configs = [(name, seed, variant_config(index, seed, steps, _run_dir(out, name, seed), float32 + overrides, task))
               for index, (name, _) in enumerate(VARIANTS) for seed in range(seeds)]
    out.mkdir(parents=True, exist_ok=True)
    curves: list[RunCurve] = []
    for name, seed, cfg in configs:
        curve = None if fresh else finished_curve(cfg, steps, evals)
        reused = curve is not None
        if curve is None:
            (Path(cfg.output_dir) / CURVE_FILE).unlink(missing_ok=True)  # another config's: stale from now on
            curve = run_variant(cfg, name, steps, evals)
            save_curve(cfg, steps, evals, curve)
        curves.append(curve)
        note = f" (finished earlier: {Path(cfg.output_dir) / CURVE_FILE})" if reused else ""
        print(f"{name:28s} seed {seed}: avg@k {curve.accuracy[0]:.1%} -> {curve.accuracy[-1]:.1%}, generated "
              f"{curve.generated_groups:.0f} groups (budget {steps * cfg.trainer.prompts_per_step}) and "
              f"{curve.generated_tokens} response tokens in {len(curve.steps)} steps{note}", flush=True)
    table = summarise(curves)
    write_atomically(out / "results.md", table)
    write_atomically(out / "curves.json", json.dumps([c.__dict__ for c in curves]))
    plot(curves, out / "ablation.png", task)
    print(table)
    print(f"wrote {out / 'results.md'} and {out / 'ablation.png'}")
    return table
