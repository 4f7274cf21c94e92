"""Reading data files row by row (dapo.data.readers): JSON lines, a .json array or one object,
parquet, ``datasets`` directories, with a byte-order mark or unreadable part-way; and where a bad
row is, as the error names it: the line an editor shows, or the 0-based row index."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dapo.config import DataConfig
from dapo.data import DataError, load_problems

GOOD = {"question": "What is 2+2?", "answer": "4"}


def test_files_that_start_with_a_byte_order_mark_load(tmp_path: Path) -> None:
    # Windows editors and spreadsheet exports write one; JSON has none
    row = {"question": "1+1?", "answer": 2}
    for name, text in (("bom.jsonl", json.dumps(row) + "\n"), ("bom.json", json.dumps([row]))):
        (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + text.encode())
        loaded = load_problems([str(tmp_path / name)], DataConfig(prompt_key="question", answer_key="answer"), "train")
        assert [(p.prompt, p.ground_truth) for p in loaded.problems] == [("1+1?", "2")], name


def test_a_json_file_holding_one_object_says_what_rows_look_like(tmp_path: Path) -> None:
    # pretty-printed over several lines, it was read as JSON lines and failed with "invalid JSON
    # at column 2" on row 0; on one line (pandas' df.to_json(path)) with "prompt got dict" on row 0
    for name, indent in (("pretty.json", 2), ("columns.json", 1), ("pandas.json", None)):
        (tmp_path / name).write_text(json.dumps({"question": {"0": "1+1?"}, "answer": {"0": 2}}, indent=indent))
        with pytest.raises(DataError, match=rf"{name}: one JSON object, not rows"):
            load_problems([str(tmp_path / name)], DataConfig(prompt_key="question", answer_key="answer"), "train")
    # one row on one line, of nested columns, is JSON lines
    (tmp_path / "one_row.json").write_text(json.dumps({"question": "1+1?", "meta": {"answer": 2}}) + "\n")
    loaded = load_problems([str(tmp_path / "one_row.json")], DataConfig(prompt_key="question", answer_key="meta.answer"),
                           "train")
    assert [p.ground_truth for p in loaded.problems] == ["2"]
    # ... also when every column of that row is an object (of its own fields, not of row labels)
    row = {"prompt": {"role": "user", "content": "1+1?"}, "reward_model": {"ground_truth": "2", "style": "rule"}}
    (tmp_path / "objects.json").write_text(json.dumps(row) + "\n")
    loaded = load_problems([str(tmp_path / "objects.json")], DataConfig(prompt_key="prompt.content"), "train")
    assert [(p.prompt, p.ground_truth) for p in loaded.problems] == [("1+1?", "2")]


def test_json_array_file_loads_and_its_bad_elements_are_named(tmp_path: Path) -> None:
    rows = [{"question": "1+1?", "answer": 2}, {"question": "2+2?", "answer": "4"}]
    path = tmp_path / "qa.json"
    path.write_text(json.dumps(rows, indent=2))  # one array, as json.dump writes it
    (tmp_path / "copy.json").write_text(path.read_text())
    cfg = DataConfig(prompt_key="question", answer_key="answer")
    loaded = load_problems([str(path), str(tmp_path / "copy.json")], cfg, "eval")
    assert [(p.prompt, p.ground_truth) for p in loaded.problems] == [("1+1?", "2"), ("2+2?", "4"), ("1+1?", "2"),
                                                                      ("2+2?", "4")]
    path.write_text(json.dumps([rows[0], ["not", "an", "object"], rows[1]]))
    with pytest.raises(DataError, match=r"qa.json row 1 \(0-based\) at line 1: wrong type: expected a JSON object, got an array"):
        load_problems([str(path)], cfg, "train")
    lenient = load_problems([str(path)], DataConfig(prompt_key="question", answer_key="answer", lenient=True), "train")
    assert len(lenient.problems) == 2 and lenient.num_malformed_skipped == 1
    path.write_text('[{"question": "1+1?", "answer": 2},\n {"question": ')
    with pytest.raises(DataError, match=r"qa.json: invalid JSON array \(.* at line 2 column"):
        load_problems([str(path)], cfg, "train")


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"question": "caf\xe9?", "answer": "1"}', "undecodable bytes"),
        (b'{"question": "Q?", "answer"', "invalid JSON"),
    ],
)
def test_unreadable_jsonl_line_names_file_and_line(tmp_path: Path, line: bytes, reason: str) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_bytes(
        json.dumps(GOOD).encode() + b"\n" + line + b"\n" + json.dumps(GOOD).encode() + b"\n"
    )
    with pytest.raises(DataError, match=rf"broken\.jsonl line 2: {reason}"):
        load_problems([str(path)], DataConfig(prompt_key="question", answer_key="answer"), "train")
    lenient = load_problems(
        [str(path)], DataConfig(prompt_key="question", answer_key="answer", lenient=True), "eval"
    )
    assert len(lenient.problems) == 2 and lenient.num_malformed_skipped == 1


def test_a_bad_jsonl_row_is_named_by_its_line_as_an_editor_numbers_it(tmp_path: Path) -> None:
    """A field error named the row's 0-based index among the non-blank lines ("row 2" for the
    row on line 4 below): an editor's line numbers count from 1 and count the blank lines."""
    path = tmp_path / "qa.jsonl"
    lines = [json.dumps(GOOD), "", json.dumps(GOOD), json.dumps({"question": "3+3?"}), "", '{"question": ']
    path.write_text("\n".join(lines) + "\n")
    # (the rows before it have the key: "set data.answer_key" would send the user to a config that is right)
    missing = (f"{path} line 4: missing ground truth at 'answer' (row has keys ['question']; the rows before it "
               "have it: fix or drop this row, or set data.lenient=true to skip such rows)")
    with pytest.raises(DataError) as refused:
        load_problems([str(path)], DataConfig(prompt_key="question", answer_key="answer"), "train")
    assert str(refused.value) == f"{missing} (1 more malformed row in {path}; data.lenient=true lists each)"
    lenient = load_problems([str(path)], DataConfig(prompt_key="question", answer_key="answer", lenient=True), "eval")
    assert lenient.counts("eval")["data/eval_malformed_skipped"] == 2.0
    # (skipping it is what data.lenient=true does: not told to set it)
    assert lenient.warnings[0] == f"skipped: {missing.replace(', or set data.lenient=true to skip such rows', '')}"
    # the column just past '{"question": ', not column 1 (of the line break json.loads was given)
    assert lenient.warnings[1] == f"skipped: {path} line 6: invalid JSON (Expecting value at column 14)"
    # the first row without the key: a setting to fix, which skipping rows would not (every row lacks it)
    with pytest.raises(DataError, match=r"line 1: missing ground truth at 'solution' \(row has keys \['answer', "
                                        r"'question'\]; set data.answer_key, or data.answer_key=null where the rows "
                                        r"have no ground truth"):
        load_problems([str(path)], DataConfig(prompt_key="question", answer_key="solution"), "train")


def test_a_bad_table_row_is_named_by_its_index_said_to_be_0_based(tmp_path: Path) -> None:
    """Parquet files and `datasets` directories have no lines: their rows are named as pandas'
    df.iloc[i] and datasets' ds[i] index them, and the message says so; a .json array's element
    by that index and the line it starts on (json.dump(rows, indent=2) writes one per few lines)."""
    import datasets

    rows = [GOOD, GOOD, {"question": "3+3?", "answer": None}, {"question": " ", "answer": "6"}]
    table = tmp_path / "qa.parquet"
    pq.write_table(pa.Table.from_pylist(rows), table)
    cfg = DataConfig(prompt_key="question", answer_key="answer")
    null = f"{table} row 2 (0-based): missing ground truth at 'answer' (null)"  # not "set data.answer_key"
    with pytest.raises(DataError) as refused:
        load_problems([str(table)], cfg, "train")
    # the way past it said, for a parquet row as for a JSON line (it was not)
    assert str(refused.value) == (f"{null}; fix or drop this row, or set data.lenient=true to skip such rows (1 more "
                                  f"malformed row in {table}; data.lenient=true lists each)")  # all counted, the first named
    lenient = load_problems([str(table)], DataConfig(prompt_key="question", answer_key="answer", lenient=True), "train")
    assert lenient.warnings == [f"skipped: {null}", f"skipped: {table} row 3 (0-based): empty prompt at 'question'"]
    datasets.DatasetDict({"test": datasets.Dataset.from_list(rows[1:])}).save_to_disk(str(tmp_path / "ds"))
    with pytest.raises(DataError, match=r"ds row 1 \(0-based\) of the 'test' split: missing ground truth"):
        load_problems([str(tmp_path / "ds")], cfg, "eval")
    array = tmp_path / "qa.json"
    array.write_text(json.dumps(rows, indent=2))
    with pytest.raises(DataError, match=r"qa\.json row 2 \(0-based\) at line 10: missing ground truth"):
        load_problems([str(array)], cfg, "train")


def test_a_file_unreadable_part_way_names_the_last_row_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A parquet file corrupt in its second row group: the error names the last row read, not
    "row 0" or the index of a row never reached; lenient or not, it stops the load (lenient
    skipped the rest of the file, counted as one malformed row)."""
    monkeypatch.setattr("dapo.data.readers._PARQUET_BATCH_ROWS", 3)  # one batch per row group
    path = tmp_path / "qa.parquet"
    pq.write_table(pa.Table.from_pylist([GOOD] * 6), path, row_group_size=3, compression="none")
    second = pq.ParquetFile(path).metadata.row_group(1).column(0)
    start = second.dictionary_page_offset or second.data_page_offset
    corrupt = bytearray(path.read_bytes())
    corrupt[start:start + 8] = b"\xff" * 8  # the second row group's first page header
    path.write_bytes(bytes(corrupt))
    for lenient in (False, True):
        with pytest.raises(DataError) as stopped:
            load_problems([str(path)], DataConfig(prompt_key="question", answer_key="answer", lenient=lenient), "train")
        assert str(stopped.value).startswith(f"{path}: unreadable after row 2 (0-based) (")
        assert "\n" not in str(stopped.value)  # pyarrow's reason has line breaks: one line in the log


def test_a_csv_quote_never_closed_is_that_row_s_error_not_the_rest_of_the_file_read_as_its_answer(tmp_path: Path) -> None:
    """(Python's csv reader, not strict, returned lines 2-4 as one row whose answer held the next
    two problems: two rows lost, nothing said)"""
    path = tmp_path / "qa.csv"
    path.write_text('question,answer\nWhat is 1+1?,"2\nWhat is 2+2?,4\nWhat is 3+3?,6\n')
    cfg = DataConfig(prompt_key="question", answer_key="answer")
    with pytest.raises(DataError, match=r"qa\.csv line 2: a quoted field opened on this line is never closed, so "
                                        r"lines 2-4 \(the file's end\) read as one value"):
        load_problems([str(path)], cfg, "train")
    path.write_text('question,answer\nWhat is 0+0?,0\nWhat is 1+1?,"2\nWhat is 2+2?,4\nWhat is 3+3?,6\n')
    lenient = load_problems([str(path)], DataConfig(prompt_key="question", answer_key="answer", lenient=True), "train")
    assert [p.ground_truth for p in lenient.problems] == ["0"] and lenient.num_malformed_skipped == 1
    # quotes that close, one stray quote in an unquoted field, and "x"y (read as xy, as pandas does) stay rows
    path.write_text('question,answer\n"What is\n1+1?",2\nWhat is 2"+2?,4\n"x"y,6\n')
    assert [(p.prompt, p.ground_truth) for p in load_problems([str(path)], cfg, "train").problems] == [
        ("What is\n1+1?", "2"), ('What is 2"+2?', "4"), ("xy", "6")]


def test_json_nested_past_the_recursion_limit_is_that_row_s_error(tmp_path: Path) -> None:
    """(a bare RecursionError, no file or line, which lenient loading could not skip)"""
    deep = '{"question": ' + "[" * 100_000 + "]" * 100_000 + ', "answer": "1"}'
    path = tmp_path / "qa.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + deep + "\n")
    with pytest.raises(DataError, match=r"qa\.jsonl line 2: JSON nested too deeply to read"):
        load_problems([str(path)], DataConfig(prompt_key="question", answer_key="answer"), "train")
    lenient = load_problems([str(path)], DataConfig(prompt_key="question", answer_key="answer", lenient=True), "train")
    assert len(lenient.problems) == 1 and lenient.num_malformed_skipped == 1
    array = tmp_path / "qa.json"
    array.write_text("[" + json.dumps(GOOD) + ", " + deep + "]")
    with pytest.raises(DataError, match=r"qa\.json: an element of the JSON array is nested too deeply to read"):
        load_problems([str(array)], DataConfig(prompt_key="question", answer_key="answer"), "train")


def test_an_integer_ground_truth_past_4300_digits_in_a_python_literal_is_read_in_full(tmp_path: Path) -> None:
    """(a CSV's struct text, read by ast.literal_eval: str() of the int raised a bare ValueError)"""
    path = tmp_path / "qa.csv"  # (a decimal literal that long is refused by literal_eval itself: text, then)
    path.write_text("prompt,reward_model\n" + f"What is it?,\"{{'ground_truth': 0x{'f' * 4000}}}\"\n")
    [problem] = load_problems([str(path)], DataConfig(), "train").problems
    assert problem.ground_truth.isdigit() and len(problem.ground_truth) == 4817  # 16^4000 - 1, in full


@pytest.mark.parametrize(("name", "text", "error"), [
    ("short.csv", "prompt,answer,data_source\nq,2\n", "short.csv line 2: 2 fields, the header (line 1) has 3"),
    ("list.jsonl", '["prompt", "x"]\n', "list.jsonl line 1: wrong type: expected a JSON object, got an array"),
    ("null.jsonl", "\n\nnull\n", "null.jsonl line 3: wrong type: expected a JSON object, got null"),
])
def test_a_row_of_the_wrong_shape_is_named_by_file_and_line(tmp_path: Path, name: str, text: str, error: str) -> None:
    """A short CSV row was zipped with the header (its columns shifted); a JSON list crashed."""
    (tmp_path / name).write_text(text)
    with pytest.raises(DataError, match=re.escape(error)):
        load_problems([str(tmp_path / name)], DataConfig(), "train")


def test_a_load_stopped_at_a_malformed_row_counts_the_files_others(tmp_path: Path) -> None:
    """Without data.lenient the first malformed row stops the load, named; the file's others are
    counted in the same message (a run stopped at each in turn, one fix at a time)."""
    import json

    path = tmp_path / "qa.jsonl"
    rows = [GOOD, {"question": "", "answer": "1"}, GOOD, {"question": "2+2?"}, {"answer": "3"}, GOOD]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(DataError) as refused:
        load_problems([str(path)], DataConfig(prompt_key="question", answer_key="answer"), "train")
    said = str(refused.value)
    assert said.startswith(f"{path} line 2: empty prompt at 'question'; fix or drop this row")
    assert said.endswith(f"(2 more malformed rows in {path}; data.lenient=true lists each)")
