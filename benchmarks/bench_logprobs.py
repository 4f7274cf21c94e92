"""The loss's token log-probs: forward and backward time by chunk size, on this machine.

    flock /tmp/dapo-cpu.lock python benchmarks/bench_logprobs.py [--repeats 5]

``logprobs_from_logits`` works through the (positions, vocabulary) logits a chunk of rows at a
time (see :mod:`dapo.algo.logprobs`). For bf16 logits of a 32k and a 152k vocabulary, this times
one forward and backward with the default chunk (on CPU: at most 16 MiB of float32) against
fixed 4096-row chunks (the accelerator default, and every device's before), best of
``--repeats``.
"""

from __future__ import annotations

import argparse
import time

import torch

from dapo.algo.logprobs import _chunk_rows, logprobs_from_logits

CASES = [(32000, 624), (151936, 256)]  # (vocabulary, response positions): a 93M- and a Qwen2.5-sized head


def seconds(logits: torch.Tensor, labels: torch.Tensor, chunk_size: int | None, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats + 1):  # the first is a warm-up
        started = time.perf_counter()
        logprobs_from_logits(logits, labels, 1.0, chunk_size).sum().backward()
        best = min(best, time.perf_counter() - started)
        logits.grad = None
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, bf16 logits, best of {args.repeats}")
    print("| vocabulary | positions | default chunk (rows) | default ms | 4096-row chunks ms | speedup |")
    print("|---|---|---|---|---|---|")
    for vocab, positions in CASES:
        logits = torch.randn(1, positions, vocab, dtype=torch.bfloat16, requires_grad=True)
        labels = torch.randint(0, vocab, (1, positions))
        default = seconds(logits, labels, None, args.repeats)
        fixed = seconds(logits, labels, 4096, args.repeats)
        print(f"| {vocab} | {positions} | {_chunk_rows(logits, None)} | {default * 1e3:.1f} | {fixed * 1e3:.1f} "
              f"| {fixed / default:.2f}x |")


if __name__ == "__main__":
    main()
