"""Loading DAPO-Math-17K at its real size: seconds and memory of a run's data set-up.

The published training file repeats each of its ~17.9k prompts about 100 times (1.79M rows). This
writes a parquet file of that shape (DAPO-Math-17K's schema: data_source, a one-message chat
prompt of ~700 characters with the DAPO instruction, ability, reward_model.ground_truth,
extra_info.index; random words, not the real problems), then times what ``dapo train`` does with
it before its first step (``load_run_data``: read, validate, de-duplicate or not, tokenize every
distinct prompt for the data.max_prompt_length check) under the reference recipe's data settings,
once with ``data.dedup_train=true`` (its default) and once with ``false`` (verl's stream: every
row kept), each in a fresh process. Memory: the process's peak and its resident size after the
load (ru_maxrss, /proc/self/statm). The built-in tokenizer stands in for Qwen's (no download).

    python benchmarks/bench_data_load.py [--prompts 17917] [--copies 100] [--file PATH]

``--file``: the parquet file to read, written there first when it does not exist (else a
temporary one, written each time: 1.5 minutes).

Run it alone on the machine (``flock /tmp/dapo-cpu.lock python benchmarks/bench_data_load.py``).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAD = ("Solve the following math problem step by step. The last line of your response should be of the form "
        "Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n")
TAIL = '\n\nRemember to put your answer on its own line after "Answer:".'
WORDS = ["find", "the", "number", "of", "integers", "x", "such", "that", "$x^2+3x$", "is", "divisible", "by", "7"]


def write_file(path: Path, prompts: int, copies: int) -> None:
    """``prompts`` distinct problems, the whole list written ``copies`` times, as the real file repeats them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(0)
    texts = [HEAD + f"Problem {i}: " + " ".join(rng.choice(WORDS) for _ in range(80)) + TAIL for i in range(prompts)]
    writer = None
    for copy in range(copies):
        table = pa.table({
            "data_source": ["math_dapo"] * prompts,
            "prompt": [[{"content": text, "role": "user"}] for text in texts],
            "ability": ["MATH"] * prompts,
            "reward_model": [{"ground_truth": str(i % 997), "style": "rule-lighteval/MATH_v2"} for i in range(prompts)],
            "extra_info": [{"index": f"{copy}-{i}"} for i in range(prompts)],
        })
        writer = writer or pq.ParquetWriter(str(path), table.schema)
        writer.write_table(table)
    writer.close()


def measure(path: str, dedup: bool) -> dict[str, float]:
    """One load, in this process (run by main in a fresh one)."""
    from dapo.builtin import build_tokenizer
    from dapo.config import builtin_config_path, load_config
    from dapo.data import PromptEncoder
    from dapo.trainer.setup import load_run_data

    cfg = load_config([builtin_config_path("dapo_qwen2.5_32b")], [
        f"data.train_files=[{path}]", "data.eval_files=[]", f"data.dedup_train={str(dedup).lower()}"])
    encoder = PromptEncoder(build_tokenizer(), cfg.data)
    started = time.perf_counter()
    data = load_run_data(cfg, drop_overlong=encoder.drop_overlong)
    seconds = time.perf_counter() - started
    resident = int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize()
    return {"problems": len(data.train.problems), "seconds": seconds,
            "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, "resident_gib": resident / 2**30}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=17_917, help="distinct prompts (DAPO-Math-17K: 17,917)")
    parser.add_argument("--copies", type=int, default=100, help="copies of each (the published file: about 100)")
    parser.add_argument("--file", type=Path, help="the file to read; written there first if it does not exist "
                        "(kept: later runs skip writing it; it must have been written with the same --prompts/--copies)")
    parser.add_argument("--measure", nargs=2, metavar=("FILE", "DEDUP"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure[0], args.measure[1] == "true")))
        return
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as tmp:
        path = args.file or Path(tmp) / "dapo-math-17k-shaped.parquet"
        if not path.exists():
            write_file(path, args.prompts, args.copies)
        rows = pq.ParquetFile(path).metadata.num_rows
        print(f"{rows:,} rows of {args.prompts:,} prompts ({path.stat().st_size / 2**20:.0f} MB of parquet); "
              "reference recipe's data settings, built-in tokenizer")
        print("| data.dedup_train | problems kept | load s | peak GiB | resident after GiB |\n|---|---|---|---|---|")
        for dedup in (True, False):
            out = subprocess.run([sys.executable, __file__, "--measure", str(path), str(dedup).lower()],
                                 capture_output=True, text=True, check=True).stdout
            result = json.loads(out.strip().splitlines()[-1])
            print(f"| {str(dedup).lower()} | {result['problems']:,} | {result['seconds']:.1f} | "
                  f"{result['peak_gib']:.2f} | {result['resident_gib']:.2f} |")


if __name__ == "__main__":
    main()
