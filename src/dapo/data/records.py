"""The problem record every dataset loads into, and the error malformed data raises."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from dapo.errors import UserError


class DataError(UserError, ValueError):
    """Malformed data; the message names the file and the row, and says what is wrong. A row is
    named as :mod:`dapo.data.readers` locates it: ``line N`` (1-based) in a JSON-lines file,
    ``row N (0-based)`` in a parquet file or ``datasets`` directory, ``row N (0-based) at line M``
    in a .json array."""


@dataclass
class Problem:
    uid: str  # stable id of the problem; repeated copies of one problem share it
    prompt: str | list[dict[str, str]]  # raw problem text, or a chat list of {"role","content"}
    ground_truth: str
    data_source: str = "unknown"
    extra: dict[str, Any] = field(default_factory=dict)  # the row's other fields (extra_info, ...)
    verbatim: bool = False  # a completion prompt, used as is: no instruction, no chat template
    # where the row is (its file and row, as DataError names them), for messages about the problem
    where: str = field(default="", compare=False, repr=False)

    @property
    def eval_key(self) -> tuple[str, str]:
        """A problem's identity in evaluation: copies of a prompt within one data_source are one
        problem, scored once."""
        return (self.data_source, self.uid)


def closing_prefill(prompt: str | list[dict[str, str]]) -> str | None:
    """The content of a chat's closing assistant message, a prefill that the response continues
    (data.assistant_prefill); None for text, or a chat that ends in another role's message."""
    if isinstance(prompt, str) or not prompt or prompt[-1]["role"] != "assistant":
        return None
    return prompt[-1]["content"]


def problems_digest(problems: list[Problem]) -> str:
    """A digest of what ``problems`` ask and are scored against, in order: each one's id (of its
    prompt), ground truth, data source and other fields (a reward function's ``extra``)."""
    digest = hashlib.sha256()
    for problem in problems:
        extra = json.dumps(problem.extra, sort_keys=True, default=str)
        digest.update(f"{problem.uid}\0{problem.ground_truth}\0{problem.data_source}\0{extra}\n".encode())
    return digest.hexdigest()[:16]


def problem_key(problem: Problem, split: str) -> tuple[str, str]:
    """What makes a problem one: its prompt for training (copies under two data sources are one
    prompt to de-duplicate), its prompt within its data source for evaluation (``eval_key``: each
    source's avg@k scores it once)."""
    return ("", problem.uid) if split == "train" else problem.eval_key


def columns_left_out_of_extra(prompt_key: str, data_source_key: str) -> set[str]:
    """The row's columns a problem's ``extra`` leaves out: a configured key named ``prompt`` or
    ``data_source``, whose value a reward function's ``extra`` gets under that name anyway (the
    problem's prompt and data source). A key of another name (``data.data_source_key=src``) stays
    in ``extra`` under its own name, as TRL's reward functions get every column by its name."""
    return {name for name, key in (("prompt", prompt_key), ("data_source", data_source_key)) if key == name}
