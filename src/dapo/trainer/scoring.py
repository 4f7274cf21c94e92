"""Scoring a generation: decode each completion and score it against its problem.

Training rollouts and evaluation both score through :func:`score_completions`, so they can never
disagree on what counts as correct.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from dapo.algo import overlong_filter_mask, soft_overlong_penalty
from dapo.config import ConfigError, DAPOConfig
from dapo.data import LoadedProblems
from dapo.data.loaders import split_keys
from dapo.data.records import Problem, closing_prefill
from dapo.rewards import RewardScorer
from dapo.rewards.start_checks import DataSample, function_extra
from dapo.rewards.types import RewardResult
from dapo.rewards.user_functions import NOT_APPLICABLE_KEY, RewardFunctionError, function_labels
from dapo.rollout.base import Completion, GenerationResult
from dapo.rollout.harmony import HarmonyTokens, harmony_text
from dapo.trainer.batch import Sample


@dataclass
class ScoredGeneration:
    """A generation's completions, decoded (``texts``) and scored (``results``), prompt-major."""

    texts: list[str]
    results: list[RewardResult]


def score_completions(
    tokenizer: PreTrainedTokenizerBase,
    scorer: RewardScorer,
    problems: list[Problem],
    generation: GenerationResult,
    samples_per_prompt: int,
    prompt_token_ids: list[list[int]] | None = None,
) -> ScoredGeneration:
    """Decode prompt-major completions and score each against its problem. An engine (a user's
    too) that returned other than ``samples_per_prompt`` completions per prompt, in prompt-major
    order, is refused: groups and @k metrics index completions by position. A prompt of
    ``prompt_token_ids`` that ends in ``<think>`` (a reasoning model's chat template opens it), or
    whose assistant prefill opens one, has its responses read as thinking until their
    ``</think>``: one cut off before it states no answer (:func:`decode_responses` keeps it)."""
    completions = generation.completions
    prompt_indices = [c.prompt_index for c in completions]
    if prompt_indices != [i // samples_per_prompt for i in range(len(problems) * samples_per_prompt)]:
        raise RuntimeError(
            f"the rollout engine returned {len(completions)} completions for {len(problems)} prompts x "
            f"n={samples_per_prompt}, or not prompt-major (prompt 0's n samples, then prompt 1's, ...)"
        )
    texts = decode_responses(tokenizer, [c.token_ids for c in completions])
    owners = [problems[c.prompt_index] for c in completions]
    opened = ([opens_thinking(tokenizer, ids) or prefill_opens_thinking(problem.prompt)
               for ids, problem in zip(prompt_token_ids, problems, strict=True)] if prompt_token_ids is not None else None)
    results = scorer.score(texts, [p.ground_truth for p in owners], [p.data_source for p in owners],
                           [p.extra for p in owners], [p.prompt for p in owners],
                           [opened[c.prompt_index] for c in completions] if opened is not None else None)
    return ScoredGeneration(texts, results)


def filter_value(result: RewardResult, filter_metric: str) -> float:
    """A response's value for ``algorithm.filter_metric`` when that names a reward function's metric
    (``<function>/<key>``, as in ``result.extra``): NaN where the function gave none; 0 for the
    built-in metrics (the sampler reads those from the Sample's own fields)."""
    if "/" not in filter_metric:
        return 0.0
    value = result.extra.get(filter_metric)
    return float(value) if value is not None else math.nan


def check_filter_metric(cfg: DAPOConfig) -> None:
    """A filter metric ``<function>/<key>`` must name one of the run's reward functions by its
    label (as its metrics are logged, :func:`function_labels`): a typo would drop every group, unsaid."""
    filter_metric = cfg.resolved_filter_metric()
    labels = function_labels([function.path for function in cfg.reward.functions])
    label = filter_metric.partition("/")[0]
    if "/" in filter_metric and label not in labels:
        raise ConfigError(
            f"algorithm.filter_metric={filter_metric!r} names no reward function of this run: "
            + (f"theirs are {list(labels)}, so a metric of one is e.g. '{labels[0]}/score' or "
               f"'{labels[0]}/<a key it returns>'" if labels else "reward.functions lists none")
            + " (the names their metrics are logged under: reward/<function>/<key>)")


def data_samples(cfg: DAPOConfig, train: LoadedProblems | None, held_out: LoadedProblems | None) -> list[DataSample]:
    """Each split's first problem, with a response that states its ground truth, and the columns
    its rows have, as :meth:`RewardScorer.check_data` reads them."""
    samples = []
    for name, split, loaded in (("training data", "train", train), ("held-out data", "eval", held_out)):
        if loaded is None or not loaded.problems:
            continue
        first = loaded.problems[0]
        # the columns a function gets (function_extra): the rows' extra fields, the prompt, a data_source
        columns = frozenset({"prompt", "data_source"}.union(*(problem.extra for problem in loaded.problems)))
        item = (f"Reasoning...\nAnswer: {first.ground_truth}", first.ground_truth,
                function_extra(first.extra, first.data_source, first.prompt))
        samples.append(DataSample(name, first.where or loaded.sources[0], item, columns,
                                  split_keys(cfg.data, split).answer_key or "", tuple(loaded.sources)))
    return samples


def decode_responses(tokenizer: PreTrainedTokenizerBase, token_lists: list[list[int]]) -> list[str]:
    """The responses' text, special tokens left out as TRL decodes them, but for a ``</think>``
    that the tokenizer marks special (in its special tokens, or only in its vocabulary's
    ``special`` flag): it is kept, as a tokenizer that does not mark it (Qwen3's) keeps it, so that
    the verifier reads the answer after the thinking, not none at all. (The other special tokens
    are taken out before one decode of the whole response: each side of the ``</think>`` decoded
    alone lost a SentencePiece tokenizer's space after it.) A gpt-oss response reads the same way:
    ``<think>analysis</think>final`` (:mod:`dapo.rollout.harmony`)."""
    vocab = tokenizer.get_vocab()  # (once: a copy of the whole vocabulary each call)
    if (harmony := HarmonyTokens.of(vocab)) is not None:  # gpt-oss's: <think>analysis</think>final
        texts = [harmony_text(tokenizer, ids, harmony) for ids in token_lists]
        return [tokenizer.decode(ids, skip_special_tokens=True) if text is None else text
                for ids, text in zip(token_lists, texts, strict=True)]
    # (the vocabulary, not convert_tokens_to_ids: that gives the unknown token's id, and logs it, for none)
    think_end = vocab.get("</think>")
    dropped = think_end is not None and tokenizer.decode([think_end], skip_special_tokens=True) == ""
    if not dropped:
        return tokenizer.batch_decode(token_lists, skip_special_tokens=True)
    # what skip_special_tokens skips: the named special tokens and every added token flagged special
    skipped = {i for i, added in tokenizer.added_tokens_decoder.items() if added.special} | set(tokenizer.all_special_ids)
    skipped.discard(think_end)
    return tokenizer.batch_decode([[token for token in ids if token not in skipped] for ids in token_lists],
                                  skip_special_tokens=False)


def opens_thinking(tokenizer: PreTrainedTokenizerBase, prompt_ids: list[int]) -> bool:
    """Whether a prompt ends in ``<think>``, opening the response's thinking."""
    return tokenizer.decode(prompt_ids[-8:], skip_special_tokens=False).rstrip().endswith("<think>")


def prefill_opens_thinking(prompt: str | list[dict[str, str]]) -> bool:
    """Whether a chat's closing assistant message (a prefill the response continues) opens a
    ``<think>`` it does not close ("<think>\nOkay, let me see."): the response goes on thinking."""
    prefill = closing_prefill(prompt)
    return prefill is not None and prefill.rfind("<think>") > prefill.rfind("</think>")


def sample_record(problem: Problem, text: str, result: RewardResult, completion: Completion) -> dict[str, Any]:
    """One scored sample as logs and saved generations show it: the response, its extracted
    answer, the ground truth, the score (before overlong shaping) and correctness, and its length;
    where user functions scored it or a scorer failed on it, what each function returned
    (``reward_metrics``: ``<function>/score``, ``<function>/not_applicable`` and its own metrics,
    as TRL's completions table has a column per reward function) and the scorers that failed."""
    return {
        "data_source": problem.data_source,
        "response": text,
        "pred": result.pred,
        "ground_truth": problem.ground_truth,
        "score": result.score,
        "acc": result.acc,
        "num_tokens": len(completion.token_ids),
        "finish_reason": completion.finish_reason,
        **({"reward_metrics": dict(result.extra), "failed_scorers": list(result.failed)}
           if result.extra or result.failed else {}),
    }


def completion_records(
    tokenizer: PreTrainedTokenizerBase,
    problems: list[Problem],
    prompt_token_ids: list[list[int]],
    generation: GenerationResult,
    scored: ScoredGeneration,
    samples: list[Sample],
    count: int,
) -> tuple[list[dict[str, Any]], list[Sample]]:
    """``count`` completions spread evenly over a round, each a :func:`sample_record` with the
    prompt the model saw (chat template included), its group's id and its reward after overlong
    shaping; and their ``samples`` (of the round, in its order), for :func:`add_group_outcomes`."""
    completions = generation.completions
    picked = sorted({i * len(completions) // count for i in range(count)}) if completions and count else []
    records = [
        {
            "prompt": tokenizer.decode(prompt_token_ids[completions[i].prompt_index], skip_special_tokens=False),
            **sample_record(problems[completions[i].prompt_index], scored.texts[i], scored.results[i], completions[i]),
            "group_id": samples[i].group_id,
            "reward": samples[i].reward,
        }
        for i in picked
    ]
    return records, [samples[i] for i in picked]


def add_group_outcomes(records: list[dict[str, Any]], samples: list[Sample], outcomes: dict[int, str]) -> None:
    """Complete :func:`completion_records`' records once the step has trained: what became of each
    one's group (``group_outcome``, a :class:`~dapo.trainer.sampler.SamplingReport` outcome) and
    its advantage where the group trained (else None)."""
    for record, sample in zip(records, samples):
        record["group_outcome"] = outcomes.get(sample.group_id)
        record["advantage"] = sample.advantage if record["group_outcome"] == "trained" else None


class RewardFailureWatch:
    """Stops a run whose reward cannot give signal: one scorer failing (raising, timing out,
    returning a wrong type) on every response it applies to (not those it returned None for) of
    ``max_failing_steps`` consecutive steps, or with ``max_failure_rate`` < 1 on at least that
    share of them."""

    def __init__(self, scorer: RewardScorer, max_failing_steps: int, max_failure_rate: float = 1.0) -> None:
        self.scorer, self.max_failing_steps, self.max_failure_rate = scorer, max_failing_steps, max_failure_rate
        self.streak: dict[str, int] = {}  # scorer label -> consecutive steps it failed on (that share of) everything

    def observe(self, results: list[RewardResult]) -> None:
        """Count this step; raise :class:`RewardFunctionError` naming the scorer past the limit."""
        if not results:
            return
        rates = {label: self._failure_rate(label, results) for label in set().union(*(r.failed for r in results))}
        failing = {label for label, rate in rates.items() if rate >= self.max_failure_rate}
        self.streak = {label: self.streak.get(label, 0) + 1 for label in failing}
        for label, steps in self.streak.items():
            if self.max_failing_steps and steps >= self.max_failing_steps:
                first = self.scorer.first_failure.get(label, "no detail recorded")
                failed = sum(label in r.failed for r in results)
                if self.max_failure_rate == 1.0:
                    raise RewardFunctionError(
                        f"reward scorer {label} failed on every response of the last {steps} steps that it applies "
                        f"to ({failed} of {len(results)} this step), so {self._signal_left(label, failing)}; first "
                        f"failure: {first}. Fix {label}, or set reward.max_failing_steps=0 to go on")
                raise RewardFunctionError(
                    f"reward scorer {label} failed on at least {self.max_failure_rate:.0%} of the responses it applies "
                    f"to in each of the last {steps} steps (reward.max_failure_rate={self.max_failure_rate:g}; "
                    f"{rates[label]:.0%}, {failed} of {len(results)}, this step); first failure: {first}. Fix "
                    f"{label}, or raise reward.max_failure_rate (1.0: stop only a scorer that fails on every response)")

    @staticmethod
    def _failure_rate(label: str, results: list[RewardResult]) -> float:
        """The share of the responses ``label`` applies to (not those it returned None for) that it failed on."""
        applied = [label in r.failed for r in results if r.extra.get(f"{label}/{NOT_APPLICABLE_KEY}") != 1.0]
        return sum(applied) / len(applied) if applied else 0.0

    def _signal_left(self, label: str, failed_everywhere: set[str]) -> str:
        """What gives no learning signal (``label``, failing on every response) and what still does:
        the verifier (reward.verifier_weight > 0), the other reward functions, or nothing."""
        cfg = self.scorer.cfg
        what = "the verifier (math-verify)" if label == "math-verify" else label
        verifier = cfg.verifier_weight != 0 and "math-verify" not in failed_everywhere
        others = [other for other, spec in zip(self.scorer.labels, cfg.functions)
                  if other not in failed_everywhere and spec.weight != 0]
        still = ([f"the verifier's still does (reward.verifier_weight={cfg.verifier_weight:g})"] if verifier else []) + (
            [f"{', '.join(others)} still do{'es' if len(others) == 1 else ''}"] if others else [])
        if still:
            return f"{what} gives no learning signal; {' and '.join(still)}"
        off = " (reward.verifier_weight=0)" if cfg.verifier_weight == 0 else ""
        return f"{what} gives no learning signal, and with no other scorer giving any{off}, the reward gives none"


def shape_rewards(samples: list[Sample], cfg: DAPOConfig) -> None:
    """Overlong Reward Shaping: soft punishment added to the reward, and/or overlong filtering."""
    a = cfg.algorithm
    lengths = torch.tensor([len(s.response_ids) for s in samples], dtype=torch.float64)
    penalty = torch.zeros_like(lengths)
    if a.overlong_soft_punishment:
        penalty = soft_overlong_penalty(
            lengths, cfg.rollout.max_response_length, a.overlong_buffer_len, a.overlong_penalty_factor
        )
    weights = torch.ones_like(lengths)
    if a.overlong_filtering:
        weights = overlong_filter_mask(torch.tensor([s.truncated for s in samples]))
    for sample, pen, weight in zip(samples, penalty.tolist(), weights.tolist()):
        sample.reward = sample.score + pen
        sample.loss_weight = weight
