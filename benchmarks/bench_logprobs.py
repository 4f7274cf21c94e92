"""The loss's token log-probs: forward and backward time by chunk size, on this machine.

    flock /tmp/dapo-cpu.lock python benchmarks/bench_logprobs.py [--repeats 5]
    python benchmarks/bench_logprobs.py --device cuda --positions 16384     # a GPU

``logprobs_from_logits`` works through the (positions, vocabulary) logits a chunk of rows at a
time (see :mod:`dapo.algo.logprobs`). For bf16 logits of a 32k and a 152k vocabulary, this times
one forward and backward with the default chunk (on CPU: at most 16 MiB of float32) against
fixed 4096-row chunks (the accelerator default, and every device's before), best of
``--repeats``. On a GPU the default is the fused Triton kernels (:mod:`dapo.algo.logprobs_triton`:
each row read once forward, once backward), against the chunked torch path of 4096 rows; each
case's positions are ``--positions`` there.

Then the entropy bonus's memory (``algorithm.entropy_coef``): the peak growth of a forward and
backward of log-probs and entropy, in copies of the float32 logits (2048 positions of a 50k
vocabulary), each way in a fresh process (its resident high-water mark): the log-probs alone, the
two functions apart (each writes a gradient of the logits and autograd a third, their sum), and
``logprobs_and_entropy_from_logits`` (one gradient).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import torch

from dapo.algo.logprobs import _chunk_rows, logprobs_from_logits

CASES = [(32000, 624), (151936, 256)]  # (vocabulary, response positions): a 93M- and a Qwen2.5-sized head


def seconds(logits: torch.Tensor, labels: torch.Tensor, chunk_size: int | None, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats + 1):  # the first is a warm-up
        sync(logits.device)
        started = time.perf_counter()
        logprobs_from_logits(logits, labels, 1.0, chunk_size).sum().backward()
        sync(logits.device)
        best = min(best, time.perf_counter() - started)
        logits.grad = None
    return best


# One case in a fresh process (argv: the case, this script's folder): its resident high-water mark
# before and after, imports done.
_PEAK = """
import sys
from dapo.algo import entropy_from_logits, logprobs_and_entropy_from_logits, logprobs_from_logits
sys.path.insert(0, sys.argv[2])
from peak_memory import peak_rss_kib as peak_kib
import torch
rows, vocab = 2048, 50_000
hidden, weight = torch.randn(rows, 64), torch.randn(64, vocab, requires_grad=True)
labels = torch.randint(0, vocab, (1, rows))
before = peak_kib()
logits = (hidden @ weight)[None]
if sys.argv[1] == "log-probs alone":
    loss = logprobs_from_logits(logits, labels).sum()
elif sys.argv[1] == "log-probs and entropy, apart":
    loss = logprobs_from_logits(logits, labels).sum() - 0.01 * entropy_from_logits(logits).sum()
else:
    logprobs, entropy = logprobs_and_entropy_from_logits(logits, labels)
    loss = logprobs.sum() - 0.01 * entropy.sum()
loss.backward()
print((peak_kib() - before) * 1024 / (rows * vocab * 4))
"""
PEAK_CASES = ("log-probs alone", "log-probs and entropy, apart", "log-probs and entropy, one pass")


def peak_copies(case: str) -> float:
    """The peak memory growth of one forward and backward of ``case``, in copies of the logits."""
    return float(subprocess.run([sys.executable, "-c", _PEAK, case, str(Path(__file__).resolve().parent)],
                                capture_output=True, text=True, check=True, timeout=300).stdout)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N")
    parser.add_argument("--positions", type=int, default=None, help="every case's positions (default: the cases')")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{torch.get_num_threads()} threads"
    print(f"torch {torch.__version__}, {where}, bf16 logits, best of {args.repeats}")
    print("| vocabulary | positions | default chunk (rows) | default ms | 4096-row chunks ms | speedup |")
    print("|---|---|---|---|---|---|")
    for vocab, positions in CASES:
        positions = args.positions or positions
        logits = torch.randn(1, positions, vocab, dtype=torch.bfloat16, device=device, requires_grad=True)
        labels = torch.randint(0, vocab, (1, positions), device=device)
        default = seconds(logits, labels, None, args.repeats)
        fixed = seconds(logits, labels, 4096, args.repeats)
        chunk = "fused" if device.type == "cuda" else _chunk_rows(logits, None)
        print(f"| {vocab} | {positions} | {chunk} | {default * 1e3:.1f} | {fixed * 1e3:.1f} | {fixed / default:.2f}x |")
    if device.type != "cpu":  # the peak growth below is the process's resident memory
        return
    print("\n| forward and backward of (2048 x 50k float32 logits) | peak growth, copies of the logits |")
    print("|---|---|")
    for case in PEAK_CASES:
        print(f"| {case} | {peak_copies(case):.2f} |")


if __name__ == "__main__":
    main()
