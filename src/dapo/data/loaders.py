"""Load problems from parquet, JSON (lines, or one array), CSV / TSV (each plain or compressed), local
``datasets`` directories, or the built-in task (an entry may also be a glob or a directory of such
files: :mod:`dapo.data.files`).

Every row becomes a :class:`~dapo.data.records.Problem`. Columns are found by dotted paths from
:class:`~dapo.config.schema.DataConfig` (``prompt_key``, ``answer_key``, ``data_source_key``), so
the DAPO schema (``prompt`` chat list, ``reward_model.ground_truth``) and others
(``question`` / ``answer``) load alike. A parquet batch whose rows all load is read a column at a
time (:mod:`dapo.data.columnar`: DAPO-Math-17K's 1.79M rows in a quarter to a sixth of the time), to
the same problems.

Duplicates: ``uid`` is a hash of the prompt content, so copies of a problem share it. For the
"train" split copies are dropped when ``cfg.dedup_train`` (DAPO-Math-17K repeats each prompt
about 100x) and counted; for "eval" copies are kept so avg@k is computed per problem over them. A
copy with another answer than its first copy is counted apart and named in ``warnings`` (de-duped
or not: without de-duplication both answers are rewarded).

The held-out files (split "eval") are read with ``cfg.eval_prompt_key`` / ``eval_answer_key`` /
``eval_data_source_key`` where they are set (:func:`split_keys`): train on one schema, evaluate
on another.

Bad data: a malformed row raises :class:`DataError` naming the file and where in it the row is
(a JSON-lines file's line, 1-based; a table's row, 0-based: :mod:`dapo.data.readers`); with
``cfg.lenient`` it is skipped, counted in ``num_malformed_skipped`` and described in
``warnings``. A file that cannot be read (a .json array that is not valid JSON, a corrupt parquet
or .gz, unreadable part-way) is always an error naming it: it is not a row, and skipping it
would lose all of its rows. So is a path that does not exist, or a pattern or directory naming
no file (a typo, not bad data).
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dapo.config.schema import DataConfig
from dapo.data.admission import Admission
from dapo.data.arithmetic import make_arithmetic_problems
from dapo.data.files import data_files, default_data_source, file_type, said_briefly
from dapo.data.loaded import LoadedProblems
from dapo.data.readers import UNREADABLE, Row, rows_of
from dapo.data.records import DataError, Problem, columns_left_out_of_extra
from dapo.data.values import PromptMemo, answer_value, literal_text, prompt_uid

__all__ = ["BUILTIN_ARITHMETIC", "LoadedProblems", "builtin_dataset_problem", "load_problems", "problem_from_row",
           "prompt_uid"]  # prompt_uid: dapo.data's, from here before dapo.data.values held it

if TYPE_CHECKING:  # (imported with the first parquet file read: pyarrow)
    from dapo.data.columnar import CheckedRows, ColumnarReader

BUILTIN_ARITHMETIC = "builtin:arithmetic"


def builtin_dataset_problem(entry: str) -> str | None:
    """Why a data file entry "builtin:<name>" names no built-in dataset, or None (not one, or the
    built-in task)."""
    if entry.startswith("builtin:") and entry != BUILTIN_ARITHMETIC:
        return f"unknown built-in dataset {entry!r}; the built-in task is {BUILTIN_ARITHMETIC!r}"
    return None


def load_problems(files: list[str], cfg: DataConfig, split: str) -> LoadedProblems:
    """Read ``files`` in order into one list of problems for ``split`` ("train" or "eval")."""
    if split not in ("train", "eval"):
        raise ValueError(f"split={split!r} must be 'train' or 'eval'")
    if not files:
        raise DataError(f"no {split} data files given")
    cfg = split_keys(cfg, split)
    result = LoadedProblems([], 0, 0, 0, [])
    admission = Admission(result, split, dedup=split == "train" and cfg.dedup_train)
    prompts_read = PromptMemo(cfg.assistant_prefill)
    empty: list[str] = []  # the files that held no rows
    with _collector_paused():
        for entry, path in _each_file_once(files, split, result.warnings):
            result.sources.append(path)
            source_name = default_data_source(path, entry)
            rows_before, skipped_before, said_before = result.rows_read, result.num_malformed_skipped, len(result.warnings)
            for where, problem in _read_source(path, cfg, split, result, source_name, prompts_read):
                if not isinstance(problem, Problem):  # CheckedRows: a parquet batch, read a column at a time
                    result.problems.extend(admission.rows(problem))
                elif admission.row(problem, where):
                    result.problems.append(problem)
            if result.rows_read == rows_before:
                empty.append(path)
            elif result.num_malformed_skipped - skipped_before == result.rows_read - rows_before:
                raise _no_usable_row(path, result.rows_read - rows_before, result.warnings[said_before:])
    _stop_or_say_empty(result, files, split, empty)
    return result


def _each_file_once(files: list[str], split: str, notes: list[str]) -> Iterator[tuple[str, str]]:
    """(entry, path) of each file ``files`` names, in order, each file once: one named again (by
    itself and by a glob or its directory, or by another spelling of its path) would add each of
    its rows a second time (with data.dedup_train=false, as a copy of equal weight); said in
    ``notes``."""
    seen: dict[str, str] = {}  # resolved path -> the entry that named it first
    for entry in files:
        for path in _paths_of(entry, split, notes):
            key = path if path == BUILTIN_ARITHMETIC else os.path.realpath(path)
            if key in seen:
                also = "" if seen[key] == entry else f" (named by {seen[key]!r} and by {entry!r})"
                notes.append(f"{path}: read once, though named twice{also}")
                continue
            seen[key] = entry
            yield entry, path


def _stop_or_say_empty(result: LoadedProblems, files: list[str], split: str, empty: list[str]) -> None:
    """No problem kept stops the load (every file empty: said first, before the notes on its files);
    among files with rows, the ``empty`` ones are the summary's first warning: a shard cut short (a
    download or write that stopped) adds 0 rows, which the row count alone does not show."""
    if not result.rows_read:
        said = "it holds no rows" if len(result.sources) == 1 else "they hold no rows"
        raise DataError(f"no usable {split} problems in {files}: {'; '.join([said, *result.warnings[:2]])}")
    if empty:
        holds = "holds" if len(empty) == 1 else "hold"
        result.warnings.insert(0, f"warning: {len(empty)} of the {len(result.sources)} data files {holds} no rows "
                                  f"(empty: a truncated download or an unfinished write?): {said_briefly(empty)}")
    if not result.problems:
        raise DataError(f"no usable {split} problems in {files}: {'; '.join(result.warnings[:3])}")


def split_keys(cfg: DataConfig, split: str) -> DataConfig:
    """``cfg`` with the keys ``split``'s files are read with: for "eval", data.eval_*_key where set."""
    if split != "eval":
        return cfg
    keys = {key: getattr(cfg, f"eval_{key}") for key in ("prompt_key", "answer_key", "data_source_key")}
    keys = {key: value for key, value in keys.items() if value is not None}
    return replace(cfg, **keys) if keys else cfg


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a load makes its millions of objects (a
    problem, its extra dict and the dicts of its row's structs, with every DAPO-Math-17K row
    kept; none in a cycle): each full collection walked all of them made so far, 4.0 of the
    10.0 s of that load (2026-11-30). Back on after it, unless the caller had it off."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _paths_of(entry: str, split: str, notes: list[str]) -> list[str]:
    """What one entry of data.*_files reads: builtin:arithmetic, or its files (:func:`data_files`)."""
    if entry == BUILTIN_ARITHMETIC:
        return [entry]
    if (problem := builtin_dataset_problem(entry)) is not None:
        raise DataError(problem)
    return data_files(entry, split, notes)


def _read_source(
    path: str, cfg: DataConfig, split: str, result: LoadedProblems, source_name: str, prompts_read: PromptMemo
) -> Iterator[tuple[str, Problem | CheckedRows]]:
    """The problems of one file (or the built-in task), each with where it is: the file and its
    row's location in it (:mod:`dapo.data.readers`); a parquet batch whose rows all load, as the
    rows (:mod:`dapo.data.columnar`)."""
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
    checked = _columnar_reader(path, cfg, source_name, prompts_read)
    malformed = _Malformed()  # (not lenient: the first stops the load once the file's others are counted)
    try:
        for location, row in _file_rows(path, split, cfg, checked):
            if not isinstance(row, (dict, DataError)):  # CheckedRows: the rows of a batch, each of which loads
                if not malformed:
                    yield location, row
                rows_read += len(row)
                continue
            try:
                if isinstance(row, DataError):
                    raise row
                where = f"{path} {location}"
                problem = problem_from_row(row, cfg, where, source_name, keys_seen=rows_read > 0,
                                           prompts_read=prompts_read, split=split)
                rows_read += 1
                if not malformed:
                    yield where, problem
            except DataError as error:
                _skip_or_count(error, cfg, result, malformed)
    except DataError:
        if not malformed:
            raise  # (the file unreadable from some row on: that row's error is the first said)
    if malformed:
        raise malformed.error(path)


def _columnar_reader(path: str, cfg: DataConfig, source_name: str, memo: PromptMemo) -> ColumnarReader | None:
    """What reads a parquet file's batches a column at a time, where it can; None for another file."""
    if file_type(path)[0] != ".parquet":
        return None
    from dapo.data.columnar import ColumnarReader

    return ColumnarReader(path, cfg, source_name, memo)


def _file_rows(
    path: str, split: str, cfg: DataConfig, checked: ColumnarReader | None
) -> Iterator[tuple[str, Row | CheckedRows]]:
    """The file's rows with their locations; a file that cannot be read (at all, or from some row
    on) is one error, naming the last row read, lenient or not: not a row, but all of its rows."""
    last_location = None
    try:
        for last_location, row in rows_of(path, split, checked):  # (still the last row read when the next fails)
            yield last_location, row
    except DataError as error:  # (the file as a whole is not rows of a kind read)
        raise _unread(error, cfg) from None
    except UNREADABLE as error:
        what = f"unreadable after {last_location}" if last_location is not None else "unreadable file"
        reason = " ".join(str(error).split()) or type(error).__name__  # pyarrow's can hold line breaks: one line
        raise _unread(DataError(f"{path}: {what} ({reason})"), cfg) from None


def _unread(error: DataError, cfg: DataConfig) -> DataError:
    """The error of a file that cannot be read; when lenient, saying why it still stops the load."""
    if not cfg.lenient:
        return error
    return DataError(f"{error}; data.lenient skips malformed rows, not a file that cannot be read")


def _no_usable_row(path: str, rows: int, said: list[str]) -> DataError:
    """The error of a file every row of which data.lenient skipped (another schema's columns among
    the files, most likely): not a few bad rows to leave out. Its first row's reason says which."""
    first = f" (first: {said[0].removeprefix('skipped: ')})" if said else ""
    return DataError(f"none of the {rows} rows of {path} is usable{first}: data.lenient skips a file's malformed "
                     "rows, not all of them; fix the keys or the file, or leave it out")


def _skip_or_count(error: DataError, cfg: DataConfig, result: LoadedProblems, malformed: _Malformed) -> None:
    """A malformed row: skipped and said with data.lenient; without it, counted in ``malformed``
    (the load stops at the file's end, naming the first), or raised at once where no row of the
    file can load (a key the file lacks)."""
    if cfg.lenient:
        result.num_malformed_skipped += 1
        result.note(f"skipped: {error}")
    elif isinstance(error, KeyNotInFile):
        raise error
    else:
        malformed.first = malformed.first or error
        malformed.count += 1


@dataclass
class _Malformed:
    """A file's malformed rows, read without data.lenient: the first and how many."""

    first: DataError | None = None
    count: int = 0

    def __bool__(self) -> bool:
        return self.count > 0

    def error(self, path: str) -> DataError:
        """What stops the load: the first, and how many more the file holds (one fix is not followed
        by a run stopping at the next row)."""
        more = self.count - 1
        more = f" ({more} more malformed row{'s' * (more > 1)} in {path}; data.lenient=true lists each)" if more else ""
        how = "" if "data.lenient" in str(self.first) else "; fix or drop this row, or set data.lenient=true to skip such rows"
        return DataError(f"{self.first}{how}{more}")


def problem_from_row(
    row: dict[str, Any], cfg: DataConfig, where: str, source_name: str, keys_seen: bool = False,
    prompts_read: PromptMemo | None = None, split: str = "train",
) -> Problem:
    """One validated :class:`Problem` from a row, or DataError starting with ``where`` (the file
    and the row's location in it); a row without a data_source gets ``source_name``.
    ``keys_seen``: earlier rows of the file had the configured keys (a missing one is this row's gap);
    ``prompts_read``: the prompts of the rows before it, whose copies it reuses; ``split``: whose
    setting a missing key's message names (``cfg`` holds that split's keys: :func:`split_keys`)."""
    setting = "data.eval_" if split == "eval" else "data."
    raw_prompt = _lookup(row, cfg.prompt_key, where, "prompt", keys_seen, cfg.lenient, setting + "prompt_key")
    prompt, uid = (prompts_read or PromptMemo(cfg.assistant_prefill)).prompt_and_uid(raw_prompt, where, cfg.prompt_key)
    ground_truth = "" if cfg.answer_key is None else answer_value(  # (null: rows without one, functions alone judge)
        _lookup(row, cfg.answer_key, where, "ground truth", keys_seen, cfg.lenient, setting + "answer_key"), where,
        cfg.answer_key
    )
    data_source = _get(row, cfg.data_source_key)
    if isinstance(data_source, (list, dict)):  # (its text would name a source no one wrote: "['aime']")
        raise DataError(f"{where}: wrong type at {cfg.data_source_key!r}: data_source must be text or a number, got "
                        f"{type(data_source).__name__}")
    # (a nested key, extra_info.raw_problem, leaves its struct in extra, where reward functions read the rest of it)
    used = columns_left_out_of_extra(cfg.prompt_key, cfg.data_source_key)
    extra = {key: value for key, value in row.items() if key not in used}
    return Problem(
        uid=uid,
        prompt=prompt,
        ground_truth=ground_truth,
        data_source=str(data_source) if data_source not in (None, "") else source_name,
        extra=extra,
        where=where,
    )


_ABSENT = object()  # a key the row does not have (its value may be None: a null in a nullable column)


def _get(row: dict[str, Any], dotted_key: str, absent: Any = None) -> Any:
    """``row[dotted_key]`` when the row has a column of that very name (a flattened table:
    pandas' json_normalize writes ``reward_model.ground_truth``), else the nested path, else
    ``absent``. A mapping on the path may be its text (pandas' to_csv writes a struct column as
    ``{'ground_truth': '540', 'style': 'rule-lab'}``; a JSON string column)."""
    if dotted_key in row:
        return row[dotted_key]
    value: Any = row
    for part in dotted_key.split("."):
        if isinstance(value, str) and value.lstrip().startswith("{"):
            value = literal_text(value)
        if not isinstance(value, dict) or part not in value:
            return absent
        value = value[part]
    return value


def _lookup(row: dict[str, Any], dotted_key: str, where: str, what: str, keys_seen: bool, lenient: bool,
            setting: str) -> Any:
    value = _get(row, dotted_key, _ABSENT)
    if value is None:  # the key is right (other rows have it); this row's value is missing
        raise DataError(f"{where}: missing {what} at {dotted_key!r} (null)")
    if value is _ABSENT and (null_part := _null_on_path(row, dotted_key)):
        raise DataError(f"{where}: missing {what} at {dotted_key!r} ({null_part!r} is null)")
    if value is _ABSENT:
        skip = "" if lenient else ", or set data.lenient=true to skip such rows"  # (lenient: it is being skipped)
        if not keys_seen and (wrapper := _rows_wrapped_under(row, dotted_key)) is not None:
            raise KeyNotInFile(f"{where}: missing {what} at {dotted_key!r}: the rows are the list under "
                               f"{wrapper!r} of one JSON object (row has keys {sorted(row)}): give that list as the "
                               f"file (jq -c '.{wrapper}[]' FILE > rows.jsonl)")
        if not keys_seen:  # the first row: the key is likely wrong for the whole file
            rows_without = (f", or {setting}=null where the rows have no {what} (reward.functions alone judge, "
                            "reward.verifier_weight=0)") if setting == "data.answer_key" else ""
            raise KeyNotInFile(f"{where}: missing {what} at {dotted_key!r} (row has keys {sorted(row)}; set "
                               f"{setting}{rows_without})")
        raise DataError(f"{where}: missing {what} at {dotted_key!r} (row has keys {sorted(row)}; the rows before "
                        f"it have it: fix or drop this row{skip})")
    return value


def _rows_wrapped_under(row: dict[str, Any], dotted_key: str) -> str | None:
    """The key of ``row`` whose value is a list of rows that have ``dotted_key`` ({"version": 1,
    "data": [{"prompt": ...}, ...]}: a file of one object holding the rows), or None."""
    return next((key for key, value in row.items() if isinstance(value, list) and value
                 and isinstance(value[0], dict) and _get(value[0], dotted_key, _ABSENT) is not _ABSENT), None)


class KeyNotInFile(DataError):
    """A file's first row lacks a configured key: a setting to fix, not a row to skip."""


def _null_on_path(row: dict[str, Any], dotted_key: str) -> str | None:
    """The struct on ``dotted_key``'s path that is null in this row (``reward_model`` of a row
    whose whole struct is null, where other rows have it), as its dotted name; None if none is."""
    parts = dotted_key.split(".")
    prefixes = (".".join(parts[:depth]) for depth in range(1, len(parts)))
    return next((prefix for prefix in prefixes if _get(row, prefix, _ABSENT) is None), None)
