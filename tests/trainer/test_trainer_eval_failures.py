"""A reward that cannot score at evaluation time is counted and said, never reported as an
accuracy: eval/reward_errors, eval/reward_timeouts and eval/reward_failures/<function> in the
metrics; a warning naming the function, how many samples it failed on and its first error; and
when the scorer that decides correctness failed on every sample, no avg@k / pass@k / maj@k
(`dapo eval` stops with a one-line error, a training run's evaluation warns and logs the counts)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from dapo.builtin import build_tokenizer
from dapo.cli.main import main as dapo_main
from dapo.config.schema import RewardConfig
from dapo.data.records import Problem
from dapo.rewards import RewardScorer
from dapo.rollout.base import SamplingParams
from dapo.trainer import Trainer
from dapo.trainer.evaluate import evaluate
from dapo.trainer.metric_docs import METRICS, documented_name
from dapo.trainer.metrics import read_metrics
from tests.trainer.conftest import tiny_config
from tests.trainer.test_trainer_evaluate import ScriptedEngine

JUDGES = '''
def judge_down(response, ground_truth, extra):
    raise ConnectionError("judge at http://judge:8000 is down")

def judge_flaky(response, ground_truth, extra):
    if int(ground_truth) % 2:
        raise ConnectionError("judge dropped the request")
    return {"score": 1.0, "acc": True}

def judge_of_easy(response, ground_truth, extra):
    if extra["data_source"] != "easy":
        raise ConnectionError("no judge for " + extra["data_source"])
    return {"score": 1.0, "acc": True}

def judge_of_wrong_answers(response, ground_truth, extra):
    if extra["data_source"] == "hard" and "-1" not in response:
        raise ConnectionError("judge timed out")
    return {"score": 0.0, "acc": "-1" not in response}
'''


@pytest.fixture()
def judges(tmp_path: Path) -> Path:
    path = tmp_path / "judges.py"
    path.write_text(JUDGES)
    return path


def problems_of(count: int, source: str = "arith") -> list[Problem]:
    return [Problem(uid=f"{source}{i}", prompt=f"{i} + 1 =", ground_truth=str(i + 1), data_source=source)
            for i in range(count)]


def run_eval(problems: list[Problem], reward: RewardConfig, right: list[int] | None = None):
    tokenizer = build_tokenizer()
    engine = ScriptedEngine(tokenizer, problems, right or [2] * len(problems))
    with RewardScorer(reward) as scorer:
        return evaluate(engine, tokenizer, scorer, [[1]] * len(problems), problems, SamplingParams(n=2, seed=0))


def test_a_judge_down_on_every_sample_gives_no_accuracy_but_counts(judges):
    reward = RewardConfig(num_workers=1, verifier_weight=0, functions=[{"path": f"{judges}:judge_down"}])
    result = run_eval(problems_of(4), reward)
    m = result.metrics
    assert not any(key.startswith(("eval/avg@", "eval/pass@", "eval/maj@")) for key in m), m  # not 0.0: unmeasured
    assert m["eval/reward_errors"] == 8 and m["eval/reward_timeouts"] == 0
    assert m["eval/reward_failures/judge_down"] == 8
    assert m["eval/num_problems"] == 4  # what was measured stays
    for key in m:
        assert documented_name(key) in METRICS, key
    assert "judge_down" in result.unscored and "8 of 8" in result.unscored
    assert "ConnectionError: judge at http://judge:8000 is down" in result.unscored
    assert "\n" not in result.unscored  # one line: dapo eval says it as its error


def test_a_judge_failing_on_some_samples_is_said_and_counted(judges):
    reward = RewardConfig(num_workers=1, verifier_weight=0, functions=[{"path": f"{judges}:judge_flaky"}])
    with pytest.warns(UserWarning, match=r"judge_flaky failed on 4 of 8 evaluation samples.*count as wrong.*"
                                         r"ConnectionError: judge dropped the request"):
        result = run_eval(problems_of(4), reward)  # ground truths 1..4: the odd ones fail
    m = result.metrics
    assert m["eval/avg@2"] == 0.5 and m["eval/reward_errors"] == 4 and m["eval/reward_failures/judge_flaky"] == 4
    assert result.unscored == ""


def test_a_failing_function_that_does_not_decide_correctness_leaves_the_accuracy(judges):
    """With the verifier on, a judge's failure costs its weight in the score, not correctness:
    avg@k is measured, and the warning says it is unaffected."""
    reward = RewardConfig(num_workers=1, functions=[{"path": f"{judges}:judge_down", "weight": 0.5}])
    with pytest.warns(UserWarning, match=r"judge_down failed on 8 of 8 evaluation samples.*decides no "
                                         r"sample.s correctness"):
        result = run_eval(problems_of(4), reward, right=[2, 1, 0, 2])
    assert result.metrics["eval/avg@2"] == pytest.approx(5 / 8) and result.unscored == ""
    assert result.metrics["eval/reward_failures/judge_down"] == 8


def test_a_data_source_the_judge_cannot_score_logs_no_accuracy_of_its_own(judges):
    reward = RewardConfig(num_workers=1, verifier_weight=0, functions=[{"path": f"{judges}:judge_of_easy"}])
    problems = problems_of(2, "easy") + problems_of(2, "hard")
    with pytest.warns(UserWarning, match=r"judge_of_easy failed on 4 of 8 evaluation samples.*no sample of "
                                         r"data_source hard had its correctness measured"):
        result = run_eval(problems, reward)
    m = result.metrics
    assert m["eval/easy/avg@2"] == 1.0 and "eval/hard/avg@2" not in m and "eval/hard/pass@2" not in m
    assert "eval/easy/score_mean" in m and "eval/hard/score_mean" not in m  # (its failures' penalty, no reward)
    assert m["eval/hard/num_problems"] == 2 and m["eval/avg@2"] == 0.5


def test_a_data_source_measured_on_later_samples_only_keeps_its_accuracy(judges):
    """A source is unscored only when every sample of it failed: one whose judge failed on each
    problem's first sample but measured its second has an accuracy (the failures count as wrong)."""
    reward = RewardConfig(num_workers=1, verifier_weight=0, functions=[{"path": f"{judges}:judge_of_wrong_answers"}])
    problems = problems_of(2, "easy") + problems_of(2, "hard")
    with pytest.warns(UserWarning, match=r"judge_of_wrong_answers failed on 2 of 8 evaluation samples"):
        result = run_eval(problems, reward, right=[2, 2, 1, 1])  # hard: sample 0 right (judge fails), 1 wrong
    m = result.metrics
    assert m["eval/easy/avg@2"] == 1.0 and m["eval/hard/avg@2"] == 0.0 and m["eval/hard/pass@2"] == 0.0
    assert m["eval/avg@2"] == 0.5 and result.unscored == ""


def write_eval_file(tmp_path: Path) -> Path:
    data = tmp_path / "held_out.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i} + 1 =", "reward_model": {"ground_truth": str(i + 1)}}) + "\n"
                            for i in range(4)))
    return data


def eval_args(tiny_model_dir: Path, tmp_path: Path, judges: Path, fn: str) -> list[str]:
    return ["eval", str(tiny_model_dir), "--save-dir", str(tmp_path / f"eval-{fn}"),
            f"data.eval_files=[{write_eval_file(tmp_path)}]", "data.template=none", "eval.k=2",
            "rollout.max_response_length=8", "algorithm.overlong_buffer_len=4", "trainer.device=cpu",
            "reward.num_workers=1", "reward.verifier_weight=0", f"reward.functions=[{{path: '{judges}:{fn}'}}]"]


def test_dapo_eval_with_a_judge_down_fails_in_one_line(tiny_model_dir, tmp_path, judges, capsys):
    assert dapo_main(eval_args(tiny_model_dir, tmp_path, judges, "judge_down")) == 2
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.startswith("dapo eval: error:")]
    assert len(errors) == 1, captured.err
    assert "judge_down" in errors[0] and "8 of 8" in errors[0] and "avg@2" in errors[0]
    assert "eval/avg@2" not in captured.out  # no number printed as if measured
    # the samples and counts are saved first: what the failing judge was given can be read
    saved = json.loads((tmp_path / "eval-judge_down" / "metrics.json").read_text())["metrics"]
    assert saved["eval/reward_failures/judge_down"] == 8 and "eval/avg@2" not in saved and "eval/score_mean" not in saved
    assert (tmp_path / "eval-judge_down" / "generations.jsonl").read_text().count("\n") == 8  # 4 problems x k=2


def test_dapo_eval_saves_the_failure_counts(tiny_model_dir, tmp_path, judges, capsys):
    with pytest.warns(UserWarning, match="judge_flaky failed on 4 of 8 evaluation samples"):
        assert dapo_main(eval_args(tiny_model_dir, tmp_path, judges, "judge_flaky")) == 0
    whole = json.loads((tmp_path / "eval-judge_flaky" / "metrics.json").read_text())
    saved = whole["metrics"]
    assert saved["eval/reward_errors"] == 4 and saved["eval/reward_failures/judge_flaky"] == 4
    assert (whole["k"], whole["num_problems"]) == (2, 4)  # eval.k, not rollout.n; problems, not samples
    assert "eval/reward_errors" in capsys.readouterr().out


def test_an_evaluation_during_training_with_a_judge_down_warns_and_logs_counts_only(tiny_model_dir, tmp_path, judges):
    run = tmp_path / "run"
    cfg = tiny_config(tiny_model_dir, run, judges, "trainer.total_steps=1", "reward.max_failing_steps=0",
                      "checkpoint.every_steps=0", fn="judge_down")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = Trainer(cfg).train()  # the run goes on: the evaluation is not what it trains on
    said = [str(w.message) for w in caught if "judge_down" in str(w.message) and "evaluation" in str(w.message)]
    assert len(said) == 2, said  # the baseline and the final evaluation
    assert all("not logged" in message for message in said)
    rows = [row for row in read_metrics(run) if "eval/num_problems" in row]
    assert [row["step"] for row in rows] == [0, 1]
    for row in rows:
        assert row["eval/reward_errors"] == 16 and row["eval/reward_failures/judge_down"] == 16  # 8 problems x k=2
        assert not any(key.startswith(("eval/avg@", "eval/pass@", "eval/maj@")) for key in row), row
    assert summary.eval_before is not None and "eval/avg@2" not in summary.eval_before
