"""The rows of one data file or ``datasets`` directory, each with where it is in that file.

Where a row is, as every message about it says, so that a user can go to it:

- JSON lines (.jsonl or .ndjson, or a .json of one object per line): ``line N``, 1-based and
  counting blank lines, as an editor (or ``sed -n Np``) numbers them;
- CSV and TSV files: ``line N``, the line the row's record starts on (a quoted value may hold
  line breaks), the header being line 1; every value is read as its text (``"007"``, ``"1.00"``);
- parquet files and ``datasets`` directories: ``row N (0-based)``, as pandas (``df.iloc[N]``) and
  ``datasets`` (``ds[N]``) index them; they have no lines;
- a .json file holding one array: ``row N (0-based) at line M``, the element's index (as
  ``json.load(f)[N]`` finds it) and the line it starts on (one line for all of them when the
  array is not pretty-printed).

A compressed file (.gz, .bz2, .xz: :mod:`dapo.data.files`) is read as the file it holds, its
lines those of the decompressed text (``zcat FILE | sed -n Np``).

:func:`rows_of` yields ``(location, row)``, the location without the path; a row that cannot be
read is yielded as the :class:`DataError` saying why, so that lenient loading can go on to the next;
a file that cannot be read as a whole raises (one of :data:`UNREADABLE`, or a DataError).
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import lzma
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from dapo.data.files import (
    DATASET_DICT_SPLITS,
    READ_TYPES_SAID,
    dataset_dict_split,
    file_type,
    readable,
)
from dapo.data.records import DataError

# A row, or the DataError that made it unreadable (so lenient mode can go on to the next row).
Row = dict[str, Any] | DataError

_PARQUET_BATCH_ROWS = 8192
# a CSV field may hold a long prompt (the csv module's default limit is 128 KiB): set once, at import
csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
# a byte-order mark (Excel, Notepad) before the first row, or before a later one in files joined
# with `cat`: not JSON, and no part of a CSV value
_UTF8_BOM = b"\xef\xbb\xbf"
_JSON_WHITESPACE = re.compile(r"[ \t\n\r]*")  # what JSON allows between values (str.isspace allows more)
_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open, "": open}
# what reading a file that is not what its name says raises (a truncated .gz: EOFError, a corrupt
# one: zlib.error; a CSV record past the field limit: csv.Error)
UNREADABLE = (OSError, ValueError, EOFError, zlib.error, lzma.LZMAError, csv.Error)


def row_location(row_index: int) -> str:
    """Where a row of a table is: its 0-based index, said to be 0-based (pandas' and ``datasets``')."""
    return f"row {row_index} (0-based)"


def rows_of(
    path: str, split: str, checked: Callable[[Any, int], Any] | None = None
) -> Iterator[tuple[str, Row | Any]]:
    """The rows of the data file (or ``datasets`` directory, its ``split`` part) at ``path``;
    a DataError when the file as a whole is not rows of a kind this reads. ``checked``: a parquet
    file's batches read a column at a time, where it can (:func:`_parquet_rows`)."""
    if Path(path).is_dir():
        return _dataset_dir_rows(path, split)
    suffix, compression = file_type(Path(path).name)
    if not readable(Path(path).name):
        packed = f" ({compression} compressed: decompress it first)" if suffix and compression else ""
        raise DataError(f"{path}: unknown file type; expected {READ_TYPES_SAID}, or a `datasets` directory{packed}")
    if suffix == ".parquet":
        return _parquet_rows(path, checked)
    if suffix in (".csv", ".tsv"):
        return _csv_rows(path, "\t" if suffix == ".tsv" else ",")
    if suffix == ".json" and _starts_with(path, b"["):
        return _json_array_rows(path)
    if suffix == ".json" and _is_one_json_object(path):
        raise DataError(f"{path}: one JSON object, not rows: give an array of row objects ([{{...}}, ...]) or "
                        "one object per line (JSON lines; pandas: df.to_json(path, orient='records', lines=True))")
    return _jsonl_rows(path)


def _open(path: str) -> IO[bytes]:
    """The file's bytes, decompressed where its name says it is compressed."""
    return _OPENERS[file_type(Path(path).name)[1]](path, "rb")


def _read_bytes(path: str) -> bytes:
    with _open(path) as handle:
        return handle.read()


def _starts_with(path: str, prefix: bytes) -> bool:
    """Whether the file's first non-blank bytes are ``prefix`` (a .json file: an array, or JSON lines)."""
    with _open(path) as handle:
        return handle.read(4096).removeprefix(_UTF8_BOM).lstrip().startswith(prefix)


def _is_one_json_object(path: str) -> bool:
    """Whether a .json file is one object rather than rows: pretty-printed (its first line is not
    a whole JSON value, so not JSON lines), or on one line with a column of values in each key, every
    column of the same row labels (pandas' default ``to_json``, orient='columns': {"prompt": {"0": ...,
    "1": ...}, ...}); one row whose columns are objects of their own fields is JSON lines."""
    with _open(path) as handle:
        first = handle.readline().removeprefix(_UTF8_BOM)
        alone = not handle.read(4096).strip()
    try:
        value = json.loads(first, parse_int=json_integer, parse_float=JsonFloat)
        columns = list(value.values()) if isinstance(value, dict) else []
        return (alone and bool(columns) and all(isinstance(column, dict) for column in columns)
                and all(column.keys() == columns[0].keys() for column in columns))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        pass
    try:
        return isinstance(json.loads(_read_bytes(path).decode("utf-8-sig"), parse_int=json_integer, parse_float=JsonFloat), dict)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return False


def _json_array_rows(path: str) -> Iterator[tuple[str, Row]]:
    """A .json file holding one array of objects (as ``json.dump(rows)`` writes); row i is element i.
    The whole array is parsed before the first row is yielded: a file that is not one is one error."""
    try:
        text = _read_bytes(path).decode("utf-8-sig")  # (a byte-order mark is not JSON)
        elements = list(_array_elements(text))
    except UnicodeDecodeError as error:
        raise DataError(f"{path}: undecodable bytes, not UTF-8 ({error.reason} at byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise DataError(f"{path}: invalid JSON array ({error.msg} at line {error.lineno} column {error.colno})") from None
    except RecursionError:  # (where the element ends is unknown: the file is one error)
        raise DataError(f"{path}: an element of the JSON array is nested too deeply to read (past Python's "
                        "recursion limit)") from None
    line_number, counted_up_to = 1, 0
    for row_index, (start, row) in enumerate(elements):
        line_number += text.count("\n", counted_up_to, start)  # counted on from the previous element
        counted_up_to = start
        location = f"{row_location(row_index)} at line {line_number}"
        if not isinstance(row, dict):
            yield location, DataError(f"{path} {location}: wrong type: expected a JSON object, got "
                                      f"{json_kind(row)}")
        else:
            yield location, row


def _array_elements(text: str) -> Iterator[tuple[int, Any]]:
    """The elements of the JSON array ``text``, each with the offset it starts at (``json.loads``
    gives no positions), or the JSONDecodeError ``json.loads`` would raise, near enough."""
    decoder = json.JSONDecoder(parse_int=json_integer, parse_float=JsonFloat)
    position = _JSON_WHITESPACE.match(text).end()
    if not text.startswith("[", position):
        raise json.JSONDecodeError("Expecting '['", text, position)
    position = _JSON_WHITESPACE.match(text, position + 1).end()
    while not text.startswith("]", position):
        element, end = decoder.raw_decode(text, position)
        yield position, element
        position = _JSON_WHITESPACE.match(text, end).end()
        if text.startswith(",", position):
            position = _JSON_WHITESPACE.match(text, position + 1).end()
            if text.startswith("]", position):  # [1,]: json.loads refuses it too
                raise json.JSONDecodeError("Expecting value", text, position)
        elif not text.startswith("]", position):
            raise json.JSONDecodeError("Expecting ',' delimiter", text, position)
    after = _JSON_WHITESPACE.match(text, position + 1).end()
    if after != len(text):
        raise json.JSONDecodeError("Extra data", text, after)


def _parquet_rows(path: str, checked: Callable[[Any, int], Any] | None) -> Iterator[tuple[str, Any]]:
    """A parquet file's rows; with ``checked`` (:class:`dapo.data.columnar.ColumnarReader`), a
    record batch it vouches for is yielded as what it returns, located at its last row, instead
    of one row at a time (its rows read faster a column at a time)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dapo.data.class_labels import named_batch, parquet_label_names

    row_index = 0
    try:
        source = path if not file_type(Path(path).name)[1] else io.BytesIO(_read_bytes(path))  # (pq seeks)
        parquet_file = pq.ParquetFile(source)
        names = parquet_file.schema_arrow.names
        if repeated := next((name for name in names if names.count(name) > 1), None):  # (as a CSV header's)
            raise DataError(f"{path}: names the column {repeated!r} twice (a row would keep one of its values, "
                            "unsaid): rename one")
        label_names = parquet_label_names(parquet_file.schema_arrow)
        for batch in parquet_file.iter_batches(batch_size=_PARQUET_BATCH_ROWS):
            batch = named_batch(batch, label_names)
            rows = checked(batch, row_index) if checked is not None else None
            if rows is not None:
                row_index += batch.num_rows
                yield row_location(row_index - 1), rows
                continue
            for row in _batch_rows(batch, path, row_index):
                yield row_location(row_index), row
                row_index += 1
    finally:
        # Arrow's allocator (mimalloc, jemalloc) keeps the freed batches' pages for reuse, which no
        # later allocation of the run makes: handed back to the OS (a third of the reader's
        # resident memory on a 300k-row DAPO-Math-schema file)
        pa.default_memory_pool().release_unused()


def _batch_rows(batch: Any, path: str, first_row: int) -> list[Row]:
    """A record batch's rows as dicts; where one cannot be converted (a string cell that is not
    UTF-8, a date past Python's year 9999), each row on its own, that one a DataError naming it
    and its column (skipped and counted where lenient), not the whole batch lost under the
    previous row's name."""
    try:
        return batch.to_pylist()
    except (UnicodeDecodeError, ValueError, OverflowError):
        rows: list[Row] = []
        for offset in range(batch.num_rows):
            try:
                rows.append(batch.slice(offset, 1).to_pylist()[0])
            except UnicodeDecodeError as error:
                rows.append(DataError(f"{path} {row_location(first_row + offset)}: undecodable bytes in a string "
                                      f"column, not UTF-8 ({error.reason} at byte {error.start})"))
            except (ValueError, OverflowError) as error:
                column = _unconvertible_column(batch.slice(offset, 1))
                rows.append(DataError(f"{path} {row_location(first_row + offset)}: unreadable{column} ({error})"))
        return rows


def _unconvertible_column(row: Any) -> str:
    """`` in column 'NAME'``: the first column of a one-row batch whose value does not convert to
    Python (a timestamp out of datetime's range), or nothing when none is found alone."""
    for name, column in zip(row.schema.names, row.columns, strict=True):
        try:
            column.to_pylist()
        except (ValueError, OverflowError):
            return f" in column {name!r}"
    return ""


def _jsonl_rows(path: str) -> Iterator[tuple[str, Row]]:
    """One JSON object per line; blank lines are skipped, but counted in the line numbers."""
    with _open(path) as handle:
        for line_number, raw_line in enumerate(_without_bom(handle), start=1):
            if raw_line.strip():
                location = f"line {line_number}"
                yield location, _parse_json_line(raw_line, f"{path} {location}")


def json_integer(digits: str) -> int | str:
    """A JSON integer (``parse_int`` of json's decoders), or its digits as text past Python's
    int-from-text limit (4300 digits), where ``int()`` raises: a ground truth of 5000 digits is
    read as written, not an error that stops the file."""
    try:
        return int(digits)
    except ValueError:
        return digits


class JsonFloat(float):
    """A JSON number with a fraction or an exponent (``parse_float`` of json's decoders): the float,
    and in ``literal`` the number as written, which a ground truth keeps where the float loses its
    digits (3.14159265358979323846 reads 3.141592653589793, and an answer stating it scored wrong)."""

    literal: str

    def __new__(cls, literal: str) -> JsonFloat:
        number = super().__new__(cls, literal)
        number.literal = literal
        return number


def _parse_json_line(raw_line: bytes, where: str) -> Row:
    try:
        # without its line break: an error at the end of the line is in its last column, not the
        # next line's first (json's colno counts from the last newline it saw)
        row = json.loads(raw_line.decode("utf-8").rstrip("\r\n"), parse_int=json_integer, parse_float=JsonFloat)
    except UnicodeDecodeError as error:
        return DataError(
            f"{where}: undecodable bytes, not UTF-8 ({error.reason} at byte {error.start})"
        )
    except json.JSONDecodeError as error:
        lone_returns = b"\r" in raw_line.rstrip(b"\r\n")  # lines ended by \r alone (classic Mac OS) read as one
        hint = "; its lines end in a carriage return alone: convert them, tr '\\r' '\\n'" if lone_returns else ""
        return DataError(f"{where}: invalid JSON ({error.msg} at column {error.colno}){hint}")
    except RecursionError:
        return DataError(f"{where}: JSON nested too deeply to read (past Python's recursion limit)")
    if not isinstance(row, dict):
        return DataError(f"{where}: wrong type: expected a JSON object, got {json_kind(row)}")
    return row


def json_kind(value: object) -> str:
    """A parsed JSON value's kind in JSON's words (``null``, ``an array``), not Python's (NoneType, list)."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return {list: "an array", str: "a string"}.get(type(value), "a number")


def _csv_rows(path: str, delimiter: str) -> Iterator[tuple[str, Row]]:
    """A CSV (or TSV) file's records under its header's column names, each value its text, as
    Python's csv module (pandas' and Excel's dialect) reads them; a record of another field
    count than the header, or with bytes that are not UTF-8, is that row's error."""
    with _open(path) as handle:
        record_lines: list[str] = []  # the lines of the record being read (the reader reads no further)

        def lines() -> Iterator[str]:
            for line in _without_bom(handle):
                record_lines.append(line.decode("utf-8", "surrogateescape"))
                yield record_lines[-1]

        reader = csv.reader(lines(), delimiter=delimiter)
        header: list[str] | None = None
        header_line = next_line = 1
        for record in reader:
            line_number, next_line = next_line, reader.line_num + 1
            raw, record_lines[:] = "".join(record_lines), []
            if not record or (len(record) == 1 and not record[0].strip()):  # a blank line
                continue
            if raw.count('"') % 2 and _ends_inside_quotes(raw, delimiter):
                error = DataError(f"{path} line {line_number}: a quoted field opened on this line is never closed, "
                                  f"so lines {line_number}-{next_line - 1} (the file's end) read as one value: close "
                                  'its quotes (a " inside a quoted field is written "")')
                if header is None:
                    raise error
                yield f"line {line_number}", error
                continue
            if header is None:
                header = record
                if repeated := next((name for name in header if header.count(name) > 1), None):
                    raise DataError(f"{path}: the header (line {line_number}) names the column {repeated!r} twice")
                if len(header) == 1 and ";" in header[0]:  # (Excel's CSV where the decimal mark is a comma)
                    raise DataError(f"{path}: the header (line {line_number}) is one column, {header[0]!r}: values "
                                    f"separated by ';'? dapo reads {delimiter!r}-separated values here: save the file so")
                header_line = line_number
                continue
            location = f"line {line_number}"
            try:
                "".join(record).encode("utf-8")
            except UnicodeEncodeError as error:
                yield location, DataError(f"{path} {location}: undecodable bytes, not UTF-8 (invalid byte "
                                          f"{error.object[error.start].encode('utf-8', 'surrogateescape')!r})")
                continue
            if record == header:  # (files joined with `cat`, each with its header)
                yield location, DataError(f"{path} {location}: repeats the header (line {header_line}), as files "
                                          "joined with `cat` do: remove it")
                continue
            if len(record) != len(header):
                yield location, DataError(f"{path} {location}: {len(record)} fields, the header (line {header_line}) "
                                          f"has {len(header)}")
                continue
            yield location, dict(zip(header, record))


def _ends_inside_quotes(record: str, delimiter: str) -> bool:
    """Whether a CSV record's text ends inside a quoted field: the file ended there, and Python's
    csv reader (not strict: it reads ``"x"y`` as pandas and Excel do) returned the rest of the file
    as that field, silently. Asked only of a record with an odd count of quotes."""
    try:
        for _ in csv.reader(io.StringIO(record), delimiter=delimiter, strict=True):
            pass
    except csv.Error as error:
        return "unexpected end of data" in str(error)
    return False


def _without_bom(handle: IO[bytes]) -> Iterator[bytes]:
    """The lines of ``handle``, each without a byte-order mark it starts with."""
    for line in handle:
        yield line.removeprefix(_UTF8_BOM)


def _dataset_dir_rows(path: str, split: str) -> Iterator[tuple[str, Row]]:
    """A ``Dataset.save_to_disk`` directory, or a ``DatasetDict`` one (its ``split`` part, which
    each row's location names: the directory holds each split's row 0)."""
    import datasets

    from dapo.data.class_labels import label_names, named_row

    try:
        loaded = datasets.load_from_disk(path)
    except (FileNotFoundError, ValueError) as error:
        raise DataError(f"{path}: not a readable `datasets` directory ({error})") from None
    of_split = ""
    if isinstance(loaded, datasets.DatasetDict):
        picked = _pick_split(path, list(loaded.keys()), split)
        loaded, of_split = loaded[picked], f" of the {picked!r} split"
    names = label_names(loaded.features.to_dict())
    for row_index, row in enumerate(loaded.with_format(None)):  # saved with set_format("numpy"/...): plain rows
        yield row_location(row_index) + of_split, named_row(row, names)


def _pick_split(path: str, available: list[str], split: str) -> str:
    """The DatasetDict split read as ``split`` (:func:`dataset_dict_split`): never another split's
    (a test split read as training data would train on the held-out problems)."""
    picked = dataset_dict_split(available, split)
    if picked is None:
        preferred = list(DATASET_DICT_SPLITS[split])
        raise DataError(f"{path}: a DatasetDict of the splits {available}, none of them the {split} split ({preferred}); "
                        f"to read one anyway, name its directory: {Path(path) / available[0]}")
    return picked
