"""Report the built-in base model's build time and sampled held-out accuracy.

Usage::

    python -m dapo.builtin.report                 # build (or reuse the cache) and measure
    python -m dapo.builtin.report --rebuild       # time a build from nothing (fresh temp cache)
    python -m dapo.builtin.report --sft-steps 200 --samples 4
    python -m dapo.builtin.report --recipe mixed  # the base model of `dapo ablate --task mixed`

Accuracy is avg@k: the fraction of correct responses over ``--samples`` temperature-1 samples
(top_p 1) for each held-out problem of the built-in task, scored by the project's verifier.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from dapo.builtin.base_model import ensure_base_model
from dapo.builtin.recipes import BUILTIN_RECIPES, TRACE_MARKER, recipe_for_model_path
from dapo.data.arithmetic import make_arithmetic_problems
from dapo.data.records import Problem
from dapo.rewards import verify


def is_correct(response: str, ground_truth: str) -> bool:
    """The project's verifier on the last "Answer:" line, as training scores it."""
    return bool(verify(response, ground_truth, extractor="answer")[0])


@torch.no_grad()
def sample_and_score(
    model_dir: Path,
    problems: list[Problem],
    samples: int = 4,
    batch_size: int = 200,
    max_new_tokens: int = 96,
    seed: int = 0,
) -> list[tuple[Problem, str, bool]]:
    """(problem, response, correct) for ``samples`` temperature-1 draws per problem."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    torch.manual_seed(seed)
    prompts = [p for p in problems for _ in range(samples)]
    scored = []
    for start in range(0, len(prompts), batch_size):
        batch = prompts[start : start + batch_size]
        encoded = tokenizer([p.prompt for p in batch], return_tensors="pt", padding=True)
        output = model.generate(
            **encoded,
            do_sample=True,
            temperature=1.0,
            top_p=1.0,
            top_k=0,
            max_new_tokens=max_new_tokens,
        )
        responses = tokenizer.batch_decode(
            output[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True
        )
        scored += [(p, r, is_correct(r, p.ground_truth)) for r, p in zip(responses, batch)]
    return scored


def breakdown(scored: list[tuple[Problem, str, bool]]) -> list[str]:
    """Share and accuracy of the responses by operator and by strategy: a trace (column steps,
    "a+b=c" on the first line), a direct answer ("Answer: N" only) or other (malformed)."""
    def strategy(response: str) -> str:
        if response.startswith("Answer:"):
            return "direct"
        first_line = response.split("\n", 1)[0]
        return "trace" if response.startswith(TRACE_MARKER) or "=" in first_line else "other"

    lines = []
    for label, key in (("operator", lambda p, r: p.extra["op"]), ("strategy", lambda p, r: strategy(r))):
        groups: dict[str, list[bool]] = {}
        for problem, response, correct in scored:
            groups.setdefault(key(problem, response), []).append(correct)
        lines += [
            f"  {label} {name}: {len(hits) / len(scored):.0%} of responses, {sum(hits) / len(hits):.1%} correct"
            for name, hits in sorted(groups.items())
        ]
    return lines


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not at least 1 (an accuracy needs a sample)")
    return value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cache-dir", default="~/.cache/dapo-rl")
    parser.add_argument(
        "--rebuild", action="store_true", help="build from nothing in a temporary cache"
    )
    parser.add_argument("--recipe", choices=sorted(BUILTIN_RECIPES), default="addition")
    parser.add_argument("--sft-steps", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0,
                        help="the recipe's SFT seed (not the sampling seed): another value builds another "
                             "base model, minutes on first use")
    parser.add_argument("--samples", type=_at_least_one, default=4, help="samples per held-out problem")
    parser.add_argument("--eval-size", type=_at_least_one, default=200, help="held-out problems")
    args = parser.parse_args(argv)
    recipe = recipe_for_model_path(f"builtin:{args.recipe}")
    recipe.seed = args.seed
    if args.sft_steps is not None:
        recipe.sft_steps = args.sft_steps
    cache_dir = tempfile.mkdtemp(prefix="dapo-base-") if args.rebuild else args.cache_dir
    started = time.perf_counter()
    model_dir = ensure_base_model(cache_dir, recipe)
    elapsed = time.perf_counter() - started
    held_out = make_arithmetic_problems(
        args.eval_size, "eval", recipe.min_digits, recipe.max_digits, recipe.ops
    )
    scored = sample_and_score(model_dir, held_out, samples=args.samples)
    accuracy = sum(correct for _, _, correct in scored) / len(scored)
    print(f"model: {model_dir}")
    print(
        f"build/load time: {elapsed:.1f} s on {torch.get_num_threads()} threads ({recipe.sft_steps} SFT steps)"
    )
    print(
        f"sampled held-out accuracy (T=1, top_p=1, avg@{args.samples} over {len(held_out)} problems): {accuracy:.1%}"
    )
    print("\n".join(breakdown(scored)))


if __name__ == "__main__":
    main()
