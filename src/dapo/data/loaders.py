"""Load problems from parquet, JSON (lines, or one array), local ``datasets`` directories, or the built-in task
(an entry may also be a glob or a directory of such files: :mod:`dapo.data.files`).

Every row becomes a :class:`~dapo.data.records.Problem`. Columns are found by dotted paths from
:class:`~dapo.config.schema.DataConfig` (``prompt_key``, ``answer_key``, ``data_source_key``), so
the DAPO schema (``prompt`` chat list, ``reward_model.ground_truth``) and others
(``question`` / ``answer``) load alike.

Duplicates: ``uid`` is a hash of the prompt content, so copies of a problem share it. For the
"train" split copies are dropped when ``cfg.dedup_train`` (DAPO-Math-17K repeats each prompt
about 100x) and counted; for "eval" copies are kept so avg@k is computed per problem over them. A
copy with another answer than its first copy is counted apart and named in ``warnings`` (de-duped
or not: without de-duplication both answers are rewarded).

Bad data: a malformed row or unreadable file raises :class:`DataError` naming the file and where
in it the row is (a JSON-lines file's line, 1-based; a table's row, 0-based: :mod:`dapo.data.readers`);
with ``cfg.lenient`` it is skipped, counted in ``num_malformed_skipped`` and described in
``warnings``. A path that does not exist, or a pattern or directory naming no file, is always an
error (a typo, not bad data).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy

from dapo.config.schema import DataConfig
from dapo.data.arithmetic import make_arithmetic_problems
from dapo.data.files import data_files, default_data_source
from dapo.data.prompts import problem_text
from dapo.data.readers import Row, rows_of
from dapo.data.records import DataError, Problem, problem_key

BUILTIN_ARITHMETIC = "builtin:arithmetic"


def builtin_dataset_problem(entry: str) -> str | None:
    """Why a data file entry "builtin:<name>" names no built-in dataset, or None (not one, or the
    built-in task)."""
    if entry.startswith("builtin:") and entry != BUILTIN_ARITHMETIC:
        return f"unknown built-in dataset {entry!r}; the built-in task is {BUILTIN_ARITHMETIC!r}"
    return None


_MAX_WARNINGS = 20


@dataclass
class LoadedProblems:
    problems: list[Problem]
    num_rows: int  # rows read from all files (built-in problems count as rows)
    num_duplicates_dropped: int  # repeated training prompts removed by de-duplication
    num_malformed_skipped: int  # rows (or unreadable files) skipped in lenient mode
    sources: list[str]  # the files (or "builtin:arithmetic") the problems came from
    warnings: list[str] = field(default_factory=list)  # why rows were skipped or dropped (first few)
    num_conflicting_duplicates: int = 0  # copies whose answer differs from their first copy's
    num_overlong_dropped: int = 0  # problems longer than data.max_prompt_length (PromptEncoder.drop_overlong)

    def num_problems(self, split: str) -> int:
        """Distinct problems, as ``split`` tells them apart (:func:`problem_key`)."""
        return len({problem_key(p, split) for p in self.problems})

    def counts(self, split: str) -> dict[str, float]:
        """What was read and what was dropped, as ``data/<split>_*`` metrics."""
        return {
            f"data/{split}_problems": float(self.num_problems(split)),
            f"data/{split}_rows": float(self.num_rows + self.num_malformed_skipped),
            f"data/{split}_duplicates_dropped": float(self.num_duplicates_dropped),
            f"data/{split}_malformed_skipped": float(self.num_malformed_skipped),
            f"data/{split}_conflicting_duplicates": float(self.num_conflicting_duplicates),
            f"data/{split}_overlong_dropped": float(self.num_overlong_dropped),
        }

    def describe(self, split: str) -> str:
        """What was read and what was dropped, for the terminal (with the first skip reasons)."""
        line = (
            f"{split} data: {self.num_problems(split)} problems from {', '.join(self.sources)} "
            f"({self.num_rows + self.num_malformed_skipped} rows; "
            f"{self.num_duplicates_dropped} duplicate prompts dropped; {self.num_malformed_skipped} malformed "
            f"rows skipped; {self.num_overlong_dropped} problems over data.max_prompt_length dropped)"
        )
        if self.num_conflicting_duplicates:
            line += (f"\n  warning: {self.num_conflicting_duplicates} copies of a prompt had another answer "
                     "than its first copy")
        return "\n".join([line, *(f"  {warning}" for warning in self.warnings[:5])])


def load_problems(files: list[str], cfg: DataConfig, split: str) -> LoadedProblems:
    """Read ``files`` in order into one list of problems for ``split`` ("train" or "eval")."""
    if split not in ("train", "eval"):
        raise ValueError(f"split={split!r} must be 'train' or 'eval'")
    if not files:
        raise DataError(f"no {split} data files given")
    result = LoadedProblems([], 0, 0, 0, [])
    # the ground truth of each problem's first copy: by uid for training's de-duplication, by
    # (data_source, uid) for evaluation, which scores each such problem once (unique_problems)
    answer_of: dict[tuple[str, str], str] = {}
    prompts_read = PromptMemo()
    dedup = split == "train" and cfg.dedup_train
    for entry, path in ((e, path) for e in files for path in _paths_of(e, split, result.warnings)):
        result.sources.append(path)
        for where, problem in _read_source(path, cfg, split, result, default_data_source(path, entry), prompts_read):
            result.num_rows += 1
            key = problem_key(problem, split)
            if key in answer_of and problem.ground_truth != answer_of[key]:
                _note_conflict(problem, answer_of[key], where, result, split, dedup)
            if dedup and key in answer_of:
                result.num_duplicates_dropped += 1
                continue
            answer_of.setdefault(key, problem.ground_truth)
            result.problems.append(problem)
    if not result.problems:
        why = "; ".join(result.warnings[:3]) or f"{'it holds' if len(result.sources) == 1 else 'they hold'} no rows"
        raise DataError(f"no usable {split} problems in {files}: {why}")
    return result


def _note_conflict(
    problem: Problem, kept_answer: str, where: str, result: LoadedProblems, split: str, dedup: bool
) -> None:
    """A copy of a prompt whose answer differs from its first copy's: count it and say so (the
    data has a labelling problem that training's de-duplication, or evaluation's one score per
    problem, would otherwise hide; without de-duplication both answers are rewarded)."""
    result.num_conflicting_duplicates += 1
    if split == "eval":
        used = "only the first copy is evaluated"
    elif dedup:
        used = "only the first copy is trained on"
    else:
        used = "both are trained on (data.dedup_train=false), each rewarding its own answer"
    if len(result.warnings) < _MAX_WARNINGS:
        result.warnings.append(
            f"{where}: a copy of the problem {problem_text(problem.prompt)[:80]!r} (uid {problem.uid}) has another "
            f"answer ({problem.ground_truth[:40]!r}; first: {kept_answer[:40]!r}); {used}"
        )


def _paths_of(entry: str, split: str, notes: list[str]) -> list[str]:
    """What one entry of data.*_files reads: builtin:arithmetic, or its files (:func:`data_files`)."""
    if entry == BUILTIN_ARITHMETIC:
        return [entry]
    if (problem := builtin_dataset_problem(entry)) is not None:
        raise DataError(problem)
    return data_files(entry, split, notes)


def _read_source(
    path: str, cfg: DataConfig, split: str, result: LoadedProblems, source_name: str, prompts_read: PromptMemo
) -> Iterator[tuple[str, Problem]]:
    """The problems of one file (or the built-in task), each with where it is: the file and its
    row's location in it (:mod:`dapo.data.readers`)."""
    if path == BUILTIN_ARITHMETIC:
        size = cfg.builtin_train_size if split == "train" else cfg.builtin_eval_size
        try:
            problems = make_arithmetic_problems(
                size, split, cfg.builtin_min_digits, cfg.builtin_max_digits, cfg.builtin_ops
            )
        except ValueError as error:  # e.g. more problems asked for than the digit range holds
            raise DataError(f"{path}: {error} (data.builtin_{split}_size, data.builtin_*_digits)") from None
        yield from ((f"{path} problem {index}", problem) for index, problem in enumerate(problems))
        return
    rows_read = 0  # of this file, valid: a key one of its later rows lacks is a gap in the data, not a wrong key
    for location, row in _file_rows(path, split, cfg, result):
        try:
            if isinstance(row, DataError):
                raise row
            where = f"{path} {location}"
            yield where, problem_from_row(row, cfg, where, source_name, keys_seen=rows_read > 0, prompts_read=prompts_read)
            rows_read += 1
        except DataError as error:
            _skip_or_raise(error, cfg, result)


def _file_rows(
    path: str, split: str, cfg: DataConfig, result: LoadedProblems
) -> Iterator[tuple[str, Row]]:
    """The file's rows with their locations; a file that cannot be read (at all, or from some row
    on) is one error, naming the last row read."""
    last_location = None
    try:
        for last_location, row in rows_of(path, split):  # (still the last row read when the next fails)
            yield last_location, row
    except DataError as error:
        _skip_or_raise(error, cfg, result)
    except (OSError, ValueError) as error:
        what = f"unreadable after {last_location}" if last_location is not None else "unreadable file"
        reason = " ".join(str(error).split())  # pyarrow's can hold line breaks: a warning is one line
        _skip_or_raise(DataError(f"{path}: {what} ({reason})"), cfg, result)


def _skip_or_raise(error: DataError, cfg: DataConfig, result: LoadedProblems) -> None:
    if not cfg.lenient:
        raise error
    result.num_malformed_skipped += 1
    if len(result.warnings) < _MAX_WARNINGS:
        result.warnings.append(f"skipped: {error}")


def problem_from_row(
    row: dict[str, Any], cfg: DataConfig, where: str, source_name: str, keys_seen: bool = False,
    prompts_read: PromptMemo | None = None,
) -> Problem:
    """One validated :class:`Problem` from a row, or DataError starting with ``where`` (the file
    and the row's location in it); a row without a data_source gets ``source_name``.
    ``keys_seen``: earlier rows of the file had the configured keys (a missing one is this row's gap);
    ``prompts_read``: the prompts of the rows before it, whose copies it reuses."""
    raw_prompt = _lookup(row, cfg.prompt_key, where, "prompt", keys_seen)
    prompt, uid = (prompts_read or PromptMemo()).prompt_and_uid(raw_prompt, where, cfg.prompt_key)
    ground_truth = _answer_of(
        _lookup(row, cfg.answer_key, where, "ground truth", keys_seen), where, cfg.answer_key
    )
    data_source = _get(row, cfg.data_source_key)
    # A top-level column the problem already holds; a nested key (extra_info.raw_problem) leaves
    # its struct in extra, where reward functions read the rest of it.
    used = {key for key in (cfg.prompt_key, cfg.data_source_key) if "." not in key}
    extra = {key: value for key, value in row.items() if key not in used}
    return Problem(
        uid=uid,
        prompt=prompt,
        ground_truth=ground_truth,
        data_source=str(data_source) if data_source not in (None, "") else source_name,
        extra=extra,
        where=where,
    )


def prompt_uid(prompt: str | list[dict[str, str]]) -> str:
    """Stable id of a prompt's content: copies of one problem share it."""
    return hashlib.sha1(json.dumps(prompt, sort_keys=True).encode()).hexdigest()[:16]


class PromptMemo:
    """The validated prompts of the rows read so far, and their uids, by their raw text or (role,
    content) pairs: a copy of a prompt (DAPO-Math-17K repeats each ~100x) is neither validated nor
    hashed again (a third of the time of reading that file), and holds its first copy's prompt
    object, not one of its own (1.8M rows of 18k prompts, kept with data.dedup_train=false)."""

    def __init__(self) -> None:
        self._read: dict[Any, tuple[str | list[dict[str, str]], str]] = {}

    def prompt_and_uid(self, raw: Any, where: str, key: str) -> tuple[str | list[dict[str, str]], str]:
        memo_key = _raw_prompt_key(raw)
        known = self._read.get(memo_key) if memo_key is not None else None
        if known is None:
            prompt = _prompt_of(raw, where, key)
            known = prompt, prompt_uid(prompt)
            if memo_key is not None:
                self._read[memo_key] = known
        return known


def _raw_prompt_key(raw: Any) -> Any:
    """What ``_prompt_of`` makes of ``raw`` depends on alone, hashable: the text, or a chat list's
    (role, content) pairs (its messages' other keys are dropped); None for another form."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in raw
    ):
        return tuple((m["role"], m["content"]) for m in raw)
    return None


_ABSENT = object()  # a key the row does not have (its value may be None: a null in a nullable column)


def _get(row: dict[str, Any], dotted_key: str, absent: Any = None) -> Any:
    """``row[dotted_key]`` when the row has a column of that very name (a flattened table:
    pandas' json_normalize writes ``reward_model.ground_truth``), else the nested path, else ``absent``."""
    if dotted_key in row:
        return row[dotted_key]
    value: Any = row
    for part in dotted_key.split("."):
        if not isinstance(value, dict) or part not in value:
            return absent
        value = value[part]
    return value


def _lookup(row: dict[str, Any], dotted_key: str, where: str, what: str, keys_seen: bool) -> Any:
    value = _get(row, dotted_key, _ABSENT)
    if value is None:  # the key is right (other rows have it); this row's value is missing
        raise DataError(f"{where}: missing {what} at {dotted_key!r} (null)")
    if value is _ABSENT:
        setting = "data.prompt_key" if what == "prompt" else "data.answer_key"
        fix = ("the rows before it have it: fix or drop this row, or set data.lenient=true to skip such rows"
               if keys_seen else f"set {setting}")
        raise DataError(f"{where}: missing {what} at {dotted_key!r} (row has keys {sorted(row)}; {fix})")
    return value


def _encodable(text: str, where: str, key: str) -> str:
    """``text``, if it is valid Unicode (a lone surrogate "\\ud835" from a cut JSON escape is not,
    and would stop training when the tokenizer meets it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise DataError(f"{where}: invalid text at {key!r}: {error.reason} at character {error.start}") from None
    return text


def _plain_decimal(value: float) -> str:
    """A finite float as an answer states it: no exponent, no float32 widening noise (a parquet
    float32 column arrives as the double nearest 0.3f, 0.30000001192092896; it reads 0.3)."""
    if value.is_integer():
        return str(int(value))
    narrow = numpy.float32(value)
    return numpy.format_float_positional(narrow if float(narrow) == value else value, trim="-")


def _prompt_of(value: Any, where: str, key: str) -> str | list[dict[str, str]]:
    if _is_column_of_messages(value):  # datasets' Sequence({role, content}): a dict of lists
        value = [{"role": role, "content": content} for role, content in zip(value["role"], value["content"])]
    value = _json_chat_list(value)
    if isinstance(value, str):
        if not value.strip():
            raise DataError(f"{where}: empty prompt at {key!r}")
        return _encodable(value, where, key)
    if isinstance(value, list) and value:
        messages = []
        for message in value:
            if not (
                isinstance(message, dict)
                and isinstance(message.get("role"), str)
                and isinstance(message.get("content"), str)
            ):
                raise DataError(
                    f"{where}: wrong type at {key!r}: chat messages must be "
                    f"{{'role': str, 'content': str}}, got {message!r:.80}"
                )
            messages.append({"role": message["role"], "content": _encodable(message["content"], where, key)})
        if not any(message["content"].strip() for message in messages):
            raise DataError(f"{where}: empty prompt at {key!r} (every message is empty)")
        if messages[-1]["role"] == "assistant":  # the policy would read it, then answer after it
            raise DataError(f"{where}: the prompt at {key!r} ends with an assistant message (a reference "
                            "solution?); a prompt ends with the message to answer")
        return messages
    if isinstance(value, list):
        raise DataError(f"{where}: empty prompt at {key!r} (no messages)")
    raise DataError(
        f"{where}: wrong type at {key!r}: prompt must be text or a chat list, got {type(value).__name__}"
    )


def _json_chat_list(value: Any) -> Any:
    """A chat list stored as its JSON text (a CSV export's, a string column's) as the list; any
    other value as it is. Only a list of {role, content} objects counts, so a text prompt that
    happens to start with a bracket stays text."""
    if not (isinstance(value, str) and value.lstrip().startswith("[{")):
        return value
    try:
        decoded = json.loads(value)
    except json.JSONDecodeError:
        return value
    is_chat = isinstance(decoded, list) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in decoded)
    return decoded if is_chat else value


def _is_column_of_messages(value: Any) -> bool:
    return (isinstance(value, dict) and set(value) == {"role", "content"}
            and all(isinstance(v, list) for v in value.values()) and len(value["role"]) == len(value["content"]))


def _answer_of(value: Any, where: str, key: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise DataError(
            f"{where}: wrong type at {key!r}: ground truth must be text or a number, "
            f"got {type(value).__name__}"
        )
    if isinstance(value, float):
        if not math.isfinite(value):
            raise DataError(f"{where}: ground truth at {key!r} is {value}, not a number an answer can state")
        # 540.0 (JSON writers) -> 540; 1e-05 -> 0.00001; a float32 column's 0.30000001192092896 -> 0.3
        value = _plain_decimal(value)
    text = _encodable(str(value), where, key).strip()
    if not text:
        raise DataError(f"{where}: missing ground truth at {key!r} (empty)")
    return text
