"""data.lenient skips malformed rows, not files: a file that cannot be read (a .json array with a
syntax error, a corrupt parquet, a truncated .gz) stops the load with its one-line error, lenient
or not. Before, lenient dropped the whole file and counted it as one malformed row."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dapo.config import DataConfig
from dapo.data import DataError, load_problems

LENIENT = DataConfig(prompt_key="question", answer_key="answer", lenient=True)
STILL = "data.lenient skips malformed rows, not a file that cannot be read"


def _rows(count: int) -> list[dict]:
    return [{"question": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(count)]


def _jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_a_json_array_with_a_syntax_error_stops_a_lenient_load(tmp_path: Path) -> None:
    good = _jsonl(tmp_path / "qa.jsonl", _rows(40))
    broken = tmp_path / "arr_bad.json"
    broken.write_text(json.dumps(_rows(40), indent=1).replace('"answer": "7"', '"answer": "7",', 1))
    with pytest.raises(DataError, match=rf"arr_bad\.json: invalid JSON array \(.* at line \d+ column \d+\); {STILL}"):
        load_problems([good, str(broken)], LENIENT, "train")
    broken.write_bytes(json.dumps(_rows(40)).encode().replace(b"What", b"Wh\xe9t", 1))
    with pytest.raises(DataError, match=r"arr_bad\.json: undecodable bytes, not UTF-8"):
        load_problems([good, str(broken)], LENIENT, "train")
    with pytest.raises(DataError, match=r"arr_bad\.json: undecodable bytes, not UTF-8 \(.*\)$"):  # strict: as before
        load_problems([good, str(broken)], DataConfig(prompt_key="question", answer_key="answer"), "train")


def test_a_corrupt_or_partly_unreadable_parquet_stops_a_lenient_load(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    good = _jsonl(tmp_path / "good.jsonl", _rows(1))
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"this is not parquet")
    with pytest.raises(DataError, match=rf"corrupt\.parquet: unreadable file \(.*\); {STILL}"):
        load_problems([str(corrupt), good], LENIENT, "train")
    monkeypatch.setattr("dapo.data.readers._PARQUET_BATCH_ROWS", 3)  # one batch per row group
    path = tmp_path / "qa.parquet"
    pq.write_table(pa.Table.from_pylist(_rows(6)), path, row_group_size=3, compression="none")
    second = pq.ParquetFile(path).metadata.row_group(1).column(0)
    start = second.dictionary_page_offset or second.data_page_offset
    damaged = bytearray(path.read_bytes())
    damaged[start:start + 8] = b"\xff" * 8  # the second row group's first page header
    path.write_bytes(bytes(damaged))
    with pytest.raises(DataError, match=rf"qa\.parquet: unreadable after row 2 \(0-based\) \([^\n]*\); {STILL}$"):
        load_problems([str(path)], LENIENT, "train")


@pytest.mark.parametrize("cut", ["truncated", "not gzip", "corrupt"])
def test_a_damaged_compressed_file_stops_the_load_naming_it(tmp_path: Path, cut: str) -> None:
    data = "".join(json.dumps(row) + "\n" for row in _rows(2000)).encode()
    packed = gzip.compress(data)
    damaged = {"truncated": packed[: len(packed) // 2], "not gzip": data,
               "corrupt": packed[:40] + bytes(b ^ 0x55 for b in packed[40:400]) + packed[400:]}[cut]
    path = tmp_path / "qa.jsonl.gz"
    path.write_bytes(damaged)
    for cfg in (LENIENT, DataConfig(prompt_key="question", answer_key="answer")):
        with pytest.raises(DataError, match=r"qa\.jsonl\.gz: unreadable (file|after line \d+) \(") as stopped:
            load_problems([str(path)], cfg, "train")
        assert "\n" not in str(stopped.value)


def test_json_lines_stay_skipped_line_by_line_when_lenient(tmp_path: Path) -> None:
    lines = [json.dumps(row) for row in _rows(4)]
    lines[1] = '{"question": "torn'
    path = tmp_path / "qa.jsonl"
    path.write_bytes("\n".join(lines).encode().replace(b"What is 2", b"Wh\xe9t is 2") + b"\n")
    loaded = load_problems([str(path)], LENIENT, "train")
    assert [p.ground_truth for p in loaded.problems] == ["1", "4"] and loaded.num_malformed_skipped == 2
    assert "(4 rows; 0 duplicate prompts dropped; 2 malformed rows skipped;" in loaded.describe("train")


def _parquet_with_a_non_utf8_cell(path: Path) -> str:
    """Three rows, the question of row 1 (0-based) bytes that are not UTF-8 in a string column
    (a writer that does not validate its strings: pyarrow reads the file, not that cell)."""
    import numpy as np

    questions = [b"What is 1 + 1?", b"What is \xff 2?", b"What is 3 + 1?"]
    offsets = np.cumsum([0] + [len(q) for q in questions]).astype(np.int32)
    column = pa.Array.from_buffers(pa.string(), 3, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(questions))])
    pq.write_table(pa.table({"question": column, "answer": pa.array(["2", "3", "4"])}), path)
    return str(path)


def test_a_parquet_cell_that_is_not_utf8_is_a_malformed_row_named_by_its_index(tmp_path: Path) -> None:
    """One bad cell is one malformed row, named (skipped and counted where lenient): before, the
    whole batch was lost under the name of the row before it, and the load stopped even when lenient."""
    path = _parquet_with_a_non_utf8_cell(tmp_path / "qa.parquet")
    loaded = load_problems([path], LENIENT, "train")
    assert [p.ground_truth for p in loaded.problems] == ["2", "4"] and loaded.num_malformed_skipped == 1
    with pytest.raises(DataError, match=r"qa\.parquet row 1 \(0-based\): undecodable bytes in a string column, not UTF-8"):
        load_problems([path], DataConfig(prompt_key="question", answer_key="answer"), "train")
