from pathlib import Path

import pytest

from dapo.cli.args import split_config_args
from dapo.cli.main import main


@pytest.mark.parametrize("command", ["train", "eval", "config", "plan"])
def test_help_documents_commands_overrides_and_the_shipped_configs(capsys, command):
    """Every command that takes a CONFIG names the shipped ones (only train's epilog did)."""
    from dapo.config.loading import shipped_config_names

    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "key=value" in out and all(name in out for name in shipped_config_names())
    assert command != "train" or "embedded default" in out


def test_top_level_help_lists_every_command(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    for command in ("train", "eval", "plot", "config", "ablate"):
        assert command in out


def test_version_is_the_packages(capsys):
    import dapo

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.strip() == f"dapo-rl {dapo.__version__}"


def test_bad_override_exits_2_with_the_reason(capsys):
    assert main(["config", "algorithm.clip_ratio_c=1.0"]) == 2
    assert "clip_ratio_c=1.0 must be > 1" in capsys.readouterr().err


def test_config_prints_resolved_yaml_of_a_shipped_config(capsys):
    assert main(["config", "dapo_qwen2.5_32b", "trainer.lr=5e-7"]) == 0
    out = capsys.readouterr().out
    assert "lr: 5.0e-07" in out and "max_response_length: 20480" in out


@pytest.fixture
def no_native_bf16(monkeypatch):
    """A CPU whose bf16 matmuls are torch's generic fallback (AVX2 alone: most Intel laptops)."""
    import dapo.hardware

    monkeypatch.setattr("dapo.cli.args.cpu_computes_bf16_natively", lambda: False)
    monkeypatch.setattr(dapo.hardware, "cpu_computes_bf16_natively", lambda: False)


@pytest.mark.parametrize("argv, autocast, native_dtype, switched", [
    ([], "none", "model", True),
    (["default", "trainer.lr=1e-4"], "none", "model", True),  # the default named
    (["trainer.autocast=bf16"], "bf16", "model", True),  # the user's own setting wins; the rest switches
    (["trainer.autocast=bf16", "rollout.native_dtype=bfloat16"], "bf16", "bfloat16", False),
    (["trainer.device=cuda"], "bf16", "bfloat16", False),  # not this CPU
])
def test_the_embedded_default_runs_in_float32_on_a_cpu_without_native_bf16(no_native_bf16, capsys, argv, autocast,
                                                                             native_dtype, switched):
    """bf16 on such a CPU ran a step of the embedded default in 25.7 s where float32 takes 1.6 s:
    the demo a newcomer runs first took half an hour, not minutes."""
    from dapo.cli.args import resolve

    cfg = resolve(argv)
    assert (cfg.trainer.autocast, cfg.rollout.native_dtype) == (autocast, native_dtype)
    assert ("so the embedded default decodes and trains in float32" in capsys.readouterr().err) == switched


def test_bf16_left_on_a_cpu_without_native_bf16_is_warned_with_the_float32_settings(no_native_bf16, capsys):
    from dapo.cli.args import resolve
    from dapo.hardware import warn_about_cpu_bf16

    recipe = resolve(["dapo_recipe", "trainer.device=cpu", "model.dtype=bfloat16"])  # not the default: as asked
    assert recipe.trainer.autocast == "bf16" and "float32" not in capsys.readouterr().err
    with pytest.warns(UserWarning, match="trainer.autocast=bf16, model.dtype=bfloat16: bf16 compute, but this CPU "
                      "has no bf16 dot-product instructions.*float32 is faster here: trainer.autocast=none model.dtype=float32"):
        warn_about_cpu_bf16(recipe)


def test_a_cpu_with_native_bf16_keeps_the_embedded_defaults_bf16(monkeypatch, capsys):
    monkeypatch.setattr("dapo.cli.args.cpu_computes_bf16_natively", lambda: True)
    from dapo.cli.args import resolve

    cfg = resolve([])
    assert (cfg.trainer.autocast, cfg.rollout.native_dtype) == ("bf16", "bfloat16") and not capsys.readouterr().err


def test_split_config_args_tells_files_from_overrides(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("{}")
    files, overrides = split_config_args([str(path), "a.b=1"])
    assert files == [str(path)] and overrides == ["a.b=1"]


def test_unknown_shipped_config_name_is_an_error(capsys):
    assert main(["config", "no_such_config"]) == 2
    assert "'no_such_config' is not a config file, a shipped config (dapo_qwen2.5_32b, dapo_recipe, default" in \
        capsys.readouterr().err


@pytest.mark.parametrize("argv, says", [
    (["data.train_files=[a.parquet,", "b.parquet]"], "the shell split 'data.train_files=[a.parquet,' at a space"),
    (["trainer.lr", "=", "1e-5"], "without spaces around '='"),
    (["trainer.lr", "1e-5"], "an override needs '=' (e.g. trainer.lr=VALUE)"),
])
def test_an_override_the_shell_split_or_without_its_equals_says_so(capsys, argv, says):
    """(each was reported as 'no shipped config named ...', pointing away from the mistake)"""
    assert main(["config", *argv]) == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("override", ["model.path=/models/mine", "model={path: /models/mine}"])
def test_your_model_starts_from_the_papers_recipe_and_says_so(capsys, override):
    assert main(["config", override]) == 0
    captured = capsys.readouterr()
    assert "shipped config 'dapo_recipe'" in captured.err
    for line in ("template: dapo", "lr: 1.0e-06", "top_p: 0.7", "clip_ratio_high: 0.28", "n: 16"):
        assert line in captured.out
    assert main(["config"]) == 0  # the built-in model: the embedded demo
    captured = capsys.readouterr()
    # no note of a shipped config (a CPU without bf16 instructions adds its own: float32 compute)
    assert "template: none" in captured.out and "shipped config" not in captured.err


def test_naming_the_demo_config_with_your_model_prints_a_note(capsys):
    assert main(["config", "default", "model.path=/models/mine"]) == 0
    assert "demo's laptop settings" in capsys.readouterr().err


def test_your_model_with_the_builtin_task_as_held_out_set_gets_a_note(tmp_path, capsys):
    # a config file of one's own that leaves out data.eval_files got the schema's default, the
    # built-in arithmetic set, and evaluated a math model on bare sums without a word
    config = tmp_path / "mine.yaml"
    config.write_text("model:\n  path: /models/mine\ndata:\n  train_files: [/data/dapo-math-17k.parquet]\n")
    assert main(["config", str(config)]) == 0
    err = capsys.readouterr().err
    assert "data.eval_files holds the built-in arithmetic task" in err and "data.train_files" not in err
    assert main(["config", str(config), "data.eval_files=[/data/aime.parquet]"]) == 0
    assert "built-in arithmetic" not in capsys.readouterr().err


def test_your_data_with_the_builtin_task_as_held_out_set_gets_a_note(capsys):
    # the embedded default with one's own training data kept its eval_files, the built-in
    # arithmetic set, and reported avg@4 of that task under the user's run without a word
    assert main(["config", "data.train_files=[/data/mine.jsonl]"]) == 0
    err = capsys.readouterr().err
    assert "the held-out evaluation is of that task, not of your data" in err and "data.eval_files=[]" in err
    for given in ("data.eval_files=[/data/held_out.jsonl]", "data.eval_files=[]"):
        assert main(["config", "data.train_files=[/data/mine.jsonl]", given]) == 0
        assert "built-in arithmetic" not in capsys.readouterr().err
    assert main(["config"]) == 0  # the embedded default itself: its own task, no note
    assert "built-in arithmetic" not in capsys.readouterr().err


def test_overrides_after_an_option_count_and_other_strays_are_refused(capsys):
    assert main(["config", "default", "--explain", "trainer.lr", "rollout.n=3"]) == 0
    assert "rollout.n=" not in capsys.readouterr().err
    assert main(["config", "default", "trainer.lr=1e-5", "--explain", "trainer", "trainer.total_steps=7"]) == 0
    out = capsys.readouterr().out
    assert "trainer.total_steps (int) = 7" in out and "trainer.lr (float) = 1e-05" in out
    with pytest.raises(SystemExit) as exit_info:
        main(["config", "default", "--explain", "trainer.lr", "stray"])
    assert exit_info.value.code == 2 and "unrecognized arguments: stray" in capsys.readouterr().err


def test_an_option_dapo_does_not_have_is_said_by_its_command_with_what_to_write_instead(capsys):
    """`dapo train --lr 1e-6` (argparse habit) or `--config-name` (Hydra's) got the top-level usage and
    "dapo: error:", saying nothing of key=value."""
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--lr", "1e-6"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "usage: dapo train" in err
    assert ("dapo train: error: unrecognized arguments: --lr; settings are key=value (trainer.lr=1e-6) and a "
            "CONFIG a file or a shipped config's name, neither an option (--lr)") in err
    with pytest.raises(SystemExit):  # the help of dapo train names dapo config --explain
        main(["train", "--explain", "trainer.lr"])
    err = capsys.readouterr().err
    assert "neither an option (--explain); a field's documentation is `dapo config --explain [KEY] [CONFIG]`, not " \
        "`dapo train --explain`" in err
    with pytest.raises(SystemExit):  # no command: no "dapo None --explain"
        main(["--explain"])
    assert "None" not in capsys.readouterr().err


def test_a_mapping_override_merges_into_its_section(capsys):
    """trainer={lr: 1e-5} changes the lr alone, as a later YAML file would (it replaced the section)."""
    from dapo.config import builtin_config_path, load_config

    cfg = load_config([builtin_config_path("default")], ["trainer={lr: 1e-5}"])
    default = load_config([builtin_config_path("default")])
    assert cfg.trainer.lr == 1e-5
    assert (cfg.trainer.total_steps, cfg.trainer.prompts_per_step, cfg.trainer.device) == (
        default.trainer.total_steps, default.trainer.prompts_per_step, default.trainer.device)


def test_a_section_with_every_key_commented_out_takes_its_defaults(tmp_path, capsys):
    config = tmp_path / "mine.yaml"
    config.write_text("eval:\n  # k: 8\ntrainer:\n  total_steps: 5\n")
    assert main(["config", str(config)]) == 0
    assert "total_steps: 5" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["ablate", "--seeds", "0"])
    assert exit_info.value.code == 2 and "not a positive integer" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["ablate", "--seeds", "abc"])  # was "invalid _positive_int value: 'abc'"
    assert exit_info.value.code == 2 and "argument --seeds: abc is not a positive integer" in capsys.readouterr().err


def test_plot_of_a_run_with_no_metrics_yet_says_so_and_writes_no_blank_report(tmp_path, capsys):
    (tmp_path / "metrics.jsonl").write_text("")
    assert main(["plot", str(tmp_path)]) == 2
    assert "holds no metrics yet" in capsys.readouterr().err and not (tmp_path / "report.png").exists()


def test_plot_of_a_damaged_metrics_file_plots_the_lines_it_can_read(tmp_path, capsys):
    """Bytes that are not UTF-8 (a damaged file) raised a UnicodeDecodeError, with a traceback."""
    (tmp_path / "metrics.jsonl").write_bytes(b'\xff\xfe\x00bin\n{"step": 1, "rollout/acc": 0.5}\n')
    with pytest.warns(UserWarning, match=r"skipped 1 unreadable line\(s\) \[1\]"):
        assert main(["plot", str(tmp_path)]) == 0
    assert (tmp_path / "report.png").is_file()


def test_plot_to_a_format_matplotlib_cannot_write_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "rollout/acc": 0.5}\n')
    assert main(["plot", str(tmp_path), "-o", str(tmp_path / "report.txt")]) == 2
    err = capsys.readouterr().err
    assert "report.txt" in err and ".png" in err and "Traceback" not in err
    assert main(["plot", str(tmp_path), "-o", str(tmp_path / "report.svg")]) == 0
    assert (tmp_path / "report.svg").read_text().lstrip().startswith("<?xml")
    assert main(["plot", str(tmp_path), "-o", str(tmp_path / "noext")]) == 0 and (tmp_path / "noext.png").is_file()
    # a folder to put it in; a folder that is not there (was: the temporary file's name); the run by its metrics file
    (tmp_path / "plots").mkdir()
    assert main(["plot", str(tmp_path), "-o", str(tmp_path / "plots")]) == 0 and (tmp_path / "plots/report.png").is_file()
    assert main(["plot", str(tmp_path), "-o", str(tmp_path / "nodir" / "x.png")]) == 2
    assert f"its folder {tmp_path / 'nodir'} does not exist" in capsys.readouterr().err
    (tmp_path / "report.png").unlink(missing_ok=True)
    assert main(["plot", str(tmp_path / "metrics.jsonl")]) == 0 and (tmp_path / "report.png").is_file()
    # a mistyped run directory is named, not its default output's folder
    assert main(["plot", str(tmp_path / "nodir")]) == 2
    assert f"{tmp_path / 'nodir' / 'metrics.jsonl'} does not exist: is {tmp_path / 'nodir'} a dapo-rl run" in (
        capsys.readouterr().err)


def test_eval_of_a_run_directory_names_its_newest_checkpoint(tmp_path, capsys):
    checkpoint = tmp_path / "checkpoints" / "step-000002"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.pt").write_bytes(b"")
    assert main(["eval", str(tmp_path)]) == 2
    assert f"is a run directory: name one of its checkpoints, e.g. dapo eval {checkpoint}" in capsys.readouterr().err


def test_eval_of_a_runs_checkpoints_folder_names_its_newest_checkpoint(tmp_path, capsys):
    """RUN_DIR/checkpoints (tab completion stops there) was read as a model and failed on
    'data.eval_files is empty', which says nothing about the path."""
    for step in ("step-000001", "step-000002"):
        (tmp_path / "checkpoints" / step).mkdir(parents=True)
        (tmp_path / "checkpoints" / step / "trainer_state.pt").write_bytes(b"")
    assert main(["eval", str(tmp_path / "checkpoints")]) == 2
    newest = tmp_path / "checkpoints" / "step-000002"
    assert f"is a run's checkpoints folder: name one of its checkpoints, e.g. dapo eval {newest}" in capsys.readouterr().err


def test_explain_followed_by_an_override_explains_every_field_with_it(capsys):
    assert main(["config", "--explain", "trainer.lr=1e-5"]) == 0
    assert "trainer.lr (float) = 1e-05" in capsys.readouterr().out


def test_dapo_train_says_each_preflight_warning_once(tmp_path, monkeypatch):
    """The CLI checks the run before anything loads and the Trainer checks it again (it is also
    driven from Python); the CLI's check raises its errors but leaves the warnings to the
    Trainer's. Before, each was printed twice: imports in between change the warning filters,
    which resets the registry that keeps a warning once."""
    import warnings

    import dapo.trainer
    from dapo.preflight import check_run

    class Checked:
        def __init__(self, cfg):
            check_run(cfg)  # as Trainer.__init__ does

        def train(self):
            raise KeyboardInterrupt

    monkeypatch.setattr(dapo.trainer, "Trainer", Checked)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")  # as after a filter change: nothing is remembered
        assert main(["train", f"output_dir={tmp_path}", "trainer.total_steps=2", "trainer.warmup_steps=5"]) == 130
    assert sum("warmup_steps=5 is not below" in str(w.message) for w in said) == 1


def test_the_real_trainer_checks_the_run_before_loading_anything(tmp_path, monkeypatch):
    """The test above stands in a stub for the Trainer; the warnings are said once only if the
    real one checks the run too (as the first thing it does)."""
    import dapo.trainer.loop
    from dapo.config import builtin_config_path, load_config

    class Checked(Exception):
        pass

    def check_run(cfg):
        raise Checked(cfg.output_dir)

    monkeypatch.setattr(dapo.trainer.loop, "check_run", check_run)
    cfg = load_config([builtin_config_path("default")], overrides=[f"output_dir={tmp_path}"])
    with pytest.raises(Checked, match=str(tmp_path)):
        dapo.trainer.loop.Trainer(cfg)


def test_dapo_rl_warnings_print_as_one_line_of_the_command_and_main_restores_the_format():
    import warnings

    import dapo.preflight
    from dapo.warning_format import warning_format

    before = warnings.formatwarning
    assert main(["config", "default"]) == 0 and warnings.formatwarning is before
    format_warning = warning_format("train", before)
    ours = format_warning(UserWarning("most responses hit the limit"), UserWarning, dapo.preflight.__file__, 120)
    assert ours == "dapo train: warning: most responses hit the limit\n"
    theirs = format_warning(UserWarning("x"), UserWarning, "/usr/lib/python3/site-packages/torch/a.py", 7)
    assert theirs.startswith("/usr/lib/python3/site-packages/torch/a.py:7: UserWarning: x")


def test_a_config_file_whose_path_holds_an_equals_sign_is_a_file(tmp_path):
    """Run directories named as Hydra names them (lr=1e-5): `dapo eval` passes the checkpoint's own
    dapo_config.yaml, which was read as a key=value override."""
    from dapo.cli.args import config_arg_kind

    run = tmp_path / "lr=1e-5"
    run.mkdir()
    (run / "dapo_config.yaml").write_text("trainer:\n  lr: 1.0e-5\n")
    assert config_arg_kind(str(run / "dapo_config.yaml")) == "file"
    assert config_arg_kind("trainer.lr=1e-5") == "override"
    assert main(["config", str(run / "dapo_config.yaml")]) == 0


def test_eval_takes_a_response_length_shorter_than_the_training_overlong_buffer(tmp_path, monkeypatch):
    """`dapo eval MODEL ... rollout.max_response_length=16` was refused: "algorithm.overlong_buffer_len=4096
    must be smaller than rollout.max_response_length=16", a setting of training that evaluation never uses."""
    seen = []

    def stop_after_loading(cfg, **_):
        seen.append(cfg)
        raise KeyboardInterrupt  # (what the config is, is all this asks)

    monkeypatch.setattr("dapo.preflight.check_run", stop_after_loading)
    assert main(["eval", str(tmp_path), "data.eval_files=[held_out.jsonl]", "rollout.max_response_length=16"]) == 130
    assert seen[0].rollout.max_response_length == 16 and seen[0].algorithm.overlong_soft_punishment is False


def test_eval_mistakes_get_advice_for_eval(tmp_path, capsys, monkeypatch):
    """An override before the model, two models, no held-out data (said before the model loads)."""
    import dapo.trainer

    with pytest.raises(SystemExit):
        main(["eval"])
    assert "the following arguments are required: model\n" in capsys.readouterr().err  # was "model, ARG"
    assert main(["eval", "eval.k=4", str(tmp_path)]) == 2
    assert "name the model first ('eval.k=4' is an override)" in capsys.readouterr().err
    # a config before the model: was "not a config file ...: dapo eval evaluates one model" about the model
    assert main(["eval", "dapo_recipe", str(tmp_path)]) == 2
    assert "name the model first ('dapo_recipe' is a config)" in capsys.readouterr().err
    (tmp_path / "my.yaml").write_text("eval:\n  k: 2\n")
    assert main(["eval", str(tmp_path / "my.yaml"), str(tmp_path)]) == 2
    assert "is a config)" in capsys.readouterr().err
    (tmp_path / "model.safetensors").write_bytes(b"")  # a checkpoint's weights file named: was "is a config"
    assert main(["eval", str(tmp_path / "model.safetensors")]) == 2
    message = (f"model.path='{tmp_path / 'model.safetensors'}' is a file: a model is a directory (a checkpoint, or "
               f"a Hugging Face model's); the one holding it is '{tmp_path}'")
    assert message in capsys.readouterr().err
    assert main(["train", f"model.path={tmp_path / 'model.safetensors'}", f"output_dir={tmp_path / 'run'}"]) == 2
    assert message in capsys.readouterr().err  # (was "not a local directory ... download the model first")
    hydra_named = tmp_path / "lr=1e-5"  # a run directory named as Hydra names them: a model, not an override
    hydra_named.mkdir()
    assert main(["eval", str(hydra_named), "data.eval_files=[]"]) == 2
    assert "data.eval_files is empty" in capsys.readouterr().err
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    assert main(["eval", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "dapo eval evaluates one model: run it once for each" in err and "checkpoint.resume" not in err
    monkeypatch.setattr(dapo.trainer, "evaluate_model", lambda *args, **kwargs: pytest.fail("the model loaded"))
    assert main(["eval", str(tmp_path / "a"), "data.eval_files=[]"]) == 2
    assert "data.eval_files is empty: nothing to evaluate on" in capsys.readouterr().err
    # model.path given as well: was evaluated MODEL, the override silently dropped
    assert main(["eval", str(tmp_path / "a"), f"model.path={tmp_path / 'b'}"]) == 2
    assert f"dapo eval evaluates MODEL ({tmp_path / 'a'}), not model.path={tmp_path / 'b'}" in capsys.readouterr().err


def test_a_misspelled_shipped_config_gets_a_did_you_mean(capsys):
    """(it was told an override needs '=': dapo_qwen2.5_32=VALUE)"""
    assert main(["config", "dapo_qwen2.5_32"]) == 2
    assert "did you mean the shipped config 'dapo_qwen2.5_32b'?" in capsys.readouterr().err


def test_a_config_after_an_option_counts_as_one(tmp_path, capsys):
    lr = tmp_path / "lr.yaml"
    lr.write_text("trainer:\n  lr: 3.0e-6\n")
    assert main(["config", "default", "--explain", "trainer.lr", str(lr)]) == 0
    assert "trainer.lr (float) = 3e-06" in capsys.readouterr().out


def test_a_second_evaluation_of_a_checkpoint_keeps_the_first_ones_results(tmp_path, monkeypatch):
    """dapo eval's default folder for a checkpoint is RUN_DIR/eval/step-N; a second evaluation (other
    data, another k) wrote its generations.jsonl over the first one's: it now takes step-N-2, -3, ..."""
    from dapo.cli.main import default_eval_dir

    checkpoint = tmp_path / "run" / "checkpoints" / "step-000002"
    checkpoint.mkdir(parents=True)
    saved = []
    for _ in range(3):
        folder = default_eval_dir(checkpoint, is_checkpoint=True)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "generations.jsonl").write_text("{}\n")
        saved.append(folder)
    assert saved == [tmp_path / "run" / "eval" / name for name in ("step-000002", "step-000002-2", "step-000002-3")]
    monkeypatch.chdir(tmp_path)
    assert default_eval_dir(tmp_path / "my-model", is_checkpoint=False) == Path("runs") / "eval" / "my-model"
    (tmp_path / "runs" / "eval" / "my-model").mkdir(parents=True)  # a folder without results: used
    assert default_eval_dir(tmp_path / "my-model", is_checkpoint=False) == Path("runs") / "eval" / "my-model"


def test_a_list_item_override_after_the_list_is_set_says_to_give_the_whole_list(capsys):
    """With reward.functions set (by an override or a YAML file), reward.functions.0.weight=2 was
    'functions is not a section' (the model.path lookup read every override first)."""
    assert main(["config", "reward.functions=[{path: rw.py:extras}]", "reward.functions.0.weight=2"]) == 2
    assert "reward.functions is a list, whose items are not set one by one" in capsys.readouterr().err
    # a list of the model section's too
    assert main(["config", "model.lora_target_modules=[q_proj]", "model.lora_target_modules.0=k_proj"]) == 2
    assert "model.lora_target_modules is a list, whose items are not set one by one" in capsys.readouterr().err
