"""checkpoint.keep_best: the checkpoint of the evaluated step with the highest held-out metric is
kept out of checkpoint.keep_last's rotation and linked as checkpoints/best, across resumes."""

from __future__ import annotations

import dataclasses
import os
import shutil
import warnings
from pathlib import Path

import pytest

from dapo.config import ConfigError
from dapo.trainer import Trainer
from dapo.trainer.summary import print_summary
from tests.trainer.conftest import tiny_config

BEST = ("eval.every_steps=1", "checkpoint.every_steps=0", "checkpoint.keep_last=1",
        "checkpoint.keep_best=eval/avg@2", "eval.before_training=false")


def _train(run: Path, model: Path, reward: Path, scores: list, *extra: str) -> tuple[Trainer, object]:
    """A run whose evaluations return ``scores`` in turn as eval/avg@2 (None: an evaluation that
    logs no avg@2, as one whose reward failed on every sample)."""
    trainer = Trainer(tiny_config(model, run, reward, *BEST, *extra))
    pending = list(scores)

    def scripted() -> dict[str, float]:
        score = pending.pop(0)
        if isinstance(score, BaseException):
            raise score
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
    with pytest.warns(UserWarning, match=r"keep_best=eval/avg@2: the evaluation of step 1 did not log a finite value of it") as said:
        _train(run, tiny_model_dir, reward_file, [None, None, 0.2], "trainer.total_steps=3")
    assert sum("keep_best" in str(w.message) for w in said) == 1
    assert _kept(run) == (["step-000003"], "step-000003")


def test_maj_at_k_without_the_verifier_is_ranked_where_the_function_returns_a_pred(tiny_model_dir, reward_file,
                                                                                   tmp_path):
    """With reward.verifier_weight=0 maj@k votes on the "pred" of the reward function correctness
    comes from (verl's math_dapo returns one): the config takes it (it was refused); a function
    that returns none logs no maj@k, which the first evaluation says, with why."""
    run = tmp_path / "run"
    with pytest.warns(UserWarning, match=r"keep_best=eval/maj@2: the evaluation of step 1 did not log a finite value "
                                         r"of it \(logged: eval/avg@2, eval/pass@2\) \(maj@k votes on answers: with "
                                         r'reward.verifier_weight=0, the "pred" of the reward function'):
        _train(run, tiny_model_dir, reward_file, [0.5, 0.5], "trainer.total_steps=2", "checkpoint.keep_best=eval/maj@2")


def test_a_run_without_keep_best_has_no_link_and_rotates_as_before(tiny_model_dir, reward_file, tmp_path):
    run = tmp_path / "run"
    _train(run, tiny_model_dir, reward_file, [0.9, 0.1, 0.1], "trainer.total_steps=3", "checkpoint.keep_best=null")
    assert _kept(run) == (["step-000003"], None)


@pytest.mark.parametrize(("overrides", "said"), [
    (["eval.every_steps=0"], "needs evaluations during training (eval.every_steps > 0, now 0)"),
    # the reason it is refused, not the eval.every_steps it has (10 in the recipe)
    (["data.eval_files=[]"], "needs held-out data, and data.eval_files is empty"),
    (["eval.k=4"], "log @4 metrics (eval.k=4), not @2; name eval/avg@4 or set eval.k=2"),
    (["checkpoint.keep_best=eval/truncation_rate"], "not a held-out metric that grows as the policy improves"),
    (["checkpoint.keep_best=avg@2"], "not a held-out metric"),
    (["checkpoint.keep_best=eval/reward/parity"], "not a held-out metric"),  # its keys are reward/parity/<key>
    (["checkpoint.keep_best=eval/arithmetic/reward/parity/score"], "not a held-out metric"),  # not per source
    (["checkpoint.keep_best=eval/openai/gsm8k/avg@4"], "not @4; name eval/openai/gsm8k/avg@2"),
])
def test_keep_best_says_what_it_needs(tiny_model_dir, reward_file, tmp_path, overrides, said):
    with pytest.raises(ConfigError, match=said.replace("(", r"\(").replace(")", r"\)")):
        tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *BEST, *overrides)


@pytest.mark.parametrize("metric", ["eval/avg@2", "eval/maj@2", "eval/score_mean", "eval/arithmetic/pass@2",
                                    "eval/reward/parity/score",
                                    # verl's preprocessed data_sources hold a slash (refused before)
                                    "eval/openai/gsm8k/avg@2", "eval/lighteval/MATH/score_mean"])
def test_keep_best_takes_the_metrics_evaluations_log(tiny_model_dir, reward_file, tmp_path, metric):
    # (the verifier beside the user's reward: maj@k votes on its extracted answers)
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *BEST, f"checkpoint.keep_best={metric}",
                      "reward.verifier_weight=1")
    assert cfg.checkpoint.keep_best == metric


# three runs (6 s); the default suite keeps going back to the best checkpoint
@pytest.mark.slow
def test_a_rerun_of_a_command_that_went_back_to_best_goes_on_not_back_again(tiny_model_dir, reward_file, tmp_path):
    """checkpoint.resume=RUN/checkpoints/best (own run, or another run's) is honoured once: the link
    moved on since, and a requeued job's rerun went back to its new target, setting the progress aside."""
    run, other = tmp_path / "run", tmp_path / "other"
    best = f"checkpoint.resume={run / 'checkpoints' / 'best'}"
    _train(run, tiny_model_dir, reward_file, [0.5, 0.9, 0.3], "trainer.total_steps=3")
    _train(run, tiny_model_dir, reward_file, [0.95, 0.1, 0.1], "trainer.total_steps=5", best)  # back to 2
    assert _kept(run) == (["step-000003", "step-000005"], "step-000003")
    _train(other, tiny_model_dir, reward_file, [0.1], "trainer.total_steps=3", best)  # from run's step 3
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        again, _ = _train(run, tiny_model_dir, reward_file, [], "trainer.total_steps=5", best)
        assert again.step == 5
        _train(other, tiny_model_dir, reward_file, [0.2, 0.1], "trainer.total_steps=5", best)
    assert not [w for w in said if "moved" in str(w.message)]  # nothing set aside
    assert _kept(other) == (["step-000004", "step-000005"], "step-000004")


def test_a_resume_relinks_to_its_checkpoint_s_best_and_ranks_afresh_under_another_metric(
        tiny_model_dir, reward_file, tmp_path):
    run = tmp_path / "run"
    _train(run, tiny_model_dir, reward_file, [0.5, 0.9, 0.95], "trainer.total_steps=3", "checkpoint.keep_last=3")
    assert _kept(run) == (["step-000001", "step-000002", "step-000003"], "step-000003")
    back = Trainer(tiny_config(tiny_model_dir, run, reward_file, *BEST, "checkpoint.keep_last=3",
                               f"checkpoint.resume={run / 'checkpoints' / 'step-000002'}"))
    with pytest.warns(UserWarning, match="moved 1 checkpoint"):
        back.resume()  # step 3, the best, set aside: the link follows step 2's own record
    back.close()
    assert back.best_checkpoint == (2, 0.9) and _kept(run) == (["step-000001", "step-000002"], "step-000002")
    other = Trainer(tiny_config(tiny_model_dir, run, reward_file, *BEST, "checkpoint.keep_best=eval/pass@2"))
    other.resume()
    other.close()
    assert other.best_checkpoint is None and _kept(run)[1] is None  # eval/avg@2's values rank nothing of pass@2


def test_a_copy_that_followed_the_link_resumes_and_keeps_its_best_directory(tiny_model_dir, reward_file, tmp_path):
    """shutil.copytree (cp -rL, a bucket) turns the link into a directory: every resume of the copy
    crashed in replacing it (IsADirectoryError), after setting checkpoints aside."""
    run, copy = tmp_path / "run", tmp_path / "copy"
    _train(run, tiny_model_dir, reward_file, [0.9, 0.5], "trainer.total_steps=2")
    shutil.copytree(run, copy, symlinks=False)
    (copy / "checkpoints" / ".tmp-best-123").symlink_to("step-000001")  # a killed run's half-made link
    with pytest.warns(UserWarning, match="checkpoints/best is a directory, not the link"):
        resumed, _ = _train(copy, tiny_model_dir, reward_file, [0.95], "trainer.total_steps=3")
    assert resumed.step == 3 and (copy / "checkpoints" / "best").is_dir()
    assert not (copy / "checkpoints" / ".tmp-best-123").is_symlink()


def test_an_owed_evaluation_of_another_run_s_checkpoint_ranks_nothing(tiny_model_dir, reward_file, tmp_path):
    """A run started from another run's checkpoint whose periodic evaluation was stopped does that
    evaluation first: it ranked a step this run has no checkpoint of, and kept none of its own."""
    first, second = tmp_path / "first", tmp_path / "second"
    with pytest.raises(KeyboardInterrupt):
        _train(first, tiny_model_dir, reward_file, [0.1, KeyboardInterrupt()], "trainer.total_steps=4")
    started, _ = _train(second, tiny_model_dir, reward_file, [0.99, 0.2, 0.1], "trainer.total_steps=4",
                        f"checkpoint.resume={first / 'checkpoints' / 'step-000002'}")
    assert started.best_checkpoint == (3, 0.2) and _kept(second) == (["step-000003", "step-000004"], "step-000003")


def test_keep_best_of_a_multi_rank_run_needs_its_checkpoints_exported(tiny_model_dir, reward_file, tmp_path):
    with pytest.raises(ConfigError, match="checkpoint.hf_export=final the checkpoints of a multi-rank run"):
        tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *BEST, "checkpoint.hf_export=final",
                    "resources.devices_per_node=2")
    tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *BEST, "checkpoint.hf_export=final")  # one process


def test_the_metrics_an_evaluation_logs_are_the_ones_keep_best_takes(tiny_model_dir, reward_file, tmp_path):
    """checkpoint.keep_best's names (dapo.config.run.BEST_METRIC) against a real evaluation's keys: it
    took eval/<source>/reward/... and eval/reward/<function>, which no evaluation logs."""
    from dapo.config.run import BEST_METRIC

    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *BEST))
    try:
        logged = trainer.evaluate()
    finally:
        trainer.close()
    ranked = {key for key in logged if BEST_METRIC.match(key)}
    assert {"eval/avg@2", "eval/pass@2", "eval/score_mean", "eval/reward/parity/score"} <= ranked
    assert ranked <= {key for key in logged if "@" in key or key.endswith("score_mean") or "/reward/" in key}


def test_a_record_of_the_best_link_s_target_written_before_its_name_was_kept_is_still_known(tmp_path):
    """went_back_to records written before the link's own name was kept hold its target
    (checkpoints/step-000003): a rerun naming checkpoints/best is still known as a rerun."""
    from dapo.trainer.resume import records_checkpoint

    (tmp_path / "checkpoints" / "step-000003").mkdir(parents=True)
    (tmp_path / "checkpoints" / "best").symlink_to("step-000003")
    best = tmp_path / "checkpoints" / "best"
    assert records_checkpoint("checkpoints/step-000003", best, tmp_path)
    assert records_checkpoint("checkpoints/best", best, tmp_path)
    assert not records_checkpoint("checkpoints/step-000002", best, tmp_path)
    # an older, absolute record is compared by its part under the LAST checkpoints/ (a run directory
    # may itself sit under a folder named checkpoints)
    step = tmp_path / "checkpoints" / "step-000003"
    assert records_checkpoint("/x/checkpoints/r/checkpoints/step-000003", step, tmp_path)
    assert not records_checkpoint("/x/checkpoints/r/checkpoints/step-000002", step, tmp_path)


@pytest.mark.parametrize("change", ["eval.max_problems=1", "eval.temperature=0.5", "rollout.top_k=5 algorithm.old_logprobs=recompute",
                                    "eval answers"])
def test_a_resume_that_changed_the_evaluation_ranks_afresh_and_says_so(tiny_model_dir, reward_file, tmp_path,
                                                                       change: str):
    """The best value of the old evaluation (8 problems) was compared with the new one's (1): the
    first new value above it took the best, and keep_last then deleted the real best's checkpoint,
    unsaid. Settings that leave the evaluation as it was keep the best."""
    run = tmp_path / "run"
    _train(run, tiny_model_dir, reward_file, [0.9, 0.5], "trainer.total_steps=2")
    assert _kept(run) == (["step-000001", "step-000002"], "step-000001")
    if change == "eval answers":  # the same held-out prompts, another answer to one of them
        trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file, *BEST))
        held_out = trainer.run.data.eval.problems
        held_out[0] = dataclasses.replace(held_out[0], ground_truth=held_out[0].ground_truth + "1")
    else:
        trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file, *BEST, *change.split()))
    with pytest.warns(UserWarning, match=r"changed since this checkpoint: step 1's eval/avg@2 = 0.9 was measured on "
                                         r"another evaluation, so checkpoint.keep_best ranks afresh"):
        trainer.resume()
    trainer.close()
    assert trainer.best_checkpoint is None
    same = Trainer(tiny_config(tiny_model_dir, run, reward_file, *BEST, "eval.every_steps=2", "eval.seed=5"))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*keep_best ranks afresh")
        same.resume()
    same.close()
    assert same.best_checkpoint == (1, 0.9)


@pytest.mark.slow  # four runs (7 s)
def test_a_requeued_run_started_from_another_run_s_best_goes_on_after_the_link_moved(tiny_model_dir, reward_file,
                                                                                     tmp_path):
    """The run it started from went on and its checkpoints/best now names a later step: the rerun of
    the command (checkpoint.resume=RUN/checkpoints/best, as the job was queued) knows it by the
    link's own name, not its target, and goes on from its own newest instead of starting over."""
    run, other = tmp_path / "run", tmp_path / "other"
    best = f"checkpoint.resume={run / 'checkpoints' / 'best'}"
    _train(run, tiny_model_dir, reward_file, [0.9, 0.5], "trainer.total_steps=2")
    started, _ = _train(other, tiny_model_dir, reward_file, [0.3, 0.2], "trainer.total_steps=3", best)  # from 1
    assert started.step == 3
    _train(run, tiny_model_dir, reward_file, [0.95], "trainer.total_steps=3")
    assert _kept(run)[1] == "step-000003"  # the link moved on
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        again, _ = _train(other, tiny_model_dir, reward_file, [0.1], "trainer.total_steps=4", best)
    assert [w for w in said if "it started this run" in str(w.message)]
    assert not [w for w in said if "moved" in str(w.message)]  # its own checkpoints not set aside
    assert again.step == 4 and _kept(other) == (["step-000002", "step-000004"], "step-000002")
