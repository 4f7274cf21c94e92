"""A reward function whose import ends or hangs its worker: the start-up error names the function
(with several, which one to look at), not only an exit code or "a reward function"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dapo.rewards import RewardFunctionError
from dapo.rewards.pool import WorkerPool

FNS = str(Path(__file__).resolve().parent / "reward_fns_fixture.py")


@pytest.mark.parametrize(("on_import", "said"), [
    ("import sys\nsys.exit(3)", "importing {path} raised SystemExit: 3"),
    ("import os\nos._exit(4)", "a reward worker exited while importing the reward function(s) {specs} (exit code 4;"),
    ("import time\ntime.sleep(600)", "reward workers did not start within 3 s: does importing the reward function(s) "
                                     "{specs} hang?"),
])
def test_a_function_whose_import_ends_or_hangs_its_worker_is_named(tmp_path: Path, on_import: str, said: str):
    path = tmp_path / "my_reward.py"
    path.write_text(f"{on_import}\n\n\ndef score(response, ground_truth, extra):\n    return 1.0\n")
    specs = [f"{FNS}:length_bonus", f"{path}:score"]
    hangs = "sleep" in on_import  # (the others get a loaded machine's time to import math_verify)
    with pytest.raises(RewardFunctionError, match=re.escape(said.format(path=path, specs=", ".join(specs)))):
        WorkerPool(1, specs, timeout_s=5.0, startup_timeout_s=3.0 if hangs else 120.0)
