"""The metric sinks across attempts of one run directory: W&B (against a stand-in ``wandb`` module) and TensorBoard."""

from __future__ import annotations

import json
import sys
import time
import types
from types import SimpleNamespace

import pytest

from dapo.trainer.metrics import MetricsLogger
from dapo.trainer.wandb_run import WANDB_RUN_FILE


@pytest.fixture
def fake_wandb(monkeypatch):
    """A stand-in with W&B's step rule: a row logged with ``step=`` below the run's current step
    is dropped, and a resumed run's current step is one past the last it logged. ``logged``: the
    x-axis value (trainer/step, or step=) of each row kept; ``exit_codes``: what finish() was given."""
    module = types.ModuleType("wandb")
    module.inits, module.history = [], {}

    def init(**kwargs):
        module.inits.append(kwargs)
        run_id = kwargs.get("id") or f"run{len(module.inits)}"
        earlier = module.history.get(run_id, []) if kwargs.get("resume") else []
        run = SimpleNamespace(id=run_id, logged=[], exit_codes=[], step_metrics={},
                              current=earlier[-1] + 1 if earlier else None)
        module.history[run_id] = run.logged

        def log(metrics, step=None):
            if step is not None:
                if run.current is not None and step < run.current:
                    return  # W&B: "steps must be monotonically increasing, so this data will be ignored"
                run.current = step
            run.logged.append(step if step is not None else metrics[run.step_metrics["*"]])

        run.log = log
        run.define_metric = lambda name, step_metric=None: run.step_metrics.__setitem__(name, step_metric)
        run.finish = lambda exit_code=None: run.exit_codes.append(exit_code)
        return run

    module.init = init
    monkeypatch.setitem(sys.modules, "wandb", module)
    return module


def attempt(run_dir, resumed_at: int, steps: range, line_counts: list[int] | None = None) -> MetricsLogger:
    logger = MetricsLogger(run_dir, tensorboard=False, wandb=True, wandb_project="p", config={})
    logger.truncate_after(resumed_at, line_counts)  # what the run directory does before the first step
    for step in steps:
        logger.log(step, {"loss": 1.0})
    logger.close()
    return logger


def test_a_resume_goes_on_in_its_wandb_run_unless_wandb_holds_lines_it_drops(fake_wandb, tmp_path):
    attempt(tmp_path, -1, range(0, 3))  # a fresh run: steps 0-2, killed after a checkpoint at step 2
    first = fake_wandb.inits[-1]
    group = first["group"]
    assert "id" not in first and group.startswith(tmp_path.name + "-")  # the directory's own group
    attempt(tmp_path, 2, range(3, 6))  # resumed at its last logged step: the same W&B run goes on
    assert (fake_wandb.inits[-1]["id"], fake_wandb.inits[-1]["resume"], fake_wandb.inits[-1]["group"]) == (
        "run1", "allow", group)
    # killed at step 5 after a checkpoint at step 4: W&B holds step 5, which the resume logs again
    with pytest.warns(UserWarning, match=r"W&B run run1 holds steps 5-5 .* new run in W&B group"):
        attempt(tmp_path, 4, range(5, 7))
    assert "id" not in fake_wandb.inits[-1] and fake_wandb.inits[-1]["group"] == group
    assert json.loads((tmp_path / WANDB_RUN_FILE).read_text()) == {"id": "run3", "group": group}
    attempt(tmp_path, 6, range(7, 8))  # and that run goes on in its turn
    assert (fake_wandb.inits[-1]["id"], fake_wandb.inits[-1]["group"]) == ("run3", group)
    # killed in the final evaluation, logged at the checkpoint's own step 7 after the checkpoint
    # (which recorded 8 lines): the resume drops that line and logs the evaluation again at step 7
    logger = MetricsLogger(tmp_path, tensorboard=False, wandb=False, wandb_project="p", config={})
    logger.log(7, {"eval/avg@4": 0.5})
    with pytest.warns(UserWarning, match=r"holds steps 7-7"):
        attempt(tmp_path, 7, range(7, 8), line_counts=[8, 0])
    assert "id" not in fake_wandb.inits[-1]
    # checkpoint.resume=never (or a rerun killed before its first checkpoint): a run of its own, in
    # the group of the directory's runs
    with pytest.warns(UserWarning, match=r"W&B run run5 holds the attempt this run starts over from"):
        attempt(tmp_path, -1, range(0, 1))
    assert "id" not in fake_wandb.inits[-1] and fake_wandb.inits[-1]["group"] == group


def test_wandb_opens_at_first_use_and_only_once(fake_wandb, tmp_path):
    logger = MetricsLogger(tmp_path, tensorboard=False, wandb=True, wandb_project="p", config={"a": 1})
    assert fake_wandb.inits == []  # not before the resume decision
    logger.log(1, {"loss": 1.0})
    logger.log_completions(1, [])
    logger.log(2, {"loss": 1.0})
    assert len(fake_wandb.inits) == 1 and fake_wandb.inits[0]["config"] == {"a": 1}
    assert logger._wandb.logged == [1, 2]


def test_an_evaluation_logged_at_the_step_a_run_resumed_at_reaches_wandb(fake_wandb, tmp_path):
    """Stopped in its final evaluation after step 2's row, a run resumes at step 2 in the same W&B
    run and logs the evaluation at step 2: with wandb.log(step=2) W&B dropped it (the resumed run's
    steps start at 3), and the headline avg@k was missing from W&B alone."""
    first = attempt(tmp_path, -1, range(0, 3))
    assert first._wandb.exit_codes == [0]
    resumed = MetricsLogger(tmp_path, tensorboard=False, wandb=True, wandb_project="p", config={})
    resumed.truncate_after(2, None)
    resumed.log(2, {"eval/avg@4": 0.75})
    resumed.close()
    assert fake_wandb.inits[-1]["resume"] == "allow" and resumed._wandb is not first._wandb
    assert resumed._wandb.logged == [2] and resumed._wandb.step_metrics["*"] == "trainer/step"


def test_a_run_closed_by_an_exception_is_marked_failed_in_wandb(fake_wandb, tmp_path):
    logger = MetricsLogger(tmp_path, tensorboard=False, wandb=True, wandb_project="p", config={})
    logger.log(0, {"loss": 1.0})
    with pytest.raises(KeyboardInterrupt):
        try:
            raise KeyboardInterrupt
        finally:
            logger.close()  # as Trainer.train's finally closes it
    assert logger._wandb.exit_codes == [1]


def test_a_damaged_wandb_run_file_is_an_error_naming_it_not_a_login_hint(fake_wandb, tmp_path):
    from dapo.errors import UserError

    (tmp_path / WANDB_RUN_FILE).write_text('{"id": "run1"}')
    logger = MetricsLogger(tmp_path, tensorboard=False, wandb=True, wandb_project="p", config={})
    with pytest.raises(UserError, match=rf"{WANDB_RUN_FILE} is damaged \(KeyError: 'group'\).* delete it"):
        logger.log(0, {"loss": 1.0})


@pytest.mark.parametrize("resumes_killed_first", [0, 1])
def test_tensorboard_keeps_one_point_per_step_after_a_kill_in_the_final_evaluation(tmp_path, resumes_killed_first):
    """The final evaluation is logged at the last checkpoint's own step, after it: a resume drops
    that line and logs the evaluation again; TensorBoard showed both points. Also when a resume
    before it dropped the line (metrics.jsonl no longer shows it) and was killed in its own final
    evaluation, before TensorBoard got its purge: then it hid only the steps after it."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    first = MetricsLogger(tmp_path, tensorboard=True, wandb=False, wandb_project="p", config={})
    first.log(1, {"loss": 1.0})
    first.log(2, {"loss": 2.0})  # the final checkpoint records these 2 lines
    first.log(2, {"eval/avg@4": 0.5})  # killed after this, before the run finished
    first.close()
    for _ in range(resumes_killed_first):
        MetricsLogger(tmp_path, tensorboard=True, wandb=False, wandb_project="p", config={}).truncate_after(2, [2, 0])
    # a resumed run is a later process: its event file sorts after the killed one's. Within one
    # second, one process's file names differ only by a counter that sorts as text (".10" before
    # ".9"), which once read the files in the wrong order in the full suite.
    time.sleep(1.01 - time.time() % 1.0)
    resumed = MetricsLogger(tmp_path, tensorboard=True, wandb=False, wandb_project="p", config={})
    resumed.truncate_after(2, [2, 0])
    resumed.log(2, {"eval/avg@4": 0.6})
    resumed.close()
    board = EventAccumulator(str(tmp_path / "tensorboard"))
    board.Reload()
    assert [(e.step, e.value) for e in board.Scalars("eval/avg@4")] == [(2, pytest.approx(0.6))]
    assert [(e.step, e.value) for e in board.Scalars("loss")] == [(1, 1.0), (2, 2.0)]  # the step's own, kept
    assert not (tmp_path / "tensorboard" / "purge_pending.json").exists()  # written into the events


def test_a_non_finite_value_is_written_as_null_and_the_line_stays_json(tmp_path):
    """json.dumps wrote Infinity and NaN, which strict JSON readers (JSON.parse, jq) refuse."""
    logger = MetricsLogger(tmp_path, tensorboard=False, wandb=False, wandb_project="p", config={})
    logger.log(1, {"loss": 0.5, "reward/f/big": float("inf"), "actor/kl": float("nan"), "n": 3})
    logger.close()

    def refuse(constant: str) -> None:
        raise ValueError(f"non-standard JSON constant {constant}")

    [row] = [json.loads(line, parse_constant=refuse) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert row == {"step": 1, "loss": 0.5, "reward/f/big": None, "actor/kl": None, "n": 3.0}


def test_the_line_counts_a_checkpoint_saves_count_every_completion(tmp_path):
    """A resume truncates completions.jsonl to the count its checkpoint saved: a step's records are
    one line each (it counted one per call, and a resume then cut the file mid-step)."""
    logger = MetricsLogger(tmp_path, tensorboard=False, wandb=False, wandb_project="p", config={})
    logger.log(1, {"loss": 0.5})
    logger.log_completions(1, [{"response": "a"}, {"response": "b"}, {"response": "c"}])
    assert logger.line_counts() == [1, 3]
    logger.close()
    assert len((tmp_path / "completions.jsonl").read_text().splitlines()) == 3


def test_documented_names_fold_k_and_the_tensorboard_gets_finite_values_only(tmp_path):
    from dapo.trainer.metric_docs import documented_name

    assert documented_name("eval/avg@32") == "eval/avg@k" and documented_name("eval/maj@4") == "eval/maj@k"
    logger = MetricsLogger(tmp_path, tensorboard=True, wandb=False, wandb_project="p", config={})
    logger.log(1, {"loss": 0.5, "actor/kl": float("nan"), "sampling/gen_rounds": 2})  # (an int: a curve too)
    logger.close()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "tensorboard")).Reload()
    assert "loss" in events.Tags()["scalars"] and "actor/kl" not in events.Tags()["scalars"]
    assert [(e.step, e.value) for e in events.Scalars("sampling/gen_rounds")] == [(1, 2.0)]


def test_a_wandb_that_cannot_start_stops_the_run_before_the_baseline_evaluation(
        tiny_model_dir, reward_file, tmp_path, monkeypatch):
    """W&B opened at the first log line, after the baseline evaluation (AIME avg@32 on a real
    run), and its error ended the run with a traceback and that evaluation lost."""
    from dapo.errors import UserError
    from dapo.trainer import Trainer
    from tests.trainer.conftest import tiny_config

    module = types.ModuleType("wandb")

    def init(**kwargs):
        raise RuntimeError("api_key not configured (no-tty)")  # as wandb.errors.UsageError says it

    module.init = init
    monkeypatch.setitem(sys.modules, "wandb", module)
    run_dir = tmp_path / "run"
    trainer = Trainer(tiny_config(tiny_model_dir, run_dir, reward_file, "logging.wandb=true"))
    evaluated = []
    monkeypatch.setattr(trainer, "evaluate", lambda: evaluated.append(1) or {})
    with pytest.raises(UserError, match=r"W&B could not start a run \(RuntimeError: api_key not configured"):
        trainer.train()
    assert evaluated == [] and not (run_dir / "metrics.jsonl").exists()


@pytest.mark.parametrize("final_evaluation_dropped", [False, True])
def test_tensorboards_server_shows_one_attempt_after_a_resume(tmp_path, final_evaluation_dropped):
    """TensorBoard's server (its plugin event accumulator) reads a resume's session start as a
    restart only after a first one, which the first attempt never wrote: it showed both attempts'
    scalars and completions past the checkpoint. The step a resume purges itself (its final
    evaluation dropped) gets its kept scalars and completions again."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    first = MetricsLogger(tmp_path, tensorboard=True, wandb=False, wandb_project="p", config={})
    for step in (1, 2, 3):
        first.log(step, {"loss": float(step)})
        first.log_completions(step, [{"prompt": "q", "response": f"first attempt, step {step}"}])
    if final_evaluation_dropped:
        first.log(3, {"eval/avg@4": 0.5})
    counts = first.line_counts()
    first.close()
    time.sleep(1.01 - time.time() % 1.0)  # the resumed process's event file sorts after the first's
    resumed = MetricsLogger(tmp_path, tensorboard=True, wandb=False, wandb_project="p", config={})
    if final_evaluation_dropped:  # resumed from step 3's checkpoint, written before the evaluation
        resumed.truncate_after(3, [counts[0] - 1, counts[1]])
        resumed.log(3, {"eval/avg@4": 0.6})
    else:  # resumed from step 2's checkpoint
        resumed.truncate_after(2, [2, 2])  # what its checkpoint recorded
        resumed.log(3, {"loss": 30.0})
        resumed.log_completions(3, [{"prompt": "q", "response": "second attempt, step 3"}])
    resumed.close()
    board = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"tensors": 0})
    board.Reload()
    losses = [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in board.Tensors("loss")]
    texts = [(e.step, tensor_util.make_ndarray(e.tensor_proto).item().decode()) for e in board.Tensors("completions/text_summary")]
    last = 3.0 if final_evaluation_dropped else 30.0
    assert losses == [(1, 1.0), (2, 2.0), (3, last)]
    assert [step for step, _ in texts] == [1, 2, 3]
    assert ("first attempt, step 3" in texts[-1][1]) is final_evaluation_dropped
    if final_evaluation_dropped:
        assert [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in board.Tensors("eval/avg@4")] == [
            (3, pytest.approx(0.6))]


def test_an_attempt_without_wandb_that_drops_steps_retires_the_wandb_run(fake_wandb, tmp_path):
    """W&B's reuse was decided from metrics.jsonl alone: an attempt with logging.wandb=false that
    went back to step 2 (dropping steps 3-5, which W&B held) left no trace of it, and the next
    attempt with W&B went on in that run, beside the abandoned steps."""
    attempt(tmp_path, -1, range(0, 6))  # steps 0-5 in W&B, killed after a checkpoint at step 2
    group = fake_wandb.inits[-1]["group"]
    without = MetricsLogger(tmp_path, tensorboard=False, wandb=False, wandb_project="p", config={})
    without.truncate_after(2, None)
    for step in (3, 4):
        without.log(step, {"loss": 2.0})
    without.close()
    assert json.loads((tmp_path / WANDB_RUN_FILE).read_text()) == {"group": group, "retired": "run1",
                                                                   "abandoned": [3, 5]}
    (tmp_path / "saved.json").write_bytes((tmp_path / WANDB_RUN_FILE).read_bytes())
    (tmp_path / WANDB_RUN_FILE).write_text("{damaged")  # an attempt without W&B is not stopped by it
    MetricsLogger(tmp_path, tensorboard=False, wandb=False, wandb_project="p", config={}).truncate_after(4, None)
    (tmp_path / "saved.json").replace(tmp_path / WANDB_RUN_FILE)
    with pytest.warns(UserWarning, match=r"W&B run run1 may hold steps 3-5, which an attempt logging without W&B "
                                         r"abandoned.* new run in W&B group"):
        attempt(tmp_path, 4, range(5, 7))  # nothing after step 4 in metrics.jsonl: it would have gone on in run1
    assert "id" not in fake_wandb.inits[-1] and fake_wandb.inits[-1]["group"] == group
    assert json.loads((tmp_path / WANDB_RUN_FILE).read_text()) == {"id": "run2", "group": group}
    attempt(tmp_path, 6, range(7, 8))  # the new run goes on in its turn
    assert fake_wandb.inits[-1]["id"] == "run2"


def test_tensorboard_shows_the_steps_an_attempt_without_it_logged_instead_of_those_they_replaced(tmp_path):
    """An attempt with logging.tensorboard=false that went back to step 2 set up no purge: the
    next attempt with TensorBoard hid only the points after its own resume step, and showed the
    first attempt's steps 3-4 where metrics.jsonl holds the second's."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    first = MetricsLogger(tmp_path, tensorboard=True, wandb=False, wandb_project="p", config={})
    for step in range(1, 6):
        first.log(step, {"loss": float(step)})
    first.close()
    without = MetricsLogger(tmp_path, tensorboard=False, wandb=False, wandb_project="p", config={})
    without.truncate_after(2, None)
    for step in (3, 4):
        without.log(step, {"loss": 10.0 * step})
    without.close()
    time.sleep(1.01 - time.time() % 1.0)  # the later process's event file sorts after the first's
    resumed = MetricsLogger(tmp_path, tensorboard=True, wandb=False, wandb_project="p", config={})
    resumed.truncate_after(4, None)
    resumed.log(5, {"loss": 50.0})
    resumed.close()
    board = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"tensors": 0})
    board.Reload()
    losses = [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in board.Tensors("loss")]
    assert losses == [(1, 1.0), (2, 2.0), (3, 30.0), (4, 40.0), (5, 50.0)]  # as metrics.jsonl has them


def test_the_completions_table_has_every_records_columns():
    """A record a scorer failed on has failed_scorers (and reward_metrics), which the others of a
    verifier-only run lack: the TensorBoard and W&B tables take every record's columns, not the
    first's (a later record's would be lost, or a KeyError)."""
    from dapo.trainer.metrics import completions_markdown

    records = [{"response": "a", "score": 1.0}, {"response": "b|c", "score": -1.0, "failed_scorers": ["judge"]}]
    assert completions_markdown(records).splitlines() == [
        "| response | score | failed_scorers |", "|---|---|---|", "| a | 1.0 |  |", "| b\\|c | -1.0 | ['judge'] |"]
