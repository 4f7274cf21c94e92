"""The built-in base models' recipes, by name: torch-free, so that a config can be checked (a
``model.path=builtin:<name>`` typo) without loading torch. :mod:`dapo.builtin.base_model` builds
and caches the model a recipe describes."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict, dataclass, field, replace

from dapo.config.schema import ConfigError

FORMAT_VERSION = 1  # bump when the build procedure changes, so stale caches are not reused
# Opens a trace when a recipe mixes strategies: its first character is the decision between a
# trace and a direct answer ("A"), kept apart from the trace's first digit.
TRACE_MARKER = "Steps: "


@dataclass
class BaseModelRecipe:
    # Qwen2 shape: about 3.2M parameters at the defaults (embeddings tied to the output layer).
    hidden_size: int = 256
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 2  # grouped-query attention, as in Qwen2
    intermediate_size: int = 768
    max_position_embeddings: int = 1024
    # Supervised warm start: optimizer steps (the competence knob), sequences per step, AdamW lr
    # with linear warm-up over warmup_steps then cosine decay to lr/10.
    sft_steps: int = 1200
    batch_size: int = 64
    lr: float = 2e-3
    warmup_steps: int = 20
    weight_decay: float = 0.0
    # Label smoothing eps of the SFT cross-entropy: the model learns to put eps of its mass on
    # other tokens, so it is accurate greedily but diffuse at temperature 1.
    label_smoothing: float = 0.03
    # Forward passes under bfloat16 autocast (weights stay float32).
    bf16_autocast: bool = True
    # Seed for initialisation and batch order.
    seed: int = 0
    # SFT data: distinct training-split problems of the built-in task (never held-out ones).
    num_problems: int = 20000
    min_digits: int = 1
    max_digits: int = 3
    ops: list[str] = field(default_factory=lambda: ["+"])
    # Two answer strategies: a share direct_share of SFT examples answers directly ("Answer: N",
    # hard to get right without the steps), the rest with TRACE_MARKER and the step-by-step
    # trace. Only a share trace_opening_share of trace examples trains the marker's first token,
    # so the model follows a trace well once started but seldom starts one:
    # P(trace) ~ (1-d) f / ((1-d) f + d). At direct_share 0 there is no marker.
    direct_share: float = 0.0
    trace_opening_share: float = 1.0
    # SFT batches draw an operand digit-count bucket (and operator) uniformly, then a problem in
    # it, as the task draws its problems. Sampling the distinct problems uniformly instead
    # starves the small buckets, which hold few distinct problems (85 one-digit training sums
    # among 20000): that model fails most held-out one-digit sums greedily ("3+4=9").
    balance_digit_counts: bool = True

    def data_overrides(self) -> list[str]:
        """The data.builtin_* settings of the task this recipe is SFT-ed on: pair the model with
        them (the task's one source of truth is the recipe)."""
        return [
            f"data.builtin_min_digits={self.min_digits}",
            f"data.builtin_max_digits={self.max_digits}",
            f"data.builtin_ops={json.dumps(self.ops)}",
        ]

    def cache_key(self) -> str:
        """Hash of everything the build reads: the recipe's fields, the build procedure's version,
        a fingerprint of the tokenizer and a digest of every SFT problem the task generator gives
        this recipe, which are code (a change to either must not reuse a model trained on the old
        ones)."""
        fields = asdict(self)
        if self.direct_share > 0:
            fields["trace_marker"] = TRACE_MARKER
        problems = _sft_problems_digest(self.num_problems, self.min_digits, self.max_digits, tuple(self.ops))
        text = json.dumps({"format": FORMAT_VERSION, "inputs": _build_inputs_fingerprint(), "sft_problems": problems,
                           **fields}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


@functools.cache
def _build_inputs_fingerprint() -> str:
    """SHA-256 of what the tokenizer does (its vocabulary, special tokens, and the ids of every
    printable ASCII character) and of the SFT prompt, response and token ids of one problem per
    operator: content, not the libraries' serialisation, so a tokenizers release that writes its
    JSON differently keeps the key (and the shipped weights)."""
    from dapo.builtin.tokenizer import build_tokenizer  # transformers: only when a key is asked for
    from dapo.data.arithmetic import TASK_SEED, make_arithmetic_problems, solution_text

    tokenizer = build_tokenizer()
    problems = [
        make_arithmetic_problems(1, "train", 2, 3, [op], seed=TASK_SEED)[0] for op in ("+", "-", "*")
    ]
    texts = [(p.prompt, solution_text(p)) for p in problems]
    ids = [tokenizer(prompt)["input_ids"] + tokenizer(response, add_special_tokens=False)["input_ids"]
           for prompt, response in texts]
    probe = tokenizer("".join(chr(c) for c in range(32, 127)), add_special_tokens=False)["input_ids"]
    payload = [sorted(tokenizer.get_vocab().items()), tokenizer.special_tokens_map, probe, texts, ids]
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


@functools.cache
def _sft_problems_digest(num_problems: int, min_digits: int, max_digits: int, ops: tuple[str, ...]) -> str:
    """SHA-256 of every SFT problem the task generator gives a recipe (the build's own call, as
    :func:`dapo.builtin.base_model._sft_problems` makes it), each by what the build reads of it:
    prompt, answer, step-by-step solution text, and the operands and operator its SFT batches are
    balanced over. The fingerprint above holds one problem per operator only: a generator change
    that left those alone (another draw order, a later problem's operands) reused a base model
    SFT-ed on the old problems. The whole set costs ~0.25 s per process and recipe (20,000
    problems, 2 CPU cores; the run then generates the same problems again as its training data),
    where a default run takes minutes."""
    from dapo.data.arithmetic import TASK_SEED, make_arithmetic_problems, solution_text

    digest = hashlib.sha256()
    for problem in make_arithmetic_problems(num_problems, "train", min_digits, max_digits, list(ops), seed=TASK_SEED):
        extra = problem.extra
        digest.update(f"{problem.prompt}\x1f{problem.ground_truth}\x1f{solution_text(problem)}\x1f"
                      f"{extra.get('a')}\x1f{extra.get('op')}\x1f{extra.get('b')}\x1e".encode())
    return digest.hexdigest()


# Named recipes, chosen with model.path="builtin:<name>" ("builtin" alone is "builtin:addition").
# Each is SFT-ed on the task its name gives; BaseModelRecipe.data_overrides gives its data settings.
BUILTIN_RECIPES: dict[str, BaseModelRecipe] = {
    # The embedded default's task: 1-3 digit addition, 25-38 token answers.
    "addition": BaseModelRecipe(),
    # `dapo ablate --task mixed`: 1-2 digit +, -, * (10-47 token answers, trivial to hard).
    # More steps, as it learns three procedures.
    "mixed": BaseModelRecipe(ops=["+", "-", "*"], max_digits=2, sft_steps=1000,
                             balance_digit_counts=False),
    # The addition task with the better strategy rare: it samples a step-by-step trace (about
    # as accurate as "addition") for about 1 answer in 10 and otherwise guesses the sum
    # directly, so RL has to explore into traces, and responses grow longer as it does.
    "rare-trace": BaseModelRecipe(sft_steps=1000, direct_share=0.3, trace_opening_share=0.05,
                                  balance_digit_counts=False),
}


def builtin_model_problem(path: str) -> str | None:
    """Why ``model.path`` of the form "builtin" or "builtin:<name>" names no recipe, or None."""
    if path.partition(":")[0] == "builtin" and (path.partition(":")[2] or "addition") in BUILTIN_RECIPES:
        return None
    return (f"model.path={path!r} names no built-in base model; choose one of "
            f"{['builtin'] + [f'builtin:{n}' for n in BUILTIN_RECIPES]}")


def recipe_for_model_path(path: str) -> BaseModelRecipe:
    """The recipe named by a ``model.path`` of the form "builtin" or "builtin:<name>"."""
    if (problem := builtin_model_problem(path)) is not None:
        raise ConfigError(problem)
    return replace(BUILTIN_RECIPES[path.partition(":")[2] or "addition"])  # a copy: callers may adjust it
