"""Files users bring that are rarer than a clean JSONL (from an audit of the data layer): each loads
as meant, or stops with the file, the row and what to do; none loads wrong unsaid."""

from __future__ import annotations

import json
import zipfile
from decimal import Decimal
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dapo.config import DataConfig
from dapo.data import DataError, load_problems


def loaded(files: list[Path], split: str = "train", **settings: object) -> list[tuple[str, str]]:
    cfg = DataConfig(answer_key="answer", **settings)
    return [(p.prompt, p.ground_truth) for p in load_problems([str(f) for f in files], cfg, split).problems]


def refusal(files: list[Path], split: str = "train", **settings: object) -> str:
    with pytest.raises(DataError) as caught:
        loaded(files, split, **settings)
    return str(caught.value)


def test_a_date_past_python_s_range_is_that_row_s_error_naming_its_column(tmp_path: Path) -> None:
    path = tmp_path / "dated.parquet"
    when = pa.array([0, 300_000_000_000_000_000, 5], pa.timestamp("us"))  # the middle one: year 11476
    pq.write_table(pa.table({"prompt": ["q1", "q2", "q3"], "answer": ["1", "2", "3"], "when": when}), path)
    assert f"{path} row 1 (0-based): unreadable in column 'when' (" in refusal([path])
    assert loaded([path], lenient=True) == [("q1", "1"), ("q3", "3")]


def test_csv_files_joined_with_cat_are_their_rows_not_a_header_row_as_a_problem(tmp_path: Path) -> None:
    path = tmp_path / "joined.csv"  # two Excel exports, each with its byte-order mark and header
    path.write_bytes(b"\xef\xbb\xbfprompt,answer\r\nq1,1\r\n\xef\xbb\xbfprompt,answer\r\nq2,2\r\n")
    assert f"{path} line 3: repeats the header (line 1)" in refusal([path])
    assert loaded([path], lenient=True) == [("q1", "1"), ("q2", "2")]


def test_json_lines_joined_with_cat_keep_no_byte_order_mark_of_a_later_file(tmp_path: Path) -> None:
    path = tmp_path / "joined.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"prompt": "q1", "answer": "1"}\n\xef\xbb\xbf{"prompt": "q2", "answer": "2"}\n')
    assert loaded([path]) == [("q1", "1"), ("q2", "2")]


def test_a_parquet_file_naming_a_column_twice_is_refused_not_read_with_one_of_them(tmp_path: Path) -> None:
    path = tmp_path / "twice.parquet"
    columns = [pa.array(["q1", "q2"]), pa.array(["1", "2"]), pa.array(["9", "8"])]
    pq.write_table(pa.Table.from_arrays(columns, names=["prompt", "answer", "answer"]), path)
    assert "names the column 'answer' twice" in refusal([path])


def test_rows_wrapped_in_one_json_object_on_one_line_are_said_to_be_under_its_key(tmp_path: Path) -> None:
    path = tmp_path / "wrapped.json"
    path.write_text(json.dumps({"version": "1", "data": [{"prompt": "q", "answer": "1"}]}))
    message = refusal([path])
    assert "the rows are the list under 'data'" in message and "jq -c '.data[]'" in message
    (tmp_path / "rows.json").write_text(json.dumps({"prompt": "q", "answer": "1"}))  # one row on one line: a row
    assert loaded([tmp_path / "rows.json"]) == [("q", "1")]


def test_a_null_prompt_in_a_parquet_file_is_that_row_s_error(tmp_path: Path) -> None:
    path = tmp_path / "gaps.parquet"
    pq.write_table(pa.table({"prompt": ["q1", None, "q3"], "answer": ["1", "2", "3"]}), path)
    assert f"{path} row 1 (0-based): missing prompt at 'prompt' (null)" in refusal([path])
    assert loaded([path], lenient=True) == [("q1", "1"), ("q3", "3")]


def test_a_json_true_is_no_ground_truth_and_no_row(tmp_path: Path) -> None:
    answer_true = tmp_path / "flag.jsonl"
    answer_true.write_text('{"prompt": "q", "answer": true}\n')
    assert "ground truth must be text or a number, got bool" in refusal([answer_true])
    row_true = tmp_path / "bare.jsonl"
    row_true.write_text('{"prompt": "q", "answer": "1"}\ntrue\n')
    assert f"{row_true} line 2: wrong type: expected a JSON object, got true" in refusal([row_true])


def test_split_words_followed_by_digits_name_the_split(tmp_path: Path) -> None:
    """data/train1.jsonl and data/test1.jsonl: training reads train1 only (never the test problems)."""
    (tmp_path / "data").mkdir()
    for split in ("train", "test"):
        (tmp_path / "data" / f"{split}1.jsonl").write_text(json.dumps({"prompt": split, "answer": "1"}) + "\n")
    assert loaded([tmp_path]) == [("train", "1")]
    assert loaded([tmp_path], "eval") == [("test", "1")]


def test_a_zip_among_a_split_s_files_stops_the_load_naming_it(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train-0.jsonl").write_text('{"prompt": "q", "answer": "1"}\n')
    with zipfile.ZipFile(tmp_path / "data" / "train-1.zip", "w") as archive:
        archive.writestr("rows.jsonl", '{"prompt": "q2", "answer": "2"}\n')
    assert "of a type dapo does not read: data/train-1.zip" in refusal([tmp_path])


def test_a_file_of_another_type_is_refused_without_a_compression_hint(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("1 + 1 = 2\n")
    (tmp_path / "rows.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd")
    assert "unknown file type" in refusal([tmp_path / "notes.txt"]) and "compressed:" not in refusal([tmp_path / "notes.txt"])
    assert "(.zst compressed: decompress it first)" in refusal([tmp_path / "rows.jsonl.zst"])


def test_a_directory_that_datasets_cannot_read_is_named(tmp_path: Path) -> None:
    (tmp_path / "saved").mkdir()
    (tmp_path / "saved" / "state.json").write_text("{}")
    assert refusal([tmp_path / "saved"]).startswith(f"{tmp_path / 'saved'}: not a readable `datasets` directory")


def test_a_dataset_dict_is_evaluated_on_its_test_split_and_says_which_it_left_out(tmp_path: Path) -> None:
    def save(name: str, splits: tuple[str, ...]) -> Path:
        rows = {split: datasets.Dataset.from_list([{"prompt": split, "answer": "1"}]) for split in splits}
        datasets.DatasetDict(rows).save_to_disk(tmp_path / name)
        return tmp_path / name

    both = save("both", ("train", "validation", "test"))
    result = load_problems([str(both)], DataConfig(answer_key="answer"), "eval")
    assert [p.prompt for p in result.problems] == ["test"]
    assert any(f"evaluating on its 'test' split, not its 'validation' (name {both / 'validation'}" in line
               for line in result.warnings), result.warnings
    assert loaded([save("valid", ("train", "valid"))], "eval") == [("valid", "1")]
    assert loaded([both]) == [("train", "1")]


def test_a_csv_separated_by_semicolons_says_so(tmp_path: Path) -> None:
    path = tmp_path / "excel.csv"  # Excel's CSV where the decimal mark is a comma
    path.write_text("prompt;answer\n1+1?;2\n")
    assert "values separated by ';'? dapo reads ','-separated values here" in refusal([path])


def test_a_data_source_that_is_a_list_is_that_row_s_error(tmp_path: Path) -> None:
    path = tmp_path / "tagged.jsonl"  # not metrics under eval/['aime']/
    path.write_text('{"prompt": "q1", "answer": "1", "data_source": "aime"}\n'
                    '{"prompt": "q2", "answer": "2", "data_source": ["aime"]}\n')
    assert f"{path} line 2: wrong type at 'data_source': data_source must be text or a number, got list" in refusal([path])
    pq.write_table(pa.table({"prompt": ["q1"], "answer": ["1"], "data_source": [["aime"]]}), tmp_path / "tagged.parquet")
    assert "row 0 (0-based): wrong type at 'data_source'" in refusal([tmp_path / "tagged.parquet"])


def test_json_lines_ended_by_a_carriage_return_alone_say_so(tmp_path: Path) -> None:
    path = tmp_path / "classic_mac.jsonl"
    path.write_bytes(b'{"prompt": "q1", "answer": "1"}\r{"prompt": "q2", "answer": "2"}\r')
    assert "its lines end in a carriage return alone: convert them, tr '\\r' '\\n'" in refusal([path])


def test_a_decimal_column_s_ground_truths_read_as_their_digits(tmp_path: Path) -> None:
    # a SQL or pandas export's decimal(5, 2) column: 4.00 is 4, as a float's 4.0
    path = tmp_path / "decimals.parquet"
    answers = pa.array([Decimal("0.50"), Decimal("4.00"), Decimal("-12.25"), Decimal("0.00")], pa.decimal128(5, 2))
    pq.write_table(pa.table({"prompt": ["q1", "q2", "q3", "q4"], "answer": answers}), path)
    assert loaded([path]) == [("q1", "0.5"), ("q2", "4"), ("q3", "-12.25"), ("q4", "0")]
    wide = tmp_path / "wide.parquet"  # decimal256 and a scale past a float's 17 digits: kept exactly
    exact = pa.array([Decimal("1234567890.123456789012")], pa.decimal256(40, 12))
    pq.write_table(pa.table({"prompt": ["q"], "answer": exact}), wide)
    assert loaded([wide]) == [("q", "1234567890.123456789012")]
