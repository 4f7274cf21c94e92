import json
from pathlib import Path

import pytest

from dapo.builtin import BUILTIN_RECIPES
from dapo.cli.ablate import ABLATION_TASKS, VARIANTS, run_ablation, variant_config
from dapo.cli.ablate_report import DIAGNOSTICS, RunCurve, summarise
from dapo.config import ConfigError
from dapo.trainer.metrics import read_metrics
from tests.trainer.conftest import PARITY_REWARD, make_tiny_model, tiny_overrides

# (clip_ratio_high, loss_agg_mode, overlong_filtering, overlong_soft_punishment, dynamic_sampling)
# of each variant: the paper's Table 1, one technique added per row.
PAPER_PROGRESSION = [
    (0.2, "seq-mean-token-mean", False, False, False),
    (0.2, "seq-mean-token-mean", True, False, False),
    (0.28, "seq-mean-token-mean", True, False, False),
    (0.28, "seq-mean-token-mean", True, True, False),
    (0.28, "token-mean", True, True, False),
    (0.28, "token-mean", True, True, True),
]


# The longest correct response of each task, in tokens (with EOS): "Steps: " + a 3-digit
# addition trace + answer line; a 2-digit x 2-digit multiplication trace + answer line.
LONGEST_CORRECT = {"rare-trace": 7 + 38, "mixed": 47}


@pytest.mark.parametrize("task", sorted(ABLATION_TASKS))
def test_variants_add_one_technique_at_a_time(task, tmp_path):
    for index, expected in enumerate(PAPER_PROGRESSION):
        cfg = variant_config(index, seed=2, steps=30, run_dir=tmp_path, overrides=[], task=task)
        algo = cfg.algorithm
        assert (algo.clip_ratio_high, algo.loss_agg_mode, algo.overlong_filtering,
                algo.overlong_soft_punishment, algo.dynamic_sampling) == expected, VARIANTS[index][0]
        assert algo.clip_ratio_low == 0.2 and algo.kl_coef == 0.0
        # Every run evaluates with the same sampling seed, whatever its training seed.
        assert cfg.trainer.seed == 2 and cfg.eval.seed == 0
        assert cfg.model.path == f"builtin:{task}"
        recipe = BUILTIN_RECIPES[task]  # the data is the task the base model was SFT-ed on
        data = cfg.data
        assert (data.builtin_min_digits, data.builtin_max_digits, data.builtin_ops) == (
            recipe.min_digits, recipe.max_digits, recipe.ops)
        # Soft punishment starts beyond the longest correct response of the task.
        assert cfg.rollout.max_response_length - algo.overlong_buffer_len >= LONGEST_CORRECT[task]


def test_unknown_task_is_an_error_that_lists_the_tasks(tmp_path):
    with pytest.raises(ValueError, match="rare-trace"):
        variant_config(0, 0, 30, tmp_path, [], task="nope")


def test_an_override_of_what_the_ablation_sets_itself_is_refused_naming_the_option(tmp_path):
    """trainer.seed, output_dir, checkpoint.resume and trainer.total_steps are set per run after the
    user's overrides: silently overwritten, they are refused instead."""
    with pytest.raises(ConfigError, match=r"trainer.seed \(use --seeds.*trainer.total_steps \(use --steps"):
        variant_config(0, 0, 30, tmp_path, ["trainer.total_steps=50", "trainer.seed=7", "eval.k=2"])
    with pytest.raises(ConfigError, match=r"output_dir \(use --output-dir"):
        variant_config(0, 0, 30, tmp_path, ["output_dir=/tmp/other"])
    with pytest.raises(ConfigError, match=r"dapo ablate sets trainer.seed \(use --seeds"):  # inside a section too
        variant_config(0, 0, 30, tmp_path, ["trainer={seed: 7, lr: 1e-4}"])
    assert variant_config(0, 0, 30, tmp_path, ["trainer={lr: 1e-4}"]).trainer.lr == 1e-4


def test_a_refused_ablation_leaves_no_folder_and_a_file_for_its_folder_is_said(tmp_path):
    from dapo.cli.ablate import run_ablation
    from dapo.errors import UserError

    with pytest.raises(ConfigError, match="trainer.lrr"):  # the output folder was made before the check
        run_ablation(1, 1, str(tmp_path / "ablation"), ["trainer.lrr=1"])
    assert not (tmp_path / "ablation").exists()
    (tmp_path / "afile").write_text("")
    with pytest.raises(UserError, match=r"--output-dir .*afile is a file: name a folder"):  # was "File exists"
        run_ablation(1, 1, str(tmp_path / "afile"), [])


def test_user_overrides_apply_to_every_variant(tmp_path):
    cfgs = [variant_config(i, 0, 30, tmp_path, ["rollout.max_response_length=80"]) for i in range(len(VARIANTS))]
    assert {c.rollout.max_response_length for c in cfgs} == {80}
    # ... over the techniques' own settings too (applied before them, a later variant undid it)
    last = variant_config(len(VARIANTS) - 1, 0, 30, tmp_path, ["algorithm.dynamic_sampling=false"])
    assert last.algorithm.dynamic_sampling is False


def test_every_variant_trains_at_the_ablation_s_constant_lr_in_mini_batches_of_two(tmp_path):
    """The paper's 16 gradient steps per rollout step (mini-batches of 2 of the 32 prompts) at a
    constant lr (the run ends on a generation budget: a cosine would follow the step cap)."""
    for index in range(len(VARIANTS)):
        trainer = variant_config(index, 0, 30, tmp_path, []).trainer
        assert (trainer.lr, trainer.lr_schedule, trainer.mini_batch_prompts) == (5e-5, "constant", 2)
        assert trainer.prompts_per_step // trainer.mini_batch_prompts == 16


def test_each_diagnostic_column_reads_its_own_logged_metric():
    from dapo.trainer.metric_docs import METRICS

    logged = {"rollout/truncation_rate": 0.1, "sampling/filtered_ratio": 0.2, "actor/clip_frac_high": 0.3,
              "actor/clip_frac_low": 0.4, "rollout/response_length_mean": 50.0, "actor/entropy": 0.6}
    assert set(logged) <= set(METRICS)
    assert {column: read(logged) for column, read, _ in DIAGNOSTICS} == {
        "truncated": 0.1, "no-signal groups": 0.2, "clip-high frac": 0.3, "clip-low frac": 0.4,
        "response length": 50.0, "entropy": 0.6}


def _curve(variant: str, seed: int, accuracy: list[float], truncated: list[float]) -> RunCurve:
    diagnostics = {column: [0.5] * len(truncated) for column, _, _ in DIAGNOSTICS}
    diagnostics["truncated"] = truncated
    return RunCurve(variant, seed, [0.0, 32.0], accuracy, trained_steps=len(truncated),
                    steps=list(range(1, len(truncated) + 1)), step_groups=[16.0] * len(truncated),
                    step_tokens=[400] * len(truncated), diagnostics=diagnostics)


def test_summary_reports_seed_means_and_spreads():
    name = VARIANTS[0][0]
    curves = [_curve(name, 0, [0.30, 0.50], [0.1, 0.3]), _curve(name, 1, [0.30, 0.60], [0.0, 0.2])]
    table = summarise(curves)
    row = next(line for line in table.splitlines() if line.startswith(f"| {name} |"))
    # final: mean(0.5, 0.6) = 55.0%, sample std = 0.0707 -> 7.1%; gain: 20% and 30%.
    assert "55.0% ± 7.1%" in row and "25.0% ± 7.1%" in row
    diagnostics_row = [line for line in table.splitlines() if line.startswith(f"| {name} |")][1]
    # truncated: run means 0.2 and 0.1 -> 15.0% ± 7.1%; entropy and length are plain numbers.
    assert "15.0% ± 7.1%" in diagnostics_row and "0.50 ± 0.00" in diagnostics_row
    # a curve past its best: final 50%, best 60%, gain over the base 20% (one seed: no spread)
    row = next(line for line in summarise([_curve(name, 0, [0.30, 0.60, 0.50], [0.1, 0.3])]).splitlines()
               if line.startswith(f"| {name} |"))
    assert row.startswith(f"| {name} | 50.0% | 60.0% | 20.0% |")


@pytest.mark.slow  # an end-to-end run of every variant (about 16 s): the slow suite keeps the default under 10 min
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_ablation_runs_every_variant_and_writes_tables_and_plot(tmp_path, monkeypatch, capsys):
    from dapo.cli import ablate

    real_run = ablate.run_variant
    model_dir = make_tiny_model(tmp_path / "model")
    reward_file = tmp_path / "rewards.py"
    reward_file.write_text(PARITY_REWARD)
    overrides = [o for o in tiny_overrides(model_dir, tmp_path / "unused", reward_file)
                 if o.split("=", 1)[0] not in ablate.ABLATION_OWNED_KEYS] + [
        "data.builtin_max_digits=2", "eval.max_problems=4", "trainer.prompts_per_step=2"
    ]
    out = tmp_path / "out #1"  # a '#' would start a YAML comment in an override
    table = run_ablation(seeds=1, steps=2, output_dir=str(out), overrides=overrides, evals=1)
    assert (out / "results.md").read_text() == table and (out / "ablation.png").stat().st_size > 10_000
    printed = [line for line in capsys.readouterr().out.splitlines() if " seed 0: avg@k " in line]
    assert len(printed) == len(VARIANTS) and all("groups (budget 4) and" in line for line in printed), printed
    curves = json.loads((out / "curves.json").read_text())
    assert [c["variant"] for c in curves] == [name for name, _ in VARIANTS]
    for curve in curves:
        # Base evaluation plus one at the end of the generation budget (2 steps x 2 groups).
        assert len(curve["accuracy"]) == 2 and curve["generated"][-1] >= 4
        assert all(0.0 <= a <= 1.0 for a in curve["accuracy"])
        assert {len(v) for v in curve["diagnostics"].values()} == {len(curve["steps"])}
    # Every run evaluated the same model before training with the same seed: same base accuracy.
    assert len({c["accuracy"][0] for c in curves}) == 1
    for name, _ in VARIANTS:
        assert sum(line.startswith(f"| {name} |") for line in table.splitlines()) == 2
    assert Path(out / "naive_GRPO-seed0").is_dir()
    # the same command again (after a Ctrl-C, say): the finished runs are reused, not rerun
    first = read_metrics(out / "naive_GRPO-seed0")
    dapo_run = out / "dynamic_sampling_DAPO-seed0"
    (dapo_run / "curve.json").unlink()  # as if the last run was interrupted
    ran = []
    monkeypatch.setattr(ablate, "run_variant", lambda cfg, *args: ran.append(cfg.output_dir) or real_run(cfg, *args))
    assert run_ablation(seeds=1, steps=2, output_dir=str(out), overrides=overrides, evals=1) == table
    assert ran == [str(dapo_run)]
    assert read_metrics(out / "naive_GRPO-seed0") == first
    # ... unless its config changed, or --fresh: then its metrics start afresh, not after the last attempt's
    ran.clear()
    run_ablation(seeds=1, steps=2, output_dir=str(out), overrides=[*overrides, "trainer.lr=6e-5"], evals=1)
    assert len(ran) == len(VARIANTS)
    ran.clear()
    run_ablation(seeds=1, steps=2, output_dir=str(out), overrides=overrides, evals=1, fresh=True)
    assert len(ran) == len(VARIANTS)
    again = read_metrics(out / "naive_GRPO-seed0")
    assert [row["step"] for row in again] == [row["step"] for row in first]


def test_an_override_a_later_variant_refuses_fails_before_any_run(tmp_path, monkeypatch):
    from dapo.cli import ablate

    def ran(*args, **kwargs):
        raise AssertionError("a variant ran before every config was checked")

    monkeypatch.setattr(ablate, "run_variant", ran)
    with pytest.raises(ConfigError, match="dynamic_sampling needs rollout.n >= 2"):
        run_ablation(seeds=1, steps=2, output_dir=str(tmp_path), overrides=["rollout.n=1"])


def test_on_a_cpu_without_native_bf16_every_variant_runs_in_float32(tmp_path, monkeypatch, capsys):
    """As `dapo train`'s embedded default (tests/cli/test_cli_main.py): bf16 there is slower."""
    from dapo.cli import ablate

    monkeypatch.setattr("dapo.cli.args.cpu_computes_bf16_natively", lambda: False)
    ran = []

    def stop(cfg, *args, **kwargs):
        ran.append(cfg)
        raise KeyboardInterrupt

    monkeypatch.setattr(ablate, "run_variant", stop)
    with pytest.raises(KeyboardInterrupt):
        run_ablation(seeds=1, steps=2, output_dir=str(tmp_path), overrides=[])
    assert [(cfg.trainer.autocast, cfg.rollout.native_dtype) for cfg in ran] == [("none", "model")]
    assert "dapo ablate: this CPU has no bf16 dot-product instructions" in capsys.readouterr().err


def test_a_finished_curve_of_another_build_of_the_base_model_is_not_reused(tmp_path, monkeypatch):
    """``builtin:rare-trace`` names whatever its recipe builds: once the recipe (or the tokenizer
    or SFT texts its cache key covers) changes, a curve measured on the old model is stale,
    although the run's config reads the same."""
    from dapo.builtin.recipes import BaseModelRecipe
    from dapo.cli.ablate import finished_curve, save_curve

    cfg = variant_config(0, 0, 30, tmp_path, [])
    curve = RunCurve(VARIANTS[0][0], 0, [0.0, 960.0], [0.03, 0.6], trained_steps=30)
    save_curve(cfg, 30, 4, curve)
    assert finished_curve(cfg, 30, 4) == curve
    monkeypatch.setattr(BaseModelRecipe, "cache_key", lambda self: "0123456789ab")  # a rebuilt base model
    assert finished_curve(cfg, 30, 4) is None


class _ScriptedTrainer:
    """A Trainer stand-in for :func:`run_variant` whose steps report scripted metrics."""

    STEPS = [  # dynamic sampling: a step of all no-signal groups makes no update
        {"sampling/groups_generated": 6.0, "actor/updates": 3.0, "rollout/truncation_rate": 0.1,
         "sampling/filtered_ratio": 0.5, "actor/clip_frac_high": 0.02, "actor/clip_frac_low": 0.04,
         "rollout/response_length_mean": 10.0, "rollout/response_tokens": 479.0, "actor/entropy": 0.4},
        {"sampling/groups_generated": 12.0, "actor/updates": 0.0, "rollout/truncation_rate": 0.0,
         "sampling/filtered_ratio": 1.0, "rollout/response_length_mean": 20.0, "rollout/response_tokens": 1913.0},
        {"sampling/groups_generated": 6.0, "actor/updates": 3.0, "rollout/truncation_rate": 0.4,
         "sampling/filtered_ratio": 0.25, "actor/clip_frac_high": 0.04, "actor/clip_frac_low": 0.02,
         "rollout/response_length_mean": 30.0, "rollout/response_tokens": 1441.0, "actor/entropy": 0.2},
    ]

    def __init__(self, cfg) -> None:
        self.step = 0

    def resume(self) -> None:
        pass

    def record_start(self, evaluation) -> None:
        pass

    def record_step(self, result) -> None:
        pass

    def evaluate(self) -> dict[str, float]:
        return {"eval/avg@4": 0.1 * self.step}

    def step_once(self):
        from types import SimpleNamespace

        self.step += 1
        return SimpleNamespace(metrics=dict(self.STEPS[self.step - 1]))

    def close(self) -> None:
        pass


def test_steps_without_an_update_count_in_what_was_generated_and_the_compute_is_reported(tmp_path, monkeypatch):
    """A dynamic-sampling step whose groups all lacked signal made no update, and was left out of
    every diagnostic: the no-signal share read 37.5% where 69% of the generated groups had none.
    ``updates`` counted steps, not optimizer updates; the budget's overshoot went unreported."""
    import dapo.trainer
    from dapo.cli.ablate import run_variant
    from dapo.cli.ablate_report import run_mean

    monkeypatch.setattr(dapo.trainer, "Trainer", _ScriptedTrainer)
    cfg = variant_config(5, 0, 1, tmp_path, ["trainer.prompts_per_step=20", "trainer.mini_batch_prompts=4"])
    curve = run_variant(cfg, VARIANTS[5][0], steps=1, evals=1)  # a budget of 20 groups: 24 generated
    assert (curve.steps, curve.trained_steps, curve.optimizer_updates) == ([1, 2, 3], 2, 6)
    assert curve.generated == [0.0, 24.0] and curve.generated_groups == 24.0
    assert curve.generated_tokens == 479 + 1913 + 1441  # the counts the steps logged, not mean x responses
    assert run_mean(curve, "no-signal groups") == pytest.approx((6 * 0.5 + 12 * 1.0 + 6 * 0.25) / 24)
    assert run_mean(curve, "response length") == pytest.approx(20.0)
    assert run_mean(curve, "entropy") == pytest.approx(0.3)  # the updates' own: none measured at step 2
    assert curve.diagnostics["entropy"] == [0.4, None, 0.2]
    table = summarise([curve])
    row = next(line for line in table.splitlines() if line.startswith(f"| {VARIANTS[5][0]} |"))
    assert "| 24 | 3833 | 3 (2) | 1 |" in row  # one seed: no spread to give
    assert table.startswith("Mean ± sample standard deviation (n - 1) over seeds.")
    diagnostics_row = [line for line in table.splitlines() if line.startswith(f"| {VARIANTS[5][0]} |")][1]
    assert "| 68.8% |" in diagnostics_row and "| 3.00% |" in diagnostics_row


def test_a_curve_saved_by_the_format_that_dropped_steps_is_not_reused(tmp_path):
    """Its diagnostics left out the steps without an update: averaged with new ones, they would mislead."""
    from dapo.cli.ablate import CURVE_FILE, finished_curve, save_curve

    cfg = variant_config(0, 0, 30, tmp_path, [])
    save_curve(cfg, 30, 4, RunCurve(VARIANTS[0][0], 0, [0.0, 960.0], [0.03, 0.6], trained_steps=30))
    saved = json.loads((tmp_path / CURVE_FILE).read_text())
    del saved["run"]["curve_format"]
    saved["curve"]["updates"] = saved["curve"].pop("trained_steps")
    (tmp_path / CURVE_FILE).write_text(json.dumps(saved))
    assert finished_curve(cfg, 30, 4) is None


def test_accuracy_against_compute_averages_seeds_at_equal_compute():
    """A dynamic-sampling step can pass two evaluation points at once: seed 0 was evaluated at
    0/144/336 groups, seed 1 at 0/96/144/240/320. Pairing points by index averaged seed 0's final
    accuracy (at 336) with seed 1's at 144, and dropped seed 1's last two evaluations."""
    from dapo.cli.ablate_report import _seed_mean_over_compute

    grid, means = _seed_mean_over_compute([[0, 144, 336], [0, 96, 144, 240, 320]],
                                          [[0.4, 0.6, 0.8], [0.4, 0.5, 0.6, 0.7, 0.9]])
    assert grid == [0, 96, 144, 240, 320]  # every run's points up to the least compute reached
    # seed 0 interpolated: 96 -> 0.4 + 0.2 * 96/144; 240 -> 0.6 + 0.2 * 96/192; 320 -> 0.6 + 0.2 * 176/192
    expected = [0.4, (0.4 + 0.2 * 96 / 144 + 0.5) / 2, 0.6, (0.7 + 0.7) / 2, (0.6 + 0.2 * 176 / 192 + 0.9) / 2]
    assert means == pytest.approx(expected, abs=1e-12)


BONUS_REWARDS = PARITY_REWARD + '''
def broken_bonus(response, ground_truth, extra):
    raise ZeroDivisionError("my bug")
'''


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_variant_logs_its_start_and_completions_and_stops_as_dapo_train_does(tmp_path):
    """run_variant logged no step-0 row (data counts, baseline evaluation), no completions, and
    trained on past a reward function failing on every response (reward.max_failing_steps)."""
    from dapo.cli.ablate import run_variant
    from dapo.rewards.user_functions import RewardFunctionError

    reward_file = tmp_path / "rewards.py"
    reward_file.write_text(BONUS_REWARDS)
    overrides = [o for o in tiny_overrides(make_tiny_model(tmp_path / "model"), tmp_path / "unused", reward_file)
                 if o.split("=", 1)[0] not in ("output_dir", "trainer.total_steps")] + [
        f"reward.functions=[{{path: '{reward_file}:parity'}}, {{path: '{reward_file}:broken_bonus', weight: 0.1}}]",
        "reward.max_failing_steps=2", "data.builtin_max_digits=2", "eval.max_problems=4",
        "trainer.prompts_per_step=2", "logging.completions_per_step=2",
    ]
    run = tmp_path / "run"
    cfg = variant_config(5, 0, 20, run, overrides)
    with pytest.raises(RewardFunctionError, match=rf"variant .*\(DAPO\), seed 0 \({run}\): .*broken_bonus"):
        run_variant(cfg, VARIANTS[5][0], steps=20, evals=1)
    rows = read_metrics(run)
    assert rows[0]["step"] == 0 and "data/train_problems" in rows[0] and "eval/avg@2" in rows[0]
    assert [row["step"] for row in rows[1:]] == [1, 2]  # stopped at the limit, not at the budget (40 groups)
    completions = [json.loads(line) for line in (run / "completions.jsonl").read_text().splitlines()]
    assert {c["step"] for c in completions} == {1, 2} and all("response" in c for c in completions)
