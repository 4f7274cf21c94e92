"""checkpoint.keep_best: the checkpoint of the evaluated step with the highest held-out metric is
kept out of checkpoint.keep_last's rotation and linked as checkpoints/best, across resumes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dapo.config import ConfigError
from dapo.trainer import Trainer
from dapo.trainer.summary import print_summary
from tests.trainer.conftest import tiny_config

BEST = ("eval.every_steps=1", "checkpoint.every_steps=0", "checkpoint.keep_last=1",
        "checkpoint.keep_best=eval/avg@2", "eval.before_training=false")


def _train(run: Path, model: Path, reward: Path, scores: list[float | None], *extra: str) -> tuple[Trainer, object]:
    """A run whose evaluations return ``scores`` in turn as eval/avg@2 (None: an evaluation that
    logs no avg@2, as one whose reward failed on every sample)."""
    trainer = Trainer(tiny_config(model, run, reward, *BEST, *extra))
    pending = list(scores)

    def scripted() -> dict[str, float]:
        score = pending.pop(0)
        return {"eval/pass@2": 1.0} if score is None else {"eval/avg@2": score, "eval/pass@2": 1.0}

    trainer.evaluate = scripted
    summary = trainer.train()
    assert not pending, "the run evaluated fewer times than scripted"
    return trainer, summary


def _kept(run: Path) -> tuple[list[str], str | None]:
    root = run / "checkpoints"
    steps = sorted(p.name for p in root.iterdir() if p.name.startswith("step-"))
    return steps, os.readlink(root / "best") if (root / "best").is_symlink() else None


def test_the_best_evaluated_checkpoint_outlives_keep_last_and_the_link_follows_it(tiny_model_dir, reward_file,
                                                                                 tmp_path, capsys):
    run = tmp_path / "run"
    # steps 1-4 periodic, step 5 the final evaluation: step 2 is best, and is no longer the newest
    _, summary = _train(run, tiny_model_dir, reward_file, [0.5, 0.9, 0.3, 0.9, 0.6], "trainer.total_steps=5")
    assert _kept(run) == (["step-000002", "step-000005"], "step-000002")  # a tie (step 4) keeps the earlier
    print_summary(summary)
    assert "best checkpoint (eval/avg@2 = 0.9): step 2" in capsys.readouterr().out
    # from_pretrained reads the link as a directory
    assert (run / "checkpoints" / "best" / "config.json").is_file()

    # the resume knows the best so far: a better step takes its place, a worse final one does not
    _train(run, tiny_model_dir, reward_file, [0.95, 0.2], "trainer.total_steps=7")
    assert _kept(run) == (["step-000006", "step-000007"], "step-000006")


def test_going_back_to_the_best_checkpoint_resumes_it_and_relinks(tiny_model_dir, reward_file, tmp_path):
    """checkpoint.resume=RUN/checkpoints/best goes back to that step (the later ones set aside);
    from another run's best, the new run ranks its own checkpoints afresh."""
    run = tmp_path / "run"
    _train(run, tiny_model_dir, reward_file, [0.5, 0.9, 0.3], "trainer.total_steps=3")
    assert _kept(run) == (["step-000002", "step-000003"], "step-000002")

    with pytest.warns(UserWarning, match="moved 1 checkpoint"):
        back, _ = _train(run, tiny_model_dir, reward_file, [0.4], "trainer.total_steps=3",
                         f"checkpoint.resume={run / 'checkpoints' / 'best'}")
    assert back.best_checkpoint == (2, 0.9)
    assert _kept(run) == (["step-000002", "step-000003"], "step-000002")

    other = tmp_path / "other"
    started, _ = _train(other, tiny_model_dir, reward_file, [0.1], "trainer.total_steps=3",
                        f"checkpoint.resume={run / 'checkpoints' / 'step-000002'}")
    assert started.best_checkpoint == (3, 0.1)  # not run's 0.9, whose checkpoint is not this run's
    assert _kept(other) == (["step-000003"], "step-000003")


def test_an_evaluation_without_the_metric_is_checkpointed_unranked_and_said_once(tiny_model_dir, reward_file,
                                                                                 tmp_path):
    run = tmp_path / "run"
    with pytest.warns(UserWarning, match=r"keep_best=eval/avg@2: the evaluation of step 1 did not log it") as said:
        _train(run, tiny_model_dir, reward_file, [None, None, 0.2], "trainer.total_steps=3")
    assert sum("keep_best" in str(w.message) for w in said) == 1
    assert _kept(run) == (["step-000003"], "step-000003")


def test_a_run_without_keep_best_has_no_link_and_rotates_as_before(tiny_model_dir, reward_file, tmp_path):
    run = tmp_path / "run"
    _train(run, tiny_model_dir, reward_file, [0.9, 0.1, 0.1], "trainer.total_steps=3", "checkpoint.keep_best=null")
    assert _kept(run) == (["step-000003"], None)


@pytest.mark.parametrize(("overrides", "said"), [
    (["eval.every_steps=0"], "needs held-out data (data.eval_files) and evaluations during training"),
    (["data.eval_files=[]"], "needs held-out data"),
    (["eval.k=4"], "log @4 metrics (eval.k=4), not @2; name eval/avg@4 or set eval.k=2"),
    (["checkpoint.keep_best=eval/truncation_rate"], "not a held-out metric that grows as the policy improves"),
    (["checkpoint.keep_best=avg@2"], "not a held-out metric"),
])
def test_keep_best_says_what_it_needs(tiny_model_dir, reward_file, tmp_path, overrides, said):
    with pytest.raises(ConfigError, match=said.replace("(", r"\(").replace(")", r"\)")):
        tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *BEST, *overrides)


@pytest.mark.parametrize("metric", ["eval/avg@2", "eval/maj@2", "eval/score_mean", "eval/arithmetic/pass@2",
                                    "eval/reward/parity/score", "eval/arithmetic/reward/parity/score"])
def test_keep_best_takes_the_metrics_evaluations_log(tiny_model_dir, reward_file, tmp_path, metric):
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *BEST, f"checkpoint.keep_best={metric}")
    assert cfg.checkpoint.keep_best == metric
