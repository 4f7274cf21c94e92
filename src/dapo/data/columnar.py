"""Parquet rows checked a column at a time, where the row-wise reading would find nothing wrong.

Why: DAPO-Math-17K is 1.79M rows of 17.9k prompts, each row a nested chat list. Read row by row
(``RecordBatch.to_pylist``, then :func:`~dapo.data.loaders.problem_from_row`), every row became a
dict of dicts and lists, and its prompt, answer and data source were looked up and checked
again: a de-duplicated load took 23 s, a third of it in ``to_pylist`` and a quarter in Python's
garbage collector walking those containers (a profile, 2026-11-30; the collector is now paused
during a load, :func:`dapo.data.loaders.load_problems`).

Here a record batch's prompt, answer and data-source columns are found as ``loaders._get`` finds
them in a row (a column of the dotted key's very name, else the nested struct fields), read as
columns (``ListArray.flatten``, ``StructArray.field``, ``to_numpy``) and checked once per distinct
value: a prompt through the memo (a copy is one dict look-up of its (role, content) pairs, made
no dict or list of its own), an answer once per file, a data source once per batch (both by
``pc.dictionary_encode``).
The other columns, a problem's ``extra``, become Python objects only for the rows
:func:`~dapo.data.loaders.load_problems` keeps (a de-duplicated load keeps 1% of DAPO-Math-17K's
rows), repeated strings sharing one object a batch.

Only a batch the row-wise reading would load without an error goes this way: its arrays valid
(UTF-8 included), its column names distinct, its column types ones whose values convert to
Python without an error, no nulls where a prompt or an answer is read, every distinct prompt and
answer valid. For any other batch :class:`ColumnarReader` returns None and the batch is read row
by row, as before, so a malformed row's error (its file and row, what is wrong) and a file
unreadable part-way read as they did. The values are ``to_pylist``'s: tests/data/
test_data_columnar.py compares the two readings on files of the cases each of those checks is for.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy
import pyarrow as pa
import pyarrow.compute as pc

from dapo.config.schema import DataConfig
from dapo.data.readers import row_location
from dapo.data.records import DataError, Problem, columns_left_out_of_extra
from dapo.data.values import Prompt, PromptMemo, answer_value


@dataclass
class CheckedRows:
    """Rows ``start``, ``start + 1``, ... of the parquet file ``path``, each of which the row-wise
    reading would load: their uids, prompts, ground truths and data sources, as
    :func:`~dapo.data.loaders.problem_from_row` would make them. :meth:`problems` makes the
    rows kept into problems (their ``extra`` read from ``batch`` only then)."""

    path: str
    start: int
    batch: pa.RecordBatch
    uids: list[str]
    prompts: list[Prompt]
    ground_truths: list[str]
    data_sources: list[str]
    extra_columns: list[int]  # the batch's columns that go to a problem's extra, in order

    def __len__(self) -> int:
        return len(self.uids)

    def where(self, index: int) -> str:
        """The row's file and location, as DataError and Problem.where name it."""
        return f"{self.path} {row_location(self.start + index)}"

    def problems(self, indices: list[int]) -> list[Problem]:
        """The problems of the rows at ``indices`` (ascending), as the row-wise reading makes them."""
        if not indices:
            return []
        every = len(indices) == len(self)
        kept = self.batch if every else self.batch.take(pa.array(indices, pa.int64()))
        names = [self.batch.schema.names[column] for column in self.extra_columns]
        values = [python_values(kept.column(column)) for column in self.extra_columns]
        extras = list(map(dict_maker(tuple(names)), *values)) if values else [{} for _ in indices]
        rows = range(len(self)) if every else indices

        def of_rows(values: list[Any]) -> list[Any]:
            return values if every else [values[i] for i in indices]

        wheres = [f"{self.path} {row_location(self.start + i)}" for i in rows]
        # positional, in Problem's field order (uid, prompt, ground_truth, data_source, extra,
        # verbatim, where): map makes 1.8M of them in half the time of keyword calls
        return list(map(Problem, of_rows(self.uids), of_rows(self.prompts), of_rows(self.ground_truths),
                        of_rows(self.data_sources), extras, itertools.repeat(False), wheres))


class ColumnarReader:
    """Called on each record batch of one parquet file (:func:`dapo.data.readers.rows_of`): its
    :class:`CheckedRows`, or None when the batch is to be read row by row (see the module
    docstring). ``memo`` is the load's, shared with the row-wise reading of other batches and files."""

    def __init__(self, path: str, cfg: DataConfig, source_name: str, memo: PromptMemo) -> None:
        self.path, self.cfg, self.source_name, self.memo = path, cfg, source_name, memo
        self._answers: dict[tuple[type, Any], str] = {}  # answer_value of each answer read (by type: 1 is not 1.0)

    def __call__(self, batch: pa.RecordBatch, start: int) -> CheckedRows | None:
        names = batch.schema.names
        if batch.num_rows == 0 or len(set(names)) != len(names) or not all(_converts(t) for t in batch.schema.types):
            return None
        try:
            batch.validate(full=True)  # (a string column's invalid UTF-8: to_pylist's error, row by row)
        except pa.ArrowInvalid:
            return None
        cfg = self.cfg
        prompts = _column(batch, cfg.prompt_key)
        no_answers = cfg.answer_key is None  # data.answer_key=null: rows without a ground truth
        answers = None if no_answers else _column(batch, cfg.answer_key)
        sources = _column(batch, cfg.data_source_key)
        if not (isinstance(prompts, pa.Array) and (no_answers or isinstance(answers, pa.Array))) or sources is _UNSURE:
            return None
        try:
            known = self._prompts(prompts, start)
            ground_truths = [""] * batch.num_rows if no_answers else _each_distinct(answers, _ANSWER_TYPES, self._answer_of)
        except DataError:  # a malformed row: read row by row, for its message
            return None
        if sources is None:
            data_sources: list[str] | None = [self.source_name] * batch.num_rows
        else:  # as problem_from_row: str(value), or the file's name for a null or empty one
            data_sources = _each_distinct(sources, _SOURCE_TYPES, self._source_of, nulls=True)
        if known is None or ground_truths is None or data_sources is None:
            return None
        used = columns_left_out_of_extra(cfg.prompt_key, cfg.data_source_key)  # (problem_from_row's)
        return CheckedRows(
            path=self.path, start=start, batch=batch, uids=list(map(_SECOND, known)),
            prompts=list(map(_FIRST, known)), ground_truths=ground_truths, data_sources=data_sources,
            extra_columns=[column for column, name in enumerate(names) if name not in used],
        )

    def _answer_of(self, value: Any) -> str:
        """answer_value's (the batch is read row by row, for the row's message, when it raises),
        remembered for the file's next batches, up to _MAX_ANSWERS of them."""
        known = self._answers.get((type(value), value))
        if known is None:
            if len(self._answers) >= _MAX_ANSWERS:  # (a file of as many answers as rows)
                self._answers.clear()
            known = self._answers[type(value), value] = answer_value(value, "", self.cfg.answer_key)
        return known

    def _source_of(self, value: Any) -> str:
        return str(value) if value not in (None, "") else self.source_name

    def _prompts(self, column: pa.Array, start: int) -> list[tuple[Prompt, str]] | None:
        """Each row's validated prompt and uid (the memo's: a copy shares its first copy's prompt
        object); None for a column of another form than text or a list of {role, content} structs."""
        if column.null_count:
            return None
        if _is_text(column.type):  # the memo's key of a text prompt is the text
            return self.memo.by_keys(_strings(column), self._where_of(start), self.cfg.prompt_key)
        messages = _messages(column)
        if messages is None:
            return None
        lengths, roles, contents = messages
        pairs = zip(_shared_strings(roles), _strings(contents))  # (role, content) of each message, in order
        if (lengths == 1).all():  # (DAPO-Math-17K's)
            keys = [(pair,) for pair in pairs]
        else:
            pairs = list(pairs)
            ends = numpy.cumsum(lengths).tolist()
            keys = [tuple(pairs[end - length:end]) for end, length in zip(ends, lengths.tolist())]
        return self.memo.by_keys(keys, self._where_of(start), self.cfg.prompt_key)

    def _where_of(self, start: int) -> Callable[[int], str]:
        return lambda index: f"{self.path} {row_location(start + index)}"


_MAX_ANSWERS = 2**16
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)
_UNSURE = object()  # a key whose rows the row-wise reading may find or miss one by one (a null struct)


def _column(batch: pa.RecordBatch, dotted_key: str) -> pa.Array | None | object:
    """The array of each row's value at ``dotted_key`` as loaders._get reads a row: a column of
    that very name, else the column and struct fields it names; None when no row has the key,
    _UNSURE when some row may lack it (a null struct on the path, a duplicated field name) or
    holds it in text (a JSON or Python mapping's text on the path)."""
    names = batch.schema.names
    if dotted_key in names:
        return batch.column(names.index(dotted_key))
    first, *rest = dotted_key.split(".")
    if first not in names:
        return None
    array = batch.column(names.index(first))
    for part in rest:
        if _is_text(array.type):
            return _UNSURE  # a mapping's text, which the row-wise reading parses (loaders._get)
        if not pa.types.is_struct(array.type):
            return None  # (a list, a map, a number: not a dict in the row, so the key is missing)
        index = array.type.get_field_index(part)
        if index < 0:
            return _UNSURE if any(field.name == part for field in array.type) else None
        if array.null_count:
            return _UNSURE
        array = array.field(index)
    return array


def _messages(column: pa.Array) -> tuple[numpy.ndarray, pa.Array, pa.Array] | None:
    """A chat-list column's message counts and its messages' roles and contents, in order;
    None when a message or its role or content is null, or the column is of another type."""
    kind = column.type
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or not pa.types.is_struct(kind.value_type):
        return None
    messages = column.flatten()  # (the batch's slice of the values)
    fields = [messages.type.get_field_index(name) for name in ("role", "content")]
    if messages.null_count or min(fields) < 0:
        return None
    roles, contents = (messages.field(index) for index in fields)
    if roles.null_count or contents.null_count or not (_is_text(roles.type) and _is_text(contents.type)):
        return None
    return pc.list_value_length(column).to_numpy(zero_copy_only=False), roles, contents


_ANSWER_TYPES = ("string", "large_string", "integer", "floating")  # answer_value's str, int and float
_SOURCE_TYPES = ("string", "large_string", "integer")


def _each_distinct(
    column: pa.Array, types: tuple[str, ...], convert: Callable[[Any], Any], nulls: bool = False
) -> list[Any] | None:
    """``convert`` of each row's value, called once per distinct value; None for a column of
    another type than ``types`` (pa.types.is_<type>), or with nulls unless ``nulls``."""
    if not any(getattr(pa.types, f"is_{kind}")(column.type) for kind in types) or pa.types.is_float16(column.type):
        return None
    if column.null_count and not nulls:
        return None
    encoded = pc.dictionary_encode(column, null_encoding="encode")
    distinct = numpy.empty(len(encoded.dictionary), dtype=object)
    distinct[:] = [convert(value) for value in encoded.dictionary.to_pylist()]
    return distinct[encoded.indices.to_numpy(zero_copy_only=False)].tolist()


def _strings(column: pa.Array) -> list[str]:
    """``column.to_pylist()`` of a text column without nulls (by numpy: no scalar a row)."""
    return column.to_numpy(zero_copy_only=False).tolist()


def _shared_strings(column: pa.Array) -> list[str | None]:
    """``column.to_pylist()`` of a text column, each distinct string one object (``ability``,
    ``reward_model.style``: 1.8M copies of one word otherwise, with every row kept)."""
    encoded = pc.dictionary_encode(column, null_encoding="encode")
    distinct = numpy.empty(len(encoded.dictionary), dtype=object)
    distinct[:] = encoded.dictionary.to_pylist()
    return distinct[encoded.indices.to_numpy(zero_copy_only=False)].tolist()


def python_values(column: pa.Array) -> list[Any]:
    """``column.to_pylist()``: the same values, read faster for the types of DAPO-Math's columns
    (text, numbers, structs of them), repeated strings sharing one object."""
    kind = column.type
    if _is_text(kind):
        return _shared_strings(column)
    if column.null_count == 0 and (pa.types.is_integer(kind) or pa.types.is_boolean(kind)
                                   or pa.types.is_float32(kind) or pa.types.is_float64(kind)):
        return column.to_numpy(zero_copy_only=False).tolist()
    if pa.types.is_struct(kind) and kind.num_fields and len({field.name for field in kind}) == kind.num_fields:
        fields = [python_values(column.field(index)) for index in range(kind.num_fields)]
        rows: list[Any] = list(map(dict_maker(tuple(field.name for field in kind)), *fields))
        if column.null_count:
            for index in numpy.flatnonzero(column.is_null().to_numpy(zero_copy_only=False)).tolist():
                rows[index] = None
        return rows
    return column.to_pylist()


def dict_maker(names: tuple[str, ...]) -> Callable[..., dict[str, Any]]:
    """A function of ``len(names)`` values returning ``{names[0]: values[0], ...}``, mapped over a
    batch's columns. (A dict display compiled with eval per file's columns was about 1 s faster
    at 1.8M rows with every row kept; not worth code generation in a data loader.)"""

    def make(*values: Any) -> dict[str, Any]:
        return dict(zip(names, values))

    return make


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _converts(kind: pa.DataType) -> bool:
    """Whether every value of a valid array of this type converts to Python (``as_py``) without
    an error: not a date or time out of Python's range, a decimal, an extension type, ..., whose
    batches are read row by row (``to_pylist``'s error is the reading's: "unreadable after ...")."""
    if pa.types.is_struct(kind):
        return all(_converts(field.type) for field in kind)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _converts(kind.value_type)
    return (pa.types.is_null(kind) or pa.types.is_boolean(kind) or pa.types.is_integer(kind)
            or pa.types.is_floating(kind) or _is_text(kind) or pa.types.is_binary(kind)
            or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind))
