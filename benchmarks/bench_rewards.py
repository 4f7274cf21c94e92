"""Reward scoring throughput: responses/s of RewardScorer on this machine.

Cases:
  (a) integer answers (DAPO-Math-17K style): ~2k-token (~7k-char) responses, "Answer: N" line;
      decided in the parent process (extraction + exact integer comparison).
  (b) LaTeX answers (fractions, roots, pi, intervals): every item goes to math-verify in the
      worker processes.
  (c) case (a) plus one trivial user reward function (one worker round trip per response).

Run: ``python benchmarks/bench_rewards.py [--workers 2]`` (wrap in ``flock /tmp/dapo-cpu.lock``
on a shared machine).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from dapo.config.schema import RewardConfig, RewardFunctionSpec
from dapo.rewards import RewardScorer

SENTENCES = [
    "Let $x$ be the number of ways to choose the subset, so $x = \\binom{{{a}}}{{2}}$.",
    "Multiplying both sides by {a} gives ${a}y = {b}$, hence $y = \\frac{{{b}}}{{{a}}}$.",
    "We check the case $n = {a}$: the sum $1 + 2 + \\cdots + {a} = {b}$ works.",
    "By the triangle inequality, the third side is less than {b}, so there are {a} options.",
    "Therefore the remainder modulo {a} is {b}, which matches our earlier computation.",
    "Wait, let me double check this step: {a} times {b} is indeed correct.",
]


def latex_answer(rng: random.Random) -> tuple[str, str, str]:
    """(ground truth, an equivalent prediction, a wrong one), fresh numbers each time so
    math-verify's parse cache does not flatter the throughput."""
    a, b, k = rng.randint(1, 97), rng.randint(2, 97), rng.randint(2, 9)
    kind = rng.randrange(4)
    if kind == 0:
        return f"\\frac{{{a}}}{{{b}}}", f"\\frac{{{k * a}}}{{{k * b}}}", f"\\frac{{{a + 1}}}{{{b}}}"
    if kind == 1:
        return f"{k}\\sqrt{{{b}}}", f"\\sqrt{{{k * k * b}}}", f"{k + 1}\\sqrt{{{b}}}"
    if kind == 2:
        return f"\\frac{{{a}\\pi}}{{{b}}}", f"{a}\\pi/{b}", f"\\frac{{{a}\\pi}}{{{b + 1}}}"
    return f"[{a}, {a + b})", f"[{a},{a + b})", f"({a}, {a + b})"


TARGET_CHARS = 7000  # ~2k tokens


def reasoning(rng: random.Random) -> str:
    parts: list[str] = []
    while sum(len(p) for p in parts) < TARGET_CHARS:
        a, b = rng.randint(2, 999), rng.randint(2, 99999)
        parts.append(rng.choice(SENTENCES).format(a=a, b=b))
    return " ".join(parts)


def integer_batch(n: int, rng: random.Random) -> tuple[list[str], list[str]]:
    bodies = [reasoning(rng) for _ in range(64)]
    responses, truths = [], []
    for i in range(n):
        truth = rng.randint(0, 999)
        pred = truth if rng.random() < 0.5 else truth + rng.randint(1, 9)
        responses.append(f"{bodies[i % 64]}\n\nAnswer: {pred}")
        truths.append(str(truth))
    return responses, truths


def latex_batch(n: int, rng: random.Random) -> tuple[list[str], list[str]]:
    bodies = [reasoning(rng) for _ in range(64)]
    responses, truths = [], []
    for i in range(n):
        truth, same, wrong = latex_answer(rng)
        responses.append(f"{bodies[i % 64]}\n\nAnswer: ${same if rng.random() < 0.5 else wrong}$")
        truths.append(truth)
    return responses, truths


def measure(scorer: RewardScorer, responses: list[str], truths: list[str]) -> tuple[float, float]:
    scorer.score(responses[:32], truths[:32])  # warm caches and workers
    start = time.perf_counter()
    results = scorer.score(responses, truths)
    elapsed = time.perf_counter() - start
    assert not any(r.timed_out or r.error for r in results)
    return len(responses) / elapsed, sum(r.acc for r in results) / len(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    rng = random.Random(0)
    rows = []
    with RewardScorer(RewardConfig(num_workers=args.workers, extractor="answer")) as scorer:
        rows.append(("(a) integer answers, ~7k-char responses", 8192,
                     *measure(scorer, *integer_batch(8192, rng))))
        rows.append(("(b) LaTeX answers via math-verify", 600,
                     *measure(scorer, *latex_batch(600, rng))))
    with tempfile.TemporaryDirectory() as tmp:
        fn_file = Path(tmp) / "bench_fn.py"
        fn_file.write_text("def fn(response, ground_truth, extra):\n    return 0.0\n")
        cfg = RewardConfig(num_workers=args.workers, extractor="answer",
                           functions=[RewardFunctionSpec(path=f"{fn_file}:fn")])
        with RewardScorer(cfg) as scorer:
            rows.append(("(c) = (a) + one trivial user function", 4096,
                         *measure(scorer, *integer_batch(4096, rng))))
    print(f"RewardScorer throughput, {args.workers} worker processes")
    print(f"{'case':<44} {'batch':>6} {'responses/s':>12} {'acc':>5}")
    for name, batch, rate, acc in rows:
        print(f"{name:<44} {batch:>6} {rate:>12,.0f} {acc:>5.2f}")


if __name__ == "__main__":
    main()
