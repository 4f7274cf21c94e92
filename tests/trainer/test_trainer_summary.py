"""The summary printed at the end of `dapo train`: what this attempt did."""

from __future__ import annotations

import re

from dapo.trainer.loop import TrainSummary
from dapo.trainer.summary import print_summary

AFTER = {"eval/avg@4": 0.5}


def title(capsys, summary: TrainSummary) -> str:
    print_summary(summary)
    return " ".join(capsys.readouterr().out.split())


def test_a_run_whose_every_step_skipped_its_update_says_the_weights_did_not_move(capsys, tmp_path):
    """A reward that never varies within a group (a constant user reward): every step is skipped
    with a warning, and the summary must not read like a normal run."""
    skipped = TrainSummary(2, {}, AFTER, str(tmp_path), 21.0, resumed_at=0, updates=0)
    assert "2 steps in 21 s, no optimizer update (every step skipped its update" in title(capsys, skipped)
    trained = TrainSummary(2, {}, AFTER, str(tmp_path), 21.0, resumed_at=0, updates=2)
    assert "no optimizer update" not in title(capsys, trained)
    resumed_done = TrainSummary(2, {}, AFTER, str(tmp_path), 1.0, resumed_at=2, updates=0)  # nothing left to train
    assert "no optimizer update" not in title(capsys, resumed_done)


def test_a_run_that_skipped_some_updates_says_how_many(capsys, tmp_path):
    some = TrainSummary(3, {}, AFTER, str(tmp_path), 9.0, updates=4, skipped=2)
    assert ("3 steps in 9.0 s, 2 of 6 optimizer updates skipped (a non-finite loss or gradient norm: see the "
            "warnings above)") in title(capsys, some)
    assert "updates skipped" not in title(capsys, TrainSummary(3, {}, AFTER, str(tmp_path), 9.0, updates=6))


def test_a_quick_run_s_time_is_said_to_a_tenth_of_a_second(capsys, tmp_path):
    """A 0.4 s run of 2 steps printed "2 steps in 0 s"."""
    assert "2 steps in 0.4 s," in title(capsys, TrainSummary(2, {}, AFTER, str(tmp_path), 0.4, updates=2))
    assert "2 steps in 9.9 s," in title(capsys, TrainSummary(2, {}, AFTER, str(tmp_path), 9.9, updates=2))
    assert "2 steps in 10 s," in title(capsys, TrainSummary(2, {}, AFTER, str(tmp_path), 9.96, updates=2))


def test_a_run_without_held_out_data_prints_no_empty_table(capsys, tmp_path):
    out = title(capsys, TrainSummary(1, {}, {}, str(tmp_path), 3.0, updates=1))
    assert "1 step in 3.0 s" in out and "(no held-out evaluation)" in out and "held-out metric" not in out


def test_per_source_counts_are_not_printed_as_percentages_whatever_the_source_is_called(capsys, tmp_path):
    """The format follows the metric's own name: a data_source named "curated" (holds "rate") or
    "aime@24" (holds "@") printed its num_problems as 1000.0%."""
    after = {"eval/curated/num_problems": 10.0, "eval/aime@24/num_problems": 20.0, "eval/curated/avg@4": 0.4,
             "eval/truncation_rate": 0.25, "eval/num_problems": 30.0}
    out = " ".join(title(capsys, TrainSummary(1, {}, after, str(tmp_path), 3.0, updates=1)).replace("│", " ").split())
    assert "eval/aime@24/num_problems - 20.0" in out and "eval/curated/num_problems - 10.0" in out
    assert "eval/curated/avg@4 - 40.0%" in out and "eval/truncation_rate - 25.0%" in out
    # a mean reward in [-1, 1] to three places, not "0.2"
    rewards = {"eval/score_mean": 0.1875, "eval/curated/score_mean": -0.4375, "eval/reward/judge/score": 0.8125}
    out = " ".join(title(capsys, TrainSummary(1, {}, rewards, str(tmp_path), 3.0, updates=1)).replace("│", " ").split())
    assert "eval/score_mean - 0.188" in out and "eval/curated/score_mean - -0.438" in out
    assert "eval/reward/judge/score - 0.812" in out


def test_dapo_eval_says_the_first_n_problems_only_when_max_problems_leaves_some_out(capsys, monkeypatch):
    import contextlib
    from types import SimpleNamespace

    from dapo.config import load_config
    from dapo.data.loaders import LoadedProblems
    from dapo.data.records import Problem
    from dapo.trainer import summary
    from dapo.trainer.evaluate import EvalResult

    problems = [Problem(uid=str(i), prompt=f"{i}+1=", ground_truth=str(i + 1)) for i in range(30)]
    loaded = LoadedProblems(problems, 30, 0, 0, ["eval.jsonl"])
    monkeypatch.setattr(summary, "build_run", lambda cfg, train_data: SimpleNamespace(data=SimpleNamespace(eval=loaded)))
    monkeypatch.setattr(summary, "RewardScorer", lambda cfg: contextlib.nullcontext(SimpleNamespace(check_data=lambda samples: None)))
    monkeypatch.setattr(summary, "evaluate_held_out", lambda *args: EvalResult({}, 0, 4))

    def said(max_problems: int, *overrides: str) -> str:
        summary.evaluate_model(load_config([], [f"eval.max_problems={max_problems}", *overrides]), progress=False)
        return capsys.readouterr().out

    assert ", the first 10:" in said(10)
    assert "the first" not in said(500)  # all 30 are evaluated
    assert "the first" not in said(0)
    # a multi-rank run's config: the ranks it names are not used, said (it ran in one process unsaid)
    assert "runs in this one process, not on the config's 2 ranks" in said(0, "resources.devices_per_node=2")
    assert "ranks" not in said(0)
    # the sampling said in full: a top_k the evaluation samples with (rollout.top_k) is named
    assert ", top_k 20, at most" in said(0, "rollout.top_k=20") and "top_k" not in said(0)


def test_a_run_resumed_from_its_final_checkpoint_shows_its_logged_final_evaluation(capsys, tmp_path):
    """Resuming a finished run trains and evaluates nothing: the table read "after: -" for every
    metric, though metrics.jsonl holds the final evaluation at that step."""
    import json

    rows = [{"step": 0, "eval/avg@4": 0.25}, {"step": 1, "actor/loss": 0.1}, {"step": 2, "actor/loss": 0.2},
            {"step": 2, "eval/avg@4": 0.75}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = " ".join(title(capsys, TrainSummary(2, None, None, str(tmp_path), 1.0, resumed_at=2, updates=0))
                   .replace("│", " ").split())
    assert "eval/avg@4 25.0% 75.0%" in out
    # resumed mid-run and trained on: the final evaluation is this attempt's own
    out = " ".join(title(capsys, TrainSummary(3, None, {"eval/avg@4": 0.5}, str(tmp_path), 1.0, resumed_at=2,
                                              updates=1)).replace("│", " ").split())
    assert "eval/avg@4 25.0% 50.0%" in out


def test_a_run_without_maj_at_k_says_why(capsys, tmp_path):
    """With reward.verifier_weight=0 no answer is extracted, so no maj@k is logged: the summary
    says so rather than leave its row silently missing."""
    no_votes = TrainSummary(2, {"eval/avg@4": 0.2, "eval/pass@4": 0.4}, {"eval/avg@4": 0.5, "eval/pass@4": 0.7},
                            str(tmp_path), 9.0, updates=2)
    assert ("no maj@k: no answers were extracted to vote on (reward.verifier_weight=0, and the reward function "
            'correctness comes from returns no "pred")') in title(capsys, no_votes)
    votes = TrainSummary(2, {"eval/avg@4": 0.2, "eval/maj@4": 0.3}, {"eval/avg@4": 0.5, "eval/maj@4": 0.6},
                         str(tmp_path), 9.0, updates=2)
    assert "no maj@k" not in title(capsys, votes)


def test_a_data_source_named_reward_counts_its_problems_as_a_count(capsys, tmp_path):
    """Per-source metrics of a data_source named "reward" share eval/reward/ with a user reward's
    (eval/reward/<function>/<key>, printed to 3 decimals): its num_problems printed as 200.000."""
    after = {"eval/avg@4": 0.5, "eval/reward/num_problems": 200.0, "eval/reward/parity/score": 0.25}
    out = title(capsys, TrainSummary(2, {}, after, str(tmp_path), 9.0, updates=2))
    assert re.search(r"eval/reward/num_problems │ - │ 200\.0 │", out) and "200.000" not in out
    assert re.search(r"eval/reward/parity/score │ - │ 0\.250 │", out)
