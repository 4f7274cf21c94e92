"""Which rows' problems a load keeps (:class:`Admission`): de-duplication, and copies of a problem
labelled with another answer, counted and said."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING

from dapo.data.loaded import LoadedProblems
from dapo.data.prompts import problem_text
from dapo.data.records import Problem
from dapo.data.values import Prompt

if TYPE_CHECKING:  # (imported with the first parquet file read: pyarrow)
    from dapo.data.columnar import CheckedRows


class Admission:
    """Which rows' problems a load keeps: all but training's copies of a prompt when
    de-duplicating; a copy with another answer than its first copy is counted and said (the data
    has a labelling problem that training's de-duplication, or evaluation's one score per
    problem, would otherwise hide; without de-duplication both answers are rewarded)."""

    def __init__(self, result: LoadedProblems, split: str, dedup: bool) -> None:
        self.result, self.split, self.dedup = result, split, dedup
        # the ground truth of each problem's first copy: by uid for training's de-duplication, by
        # (data_source, uid) for evaluation, which scores each such problem once (unique_problems)
        self.answer_of: dict[str | tuple[str, str], str] = {}

    def row(self, problem: Problem, where: str) -> bool:
        """Whether the problem read next is kept."""

        def conflicting(_: int, first: str) -> None:
            self._note_conflict(problem.prompt, problem.uid, problem.ground_truth, first, where)

        return bool(self._kept(self._keys([problem.uid], [problem.data_source]), [problem.ground_truth], conflicting))

    def rows(self, rows: CheckedRows) -> list[Problem]:
        """The problems kept of the rows read next (a parquet batch's); only theirs are made."""

        def conflicting(i: int, first: str) -> None:
            self._note_conflict(rows.prompts[i], rows.uids[i], rows.ground_truths[i], first, rows.where(i))

        return rows.problems(self._kept(self._keys(rows.uids, rows.data_sources), rows.ground_truths, conflicting))

    def _keys(self, uids: list[str], data_sources: list[str]) -> list[str] | list[tuple[str, str]]:
        """What tells the problems of these rows apart (:func:`problem_key`'s, for training the uid
        alone: its ("", uid) without a tuple a row)."""
        return uids if self.split == "train" else list(zip(data_sources, uids))

    def _kept(self, keys: list[str] | list[tuple[str, str]], ground_truths: list[str],
              conflicting: Callable[[int, str], None]) -> list[int]:
        """The indices of the rows kept, of rows read in order (their problem_key and ground
        truth); ``conflicting(i, first copy's answer)`` for each copy with another answer. Only
        the rows that are not copies of an earlier batch's with its answer are gone through one
        by one (a de-duplicated DAPO-Math-17K: 1% of them)."""
        answer_of, dedup, count = self.answer_of, self.dedup, len(keys)
        self.result.num_rows += count
        kept = []
        firsts = map(answer_of.get, keys)  # (a ground truth is never None: answer_value's text)
        for index in itertools.compress(range(count), map(operator.ne, firsts, ground_truths)):
            first = answer_of.get(keys[index])  # (again: a row before it in these may be its first copy)
            if first is None:
                answer_of[keys[index]] = ground_truths[index]
                kept.append(index)
            elif ground_truths[index] != first:
                conflicting(index, first)
        if not dedup:
            return list(range(count))
        self.result.num_duplicates_dropped += count - len(kept)
        return kept

    def _note_conflict(self, prompt: Prompt, uid: str, ground_truth: str, kept_answer: str, where: str) -> None:
        self.result.num_conflicting_duplicates += 1
        if self.split == "eval":
            used = "only the first copy is evaluated"
        elif self.dedup:
            used = "only the first copy is trained on"
        else:
            used = "both are trained on (data.dedup_train=false), each rewarding its own answer"
        self.result.note(f"{where}: a copy of the problem {problem_text(prompt)[:80]!r} (uid {uid}) has another "
                         f"answer ({ground_truth[:40]!r}; first: {kept_answer[:40]!r}); {used}")
