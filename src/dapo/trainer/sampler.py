"""The prompt stream (an exactly resumable data cursor) and DAPO's Dynamic Sampling loop.

Dynamic Sampling (DAPO section 3.2): groups whose filter metric is constant (all correct or all
wrong under binary correctness) have zero advantage, but for the soft overlong penalty's share
of their scores: no signal about correctness. We over-sample and
filter them out, generating further rounds until the step holds ``prompts_per_step`` groups with
mixed outcomes, at most ``max_gen_rounds`` rounds. Accepted groups beyond the target are kept for
the next step (``keep_surplus_groups``) instead of being thrown away; they are at most one step
stale. Their PPO ratio is taken against the older policy that sampled them (an importance ratio
for the extra step): its behaviour log-probs with ``algorithm.old_logprobs=rollout``, its own
forward with ``recompute`` (taken in the step that sampled them, before its update; the loop
asks :meth:`DynamicSampler.to_carry`). A group whose every response overlong filtering masked out
of the loss has no token to train on and is dropped like a constant one.
At most ``max_surplus_fraction`` of a step's ``prompts_per_step`` groups come from that surplus, so
every full step trains on groups sampled from the current policy too (one the round limit leaves
short may hold fewer, or none); carried groups beyond the cap are dropped
(verl keeps none: ``keep_surplus_groups=false``, the paper config's choice). A step's batch
holds its own groups first and the carried ones last, so the first mini-batch, on which
``old_logprobs=rollout`` measures entropy and engine/trainer mismatch, is of this step's policy.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from dapo.algo import filter_groups
from dapo.data.records import Problem, problems_digest
from dapo.trainer.batch import Sample
from dapo.trainer.surplus import changed_surplus_settings, sample_from_state, sample_state
from dapo.warning_format import said_again


class PromptStream:
    """Endless, seeded, epoch-wise shuffled stream of problems with a resumable cursor."""

    def __init__(self, problems: list[Problem], seed: int, shuffle: bool = True) -> None:
        if not problems:
            raise ValueError("the training set is empty: check data.train_files")
        self.problems, self.seed, self.shuffle = problems, seed, shuffle
        self.epoch, self.cursor = 0, 0
        self._order = self._permutation(0)
        self.order_key = self._order_key()
        # what they are scored against, which the order key, of the prompts alone, leaves out
        self.answers_key = problems_digest(problems)

    def _permutation(self, epoch: int) -> list[int]:
        if not self.shuffle:
            return list(range(len(self.problems)))
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        return torch.randperm(len(self.problems), generator=generator).tolist()

    def take(self, count: int) -> list[Problem]:
        out = []
        for _ in range(count):
            if self.cursor == len(self._order):
                self.epoch, self.cursor = self.epoch + 1, 0
                self._order = self._permutation(self.epoch)
            out.append(self.problems[self._order[self.cursor]])
            self.cursor += 1
        return out

    def _order_key(self, seeded: bool | None = None) -> str:
        """What fixes the epochs' order: the problems (by uid, in order), shuffling, and the seed
        where it shuffles (``seeded``: whether the seed is in the key; before 2026-11-29 it always
        was, so a checkpoint's key without shuffling may hold it too)."""
        seed = self.seed if (self.shuffle if seeded is None else seeded) else ""
        digest = hashlib.sha256(f"{seed}|{self.shuffle}|".encode())
        for problem in self.problems:
            digest.update(problem.uid.encode() + b"\n")
        return digest.hexdigest()[:16]

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "cursor": self.cursor, "order_key": self.order_key, "answers_key": self.answers_key}

    def load_state_dict(self, state: dict) -> bool:
        """Continue at the saved cursor (True); if the data, the seed (when shuffling) or data.shuffle
        changed since the state was saved (the cursor would point into a different order, or past its end), start
        the next epoch instead, saying so (False)."""
        epoch, cursor = state["epoch"], state["cursor"]
        saved_key = state.get("order_key")  # absent in checkpoints written before it was kept
        same_order = saved_key in (None, self.order_key, self._order_key(seeded=True))
        if not same_order or cursor > len(self.problems):
            warnings.warn(
                f"the training data, trainer.seed or data.shuffle changed since this checkpoint (now "
                f"{len(self.problems)} problems): its data cursor (epoch {epoch}, position {cursor}) "
                f"cannot continue the same order, so training goes on with a new epoch ({epoch + 1})",
                stacklevel=2,
            )
            epoch, cursor = epoch + 1, 0
        continued = (epoch, cursor) == (state["epoch"], state["cursor"])
        self.epoch, self.cursor = epoch, cursor
        self._order = self._permutation(self.epoch)
        return continued


@dataclass
class SamplingReport:
    """What dynamic sampling did in one step (logged as metrics)."""

    gen_rounds: int = 0
    groups_generated: int = 0
    groups_kept: int = 0  # with signal: those dynamic sampling keeps (with it off, all train)
    groups_all_correct: int = 0  # filter metric constant, every response correct (acc); filtered if dynamic
    groups_all_wrong: int = 0  # filter metric constant, no response correct (acc); filtered if dynamic
    # filter metric varies, but overlong filtering masked every response out of the loss (all
    # truncated): no token to train on; filtered if dynamic
    groups_all_masked: int = 0
    groups_carried_in: int = 0  # surplus groups from the previous step used in this one
    groups_carried_out: int = 0  # surplus groups kept for the next step
    groups_discarded: int = 0  # surplus groups dropped (too stale, over the cap, or keeping is off)
    hit_round_limit: bool = False
    generated: list[Sample] = field(default_factory=list)  # every scored sample, filtered or not
    # what became of each generated group (by group id): "trained" this step, "carried" to the
    # next, "discarded" (surplus), or filtered as "all_correct", "all_wrong", "all_masked" or
    # "alike" (filtering on the score: scored alike with mixed correctness)
    group_outcomes: dict[int, str] = field(default_factory=dict)


# generate_round(problems, round_index) -> scored samples, n per problem, with group ids assigned.
GenerateRound = Callable[[list[Problem], int], list[Sample]]


class DynamicSampler:
    def __init__(
        self,
        stream: PromptStream,
        prompts_per_step: int,
        gen_prompts_per_round: int,
        max_gen_rounds: int,
        dynamic_sampling: bool,
        filter_metric: str,
        keep_surplus: bool,
        max_surplus_fraction: float = 0.5,
        surplus_settings: dict | None = None,
    ) -> None:
        """``surplus_settings``: what the groups it keeps were made under (:func:`surplus_settings`),
        saved with them: a checkpoint's groups made under others are not trained after a resume."""
        if filter_metric not in ("acc", "score", "reward") and "/" not in filter_metric:  # "auto": DAPOConfig's
            raise ValueError(f"filter_metric={filter_metric!r}: 'acc', 'score', 'reward' or '<function>/<key>' "
                             "(DAPOConfig.resolved_filter_metric)")
        self.stream = stream
        self.prompts_per_step, self.gen_prompts_per_round = prompts_per_step, gen_prompts_per_round
        self.max_gen_rounds, self.dynamic_sampling = max_gen_rounds, dynamic_sampling
        self.filter_metric, self.keep_surplus = filter_metric, keep_surplus
        # most carried-over groups one step may use (always fewer than a whole step)
        # (rounded before the floor: 0.29 * 100 is 28.999999999999996 in floating point)
        self.max_carried_in = min(int(round(max_surplus_fraction * prompts_per_step, 6)), prompts_per_step - 1)
        self.surplus: list[list[Sample]] = []  # accepted groups waiting for the next step
        self.surplus_settings = surplus_settings or {}
        self._dropped_on_resume = 0  # a checkpoint's surplus made under other settings (load_state_dict)
        self.short_batches = 0  # steps the round limit stopped short of a full batch, this process
        self._warned_missing = False  # a reward function's filter metric missing from responses (_metric)

    def next_batch(self, generate_round: GenerateRound, step: int) -> tuple[list[Sample], SamplingReport]:
        """Collect ``prompts_per_step`` groups for training step ``step``."""
        report = SamplingReport(groups_discarded=self._dropped_on_resume)
        self._dropped_on_resume = 0
        carried = self._carried_into(step)
        report.groups_discarded += len(self.surplus) - len(carried)
        for sample in (s for group in carried for s in group):
            sample.carried_over = True
        accepted, self.surplus = carried, []
        report.groups_carried_in = len(accepted)
        if not self.dynamic_sampling:
            samples = generate_round(self.stream.take(self.prompts_per_step), 0)
            report.gen_rounds, report.generated = 1, samples
            self._groups_with_signal(samples, report)  # counts what dynamic sampling would drop
            report.group_outcomes = dict.fromkeys(report.group_outcomes, "trained")
            return samples, report
        while len(accepted) < self.prompts_per_step and report.gen_rounds < self.max_gen_rounds:
            samples = generate_round(self.stream.take(self.gen_prompts_per_round), report.gen_rounds)
            report.gen_rounds += 1
            report.generated.extend(samples)
            accepted.extend(self._filter(samples, report))
        if len(accepted) < self.prompts_per_step:
            report.hit_round_limit = True
            self._warn_short_batch(len(accepted), report)
        batch, rest = accepted[: self.prompts_per_step], accepted[self.prompts_per_step :]
        # the next step takes at most max_carried_in of them: the rest is dropped now, and counted so
        self.surplus = rest[: self.max_carried_in] if self.keep_surplus else []
        report.groups_carried_out = len(self.surplus)
        report.groups_discarded += len(rest) - len(self.surplus)
        for groups, outcome in ((batch, "trained"), (self.surplus, "carried"), (rest[len(self.surplus):], "discarded")):
            report.group_outcomes.update((group[0].group_id, outcome) for group in groups)
        batch = batch[report.groups_carried_in :] + batch[: report.groups_carried_in]  # this step's first
        return [s for group in batch for s in group], report

    def _warn_short_batch(self, accepted: int, report: SamplingReport) -> None:
        """Say that the round limit stopped generation with ``accepted`` groups of signal: in full the
        first time, then in one line the 10th, 100th, ... time (a solved task hits it every step)."""
        self.short_batches += 1
        if self.short_batches > 1:
            if said_again(self.short_batches):
                warnings.warn(f"dynamic sampling: the round limit stopped generation short of a full batch again: "
                              f"{self.short_batches} times so far, this time with {accepted} of "
                              f"{self.prompts_per_step} groups (sampling/hit_round_limit logs every step)",
                              stacklevel=3)
            return
        # filtering on the score, a group may score alike with mixed correctness: neither of the two
        alike = (report.groups_generated - report.groups_kept - report.groups_all_masked
                 - report.groups_all_correct - report.groups_all_wrong)
        warnings.warn(
            f"dynamic sampling: only {accepted} of {self.prompts_per_step} groups with mixed "
            f"outcomes after {report.gen_rounds} generation rounds (algorithm.max_gen_rounds="
            f"{self.max_gen_rounds}); {report.groups_all_correct} groups were all-correct, "
            f"{report.groups_all_wrong} all-wrong"
            + (f", {alike} scored alike with mixed correctness" if alike else "")
            + f" and {report.groups_all_masked} all truncated and masked by "
            f"overlong filtering. Training on the {accepted} groups there are. "
            "If this persists, the reward does not tell a group's responses apart: the task is too easy or "
            "too hard for the model (raise max_gen_rounds / gen_prompts_per_round or change the data), or a "
            "reward function returns the same score for every response. (Said in full once; "
            "sampling/hit_round_limit, sampling/groups_trained and sampling/filtered_ratio log every step.)",
            stacklevel=3,
        )

    def to_carry(self, step: int) -> list[Sample]:
        """The surplus samples training step ``step`` will train on (see :meth:`_carried_into`)."""
        return [s for group in self._carried_into(step) for s in group]

    def _carried_into(self, step: int) -> list[list[Sample]]:
        """The surplus groups step ``step`` uses: none unless dynamic sampling keeps surplus (a
        checkpoint saved under other settings may hold some), at most one step stale, at most
        ``max_carried_in`` of them."""
        if not (self.dynamic_sampling and self.keep_surplus):
            return []
        return [g for g in self.surplus if step - g[0].policy_version <= 1][: self.max_carried_in]

    def _filter(self, samples: list[Sample], report: SamplingReport) -> list[list[Sample]]:
        """Keep groups whose filter metric varies; count the all-correct / all-wrong ones."""
        keep = self._groups_with_signal(samples, report)
        groups: dict[int, list[Sample]] = {}
        for sample, kept in zip(samples, keep):
            if kept:
                groups.setdefault(sample.group_id, []).append(sample)
        return list(groups.values())

    def _groups_with_signal(self, samples: list[Sample], report: SamplingReport) -> list[bool]:
        """Count generated, kept, all-correct, all-wrong and all-masked groups; per sample,
        whether its group has signal: its filter metric varies and some response is in the loss."""
        group_ids = torch.tensor([s.group_id for s in samples], dtype=torch.long)
        result = filter_groups(group_ids, self._metric(samples))
        report.groups_generated += result.num_groups
        report.groups_kept += result.num_kept
        keep = result.keep.tolist()
        # A constant group is all-correct or all-wrong by its responses' acc, whatever the filter
        # metric: a constant score says nothing about which (every response may score -1).
        constant_accs: dict[int, list[bool]] = {}
        for sample, kept in zip(samples, keep):
            if not kept:
                constant_accs.setdefault(sample.group_id, []).append(sample.acc)
        report.groups_all_correct += sum(all(accs) for accs in constant_accs.values())
        report.groups_all_wrong += sum(not any(accs) for accs in constant_accs.values())
        in_loss: dict[int, bool] = {}
        for sample, kept in zip(samples, keep):
            if kept:
                in_loss[sample.group_id] = in_loss.get(sample.group_id, False) or sample.loss_weight > 0
        masked = {group for group, any_in_loss in in_loss.items() if not any_in_loss}
        report.groups_kept -= len(masked)
        report.groups_all_masked += len(masked)
        # a group with signal is "trained", "carried" or "discarded" once next_batch has chosen
        report.group_outcomes.update({group: "all_masked" if group in masked else "with_signal" for group in in_loss})
        report.group_outcomes.update({group: "all_correct" if all(accs) else "all_wrong" if not any(accs) else "alike"
                                      for group, accs in constant_accs.items()})
        return [kept and s.group_id not in masked for s, kept in zip(samples, keep)]

    def _metric(self, samples: list[Sample]) -> torch.Tensor:
        """Each response's filter metric, float64. A reward function's metric that a response has no
        value for (the function failed, did not apply, or did not return the key) is read as its
        group's first value that is there (no spread of its own), or 0 where none is: warned of once."""
        name = self.filter_metric
        fixed = {"acc": lambda s: float(s.acc), "score": lambda s: s.score, "reward": lambda s: s.reward}.get(name)
        if fixed is not None:
            return torch.tensor([fixed(s) for s in samples], dtype=torch.float64)
        present: dict[int, float] = {}
        for sample in samples:
            if not math.isnan(sample.filter_value):
                present.setdefault(sample.group_id, sample.filter_value)
        missing = sum(math.isnan(s.filter_value) for s in samples)
        if missing and not self._warned_missing:
            self._warned_missing = True
            warnings.warn(f"algorithm.filter_metric={name!r}: {missing} of {len(samples)} responses of a round have no "
                          f"value for it (the function failed on them, did not apply, or returned no "
                          f"{name.partition('/')[2]!r}); each is read as its group's other values, and a group with "
                          f"none is dropped (said once)", stacklevel=2)
        return torch.tensor([present.get(s.group_id, 0.0) if math.isnan(s.filter_value) else s.filter_value
                             for s in samples], dtype=torch.float64)

    def state_dict(self) -> dict:
        # Plain dicts and tensors, so a checkpoint loads with torch.load(weights_only=True).
        surplus = [[sample_state(s) for s in group] for group in self.surplus]
        return {"stream": self.stream.state_dict(), "surplus": surplus, "surplus_settings": self.surplus_settings}

    def load_state_dict(self, state: dict) -> None:
        """The cursor and the kept groups; the groups are dropped (said, and counted in the next
        step's sampling/groups_discarded) when the settings they were made under changed since, or
        the data did: trained as if made under this run's settings, they would be wrong numbers (the
        log-probs of another temperature as pi_old, groups of another size, another length limit)."""
        continued = self.stream.load_state_dict(state["stream"])
        surplus = [[sample_from_state(fields) for fields in group] for group in state["surplus"]]
        changed = changed_surplus_settings(state.get("surplus_settings"), self.surplus_settings)
        # (absent in checkpoints written before it was kept: unknown, taken as the same)
        rescored = state["stream"].get("answers_key", self.stream.answers_key) != self.stream.answers_key
        if surplus and (changed or not continued or rescored):
            why = (f"{', '.join(changed)} changed" if changed else
                   "the training data, trainer.seed or data.shuffle changed" if not continued else
                   "the training data's answers (ground truths, data sources or other fields) changed")
            warnings.warn(f"{why} since this checkpoint: the {len(surplus)} surplus group(s) it kept for the next "
                          "step were made under the old settings, so they are dropped, not trained", stacklevel=2)
            self._dropped_on_resume, surplus = len(surplus), []
        self.surplus = surplus
