"""The TRL half of ``vs_trl.py``: TRL's GRPOTrainer configured as DAPO, under a wall-clock budget.

TRL's DAPO recipe: ``loss_type="dapo"`` (token-level loss normalised by the token count of the
whole generation batch), Clip-Higher ``epsilon=0.2, epsilon_high=0.28``, no KL (``beta=0``), and
the soft overlong punishment as an extra reward function (``trl.rewards``). TRL has no Dynamic
Sampling: every generated group is trained on, including the ones with constant rewards, whose
advantages are zero.

One step = one generation batch of ``prompts_per_step x G`` completions = one optimizer update
(``steps_per_generation=1``, ``num_iterations=1``), the same shape as a dapo-rl step with
``mini_batch_prompts == prompts_per_step``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import torch  # noqa: E402
import trl  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import (  # noqa: E402
    AutoModelForCausalLM,
    AutoTokenizer,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from trl.rewards import get_soft_overlong_punishment  # noqa: E402

from dapo.config import DataConfig  # noqa: E402
from dapo.data import load_problems  # noqa: E402
from dapo.rewards import verify  # noqa: E402
from dapo.trainer.allocator import keep_freed_memory  # noqa: E402


class CorrectnessReward:
    """DAPO's rule-based reward, scored by dapo-rl's own verifier: +1 if correct, else -1.

    Also counts the completion tokens it sees, which is every token TRL generated.
    """

    __name__ = "correctness_reward"

    def __init__(self) -> None:
        self.completion_tokens = 0

    def __call__(self, completions: list[str], completion_ids: list[list[int]], ground_truth: list[str],
                 **kwargs: Any) -> list[float]:
        self.completion_tokens += sum(len(ids) for ids in completion_ids)
        return [1.0 if verify(text, truth, extractor="answer")[0] else -1.0
                for text, truth in zip(completions, ground_truth)]


class WallClockBudget(TrainerCallback):
    """Stops training once ``seconds`` have passed, and times every whole step.

    A step's time runs from the end of the previous step (or the start of training) to the end of
    this one, so it covers data loading, generation, scoring, the update and logging.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = self.last_step_end = 0.0
        self.step_seconds: list[float] = []
        self.logs: list[dict[str, float]] = []

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs: Any) -> None:
        self.started = self.last_step_end = time.perf_counter()

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        now = time.perf_counter()
        self.step_seconds.append(now - self.last_step_end)
        self.last_step_end = now
        if now - self.started >= self.seconds:
            control.should_training_stop = True

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, float] | None = None, **kwargs: Any) -> None:
        if logs:
            self.logs.append(dict(logs))


class PhaseTimer:
    """Wraps GRPOTrainer._generate_and_score_completions (generation, reward scoring, advantages) to
    time it at every call; with steps_per_generation=1 it runs once per step, and the rest of a
    step is the update (forward, backward, optimizer step) and logging. The model attends with
    ``generation_attn`` inside the call and with its own kernel outside it (the update)."""

    def __init__(self, trainer: GRPOTrainer, generation_attn: str) -> None:
        self.seconds: list[float] = []
        self.model, self.generation_attn = trainer.model, generation_attn
        self.wrapped = trainer._generate_and_score_completions
        trainer._generate_and_score_completions = self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        update_attn = self.model.config._attn_implementation
        self.model.set_attn_implementation(self.generation_attn)
        try:
            result = self.wrapped(*args, **kwargs)
        finally:
            self.model.set_attn_implementation(update_attn)
        self.seconds.append(time.perf_counter() - started)
        return result


def make_dataset(problems: list[Any]) -> Dataset:
    """Standard (non-conversational) TRL format: a plain-text "prompt" column; other columns go to rewards."""
    return Dataset.from_dict({
        "prompt": [p.prompt for p in problems],
        "ground_truth": [p.ground_truth for p in problems],
    })


def make_config(settings: dict[str, Any], output_dir: str) -> GRPOConfig:
    completions_per_step = settings["prompts_per_step"] * settings["group_size"]
    return GRPOConfig(
        output_dir=output_dir,
        loss_type="dapo",
        epsilon=settings["clip_low"],
        epsilon_high=settings["clip_high"],
        beta=0.0,
        num_generations=settings["group_size"],
        per_device_train_batch_size=completions_per_step,  # TRL counts completions, not prompts
        gradient_accumulation_steps=1,
        steps_per_generation=1,
        num_iterations=1,
        max_completion_length=settings["max_response_length"],
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        learning_rate=settings["lr"],
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        max_steps=1_000_000,  # the wall-clock budget stops training, not the step count
        gradient_checkpointing=False,  # TRL's default is True: off, like dapo-rl, for a fair timing
        use_cpu=True,
        bf16=settings["precision"] == "bf16",  # TRL's own mixed precision: autocast over generation and training
        fp16=False,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        seed=settings["seed"],
        dataloader_num_workers=0,
    )


def train_trl(settings: dict[str, Any], model_dir: str, work_dir: str) -> dict[str, Any]:
    """Train with TRL for ``settings["seconds"]`` and save the final policy to ``<work_dir>/final``."""
    # the process setting dapo-rl's trainer makes (trainer.keep_freed_memory), so that both
    # systems allocate alike
    keep_freed_memory()
    torch.manual_seed(settings["seed"])
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # eager for the update, the kernel dapo-rl's default config trains with (faster than sdpa here);
    # sdpa for generation (faster than eager there): TRL gets the faster of the two in each phase
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    problems = load_problems(["builtin:arithmetic"], DataConfig(template="none"), split="train").problems
    correctness = CorrectnessReward()
    overlong = get_soft_overlong_punishment(settings["max_response_length"], settings["overlong_buffer"])
    budget = WallClockBudget(settings["seconds"])
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[correctness, overlong],
        args=make_config(settings, str(Path(work_dir) / "trl_out")),
        train_dataset=make_dataset(problems),
        processing_class=tokenizer,
        callbacks=[budget],
    )
    generation = PhaseTimer(trainer, generation_attn="sdpa")
    train_started = time.perf_counter()
    trainer.train()
    train_seconds = time.perf_counter() - train_started
    final_dir = Path(work_dir) / "final"
    trainer.model.save_pretrained(final_dir)
    tokenizer.save_pretrained(final_dir)
    step_logs = [log for log in budget.logs if "frac_reward_zero_std" in log]
    zero_std = [log["frac_reward_zero_std"] for log in step_logs]
    return {
        "steps": len(budget.step_seconds),
        "step_seconds": budget.step_seconds,
        "generate_seconds": generation.seconds[: len(budget.step_seconds)],
        "train_seconds": train_seconds,
        "completion_tokens": correctness.completion_tokens,
        "trained_tokens": correctness.completion_tokens,  # every generated completion is in the update
        "groups_dropped_per_step": 0.0,
        "groups_generated_per_step": float(settings["prompts_per_step"]),
        "mixed_groups_per_step": settings["prompts_per_step"] * (1 - sum(zero_std) / max(len(zero_std), 1)),
        "train_acc_first": _first_last(step_logs, "rewards/correctness_reward/mean", first=True),
        "train_acc_last": _first_last(step_logs, "rewards/correctness_reward/mean", first=False),
        "final_model_dir": str(final_dir),
        "version": trl.__version__,
    }


def _first_last(logs: list[dict[str, float]], key: str, first: bool) -> float | None:
    """Mean +-1 reward of the first/last logged step, as an accuracy in [0, 1]."""
    values = [log[key] for log in logs if key in log]
    if not values:
        return None
    return (values[0 if first else -1] + 1) / 2
