"""Where ``dapo eval`` saves when no --save-dir is given (dapo.cli.eval_dir): beside the run of a
checkpoint however it is named (., a symbolic link), under runs/eval/ for any other model."""

from __future__ import annotations

from pathlib import Path

from dapo.cli.eval_dir import default_eval_dir


def test_a_checkpoint_named_from_inside_it_or_by_a_link_is_evaluated_beside_its_run(tmp_path, monkeypatch):
    run = tmp_path / "run"
    checkpoint = run / "checkpoints" / "step-000002"
    checkpoint.mkdir(parents=True)
    (tmp_path / "latest").symlink_to(checkpoint)
    assert default_eval_dir(tmp_path / "latest", is_checkpoint=True) == run / "eval" / "step-000002"
    monkeypatch.chdir(checkpoint)  # dapo eval .
    assert default_eval_dir(Path("."), is_checkpoint=True).resolve() == (run / "eval" / "step-000002").resolve()


def test_a_model_that_is_no_run_s_checkpoint_is_evaluated_under_runs_eval(tmp_path, monkeypatch):
    """A Hugging Face model kept in a folder of its own called checkpoints is no run's checkpoint."""
    model = tmp_path / "checkpoints" / "qwen-0.5b"
    model.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert default_eval_dir(model, is_checkpoint=False) == Path("runs") / "eval" / "qwen-0.5b"
    monkeypatch.chdir(model)
    assert default_eval_dir(Path("."), is_checkpoint=False) == Path("runs") / "eval" / "model"
