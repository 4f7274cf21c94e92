"""`dapo eval` mistakes said before anything loads, and nothing an earlier evaluation saved lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from dapo.cli.main import main
from tests.trainer.conftest import make_tiny_model


def test_a_model_path_that_is_not_there_is_the_one_error(tmp_path, capsys):
    """A path that is not there was said after a note on the shipped config the evaluation fell back
    to, and beside that config's empty data.eval_files (a run's config.yaml would have set them)."""
    assert main(["eval", str(tmp_path / "checkpoints" / "step-00002")]) == 2
    err = capsys.readouterr().err
    assert "step-00002' is not a local directory (dapo-rl never downloads" in err
    assert "data.eval_files is empty" not in err and "shipped config" not in err


@pytest.mark.parametrize(("typed", "meant"), [("step-2", "step-000002"), ("step-00020", "step-000020"),
                                              ("stpe-000002", "step-000002"), ("step-12", None), ("step-102", None)])
def test_a_mistyped_checkpoint_is_matched_to_the_one_beside_it(tmp_path, capsys, typed, meant):
    """A step number short of its zeros, or misspelt, names the checkpoint that is there; one that
    is not there names none (step-12 is not step-102)."""
    for step in ("step-000002", "step-000020", "step-000120"):
        (tmp_path / "checkpoints" / step).mkdir(parents=True)
        (tmp_path / "checkpoints" / step / "trainer_state.pt").touch()  # complete ones
    assert main(["eval", str(tmp_path / "checkpoints" / typed)]) == 2
    err = capsys.readouterr().err
    if meant is None:  # (the newest 4; a checkpoint not written yet, or long removed)
        assert "did you mean" not in err
        assert (f"is no checkpoint of its run: {tmp_path / 'checkpoints'} holds step-000002, step-000020, "
                "step-000120\n") in err
    else:
        assert f"did you mean '{tmp_path / 'checkpoints' / meant}'" in err


@pytest.fixture()
def eval_into(tmp_path: Path) -> tuple[list[str], Path]:
    """`dapo eval` arguments for a tiny model and a one-problem file, saving into the (empty) directory
    returned with them."""
    model = make_tiny_model(tmp_path / "model")
    eval_file = tmp_path / "eval.jsonl"
    eval_file.write_text('{"prompt": "1 + 1 =", "answer": "2"}\n')
    save_dir = tmp_path / "evaluations"
    save_dir.mkdir()
    return ["eval", str(model), "default", f"data.eval_files=[{eval_file}]", "data.answer_key=answer",
            "--save-dir", str(save_dir)], save_dir


def test_a_save_dir_holding_an_earlier_evaluation_is_refused_and_left_as_it_was(eval_into, capsys, monkeypatch):
    """--save-dir wrote over an earlier evaluation's samples and metrics without a word (the default
    directory never does: it moves on to DIR-2)."""
    import dapo.trainer

    args, save_dir = eval_into
    (save_dir / "generations.jsonl").write_text("earlier samples\n")
    monkeypatch.setattr(dapo.trainer, "evaluate_model", lambda *args, **kwargs: pytest.fail("evaluated"))
    assert main(args) == 2
    assert f"--save-dir {save_dir} holds an earlier evaluation (generations.jsonl)" in capsys.readouterr().err
    assert (save_dir / "generations.jsonl").read_text() == "earlier samples\n"
    assert sorted(p.name for p in save_dir.iterdir()) == ["generations.jsonl"]


def test_a_save_dir_without_an_earlier_evaluation_is_used(eval_into, monkeypatch):
    import dapo.trainer

    args, save_dir = eval_into
    (save_dir / "notes.txt").write_text("mine\n")
    used: list[Path] = []

    class Result:
        metrics, num_problems, k = {"eval/avg@1": 1.0}, 1, 1

    def evaluate(cfg, where, progress=True):
        used.append(Path(where))
        return Result()

    monkeypatch.setattr(dapo.trainer, "evaluate_model", evaluate)
    assert main(args) == 0
    assert used == [save_dir]


def test_placement_overrides_an_evaluation_does_not_use_are_said(eval_into, capsys, monkeypatch):
    """dapo eval runs in one process: resources.devices_per_node=2 was dropped without a word."""
    import dapo.trainer
    from dapo.errors import UserError

    def evaluated(cfg, *args, **kwargs):
        assert cfg.resources.world_size == 1
        raise UserError("evaluated")
    monkeypatch.setattr(dapo.trainer, "evaluate_model", evaluated)
    args, _ = eval_into
    assert main([*args, "resources.devices_per_node=2"]) == 2
    err = capsys.readouterr().err
    assert "dapo eval: evaluates in this process, on one device: resources.devices_per_node=2 not used" in err
    assert "error: evaluated" in err


def test_the_built_in_model_is_evaluated_not_taken_for_a_missing_path(capsys, monkeypatch):
    """`dapo eval builtin` (its help offers it) was refused as a path that is not there."""
    import dapo.trainer
    from dapo.errors import UserError

    def evaluated(cfg, *args, **kwargs):
        assert cfg.model.path == "builtin"
        raise UserError("evaluated")
    monkeypatch.setattr(dapo.trainer, "evaluate_model", evaluated)
    assert main(["eval", "builtin", "eval.max_problems=4"]) == 2
    err = capsys.readouterr().err
    assert "error: evaluated" in err and "not a local directory" not in err


def test_a_checkpoint_of_a_run_with_algorithm_plugins_evaluates_without_them(eval_into, capsys, monkeypatch):
    """A run trained with a policy loss of algorithm.plugins: its checkpoint's config named a file
    moved since (ModuleNotFoundError), or a loss registered from Python ("is not one of
    ['decoupled_clip']"), and dapo eval refused it, though an evaluation computes no loss."""
    import dapo.trainer
    from dapo.errors import UserError

    args, save_dir = eval_into
    model = Path(args[1])
    (model / "dapo_config.yaml").write_text(f"algorithm: {{plugins: [{save_dir / 'moved_away.py'}], "
                                            "policy_loss: my_loss, advantage: my_advantage}\n")

    def evaluated(cfg, *args, **kwargs):
        assert (cfg.algorithm.plugins, cfg.algorithm.policy_loss) == ([], "decoupled_clip")
        raise UserError("evaluated")
    monkeypatch.setattr(dapo.trainer, "evaluate_model", evaluated)
    assert main(args) == 2
    assert "error: evaluated" in capsys.readouterr().err


def configs_checked(monkeypatch) -> list:
    """The configs `dapo eval` resolves, each stopping it there (as a Ctrl-C: exit code 130)."""
    seen = []

    def stop_after_loading(cfg, **_):
        seen.append(cfg)
        raise KeyboardInterrupt

    monkeypatch.setattr("dapo.preflight.check_run", stop_after_loading)
    return seen


def test_eval_of_a_keep_best_run_s_checkpoint_takes_another_eval_k(tmp_path, monkeypatch):
    """A run's checkpoint.keep_best=eval/avg@2 named its eval.k: `dapo eval CKPT eval.k=8` was refused
    ("the evaluations log @8 metrics"), a setting of training that evaluation never uses."""
    seen = configs_checked(monkeypatch)
    (tmp_path / "dapo_config.yaml").write_text("eval: {k: 2, every_steps: 5}\ncheckpoint: {keep_best: eval/avg@2}\n")
    assert main(["eval", str(tmp_path), "eval.k=8"]) == 130
    assert seen[0].eval.k == 8 and seen[0].checkpoint.keep_best is None


def test_eval_s_config_file_and_overrides_win_over_the_run_s_saved_config(tmp_path, monkeypatch):
    """`dapo eval CKPT my.yaml key=value`: the checkpoint's dapo_config.yaml first, then the user's
    file, then the overrides (the saved config read last would ignore the user's file)."""
    seen = configs_checked(monkeypatch)
    (tmp_path / "dapo_config.yaml").write_text("eval: {k: 2, top_p: 0.5, temperature: 0.9}\n")
    mine = tmp_path / "mine.yaml"
    mine.write_text("eval: {k: 4, top_p: 0.6}\n")
    assert main(["eval", str(tmp_path), str(mine), "eval.top_p=0.7"]) == 130
    assert (seen[0].eval.k, seen[0].eval.top_p, seen[0].eval.temperature) == (4, 0.7, 0.9)


@pytest.mark.parametrize("argv", [["eval", "builtin", "--save-dir", ""], ["plot", "runs", "-o", ""],
                                  ["ablate", "--output-dir", " "]])
def test_an_empty_path_option_is_refused_not_read_as_the_default(argv, capsys, tmp_path, monkeypatch):
    """`--save-dir ''` (an unset shell variable) saved to the default place, as if not given."""
    monkeypatch.chdir(tmp_path)  # (where the code before it ran the evaluation or the ablation)
    with pytest.raises(SystemExit):
        main(argv)
    assert "is empty: name a path" in capsys.readouterr().err


def test_a_stopped_evaluation_or_refused_run_leaves_no_empty_directory(tmp_path, monkeypatch, capsys):
    """A `dapo eval` stopped before it saved (Ctrl-C, a model that fails to load) left its empty save
    dir, and its parents, behind (runs/eval/NAME in the working directory); so did a `dapo train`
    refused by its checks (its output_dir)."""
    def stopped(*_, **__):
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("dapo.trainer.evaluate_model", stopped)
    assert main(["eval", "builtin"]) == 130
    assert main(["eval", "builtin", "--save-dir", "out/a/b"]) == 130
    assert main(["train", "output_dir=runs/new/run", "data.train_files=[missing.jsonl]"]) == 2
    assert "missing.jsonl" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_best_link_is_evaluated_as_the_checkpoint_it_names(tmp_path, monkeypatch):
    """checkpoints/best (checkpoint.keep_best) moves as its run goes on: the evaluation's model.path
    names the checkpoint the link named when it started, not the link."""
    seen = []

    def stop_after_loading(cfg, **_):
        seen.append(cfg)
        raise KeyboardInterrupt

    checkpoint = tmp_path / "checkpoints" / "step-000004"
    checkpoint.mkdir(parents=True)
    (tmp_path / "checkpoints" / "best").symlink_to("step-000004")
    monkeypatch.setattr("dapo.preflight.check_run", stop_after_loading)
    assert main(["eval", str(tmp_path / "checkpoints" / "best") + "/", "data.eval_files=[held_out.jsonl]"]) == 130
    assert seen[0].model.path == str(checkpoint)
