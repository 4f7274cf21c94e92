"""What a load of problem files gave: the problems, what was read and dropped, and the warnings said
on the terminal (:class:`LoadedProblems`, made by :func:`dapo.data.loaders.load_problems`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from dapo.data.records import Problem, problem_key

_MAX_WARNINGS = 20
_SHOWN_WARNINGS = 5  # of them, on the terminal


@dataclass
class LoadedProblems:
    problems: list[Problem]
    num_rows: int  # rows read from all files (built-in problems count as rows)
    num_duplicates_dropped: int  # repeated training prompts removed by de-duplication
    num_malformed_skipped: int  # rows skipped in lenient mode (never a whole file)
    sources: list[str]  # the files (or "builtin:arithmetic") the problems came from
    warnings: list[str] = field(default_factory=list)  # why rows were skipped or dropped (first few)
    num_conflicting_duplicates: int = 0  # copies whose answer differs from their first copy's
    num_overlong_dropped: int = 0  # problems longer than data.max_prompt_length (PromptEncoder.drop_overlong)
    num_warnings_unkept: int = 0  # warnings past the first _MAX_WARNINGS (their rows are in the counts)

    def note(self, warning: str) -> None:
        """Keep ``warning`` among the first _MAX_WARNINGS (a file of a million bad rows keeps no million
        lines); count the rest, which :meth:`describe` says it leaves out."""
        if len(self.warnings) < _MAX_WARNINGS:
            self.warnings.append(warning)
        else:
            self.num_warnings_unkept += 1

    @property
    def rows_read(self) -> int:
        """The rows read, kept or not (a copy dropped, a malformed row skipped)."""
        return self.num_rows + self.num_malformed_skipped

    def num_problems(self, split: str) -> int:
        """Distinct problems, as ``split`` tells them apart (:func:`problem_key`)."""
        return len({problem_key(p, split) for p in self.problems})

    def counts(self, split: str) -> dict[str, float]:
        """What was read and what was dropped, as ``data/<split>_*`` metrics."""
        return {
            f"data/{split}_problems": float(self.num_problems(split)),
            f"data/{split}_rows": float(self.rows_read),
            f"data/{split}_duplicates_dropped": float(self._copies_dropped(split)),
            f"data/{split}_malformed_skipped": float(self.num_malformed_skipped),
            f"data/{split}_conflicting_duplicates": float(self.num_conflicting_duplicates),
            f"data/{split}_overlong_dropped": float(self.num_overlong_dropped),
        }

    def _copies_dropped(self, split: str) -> int:
        """Training drops repeated prompts (data.dedup_train); evaluation keeps them and scores each
        problem once (``eval_key``), so its count of dropped copies is those merged."""
        return len(self.problems) - self.num_problems(split) if split == "eval" else self.num_duplicates_dropped

    def _copies_said(self, split: str) -> str:
        if split == "eval":  # "0 dropped" would hide that its copies were merged
            return f"{self._copies_dropped(split)} repeated prompts evaluated once"
        return f"{self._copies_dropped(split)} duplicate prompts dropped"

    def describe(self, split: str, max_problems: int = 0) -> str:
        """What was read and what was dropped, for the terminal (with the first skip reasons); with
        ``max_problems`` (eval.max_problems), how many of them are evaluated when it leaves some out."""
        num_problems = self.num_problems(split)
        line = (
            f"{split} data: {num_problems} problems from {', '.join(self.sources)} "
            f"({self.rows_read} rows; "
            f"{self._copies_said(split)}; {self.num_malformed_skipped} malformed "
            f"rows skipped; {self.num_overlong_dropped} problems over data.max_prompt_length dropped)"
        )
        if 0 < max_problems < num_problems:  # "200 problems" alone read as 200 evaluated
            line += f"; the first {max_problems} evaluated (eval.max_problems)"
        if self.num_conflicting_duplicates:
            copies = "1 copy" if self.num_conflicting_duplicates == 1 else f"{self.num_conflicting_duplicates} copies"
            line += f"\n  warning: {copies} of a prompt had another answer than its first copy"
        shown, unshown = self.warnings[:_SHOWN_WARNINGS], len(self.warnings) - _SHOWN_WARNINGS + self.num_warnings_unkept
        more = [f"  ... and {unshown} more like these (the counts above include them)"] if unshown > 0 else []
        return "\n".join([line, *(f"  {warning}" for warning in shown), *more])
