"""Our verifier against Math-Verify's own test suite, with the answers anchored.

Math-Verify's regression cases (vendored in ``math_verify_cases.py``: 269 rows of gold,
prediction, expected verdict) are written for a parser that searches free text for an answer.
Our verifier reads only an explicitly anchored final answer, so each prediction is anchored
first, and both verifiers are run on the same anchored text:

- a prediction that already states an anchor (``\\boxed``/``\\fbox``, or an ``Answer:`` /
  ``Final Answer:`` line) is left as it is;
- any other prediction gets ``Answer: `` in front of it (the DAPO format).

Ours: :class:`~dapo.rewards.RewardScorer` (``extractor="auto"``, no data source = the later
anchor wins; the production path: string fast path in-process, math-verify in killed-at-deadline
workers) on (anchored prediction, gold). Math-Verify: its own ``parse`` of the gold and of the
anchored prediction with its default extraction, then ``verify`` with the case's own options
(``float_rounding``, ``strict``, ``allow_set_relation_comp``) and its built-in timeouts.

Run: ``python benchmarks/bench_verifier_suite.py [--show all|diff|fail]`` (offline, ~30 s; wrap
in ``flock /tmp/dapo-cpu.lock`` on a shared machine).
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dapo.config.schema import RewardConfig  # noqa: E402
from dapo.rewards import RewardScorer  # noqa: E402
from math_verify_cases import CASES  # noqa: E402

_ANCHOR = re.compile(r"\\boxed|\\fbox|answer[ \t*]{0,8}[:：]", re.IGNORECASE)


def anchor(pred: str) -> str:
    """The prediction with an explicit final-answer anchor (see the module docstring)."""
    return pred if _ANCHOR.search(pred) else f"Answer: {pred}"


def run_ours(golds: list[str], preds: list[str], workers: int) -> list[tuple[bool, str]]:
    cfg = RewardConfig(timeout_s=10.0, num_workers=workers)
    with RewardScorer(cfg) as scorer:
        results = scorer.score(preds, golds)
    return [(r.acc, r.pred) for r in results]


def run_math_verify(golds: list[str], preds: list[str], options: list[dict]) -> list[bool]:
    from math_verify import parse, verify

    for name in ("math_verify", "math_verify.parser", "math_verify.grader"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    verdicts = []
    for gold, pred, opts in zip(golds, preds, options):
        try:
            verdicts.append(bool(verify(parse(gold), parse(pred), **opts)))
        except Exception:
            verdicts.append(False)
    return verdicts


def _short(text: str, limit: int = 70) -> str:
    text = text.replace("\n", "⏎")
    return text if len(text) <= limit else f"{text[:30]}…{text[-(limit - 31) :]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--show",
        choices=["none", "diff", "fail", "all"],
        default="diff",
        help="rows to list: where the verifiers differ, where ours fails, all",
    )
    args = parser.parse_args()

    sources = [case[0] for case in CASES]
    golds = [case[1] for case in CASES]
    preds = [anchor(case[2]) for case in CASES]
    expected = [case[3] for case in CASES]
    options = [case[4] for case in CASES]

    start = time.perf_counter()
    ours = run_ours(golds, preds, args.workers)
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    theirs = run_math_verify(golds, preds, options)
    theirs_s = time.perf_counter() - start

    n = len(CASES)
    ours_ok = [acc == exp for (acc, _), exp in zip(ours, expected)]
    theirs_ok = [v == exp for v, exp in zip(theirs, expected)]
    ours_fp = sum(acc and not exp for (acc, _), exp in zip(ours, expected))
    theirs_fp = sum(v and not exp for v, exp in zip(theirs, expected))
    print(f"Math-Verify test suite, anchored: {n} cases ({sum(expected)} expected correct)")
    print(f"{'verifier':<14}{'passed':>8}{'false pos':>11}{'false neg':>11}{'seconds':>9}")
    for name, ok, fp, secs in (
        ("dapo (ours)", ours_ok, ours_fp, ours_s),
        ("math-verify", theirs_ok, theirs_fp, theirs_s),
    ):
        fn = n - sum(ok) - fp
        print(f"{name:<14}{sum(ok):>8}{fp:>11}{fn:>11}{secs:>9.1f}")
    print(f"seconds are not like for like: dapo-rl's verifier in {args.workers} worker process(es) with its "
          "process isolation, math-verify serially in this process with each case's own options")

    only_theirs = Counter(s for s, a, b in zip(sources, ours_ok, theirs_ok) if b and not a)
    only_ours = Counter(s for s, a, b in zip(sources, ours_ok, theirs_ok) if a and not b)
    print("\nCategories where they differ (cases only math-verify / only ours gets right):")
    for source in sorted(set(only_theirs) | set(only_ours)):
        print(f"  {source:<58} {only_theirs[source]:>3} / {only_ours[source]:>3}")

    if args.show == "none":
        return
    print(
        f"\nRows ({args.show}): index, expected, ours, math-verify | gold | anchored prediction"
        " -> our extracted answer"
    )
    for i in range(n):
        differ = ours_ok[i] != theirs_ok[i]
        if (
            args.show == "all"
            or (args.show == "diff" and differ)
            or (args.show == "fail" and not ours_ok[i])
        ):
            print(
                f"{i:>3} {sources[i].split('::')[1][5:]:<30} exp={int(expected[i])} "
                f"ours={int(ours[i][0])} mv={int(theirs[i])} | {_short(golds[i])} | "
                f"{_short(preds[i])} -> {ours[i][1]!r}"
            )


if __name__ == "__main__":
    main()
