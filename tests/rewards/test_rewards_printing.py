"""What reward functions print is captured in the workers (bounded), not streamed into the
trainer's output; per-scorer failures are named on each result."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dapo.config.schema import RewardConfig, RewardFunctionSpec
from dapo.rewards import RewardScorer

NOISY = '''
import sys

def noisy(response, ground_truth, extra):
    print("x" * 1_000_000)
    sys.stderr.write("e" * 1000)
    return 1.0

def broken(response, ground_truth, extra):
    raise KeyError("no such field")
'''


@pytest.fixture()
def functions_file(tmp_path: Path) -> Path:
    path = tmp_path / "noisy_rewards.py"
    path.write_text(NOISY)
    return path


def test_a_function_printing_megabytes_does_not_flood_the_trainer(functions_file, capfd, caplog):
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{functions_file}:noisy")], num_workers=1, timeout_s=20.0)
    with caplog.at_level(logging.WARNING, logger="dapo.rewards"), RewardScorer(cfg) as scorer:
        results = scorer.score(["Answer: 1"] * 8, ["1"] * 8)
        results += scorer.score(["Answer: 2"] * 8, ["1"] * 8)
    assert [r.score for r in results] == [2.0] * 8 + [0.0] * 8  # verifier +-1, plus noisy's 1.0
    out, err = capfd.readouterr()
    assert len(out) + len(err) < 20_000, "a reward function's prints reached the trainer's terminal"
    shown = [r for r in caplog.records if "printed while scoring" in r.getMessage()]
    assert len(shown) == 1 and "2000 of 1001001 characters" in shown[0].getMessage()
    assert scorer.printed_chars == {"noisy": 16 * 1_001_001}


def test_each_result_names_the_scorers_that_failed_on_it(functions_file):
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{functions_file}:broken")], num_workers=1)
    with RewardScorer(cfg) as scorer:
        results = scorer.score(["Answer: 1", "Answer: 3"], ["1", "1"])
    assert [r.failed for r in results] == [["broken"], ["broken"]]
    assert all(r.error for r in results) and [r.acc for r in results] == [True, False]  # the verifier's
    assert scorer.first_failure["broken"].endswith("KeyError: 'no such field'")
