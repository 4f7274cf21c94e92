"""A policy rank's reply of log-probs, as Ray sends it: lists of Python floats (before) against one
float32 array (:class:`~dapo.trainer.ray_transport.LogprobRows`, now), at the DAPO reference
scale by default (512 responses of 10k tokens a step).

    flock /tmp/dapo-cpu.lock python benchmarks/bench_ray_transport.py [--rows 512] [--width 10000] [--repeats 3]

Times pickling on the rank, unpickling on the driver (pickle protocol 5, as Ray's serializer) and,
for the array, the driver's cut into the float32 rows its samples hold; best of ``--repeats``.
The bytes are the pickled size (the array travels as one out-of-band buffer of 4 bytes a token).
"""

from __future__ import annotations

import argparse
import pickle
import time

import torch

from dapo.trainer.ray_transport import LogprobRows
from dapo.trainer.update_stats import LogprobPass


def round_trip(reply: object, to_rows: bool) -> tuple[float, float, float, int]:
    """(pickle s, unpickle s, driver's rows() s, bytes) of one reply."""
    started = time.perf_counter()
    blob = pickle.dumps(reply, protocol=5)
    pickled = time.perf_counter()
    received = pickle.loads(blob)
    unpickled = time.perf_counter()
    if to_rows:
        received[1].rows()
    return pickled - started, unpickled - pickled, time.perf_counter() - unpickled, len(blob)


def best_of(reply: object, to_rows: bool, repeats: int) -> tuple[float, float, float, int]:
    runs = [round_trip(reply, to_rows) for _ in range(repeats)]
    return min(runs, key=lambda run: run[0] + run[1] + run[2])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=512, help="responses in the reply")
    parser.add_argument("--width", type=int, default=10_000, help="tokens per response")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    flat = torch.randn(args.rows * args.width) - 2
    as_lists = LogprobPass(logprobs=flat.view(args.rows, args.width).tolist())
    as_array = (LogprobPass(), LogprobRows.of(flat, [args.width] * args.rows))
    print(f"{args.rows} x {args.width} log-probs, best of {args.repeats}")
    print("| reply | pickle s | unpickle s | rows() s | total s | MB |")
    print("|---|---|---|---|---|---|")
    totals = []
    for name, reply, to_rows in [("lists of floats", as_lists, False), ("float32 array", as_array, True)]:
        pickle_s, unpickle_s, rows_s, size = best_of(reply, to_rows, args.repeats)
        totals.append(pickle_s + unpickle_s + rows_s)
        rows_cell = f"{rows_s:.4f}" if to_rows else "-"
        print(f"| {name} | {pickle_s:.4f} | {unpickle_s:.4f} | {rows_cell} | {totals[-1]:.4f} | {size / 1e6:.1f} |")
    print(f"the array is {totals[0] / totals[1]:.1f}x faster end to end")


if __name__ == "__main__":
    main()
