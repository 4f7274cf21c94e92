"""README "Train your own model": its worked example, run line by line as written (paths moved to a
temporary directory), on a locally built Qwen2 + BPE tokenizer + chat template + DAPO parquet."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM

from dapo.trainer.metrics import read_metrics

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- own-model:begin -->\s*```bash\n(.*?)```", text, re.S).group(1)
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def run(command: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    command = [arg.replace("/tmp/mine", str(tmp_path / "mine")).replace("runs/mine", str(tmp_path / "runs" / "mine"))
               for arg in command]
    if command[0] == "python":
        command[0] = sys.executable
    elif command[0] == "dapo":
        command[:1] = [sys.executable, "-m", "dapo.cli.main"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.mark.slow  # the README's whole worked example end to end (about 15 s)
def test_the_readme_worked_example_trains_evaluates_and_reports(tmp_path):
    make, train, evaluate = readme_commands()
    run(make, tmp_path)
    trained = run(train, tmp_path)
    assert "shipped config 'dapo_recipe'" in trained.stderr  # says which settings it started from
    assert "trainer.warmup_steps" not in trained.stderr  # (dapo_recipe's 10 warm-up steps in a 2-step run warned)
    assert "train data: 200 problems from" in trained.stdout and "400 duplicate prompts dropped" in trained.stdout
    run_dir = tmp_path / "runs" / "mine"
    rows = read_metrics(run_dir)
    assert rows[0]["step"] == 0 and rows[0]["data/train_duplicates_dropped"] == 400
    steps = [r for r in rows if "actor/updates" in r]
    assert [r["step"] for r in steps] == [1, 2] and sum(r["actor/updates"] for r in steps) > 0
    assert all("reward/brevity/score" in r and "reward/brevity/chars" in r for r in steps)
    config = (run_dir / "config.yaml").read_text()
    assert "template: dapo" in config and "lr: 1.0e-06" in config and "top_p: 0.7" in config
    completions = [json.loads(line) for line in (run_dir / "completions.jsonl").read_text().splitlines()]
    assert {c["step"] for c in completions} == {1, 2}
    assert all("<|im_start|>user" in c["prompt"] and c["ground_truth"] for c in completions)
    checkpoint = run_dir / "checkpoints" / "step-000002"
    assert AutoModelForCausalLM.from_pretrained(checkpoint).config.model_type == "qwen2"

    evaluated = run(evaluate, tmp_path)
    assert "the run's own" in evaluated.stderr and "k=2 samples per problem" in evaluated.stdout
    for key in ("eval/avg@2", "eval/aime/avg@2", "eval/amc/pass@2"):
        assert key in evaluated.stdout
    saved = run_dir / "eval" / "step-000002"
    samples = [json.loads(line) for line in (saved / "generations.jsonl").read_text().splitlines()]
    assert len(samples) == 16 * 2 and {s["data_source"] for s in samples} == {"aime", "amc"}
    metrics = json.loads((saved / "metrics.json").read_text())
    assert metrics["num_problems"] == 16 and metrics["k"] == 2
