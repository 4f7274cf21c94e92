"""Where a resumed run goes on from: starting over or going back sets later checkpoints aside, and
rerunning the same command (a requeued job) goes on from the run's newest checkpoint rather than
back to the one it names, even after that one was deleted."""

from __future__ import annotations

import shutil

import pytest

from dapo.rewards.user_functions import RewardFunctionError
from dapo.trainer import Trainer
from dapo.trainer.checkpoint import load_trainer_state
from dapo.trainer.metrics import read_metrics
from tests.trainer.conftest import tiny_config


def stopping_after_step(step: int, trainer: Trainer) -> Trainer:
    """``trainer``, whose train() raises KeyboardInterrupt (a preemption) once ``step`` is done."""
    steps = trainer.step_once

    def preempted():
        if trainer.step == step:
            raise KeyboardInterrupt
        return steps()

    trainer.step_once = preempted
    return trainer


def test_starting_over_or_going_back_sets_the_abandoned_checkpoints_aside(tiny_model_dir, reward_file, tmp_path):
    """checkpoint.resume=never in a used directory, or a resume from an earlier checkpoint: the
    later checkpoints of the abandoned attempt must neither be resumed by resume=auto nor make
    keep_last delete the new attempt's checkpoints."""
    run = tmp_path / "run"
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "eval.every_steps=0")).train()  # steps 1-3
    checkpoints = run / "checkpoints"
    going_back = tiny_config(tiny_model_dir, run, reward_file, "eval.every_steps=0", "checkpoint.keep_last=1",
                             f"checkpoint.resume={checkpoints / 'step-000001'}", "trainer.total_steps=2")
    with pytest.warns(UserWarning, match=r"moved 2 checkpoint\(s\) after step 1 \(step-000002, step-000003\)"):
        Trainer(going_back).train()
    assert [p.name for p in checkpoints.glob("step-*")] == ["step-000002"]  # the new attempt's, kept
    [aside] = checkpoints.glob("abandoned-*")
    # the abandoned attempt's logs too, whole, beside its checkpoints (the run's own are cut back to step 1)
    assert sorted(p.name for p in aside.iterdir()) == ["completions.jsonl", "metrics.jsonl", "step-000002", "step-000003"]
    assert [row["step"] for row in read_metrics(aside) if "actor/loss" in row] == [1, 2, 3]
    assert load_trainer_state(checkpoints / "step-000002")["final"] is True
    # TensorBoard shows the attempt that goes on: the abandoned steps 2 and 3 are purged
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    board = EventAccumulator(str(run / "tensorboard"))
    board.Reload()
    assert [event.step for event in board.Scalars("actor/loss")] == [1, 2]
    last = [row for row in read_metrics(run) if "actor/loss" in row][-1]
    assert board.Scalars("actor/loss")[-1].value == pytest.approx(last["actor/loss"])
    # starting over: every checkpoint is set aside; a crash after step 1 resumes the new attempt
    shutil.rmtree(aside)
    over = tiny_config(tiny_model_dir, run, reward_file, "eval.every_steps=0", "checkpoint.resume=never",
                       "trainer.total_steps=1")
    with pytest.warns(UserWarning, match=r"checkpoint.resume=never: the lines of metrics.jsonl and completions.jsonl "
                                         r"this run does not continue are dropped; the files as they were are copied to "):
        Trainer(over).train()
    assert [p.name for p in checkpoints.glob("step-*")] == ["step-000001"]
    assert [row["step"] for row in read_metrics(run) if "actor/loss" in row] == [1]
    assert [row["step"] for row in read_metrics(run)].count(0) == 1  # the new start's step 0, not the old one's too
    [aside] = checkpoints.glob("abandoned-*")  # what starting over would have emptied: kept
    assert [row["step"] for row in read_metrics(aside) if "actor/loss" in row] == [1, 2]


# three runs (5 s); the default suite keeps the rerun of a command that went back
@pytest.mark.slow
def test_rerunning_a_run_started_from_another_runs_checkpoint_goes_on(tiny_model_dir, reward_file, tmp_path):
    """checkpoint.resume=<another run's checkpoint> is where the run starts: rerunning the same
    command after a crash must resume this run's newest checkpoint, not start over from it."""
    first = tmp_path / "first"
    Trainer(tiny_config(tiny_model_dir, first, reward_file, "eval.every_steps=0", "trainer.total_steps=1")).train()
    command = tiny_config(tiny_model_dir, tmp_path / "second", reward_file, "eval.every_steps=0",
                          f"checkpoint.resume={first / 'checkpoints' / 'step-000001'}", "trainer.total_steps=3")
    crashing = stopping_after_step(2, Trainer(command))  # a crash after step 2 has been checkpointed
    with pytest.raises(KeyboardInterrupt):
        crashing.train()
    from dapo.trainer.resume import ResumePoint, resolve_resume

    with pytest.warns(UserWarning, match="resuming its newest"):  # a redirect is the run's own choice
        point = resolve_resume(str(first / "checkpoints" / "step-000001"), tmp_path / "second")
    assert point == ResumePoint(tmp_path / "second" / "checkpoints" / "step-000002", automatic=True)
    with pytest.warns(UserWarning, match="resuming its newest, .*step-000002"):
        summary = Trainer(command).train()
    assert summary.steps == 3
    assert [p.name for p in (tmp_path / "second" / "checkpoints").glob("abandoned-*")] == []
    # a directory whose checkpoints did not start from PATH (an unrelated attempt) starts from PATH
    other = tmp_path / "other"
    Trainer(tiny_config(tiny_model_dir, other, reward_file, "eval.every_steps=0", "trainer.total_steps=1")).train()
    start = first / "checkpoints" / "step-000001"
    assert resolve_resume(str(start), other) == ResumePoint(start, automatic=False)
    # ... and nothing of that attempt goes on: its metrics were kept below the resumed step, and
    # its checkpoint stayed where keep_last and resume=auto see it
    from_start = tiny_config(tiny_model_dir, other, reward_file, "eval.every_steps=0", f"checkpoint.resume={start}",
                             "trainer.total_steps=2")
    with pytest.warns(UserWarning, match=r"moved 1 checkpoint\(s\) after step 0 \(step-000001\)"):
        Trainer(from_start).train()
    assert [p.name for p in (other / "checkpoints").glob("step-*")] == ["step-000002"]
    assert {row["step"] for row in read_metrics(other)} == {2}


def test_rerunning_a_command_that_went_back_goes_on_instead_of_back_again(tiny_model_dir, reward_file, tmp_path):
    """checkpoint.resume=<this run's step 1> in a job script that is requeued after a preemption:
    each restart went back to step 1 again, setting aside what the last one had trained."""
    run, checkpoints = tmp_path / "run", tmp_path / "run" / "checkpoints"
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "eval.every_steps=0")).train()  # steps 1-3
    command = tiny_config(tiny_model_dir, run, reward_file, "eval.every_steps=0", "trainer.total_steps=4",
                          f"checkpoint.resume={checkpoints / 'step-000001'}")
    preempted = stopping_after_step(2, Trainer(command))
    with pytest.warns(UserWarning, match="moved 2 checkpoint"), pytest.raises(KeyboardInterrupt):
        preempted.train()  # went back to step 1, trained and checkpointed step 2
    with pytest.warns(UserWarning, match=r"went back to it and has checkpointed since .*: resuming its newest, "
                                         r".*step-000002"):
        summary = Trainer(command).train()
    assert summary.steps == 4 and len(list(checkpoints.glob("abandoned-*"))) == 1  # not set aside again
    assert [row["step"] for row in read_metrics(run) if "actor/loss" in row] == [1, 2, 3, 4]


def test_a_requeued_command_goes_on_after_keep_last_deleted_the_checkpoint_it_names(
    tiny_model_dir, reward_file, tmp_path, capsys
):
    """The job script's checkpoint.resume=<step 1> names a checkpoint that checkpoint.keep_last
    deletes once the run has gone on from it: the requeued command must resume the newest, not
    stop with "not a checkpoint directory" (nor start over). Likewise for another run's checkpoint
    that this run started from, deleted by that run's own retention."""
    from dapo.preflight import resume_problems
    from dapo.trainer.resume import ResumePoint, resolve_resume

    run, checkpoints = tmp_path / "run", tmp_path / "run" / "checkpoints"
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "eval.every_steps=0")).train()  # steps 1-3
    command = tiny_config(tiny_model_dir, run, reward_file, "eval.every_steps=0", "trainer.total_steps=4",
                          "checkpoint.keep_last=1", f"checkpoint.resume={checkpoints / 'step-000001'}")
    preempted = stopping_after_step(2, Trainer(command))
    with pytest.warns(UserWarning, match="moved 2 checkpoint"), pytest.raises(KeyboardInterrupt):
        preempted.train()  # went back to step 1, checkpointed step 2: keep_last=1 deleted step 1
    assert [p.name for p in checkpoints.glob("step-*")] == ["step-000002"]
    assert resume_problems(command) == []  # the preflight check agrees
    with pytest.warns(UserWarning, match=r"went back to it .*: resuming its newest, .*step-000002"):
        summary = Trainer(command).train()
    assert summary.steps == 4 and summary.resumed_at == 2
    from dapo.trainer.summary import print_summary

    print_summary(summary)  # the seconds are this attempt's: the title says how many steps they hold
    assert "4 steps (2 in" in capsys.readouterr().out.replace("\n", " ")
    assert [row["step"] for row in read_metrics(run) if "actor/loss" in row] == [1, 2, 3, 4]

    # a run started from another run's checkpoint, which that run's retention deleted since
    second = tmp_path / "second"
    start = checkpoints / "step-000004"
    Trainer(tiny_config(tiny_model_dir, second, reward_file, "eval.every_steps=0", "trainer.total_steps=5",
                        f"checkpoint.resume={start}")).train()
    shutil.rmtree(start)
    with pytest.warns(UserWarning, match="it started this run"):
        assert resolve_resume(str(start), second) == ResumePoint(second / "checkpoints" / "step-000005", automatic=True)
    # a deleted checkpoint that no checkpoint of the run descends from is still an error
    with pytest.raises(FileNotFoundError, match="not auto, never or a checkpoint directory"):
        resolve_resume(str(checkpoints / "step-000002"), second)


def test_resuming_a_set_aside_checkpoint_continues_nothing_of_the_attempt_that_went_back(
    tiny_model_dir, reward_file, tmp_path
):
    """A set-aside checkpoint's log line counts are of files that the attempt which went back has
    rewritten since: its metrics (kept up to the resumed step) and its checkpoints must go."""
    run, checkpoints = tmp_path / "run", tmp_path / "run" / "checkpoints"
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "eval.every_steps=0")).train()  # steps 1-3
    going_back = tiny_config(tiny_model_dir, run, reward_file, "eval.every_steps=0", "trainer.total_steps=2",
                             f"checkpoint.resume={checkpoints / 'step-000001'}")
    with pytest.warns(UserWarning, match="moved 2 checkpoint"):
        Trainer(going_back).train()  # step 2 again
    [aside] = checkpoints.glob("abandoned-*")
    back_again = tiny_config(tiny_model_dir, run, reward_file, "eval.every_steps=0", "trainer.total_steps=4",
                             f"checkpoint.resume={aside / 'step-000003'}")
    with pytest.warns(UserWarning, match=r"moved 2 checkpoint\(s\) after step 0 \(step-000001, step-000002\)"):
        Trainer(back_again).train()
    assert [p.name for p in checkpoints.glob("step-*")] == ["step-000004"]
    assert {row["step"] for row in read_metrics(run)} == {4}
    assert len(list(checkpoints.glob("abandoned-*"))) == 2  # two set-asides, two folders


def test_an_automatic_resume_compares_the_runs_paths_as_absolute_paths(tmp_path, monkeypatch):
    """Checkpoints save their run's paths absolute (dapo eval finds them from anywhere); a
    rerun of the command with relative paths, or an older checkpoint saved with them, is still
    the same run. Another model is not."""
    from dapo.trainer.run_dir import checkpoint_mismatch

    (tmp_path / "models" / "mine").mkdir(parents=True)
    (tmp_path / "models" / "other").mkdir()
    monkeypatch.chdir(tmp_path)
    checkpoint = tmp_path / "run" / "checkpoints" / "step-000001"
    checkpoint.mkdir(parents=True)
    for saved in ("models/mine", str(tmp_path / "models" / "mine")):  # older, and today's
        (checkpoint / "dapo_config.yaml").write_text(
            f"model: {{path: {saved}}}\ndata: {{train_files: [builtin:arithmetic]}}\n")
        for now in ("models/mine", str(tmp_path / "models" / "mine")):
            run = {"model": {"path": now}, "data": {"train_files": ["builtin:arithmetic"]}}
            assert checkpoint_mismatch(checkpoint, None, run, automatic=True) is None
        other = {"model": {"path": "models/other"}, "data": {"train_files": ["builtin:arithmetic"]}}
        assert "model.path" in checkpoint_mismatch(checkpoint, None, other, automatic=True)
        # other training data: another run too (resume=auto went on with the new data)
        other_data = {"model": {"path": "models/mine"}, "data": {"train_files": ["mine.jsonl"]}}
        assert "data.train_files" in checkpoint_mismatch(checkpoint, None, other_data, automatic=True)


def test_a_named_checkpoint_of_a_run_with_another_model_path_is_taken_saying_what_model_path_still_gives(tmp_path):
    """checkpoint.resume=PATH is taken whatever its run's model.path (another run's checkpoint may
    be continued), but the new model.path was ignored for the weights unsaid (resume audit)."""
    import warnings

    from dapo.trainer.run_dir import checkpoint_mismatch

    checkpoint = tmp_path / "run" / "checkpoints" / "step-000003"
    checkpoint.mkdir(parents=True)
    (checkpoint / "dapo_config.yaml").write_text(f"model: {{path: {tmp_path}/a}}\ndata: {{train_files: [x.jsonl]}}\n")
    other = {"model": {"path": f"{tmp_path}/b"}, "data": {"train_files": ["x.jsonl"]}}
    with pytest.warns(UserWarning, match=r"model.path .*/b' differs from the checkpoint's run's .*/a'\): training "
                                         r"goes on from step-000003's weights; model.path gives only the tokenizer"):
        assert checkpoint_mismatch(checkpoint, None, other, automatic=False) is None
    from dapo.trainer.run_dir import changed_settings

    assert changed_settings(checkpoint, other) == []  # said once, above, not again in the list of changes
    same = {"model": {"path": f"{tmp_path}/a"}, "data": {"train_files": ["y.jsonl"]}}  # the data's change: the cursor says it
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert checkpoint_mismatch(checkpoint, None, same, automatic=False) is None


def test_a_resume_names_the_settings_changed_since_its_checkpoint(tiny_model_dir, reward_file, tmp_path,
                                                                   monkeypatch):
    """Only the optimizer's were named (resume audit): clip ratios, batch sizes, rollout settings
    changed on a resume unsaid. The same command names nothing, its relative paths too (the
    checkpoint saves them absolute)."""
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    run, reward_file = Path("run"), Path(reward_file.name)
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "eval.every_steps=0", "trainer.total_steps=1")).train()
    with pytest.warns(UserWarning, match="nothing to train") as said:  # the same command again
        Trainer(tiny_config(tiny_model_dir, run, reward_file, "eval.every_steps=0", "trainer.total_steps=1")).train()
    assert not any("other settings" in str(warning.message) for warning in said)
    changed = tiny_config(tiny_model_dir, run, reward_file, "eval.every_steps=0", "trainer.total_steps=2",
                          "algorithm.clip_ratio_high=0.3")
    with pytest.warns(UserWarning, match=r"resuming step-000001 with other settings than it was saved with, which apply "
                                         r"from the resumed step: algorithm.clip_ratio_high 0.28 -> 0.3; "
                                         r"trainer.total_steps 1 -> 2$"):
        Trainer(changed).train()


def stop_in_the_evaluation_after_step_2(trainer: Trainer) -> None:
    """Ctrl-C in ``trainer``'s periodic evaluation after step 2."""
    evaluate = trainer.evaluate

    def stopped_after_step_2():
        if trainer.step == 2:
            raise KeyboardInterrupt
        return evaluate()

    trainer.evaluate = stopped_after_step_2


@pytest.mark.parametrize(("every_steps", "checkpoints"), [(1, ["step-000001", "step-000002"]), (20, ["step-000002"])])
def test_a_periodic_evaluation_stopped_checkpoints_the_step_just_trained_first(tiny_model_dir, reward_file, tmp_path,
                                                                             every_steps, checkpoints):
    """Ctrl-C (or a scheduler's SIGTERM) in the evaluation after step 2: step 2 is logged and
    checkpointed before the stop (as the final evaluation does), and the rerun trains step 3 alone
    instead of step 2 again; also where checkpoint.every_steps does not checkpoint step 2 (every 20
    steps: steps 1-2 were lost, the rerun started over, though the README says a run stopped in an
    evaluation checkpoints the step just trained first). The resume evaluates step 2 before step 3.
    """
    run = tmp_path / "run"
    command = tiny_config(tiny_model_dir, run, reward_file, f"checkpoint.every_steps={every_steps}")  # evaluated every 2
    trainer = Trainer(command)
    stop_in_the_evaluation_after_step_2(trainer)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    assert sorted(p.name for p in (run / "checkpoints").glob("step-*")) == checkpoints
    assert [row["step"] for row in read_metrics(run) if "actor/loss" in row] == [1, 2]
    summary = Trainer(command).train()
    assert (summary.resumed_at, summary.steps) == (2, 3)
    assert [row["step"] for row in read_metrics(run) if "actor/loss" in row] == [1, 2, 3]
    # step 2's evaluation, stopped, done first by the resume (was: lost, no eval row of step 2)
    assert [row["step"] for row in read_metrics(run) if any(key.startswith("eval/avg@") for key in row)] == [0, 2, 3]


def test_an_evaluation_stopped_at_the_step_a_failing_reward_stops_the_run_is_still_owed(tiny_model_dir, reward_file,
                                                                                       tmp_path, monkeypatch):
    """(the reward's stop checkpointed the step as if its evaluation had run: the resume skipped it,
    and step 2 never had an eval row nor a keep_best rank)"""
    run = tmp_path / "run"
    trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file, "checkpoint.every_steps=20"))
    stop_in_the_evaluation_after_step_2(trainer)
    record = trainer.record_step

    def reward_stop_at_step_2(result):
        record(result)
        if trainer.step == 2:
            raise RewardFunctionError("my_reward failed on every response of 2 steps")

    monkeypatch.setattr(trainer, "record_step", reward_stop_at_step_2)
    with pytest.raises(RewardFunctionError, match="Step 2 is checkpointed"):
        trainer.train()
    assert load_trainer_state(run / "checkpoints" / "step-000002", peek=True)["evaluation_owed"] is True


def test_a_resume_without_periodic_evaluations_skips_the_one_a_stop_interrupted(tiny_model_dir, reward_file, tmp_path):
    """(a run stopped to skip a long evaluation, resumed with eval.every_steps=0)"""
    run = tmp_path / "run"
    trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file))  # evaluated every 2 steps, 3 in all
    stop_in_the_evaluation_after_step_2(trainer)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "eval.every_steps=0")).train()
    assert [row["step"] for row in read_metrics(run) if any(key.startswith("eval/avg@") for key in row)] == [0, 3]


def test_a_changed_setting_is_said_as_written_though_its_value_names_a_folder_here(tmp_path, monkeypatch):
    """(said "algorithm.policy_loss '/tmp/x/gspo' -> 'decoupled_clip'" from a directory holding a
    run folder named gspo: every value was made an absolute path where one of that name existed)"""
    from dapo.trainer.run_dir import changed_settings

    monkeypatch.chdir(tmp_path)
    (tmp_path / "gspo").mkdir()
    checkpoint = tmp_path / "gspo" / "checkpoints" / "step-000003"
    checkpoint.mkdir(parents=True)
    (checkpoint / "dapo_config.yaml").write_text(
        f"algorithm: {{policy_loss: gspo}}\ndata: {{eval_files: [{tmp_path}/gspo]}}\n")
    now = {"algorithm": {"policy_loss": "decoupled_clip"}, "data": {"eval_files": ["gspo"]}}  # the same folder
    assert changed_settings(checkpoint, now) == ["algorithm.policy_loss 'gspo' -> 'decoupled_clip'"]


def test_a_setting_added_since_the_checkpoint_was_saved_is_no_change(tmp_path):
    """A checkpoint of an older dapo-rl lacks the fields added since (resources.start_attempts):
    resuming it said each as "None -> its default", a change nobody made; a removed or changed
    setting is still said, and so is a new entry of a mapping the checkpoint's config holds."""
    from dapo.trainer.run_dir import changed_settings

    checkpoint = tmp_path / "step-000003"
    checkpoint.mkdir()
    (checkpoint / "dapo_config.yaml").write_text("resources: {nnodes: 1, cpus_per_rank: 2.0, gone: 3}\n"
                                                 "data: {chat_template_kwargs: {}}\n")
    now = {"resources": {"nnodes": 1, "cpus_per_rank": 1.0, "start_attempts": 2},
           "data": {"chat_template_kwargs": {"enable_thinking": False}}, "python_path": []}
    assert changed_settings(checkpoint, now) == ["data.chat_template_kwargs.enable_thinking None -> False",
                                                 "resources.cpus_per_rank 2.0 -> 1.0", "resources.gone 3 -> None"]
