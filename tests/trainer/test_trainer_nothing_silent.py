"""Nothing dropped silently: the loader's counts are printed and logged, a reward that fails on
everything stops the run naming itself, and sampled completions reach the run directory."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import torch
from transformers import AutoModelForCausalLM

from dapo.cli.main import main as dapo_main
from dapo.errors import NonFiniteError
from dapo.rewards.user_functions import RewardFunctionError
from dapo.trainer import Trainer
from dapo.trainer.checkpoint import list_checkpoints
from dapo.trainer.metrics import read_metrics
from dapo.trainer.policy import PolicyWorker
from tests.trainer.conftest import tiny_config, tiny_overrides

BROKEN_REWARD = '''
def needs_a_field(response, ground_truth, extra):
    return float(extra["difficulty"])  # the rows have no such field
'''


def test_loader_counts_are_printed_and_logged_at_step_0(tiny_model_dir, reward_file, tmp_path, capsys):
    data = tmp_path / "train.jsonl"
    rows = [{"prompt": f"{i} + 1 =", "reward_model": {"ground_truth": str(i + 1)}} for i in range(6)]
    too_long = {"prompt": "9" * 200 + " + 1 =", "reward_model": {"ground_truth": "1" + "0" * 200}}
    lines = [json.dumps(r) for r in [*rows, *rows[:2], too_long]] + ['{"prompt": "no answer"}', "{torn"]
    data.write_text("\n".join(lines) + "\n")
    run = tmp_path / "run"
    cfg = tiny_config(tiny_model_dir, run, reward_file, f"data.train_files=[{data}]", "data.lenient=true",
                      "data.max_prompt_length=64", "trainer.total_steps=1", "eval.before_training=false",
                      "logging.completions_per_step=100")
    Trainer(cfg).train()
    out = capsys.readouterr().out
    assert (f"train data: 6 problems from {data} (11 rows; 2 duplicate prompts dropped; 2 malformed rows skipped; "
            "1 problems over data.max_prompt_length dropped)") in out
    assert "skipped:" in out and "longer than data.max_prompt_length=64 tokens were left out" in out  # reasons
    first = read_metrics(run)[0]
    assert first["step"] == 0 and first["data/train_malformed_skipped"] == 2
    assert first["data/train_duplicates_dropped"] == 2 and first["data/train_problems"] == 6
    assert first["data/train_overlong_dropped"] == 1 and first["data/eval_overlong_dropped"] == 0
    prompts = {json.loads(line)["prompt"] for line in (run / "completions.jsonl").read_text().splitlines()}
    assert prompts and not any("9" * 200 in prompt for prompt in prompts)  # left out whole, never cut


def test_a_reward_failing_on_everything_stops_the_run_naming_it(tiny_model_dir, tmp_path, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text(BROKEN_REWARD)
    run = tmp_path / "run"
    # checkpoint.every_steps=4: the stop after step 2 checkpoints it all the same (it lost steps 1-2)
    cfg = tiny_config(tiny_model_dir, run, broken, "trainer.total_steps=5", "eval.before_training=false",
                      "checkpoint.every_steps=4", fn="needs_a_field")
    with pytest.raises(RewardFunctionError, match=r"needs_a_field failed on every response of the last 2 steps.*"
                                                  r"KeyError: 'difficulty' \(the whole traceback is logged above\)\. "
                                                  r"Fix needs_a_field.*\. Step 2 is checkpointed \(.*step-000002\): "
                                                  r"the same command resumes after it$"):
        Trainer(cfg).train()
    assert [r["step"] for r in read_metrics(run) if "rollout/reward_errors" in r] == [1, 2]
    assert [path.name for path in list_checkpoints(run)] == ["step-000002"]
    # ... which it does, the function fixed: step 3 trains next
    broken.write_text("def needs_a_field(response, ground_truth, extra):\n    return 1.0 if ground_truth in response else -1.0\n")
    fixed = tiny_config(tiny_model_dir, run, broken, "trainer.total_steps=3", "eval.before_training=false",
                        "checkpoint.every_steps=4", fn="needs_a_field")
    assert Trainer(fixed).train().resumed_at == 2
    assert [r["step"] for r in read_metrics(run) if "rollout/reward_errors" in r] == [1, 2, 3]
    # the command line: one line, exit 2, and the run directory is free again
    broken.write_text(BROKEN_REWARD)
    args = ["train", "default", *tiny_overrides(tiny_model_dir, run, broken, "needs_a_field"),
            "checkpoint.resume=never", "eval.before_training=false"]
    assert dapo_main(args) == 2
    err = capsys.readouterr().err
    assert "dapo train: error: reward scorer needs_a_field failed on every response" in err
    assert "is checkpointed" in err and "checkpoint.resume=auto resumes after it" in err  # (not this command)
    assert "Traceback" not in err.split("dapo train: error:")[-1]


def test_sampled_completions_are_written_each_step(tiny_model_dir, reward_file, tmp_path):
    run = tmp_path / "run"
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=2",
                        "logging.completions_per_step=3")).train()
    records = [json.loads(line) for line in (run / "completions.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 1, 1, 2, 2, 2]
    for record in records:
        assert set(record) >= {"prompt", "response", "pred", "ground_truth", "score", "acc", "data_source"}
        assert record["score"] in (1.0, -1.0)  # the parity reward
        # what each reward function returned, as TRL's completions table has a column per function
        assert record["reward_metrics"] == {"parity/score": record["score"], "parity/not_applicable": 0.0}
        assert record["failed_scorers"] == []
    events = list((run / "tensorboard").glob("events.out.tfevents.*"))
    assert events and b"completions" in events[0].read_bytes()


def test_logged_completions_say_what_became_of_their_group(tiny_model_dir, reward_file, tmp_path):
    """Every completion of the first round logged: each group's outcome matches the step's sampling
    counts, and a trained group's logged advantages are its logged rewards' (R - mean) / (std + eps)."""
    run = tmp_path / "run"
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=2", "logging.completions_per_step=24",
                        "eval.every_steps=0", "eval.before_training=false")).train()
    records = [json.loads(line) for line in (run / "completions.jsonl").read_text().splitlines()]
    metrics = {row["step"]: row for row in read_metrics(run) if "sampling/gen_rounds" in row}
    for step in (1, 2):
        groups: dict[int, list[dict]] = {}
        for record in (r for r in records if r["step"] == step):
            groups.setdefault(record["group_id"], []).append(record)
        assert len(groups) == 6 and all(len(g) == 4 for g in groups.values())  # the first round: 6 prompts x n=4
        outcomes = [g[0]["group_outcome"] for g in groups.values()]
        assert all(len({r["group_outcome"] for r in g}) == 1 for g in groups.values())
        row = metrics[step]
        counts = {"all_correct": row["sampling/all_correct_ratio"] * row["sampling/groups_generated"],
                  "all_wrong": row["sampling/all_wrong_ratio"] * row["sampling/groups_generated"],
                  "carried": row["sampling/groups_carried_out"], "discarded": row["sampling/groups_discarded"]}
        for outcome, count in counts.items():  # the step's count; its first round's where it had one only
            assert outcomes.count(outcome) == pytest.approx(count) if row["sampling/gen_rounds"] == 1 else \
                outcomes.count(outcome) <= count + 1e-9
        assert set(outcomes) <= {*counts, "trained", "all_masked"} and "trained" in outcomes
        for group in groups.values():
            rewards = torch.tensor([r["reward"] for r in group], dtype=torch.float64)
            assert all(r["reward"] <= r["score"] for r in group)  # the overlong penalty only takes away
            if group[0]["group_outcome"] != "trained":
                assert all(r["advantage"] is None for r in group)
                continue
            expected = (rewards - rewards.mean()) / (rewards.std() + 1e-6)
            assert [r["advantage"] for r in group] == pytest.approx(expected.tolist(), abs=1e-9)


def test_a_reward_function_refused_at_start_leaves_the_run_directory_free(tiny_model_dir, reward_file, tmp_path):
    # the scorer's smoke test raised after the run directory was locked: a retry in the same
    # process (a notebook, once the function is fixed) found the directory "in use" by itself
    broken = tmp_path / "broken.py"
    broken.write_text("def says_text(response, ground_truth, extra):\n    return 'yes'\n")
    run = tmp_path / "run"
    with pytest.raises(RewardFunctionError, match="says_text") as refused:  # kept, as a notebook keeps it
        Trainer(tiny_config(tiny_model_dir, run, broken, fn="says_text"))
    Trainer(tiny_config(tiny_model_dir, run, reward_file)).close()
    assert refused.value is not None


def test_training_data_smaller_than_a_generation_round_is_said(tiny_model_dir, reward_file, tmp_path):
    """3 problems for rounds of 6 prompts: each round draws some of them twice, which nothing said."""
    cfg = tiny_config(tiny_model_dir, tmp_path, reward_file, "data.builtin_train_size=3")
    with pytest.warns(UserWarning, match=r"holds 3 problem\(s\), fewer than a generation round's 6 prompts "
                                         r"\(trainer.gen_prompts_per_round\)"):
        Trainer(cfg).close()


def nan_loss_in_steps(monkeypatch, nan_steps: Callable[[int], bool]) -> list[int]:
    """Every update's loss NaN in the steps (counted from 0) ``nan_steps`` picks; the steps run."""
    steps: list[int] = []
    step_once, micro_batch_loss = Trainer.step_once, PolicyWorker._micro_batch_loss

    def counted_step(self):
        steps.append(self.step)
        return step_once(self)

    def nan_where_picked(self, *args, **kwargs):
        loss, pg_loss = micro_batch_loss(self, *args, **kwargs)
        return (loss * float("nan"), pg_loss) if nan_steps(steps[-1]) else (loss, pg_loss)

    monkeypatch.setattr(Trainer, "step_once", counted_step)
    monkeypatch.setattr(PolicyWorker, "_micro_batch_loss", nan_where_picked)
    return steps


def test_a_step_of_non_finite_losses_is_skipped_and_counted_and_the_run_goes_on(
        tiny_model_dir, reward_file, tmp_path, monkeypatch):
    steps = nan_loss_in_steps(monkeypatch, lambda step: step == 1)
    with pytest.warns(UserWarning, match="skipped an optimizer update: loss is nan"):
        summary = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "trainer.total_steps=3",
                                      "trainer.max_nonfinite_steps=2",
                                      "eval.every_steps=0")).train()
    assert steps == [0, 1, 2] and (summary.updates, summary.skipped) == (4, 2)  # two updates a step


def test_a_run_whose_every_update_comes_out_non_finite_stops(tiny_model_dir, reward_file, tmp_path, monkeypatch):
    """A diverged policy's loss is NaN on every update: each is skipped (the weights stay), but the
    run went on sampling and skipping to its last step, and checkpoint.keep_last rotated its
    checkpoints from before the divergence out."""
    steps = nan_loss_in_steps(monkeypatch, lambda step: step >= 2)
    run = tmp_path / "run"
    trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=8", "checkpoint.keep_last=3",
                                  "trainer.max_nonfinite_steps=2", "eval.every_steps=0"))
    with pytest.warns(UserWarning, match="skipped an optimizer update: loss is nan"), \
            pytest.raises(NonFiniteError, match=r"every optimizer update of the last 2 steps that tried one was "
                                                r"skipped .* the weights have not changed since step 2"):
        trainer.train()
    assert steps == [0, 1, 2, 3]  # stopped after the second step of skips, not at step 8
    assert [path.name for path in list_checkpoints(run)] == ["step-000001", "step-000002", "step-000003"]
    for kept in ("step-000002", "step-000003"):
        weights = AutoModelForCausalLM.from_pretrained(run / "checkpoints" / kept).state_dict().values()
        assert all(torch.equal(a, b) for a, b in zip(weights, trainer.model.state_dict().values()))
    assert [row["actor/skipped_updates"] > 0 for row in read_metrics(run) if "actor/updates" in row] == \
        [False, False, True, True]
