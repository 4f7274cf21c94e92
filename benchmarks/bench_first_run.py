"""A newcomer's first run: seconds from `dapo train` to its first RL step on an empty model cache,
and held-out accuracy against seconds of RL.

    flock /tmp/dapo-cpu.lock python benchmarks/bench_first_run.py [extra key=value ...]

Runs the embedded default (``dapo train``, any overrides given) with a fresh ``model.cache_dir``,
so the shipped base model is installed as on a new machine, and a fresh ``output_dir``; polls
``metrics.jsonl`` for the first step; then prints each evaluation's avg@k and maj@k against the
seconds of RL before it (the sum of ``time/step``, so evaluations and checkpoints do not count).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str]) -> None:
    work = Path(tempfile.mkdtemp(prefix="dapo-first-run-"))
    run_dir = work / "run"
    command = [str(Path(sys.executable).parent / "dapo"), "train", f"output_dir={run_dir}",
               f"model.cache_dir={work / 'cache'}", "logging.progress=false", *argv]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    metrics = run_dir / "metrics.jsonl"
    first_step = None
    while process.poll() is None:
        if first_step is None and metrics.exists() and '"actor/loss"' in metrics.read_text():
            first_step = time.perf_counter() - started
            print(f"first RL step logged {first_step:.1f} s after the command started", flush=True)
        time.sleep(0.2)
    total = time.perf_counter() - started
    if not metrics.exists():
        sys.exit(f"dapo train exited with code {process.returncode} before logging a step: {' '.join(command)}")
    rl_seconds = 0.0
    for row in (json.loads(line) for line in metrics.read_text().splitlines()):
        rl_seconds += row.get("time/step", 0.0)
        for key in row:
            if key.startswith("eval/avg@"):
                k = key.split("@")[1]
                print(f"step {row['step']:3d}  RL seconds {rl_seconds:6.1f}  avg@{k} {row[key]:.1%}  "
                      f"maj@{k} {row[f'eval/maj@{k}']:.1%}")
    print(f"whole command {total:.0f} s, exit code {process.returncode}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
