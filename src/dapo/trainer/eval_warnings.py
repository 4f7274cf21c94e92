"""What an evaluation says when reward scoring failed on some or all of its samples, and when the
verifier read no answer from most responses that hold one in a box or an answer tag (training batches
too)."""

from __future__ import annotations

from collections import Counter

from dapo.config.schema import RewardConfig
from dapo.rewards import RewardScorer
from dapo.rewards.answer_tags import holds_closed_tag
from dapo.rewards.boxes import last_box_start
from dapo.rewards.extract import extract_answer, resolve_extractor
from dapo.rewards.scorer import NO_REWARD
from dapo.rewards.types import RewardResult

# The answer forms a reader may be blind to (unread_answers_note)
_BOX = "a \\boxed{...}"
_TAG = "an <answer> tag"
_LINE = 'an "Answer:" line'


def all_unmeasured(culprits: list[str | None]) -> bool:
    """Whether no sample's correctness was measured (each had its correctness scorer fail)."""
    return bool(culprits) and all(culprit is not None for culprit in culprits)


def _first_failure(scorer: RewardScorer, label: str) -> str:
    """The scorer's first failure, on one line (a bad value's detail may span several)."""
    text = scorer.first_failure.get(label, "no detail recorded")
    return " / ".join(line.strip() for line in text.splitlines() if line.strip())


def at_k_names(k: int, majority_vote: bool) -> str:
    """The @k metrics an evaluation logs, by name (maj@k only where answers are extracted)."""
    return f"eval/avg@{k}, pass@{k} and maj@{k}" if majority_vote else f"eval/avg@{k} and pass@{k}"


def _source(culprit: str) -> str:
    """Where correctness comes from, when ``culprit`` is where it failed."""
    return "the verifier's math-verify call" if culprit == "math-verify" else "reward.verifier_weight=0"


def failure_warnings(scorer: RewardScorer, results: list[RewardResult], culprits: list[str | None], k: int,
                     unscored_sources: list[str]) -> list[str]:
    """One warning per scorer that failed on some samples, naming it, how many and its first
    failure, and what that does to the @k (``culprits``: each result's ``unmeasured_by``; what failed on
    every sample's correctness is :func:`unscored_message`'s, not said here)."""
    counts = Counter(label for result in results for label in result.failed)
    decided = Counter(culprit for culprit in culprits if culprit is not None)
    at_k = at_k_names(k, scorer.extracts_answers)
    messages = []
    for label, count in counts.most_common():
        if all_unmeasured(culprits) and label in decided:
            continue
        if label in decided:
            which = "" if decided[label] == count else f" on {decided[label]} of them"
            effect = (f"correctness comes from it{which} ({_source(label)}), so those count as wrong in {at_k}, "
                      "which may understate the model")
            if unscored_sources:
                effect += (f"; no sample of data_source {', '.join(unscored_sources)} had its correctness measured: "
                           "their @k are not logged")
        else:
            who = "the verifier does" if scorer.cfg.verifier_weight != 0 else "another reward function does"
            effect = f"it decides no sample's correctness ({who}): {at_k} are unaffected"
        how = ("no reward function applied to them: each returned None" if label == NO_REWARD
               else "timed out, raised or returned a bad value")
        messages.append(f"{label} failed on {count} of {len(results)} evaluation samples ({how}; "
                        f"eval/reward_failures/{label}): {effect}; first failure: {_first_failure(scorer, label)}")
    return messages


def unscored_message(scorer: RewardScorer, culprits: list[str | None], k: int) -> str:
    """Why an evaluation whose correctness scorer failed on every sample has no @k, in one line."""
    decided = Counter(culprit for culprit in culprits if culprit is not None).most_common()
    first = decided[0][0]
    if len(decided) == 1:
        what = f"{first} failed on {len(culprits)} of {len(culprits)} evaluation samples, and correctness comes from it"
    else:
        what = (f"the scorer correctness comes from failed on every one of the {len(culprits)} evaluation samples "
                f"({', '.join(f'{label} on {count}' for label, count in decided)})")
    hint = " (a judge that is down, a field the rows lack?)" if first in scorer.labels else ""
    return (f"{what} ({_source(first)}): {at_k_names(k, scorer.extracts_answers)} would read 0 without measuring "
            f"anything; first failure: {_first_failure(scorer, first)}. Fix {first}{hint} and evaluate again")


def unread_answers_note(reward: RewardConfig, data_sources: list[str], texts: list[str],
                        results: list[RewardResult], what: str) -> str | None:
    """A warning when most responses the verifier reads with an extractor blind to the form they answer
    in had no answer extracted: a ``\\boxed{...}`` where only the ``Answer:`` line is read
    (reward.verifier=math_dapo; reward.extractor=answer, or auto for a data_source that contains "dapo" or
    begins with "aime"), an ``<answer>`` tag where math_dapo reads, either or an ``Answer:`` line where
    reward.extractor=boxed reads. A model that
    answers so scores wrong on every one of them. None otherwise. ``what``: "training" or "evaluation",
    the responses'."""
    if reward.verifier_weight == 0:  # no verifier, no extraction
        return None
    strict = reward.verifier == "math_dapo"  # the reference scorer reads the "Answer:" line of every source
    readers = ["math_dapo" if strict else resolve_extractor(reward.extractor, source) for source in data_sources]
    blind = [i for i, reader in enumerate(readers) if reader in ("math_dapo", "answer", "boxed")]
    held = {i: _unread_form(readers[i], texts[i]) for i in blind if not results[i].answer}
    unread = [i for i, form in held.items() if form is not None]
    if 2 * len(unread) <= len(blind):
        return None
    names = sorted({data_sources[i] for i in unread})
    named = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    forms = sorted({held[i] for i in unread})
    reader = readers[unread[0]]
    chosen = ('reward.verifier=math_dapo reads only the "Answer:" line, as the DAPO reference run did' if strict else
              'reward.extractor=boxed reads only boxes' if reader == "boxed" else
              'reward.extractor=auto picks the "Answer:" line extractor there (a data_source whose name contains '
              '"dapo" or begins with "aime")' if reward.extractor == "auto" else
              'reward.extractor=answer reads only the "Answer:" line and <answer> tags')
    fix = ("reward.extractor=auto (or answer)" if reader == "boxed" else
           "reward.verifier=dapo-rl" + (" reward.extractor=boxed" if forms == [_BOX] else "") if strict else
           "reward.extractor=boxed")
    asks = ("a \\boxed{...} answer (data.template=boxed" if reader == "boxed" else
            "a last line \"Answer: ...\" (data.template=dapo")
    return (f"{len(unread)} of {len(blind)} {what} responses on data_source {named} hold {' or '.join(forms)} but "
            f"no answer the verifier reads: {chosen}, so they score as wrong (pred \"\"). If the model answers so, "
            f"set {fix}; or have the prompt ask for {asks} does for text prompts)")


def _unread_form(reader: str, text: str) -> str | None:
    """The answer form ``text`` holds that ``reader`` (an extractor, or "math_dapo") does not read."""
    if reader in ("math_dapo", "answer") and last_box_start(text) >= 0:
        return _BOX
    tagged = holds_closed_tag(text)
    if reader == "math_dapo" and tagged:
        return _TAG
    if reader == "boxed" and extract_answer(text, "answer") is not None:  # (what the Answer-line extractor reads)
        return _TAG if tagged else _LINE
    return None
