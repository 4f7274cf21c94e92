"""The built-in tiny base model: a small Qwen2 warm-started on the built-in arithmetic task.

No pretrained model can be downloaded here, so the project makes its own: the char-level
tokenizer (:mod:`dapo.builtin.tokenizer`), a freshly initialised ``Qwen2ForCausalLM``, and a short
supervised fine-tune (SFT) on arithmetic traces (:func:`dapo.data.arithmetic.solution_text`).
The SFT uses label smoothing, so the model is accurate greedily but diffuse at temperature 1, as
real base models are (pass@k far above avg@1), and leaves DAPO something to improve. Measured on
2 CPU cores: the default recipe (1-3 digit addition, 1200 steps, label smoothing 0.03, batches
balanced over the operands' digit counts) builds in about 520 s; on the held-out set it samples
43% correct at temperature 1 (avg@8) and answers 99% correctly greedily. With 800 steps it is
90.5% greedy with balanced batches (three-digit sums fail), and 91% without them (one-digit sums
fail: "3+4=9"). Without label smoothing, 250 steps give about 34% sampled but only 53%
greedy: RL then has to teach addition, not sharpen, and is much slower.
Two more recipes serve `dapo ablate` (:data:`BUILTIN_RECIPES`); build times are the cache's
recipe.json, accuracies ``python -m dapo.builtin.report --recipe NAME --samples 8``. "mixed" (1-2
digit +, -, *, 1000 steps) builds in about 430 s and samples 40% correct at temperature 1
(+ 54%, - 43%, * 20%). "rare-trace" (the addition task, 30% of SFT answers direct, 5% of trace
openings trained) builds in about 410 s; at temperature 1 it answers directly in 74% of samples
(2.8% correct), malformed in 16%, and with a step-by-step trace in only 11% (31% correct): 5.4%
in all.

SFT loss (label-smoothed cross-entropy on response tokens only, prompt tokens masked)::

    L = -1/|R| * sum_{t in R} [ (1 - eps) log p_theta(x_t | x_<t) + eps/V sum_v log p_theta(v | x_<t) ]

with R the response and EOS positions of the batch, V the vocabulary size, eps = label_smoothing.

The default recipe's weights ship with the package (:mod:`dapo.builtin.shipped`: installed into
the cache in about a second, checksum verified); other recipes are built on first use.
The result is cached under ``<cache_dir>/base-model-<recipe hash>/`` with ``save_pretrained``, so
``AutoModelForCausalLM`` / ``AutoTokenizer.from_pretrained`` load it like any HF model. The cache
is written atomically (built in a temporary directory, flushed to disk, then renamed), so a killed
build never leaves a half model, and a cached model whose files no longer match the checksums
recorded with them (a disk error) is installed again. Building is deterministic for a recipe: same
weights bit for bit on one machine.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from dapo.builtin.recipes import (
    FORMAT_VERSION,
    TRACE_MARKER,
    BaseModelRecipe,
    recipe_for_model_path,
)
from dapo.builtin.shipped import SHIPPED, checksum_ok, sha256_of, shipped_weights
from dapo.builtin.tokenizer import build_tokenizer, save_tokenizer
from dapo.data.arithmetic import TASK_SEED, make_arithmetic_problems, solution_text
from dapo.data.records import Problem
from dapo.durable import fsync_dir, fsync_tree, modes_as_umask

ABANDONED_BUILD_S = 24 * 3600  # a build takes minutes: a staging directory a day old was killed


def remove_abandoned_builds(root: Path) -> None:
    """Delete staging directories that killed builds left in the cache (a base model's worth of
    files each; one younger than a day may be another process's build in progress), and damaged
    entries a killed process moved aside and did not finish deleting."""
    for staging in root.glob(".building-*"):
        with contextlib.suppress(OSError):
            if time.time() - staging.stat().st_mtime > ABANDONED_BUILD_S:
                shutil.rmtree(staging, ignore_errors=True)
    for aside in root.glob(".damaged-*"):  # nobody reads these: deleting one twice at once is harmless
        shutil.rmtree(aside, ignore_errors=True)


def ensure_base_model(
    cache_dir: str = "~/.cache/dapo-rl",
    recipe: BaseModelRecipe | None = None,
    progress: bool = True,
) -> Path:
    """Directory of the built-in base model for ``recipe``, building and caching it if needed.

    Processes sharing a cache (the ranks of one machine, two runs) take turns on a lock file
    while they check, repair or build an entry: one of them builds, the others wait and use its
    copy, and none discards a copy another has just installed."""
    recipe = recipe or BaseModelRecipe()
    root = Path(cache_dir).expanduser()
    target = root / f"base-model-{recipe.cache_key()}"
    if target.exists() and _cache_damage(target) is None:  # the usual case: no lock needed to read
        remove_abandoned_builds(root)  # (a killed build's rerun finds the model cached)
        return target
    root.mkdir(parents=True, exist_ok=True)
    with _cache_lock(root, progress):
        remove_abandoned_builds(root)
        if target.exists():  # (one without config.json too: the rename into its place would fail on every run)
            if (damage := _cache_damage(target)) is None:  # repaired or built by whoever held the lock
                return target
            warnings.warn(f"the cached base model {target} is damaged ({damage}): installing it again",
                          stacklevel=2)
            _discard(target)
        _install(recipe, root, target, progress)
    return target


@contextlib.contextmanager
def _cache_lock(root: Path, progress: bool) -> Iterator[None]:
    """Hold ``<root>/.lock`` (an advisory ``flock``, released if the process dies) for the body;
    say so when another process holds it, since waiting on a build can take minutes."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): the atomic rename below still keeps the cache whole
        yield
        return
    with open(root / ".lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if progress:
                print(f"[base model] waiting for another process installing or building it in {root}", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _install(recipe: BaseModelRecipe, root: Path, target: Path, progress: bool) -> None:
    """Install the shipped weights or build the model in a staging directory, record every file's
    checksum, and rename it into ``target`` (atomically: a killed build never leaves half a model)."""
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
    try:
        started = time.perf_counter()
        source = install_shipped(recipe, staging)
        if source is None:
            if progress:  # minutes of SFT before anything else prints: say what it is, once
                print(f"[base model] building the base model of this recipe (no shipped weights): once, "
                      f"{recipe.sft_steps} SFT steps (about 7 minutes on 2 idle cores for 1000), then cached in {target}",
                      flush=True)
            build_base_model(recipe, staging, progress=progress)
        files = {path.name: sha256_of(path) for path in sorted(staging.iterdir())}
        _write_json(
            staging / "recipe.json",
            {
                "format": FORMAT_VERSION,
                "recipe": asdict(recipe),
                "source": source or "built",
                "build_seconds": round(time.perf_counter() - started, 1),
                "weights_sha256": files["model.safetensors"],
                "files_sha256": files,
            },
        )
        modes_as_umask(staging)  # not mkdtemp's 0700 nor safetensors' 0600: a shared cache stays shareable
        fsync_tree(staging)  # a power loss after the rename must not leave empty or torn files
        try:
            os.rename(staging, target)
            fsync_dir(root)
        except OSError:  # another process (without the lock: no flock here) finished the same build first
            if not (target / "config.json").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


CACHED_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json")  # besides the checked weights


def _cache_damage(directory: Path) -> str | None:
    """Why a cached model cannot be used (a file no longer matches the checksum recorded when it
    was cached, or files are missing), or None when it is intact. Entries cached before every
    file's checksum was recorded have their weights checked and the other files' presence."""
    try:
        record = json.loads((directory / "recipe.json").read_text())
        recorded = record.get("files_sha256") or {"model.safetensors": record["weights_sha256"]}
        missing = [name for name in (*recorded, *CACHED_FILES) if not (directory / name).is_file()]
        # without them from_pretrained builds a model of defaults or an empty-vocabulary tokenizer, silently
        if missing:
            return f"missing {', '.join(dict.fromkeys(missing))}"
        changed = [name for name, digest in recorded.items() if sha256_of(directory / name) != digest]
    except (OSError, ValueError, KeyError, AttributeError) as error:
        return f"{type(error).__name__}: {error}"
    verb = "does" if len(changed) == 1 else "do"
    return f"{', '.join(changed)} {verb} not match the SHA-256 recorded when it was cached" if changed else None


def _discard(directory: Path) -> None:
    """Move a damaged cache entry aside (atomically, so a concurrent reader never sees half of
    it) and delete it."""
    aside = Path(tempfile.mkdtemp(prefix=".damaged-", dir=directory.parent))
    with contextlib.suppress(FileNotFoundError):  # another process discarded it first
        os.rename(directory, aside / directory.name)
    shutil.rmtree(aside, ignore_errors=True)


def install_shipped(recipe: BaseModelRecipe, out_dir: Path) -> str | None:
    """Write the recipe's shipped weights (checksum verified) with its config and tokenizer to
    ``out_dir``; the source description, or None when there is nothing (valid) to install."""
    weights = shipped_weights(recipe.cache_key())
    if weights is None:
        return None
    if not checksum_ok(recipe.cache_key(), weights):
        warnings.warn(f"{weights} does not match its SHA-256 (a damaged install?): building the base model "
                      "instead, which takes minutes", stacklevel=3)
        return None
    tokenizer = build_tokenizer()
    config = _model_config(recipe, tokenizer)
    config.architectures, config.dtype = [Qwen2ForCausalLM.__name__], torch.float32  # as save_pretrained writes
    config.save_pretrained(str(out_dir))
    _generation_config(tokenizer).save_pretrained(str(out_dir))
    shutil.copyfile(weights, out_dir / "model.safetensors")
    save_tokenizer(tokenizer, out_dir)
    return f"shipped {weights.name} (sha256 {SHIPPED[recipe.cache_key()]})"


def _generation_config(tokenizer: PreTrainedTokenizerFast) -> GenerationConfig:
    return GenerationConfig(pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                            bos_token_id=tokenizer.bos_token_id)


def build_base_model(recipe: BaseModelRecipe, out_dir: Path, progress: bool = True) -> None:
    """Tokenizer + fresh Qwen2 + SFT, saved to ``out_dir`` with ``save_pretrained``."""
    tokenizer = build_tokenizer()
    deterministic_before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        torch.manual_seed(recipe.seed)
        model = Qwen2ForCausalLM(_model_config(recipe, tokenizer))
        supervised_finetune(model, tokenizer, recipe, progress=progress)
    finally:
        torch.use_deterministic_algorithms(deterministic_before)
    model.generation_config = _generation_config(tokenizer)
    model.save_pretrained(str(out_dir))
    save_tokenizer(tokenizer, out_dir)


def builtin_model_config(path: str = "builtin") -> Qwen2Config:
    """The model config of built-in model ``path`` ("builtin[:<name>]"), without building it."""
    return _model_config(recipe_for_model_path(path), build_tokenizer())


def _model_config(recipe: BaseModelRecipe, tokenizer: PreTrainedTokenizerFast) -> Qwen2Config:
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=recipe.hidden_size,
        intermediate_size=recipe.intermediate_size,
        num_hidden_layers=recipe.num_layers,
        num_attention_heads=recipe.num_heads,
        num_key_value_heads=recipe.num_kv_heads,
        max_position_embeddings=recipe.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def sft_examples(
    tokenizer: PreTrainedTokenizerFast, recipe: BaseModelRecipe, problems: list[Problem] | None = None
) -> list[tuple[list[int], int]]:
    """(prompt + response + EOS token ids, first position in the loss) for each SFT problem.

    The loss starts at the response, or one token later for a trace whose opening is not
    trained. Prompts are encoded as the rollout encodes them (with the tokenizer's ``<bos>``).
    ``problems``: the recipe's SFT problems when the caller has them already."""
    problems = problems if problems is not None else _sft_problems(recipe)
    prompts = tokenizer([p.prompt for p in problems])["input_ids"]
    draw = random.Random(f"{recipe.seed}/strategy").random
    direct = [draw() < recipe.direct_share for _ in problems]
    opening_trained = [d or draw() < recipe.trace_opening_share for d in direct]
    marker = TRACE_MARKER if recipe.direct_share > 0 else ""
    texts = [f"Answer: {p.ground_truth}" if d else marker + solution_text(p) for p, d in zip(problems, direct)]
    responses = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return [
        (p + r + [tokenizer.eos_token_id], len(p) + (0 if trained else 1))
        for p, r, trained in zip(prompts, responses, opening_trained)
    ]


def _sft_problems(recipe: BaseModelRecipe) -> list[Problem]:
    return make_arithmetic_problems(
        recipe.num_problems, "train", recipe.min_digits, recipe.max_digits, recipe.ops, seed=TASK_SEED
    )


def digit_count_buckets(problems: list[Problem]) -> list[list[int]]:
    """Indices of ``problems`` grouped by (operator, digits of a, digits of b), in first-seen order."""
    buckets: dict[tuple[str, int, int], list[int]] = {}
    for index, problem in enumerate(problems):
        a, op, b = problem.extra["a"], problem.extra["op"], problem.extra["b"]
        buckets.setdefault((op, len(str(a)), len(str(b))), []).append(index)
    return list(buckets.values())


def _draw_batch(
    rng: random.Random, count: int, batch_size: int, buckets: list[list[int]] | None
) -> list[int]:
    """Example indices of one SFT batch: distinct and uniform, or a uniform bucket then a uniform
    member of it for each row (``buckets`` given)."""
    if buckets is None:
        return rng.sample(range(count), batch_size)
    return [rng.choice(rng.choice(buckets)) for _ in range(batch_size)]


def _batch(examples: list[tuple[list[int], int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded input ids and labels (-100 before each example's loss start and on padding)."""
    width = max(len(ids) for ids, _ in examples)
    input_ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    for row, (ids, loss_start) in enumerate(examples):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        labels[row, loss_start : len(ids)] = input_ids[row, loss_start : len(ids)]
    return input_ids, labels


def _lr_at(step: int, recipe: BaseModelRecipe) -> float:
    if step < recipe.warmup_steps:
        return recipe.lr * (step + 1) / recipe.warmup_steps
    progress = (step - recipe.warmup_steps) / max(1, recipe.sft_steps - recipe.warmup_steps)
    return recipe.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def supervised_finetune(
    model: Qwen2ForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    recipe: BaseModelRecipe,
    progress: bool = True,
) -> list[float]:
    """``recipe.sft_steps`` AdamW steps on random batches of SFT examples; returns the losses."""
    problems = _sft_problems(recipe)
    examples = sft_examples(tokenizer, recipe, problems)
    buckets = digit_count_buckets(problems) if recipe.balance_digit_counts else None
    order_rng = random.Random(recipe.seed)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=recipe.lr, betas=(0.9, 0.98), weight_decay=recipe.weight_decay
    )
    model.train()
    losses = []
    for step in range(recipe.sft_steps):
        picked = _draw_batch(order_rng, len(examples), recipe.batch_size, buckets)
        input_ids, labels = _batch([examples[i] for i in picked], tokenizer.pad_token_id)
        for group in optimizer.param_groups:
            group["lr"] = _lr_at(step, recipe)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=recipe.bf16_autocast):
            logits = model(
                input_ids=input_ids, attention_mask=input_ids.ne(tokenizer.pad_token_id)
            ).logits
            loss = F.cross_entropy(
                logits[:, :-1].flatten(0, 1).float(),
                labels[:, 1:].flatten(),
                ignore_index=-100,
                label_smoothing=recipe.label_smoothing,
            )
        if not torch.isfinite(loss):  # stopped before it reaches the weights, as the RL update's guard does
            raise RuntimeError(f"the base model's SFT loss is {loss.item()} at step {step + 1} of {recipe.sft_steps}: "
                               "stopped before the weights take it (a recipe's learning rate or data gone wrong)")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if progress and (step + 1) % 25 == 0:
            print(
                f"[base model] SFT step {step + 1}/{recipe.sft_steps} loss {loss.item():.3f}",
                file=sys.stderr,
            )
    model.eval()
    return losses


def _write_json(path: Path, payload: dict) -> None:
    path.write_text(json.dumps(payload, indent=2) + "\n")
