"""End to end on a tiny random model: metrics, checkpoints, SIGKILL + exact resume, dynamic sampling."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from dapo.cli.main import main as dapo_main
from dapo.trainer import Trainer
from dapo.trainer.metric_docs import METRICS, documented_name
from dapo.trainer.metrics import read_metrics
from tests.trainer.conftest import tiny_config, tiny_overrides

KILLER = '''
import os, signal
from pathlib import Path

def parity_then_kill(response, ground_truth, extra):
    """Parity reward that SIGKILLs the trainer once the step-2 checkpoint exists (mid step 3)."""
    run_dir = os.environ.get("DAPO_TEST_KILL_RUN_DIR")
    if run_dir and (Path(run_dir) / "checkpoints" / "step-000002").is_dir():
        os.kill(int(Path(run_dir, "trainer.pid").read_text()), signal.SIGKILL)
    odd = len(response) % 2 == 1
    return {"score": 1.0 if odd else -1.0, "acc": odd}
'''

VOLATILE = ("time/", "perf/")


def documented(key: str) -> bool:
    return documented_name(key) in METRICS


def stable_rows(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in row.items() if not k.startswith(VOLATILE)} for row in read_metrics(run_dir)]


@pytest.mark.parametrize("old_logprobs", ["recompute", "rollout"])
def test_few_steps_log_documented_finite_metrics_and_loadable_checkpoints(
    tiny_model_dir, reward_file, tmp_path, old_logprobs
):
    run_dir = tmp_path / "run"
    cfg = tiny_config(tiny_model_dir, run_dir, reward_file, f"algorithm.old_logprobs={old_logprobs}")
    summary = Trainer(cfg).train()
    assert summary.steps == 3 and summary.eval_before and summary.eval_after
    rows = read_metrics(run_dir)
    step_rows = [r for r in rows if "actor/loss" in r]
    assert [r["step"] for r in step_rows] == [1, 2, 3]
    for row in rows:
        for key, value in row.items():
            if key == "step":
                continue
            assert documented(key), f"metric {key} is not documented in METRICS"
            assert math.isfinite(value), f"{key}={value}"
    for key in ("actor/clip_frac_low", "actor/clip_frac_high", "actor/clip_frac_dual", "actor/entropy",
                "sampling/filtered_ratio", "sampling/gen_rounds", "rollout/truncation_rate", "actor/grad_norm"):
        assert key in step_rows[0]
    assert step_rows[0]["actor/updates"] == 2  # prompts_per_step 4 / mini_batch_prompts 2
    final = run_dir / "checkpoints" / "step-000003"
    model = AutoModelForCausalLM.from_pretrained(final)
    assert sum(p.numel() for p in model.parameters()) > 0
    assert (run_dir / "config.yaml").exists() and (run_dir / "tensorboard").is_dir()
    assert dapo_main(["plot", str(run_dir)]) == 0 and (run_dir / "report.png").stat().st_size > 10_000


def test_dapo_eval_scores_a_checkpoint_directory(tiny_model_dir, tmp_path, capsys):
    named = shutil.copytree(tiny_model_dir, tmp_path / "run #3")  # a name that YAML would cut at '#'
    code = dapo_main(["eval", str(named), "--save-dir", str(tmp_path / "eval"), "data.eval_files=[builtin:arithmetic]",
                      "data.builtin_eval_size=6", "eval.k=3", "rollout.max_response_length=8",
                      "algorithm.overlong_buffer_len=4", "trainer.device=cpu", "reward.num_workers=1"])
    assert code == 0
    out = capsys.readouterr().out
    for key in ("eval/avg@3", "eval/pass@3", "eval/maj@3", "eval/truncation_rate"):
        assert key in out
    saved = json.loads((tmp_path / "eval" / "metrics.json").read_text())  # what was evaluated, beside the numbers
    assert saved["num_problems"] == 6 and saved["max_problems"] == 0 and saved["k"] == 3
    assert saved["data"]["data/eval_problems"] == 6 and saved["data"]["data/eval_malformed_skipped"] == 0


# bf16: the passes run on bf16 copies of the float32 weights (trainer.param_dtype), which neither
# the checkpoint nor the optimizer may see: a resume from bf16-rounded weights would differ (in the
# slow suite, 9 s)
@pytest.mark.parametrize("precision", [[], pytest.param(["trainer.autocast=none", "trainer.param_dtype=bf16"],
                                                        marks=pytest.mark.slow)],
                         ids=["autocast", "bf16-weights"])
def test_sigkill_mid_step_then_resume_is_bit_identical(tiny_model_dir, tmp_path, precision):
    assert_sigkill_then_resume_is_bit_identical(tiny_model_dir, tmp_path, ["trainer.num_threads=1", *precision])


def assert_sigkill_then_resume_is_bit_identical(tiny_model_dir, tmp_path, settings: list[str]) -> None:
    """A reference run of 4 steps, and a run SIGKILLed mid step 3 then rerun: the same final
    weights bit for bit, and the same metrics."""
    killer = tmp_path / "killer.py"
    killer.write_text(KILLER)
    # the default's bf16 said, not left to it: on a CPU without bf16 instructions `dapo train` (the
    # killed run) puts the embedded default in float32, the Trainer (the others) does not
    extra = ["trainer.total_steps=4", "eval.every_steps=0", "trainer.autocast=bf16", "rollout.native_dtype=bfloat16",
             *settings]
    reference_dir = tmp_path / "reference"
    Trainer(tiny_config(tiny_model_dir, reference_dir, killer, *extra, fn="parity_then_kill")).train()

    run_dir = tmp_path / "killed"
    run_dir.mkdir()
    args = tiny_overrides(tiny_model_dir, run_dir, killer, "parity_then_kill") + extra
    env = dict(os.environ, DAPO_TEST_KILL_RUN_DIR=str(run_dir))
    proc = subprocess.Popen([sys.executable, "-m", "dapo.cli.main", "train", "default", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (run_dir / "trainer.pid").write_text(str(proc.pid))
    assert proc.wait(timeout=300) == -signal.SIGKILL, "the trainer was not killed mid-run"
    assert not (run_dir / "checkpoints" / "step-000004").exists()

    Trainer(tiny_config(tiny_model_dir, run_dir, killer, *extra, fn="parity_then_kill")).train()
    final_ref = load_file(str(reference_dir / "checkpoints" / "step-000004" / "model.safetensors"))
    final_resumed = load_file(str(run_dir / "checkpoints" / "step-000004" / "model.safetensors"))
    for name, tensor in final_ref.items():
        assert torch.equal(tensor, final_resumed[name]), name
    assert stable_rows(run_dir) == stable_rows(reference_dir)
    completions = [(d / "completions.jsonl").read_text() for d in (run_dir, reference_dir)]
    assert completions[0] == completions[1] and completions[0].count("\n") == 4 * 4  # 4 steps x 4 samples


def test_always_correct_reward_does_not_crash_and_says_why(tiny_model_dir, reward_file, tmp_path):
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "trainer.total_steps=2", fn="always_right")
    with pytest.warns(UserWarning, match="all-correct"):
        summary = Trainer(cfg).train()
    assert summary.steps == 2
    rows = [r for r in read_metrics(tmp_path / "run") if "actor/updates" in r]
    assert all(r["actor/updates"] == 0 and r["sampling/hit_round_limit"] == 1 for r in rows)
    assert all(r["sampling/all_correct_ratio"] == 1.0 for r in rows)


def test_metrics_jsonl_lines_are_json(tiny_model_dir, reward_file, tmp_path):
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "trainer.total_steps=1")
    Trainer(cfg).train()
    for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines():
        assert isinstance(json.loads(line)["step"], int)


def test_old_logprobs_from_rollout_skip_the_recompute_and_feed_the_ratio(tiny_model_dir, reward_file, tmp_path):
    """algorithm.old_logprobs=rollout: pi_old is the engine's behaviour policy (no extra forward
    pass), so every update's old log-probs are exactly the rollout log-probs."""
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "algorithm.old_logprobs=rollout")
    trainer = Trainer(cfg)
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    real_update = trainer.policy.update

    def recording_update(mini_batch, *args, **kwargs):
        seen.extend((s.old_logprobs, s.rollout_logprobs) for s in mini_batch)
        return real_update(mini_batch, *args, **kwargs)

    def no_recompute(samples):
        raise AssertionError("old log-probs were recomputed")

    trainer.policy.update = recording_update
    trainer.policy.compute_logprobs = no_recompute
    metrics = trainer.step_once().metrics
    assert seen and all(old is rollout and len(old) for old, rollout in seen)
    assert metrics["time/old_logprob"] == 0.0 and metrics["actor/updates"] == 2
    # measured on the first update's forward (bf16 autocast vs the engine's float32 decode)
    assert math.isfinite(metrics["actor/entropy"]) and 0 < metrics["mismatch/rollout_trainer_logprob_diff"] < 0.05


def test_dapo_eval_layers_a_config_file_on_the_runs_own(tiny_model_dir, reward_file, tmp_path, capsys, monkeypatch):
    """`dapo eval CKPT my.yaml`: my.yaml changes what it holds; the rest stays the run's (it was
    replaced by schema defaults: max_response_length 20480 on a 1024-token model). The training
    data is not read (it was, all of it, and a missing file stopped the evaluation). A reward
    file named relative to where the run started is found from anywhere (the saved config holds
    absolute paths; before, `dapo eval` elsewhere said the file did not exist)."""
    run = tmp_path / "run"
    monkeypatch.chdir(tmp_path)
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.total_steps=1", "eval.every_steps=0",
                        "eval.before_training=false", "reward.functions=[{path: rewards.py:parity}]")).train()
    # the start says what the reward sums (the test config's verifier is off) and whence correctness
    assert "reward: 1 x parity; correctness (acc, avg@k): the first of them" in capsys.readouterr().out
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    mine = tmp_path / "my_eval.yaml"
    mine.write_text("eval: {k: 2}\n")
    checkpoint = run / "checkpoints" / "step-000001"
    # an evaluation reads the held-out files only: a training file that is gone does not matter
    assert dapo_main(["eval", str(checkpoint), str(mine), "--save-dir", str(tmp_path / "eval"),
                      "data.train_files=[/nonexistent/train.parquet]"]) == 0
    out = capsys.readouterr().out
    assert "eval/avg@2" in out and "x k=2" in out
    assert "max_response_length: 12" in (tmp_path / "eval" / "config.yaml").read_text()  # the run's
