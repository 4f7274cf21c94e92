"""Which file types are read, and that none holding data is left out unsaid: JSON lines and JSON
arrays compressed (.gz, .bz2, .xz), CSV and TSV; a directory's files of a type dapo does not
read (.arrow, .zst, .txt, ...) stop the load, naming them, where they were left out silently."""

from __future__ import annotations

import bz2
import csv
import gzip
import json
import lzma
from pathlib import Path

import numpy
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dapo.config import DataConfig
from dapo.data import DataError, load_problems
from dapo.data.files import data_files
from dapo.preflight import data_problems

QA = DataConfig(prompt_key="question", answer_key="answer")


def _rows(first: int, count: int) -> list[dict]:
    return [{"question": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(first, first + count)]


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def _csv(path: Path, rows: list[dict], delimiter: str = ",") -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)


def test_a_directory_of_mixed_types_reads_every_file(tmp_path: Path) -> None:
    """Before, part1.jsonl alone was read: 20 of the 60 rows, and not a word."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "part1.jsonl").write_bytes(_jsonl(_rows(0, 20)))
    (folder / "part2.jsonl.gz").write_bytes(gzip.compress(_jsonl(_rows(20, 20))))
    _csv(folder / "part3.csv", _rows(40, 20))
    (folder / "README.md").write_text("# my data\n")  # not data: left alone, as before
    loaded = load_problems([str(folder)], QA, "train")
    assert len(loaded.problems) == 60 and loaded.num_rows == 60
    assert [Path(s).name for s in loaded.sources] == ["part1.jsonl", "part2.jsonl.gz", "part3.csv"]
    assert [p.ground_truth for p in loaded.problems] == [str(i + 1) for i in range(60)]
    assert {p.data_source for p in loaded.problems} == {"part1", "part2", "part3"}  # not "part2.jsonl"


def test_a_hub_split_of_plain_and_compressed_shards_is_read_whole(tmp_path: Path) -> None:
    """Before, train-00001-of-00002.jsonl.gz was left out: half the split gone; the glob stopped
    with "unknown file type"."""
    data = tmp_path / "hub" / "data"
    data.mkdir(parents=True)
    (data / "train-00000-of-00002.jsonl").write_bytes(_jsonl(_rows(0, 3)))
    (data / "train-00001-of-00002.jsonl.gz").write_bytes(gzip.compress(_jsonl(_rows(3, 3))))
    (data / "test-00000-of-00001.jsonl.gz").write_bytes(gzip.compress(_jsonl(_rows(100, 2))))
    for entry in (str(tmp_path / "hub"), str(data / "train-*")):
        loaded = load_problems([entry], QA, "train")
        assert [p.ground_truth for p in loaded.problems] == ["1", "2", "3", "4", "5", "6"], entry
    held_out = load_problems([str(tmp_path / "hub")], QA, "eval")
    assert [p.ground_truth for p in held_out.problems] == ["101", "102"]
    assert {p.data_source for p in held_out.problems} == {"hub"}  # a split word's shard: its dataset's name


@pytest.mark.parametrize(("suffix", "compress"), [(".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress)])
def test_compressed_json_lines_and_arrays_read_as_their_plain_files(tmp_path: Path, suffix: str, compress) -> None:
    rows = _rows(0, 3)
    (tmp_path / f"qa.jsonl{suffix}").write_bytes(compress(b"\xef\xbb\xbf" + _jsonl(rows) + b"\n{torn\n"))
    (tmp_path / f"qa.json{suffix}").write_bytes(compress(json.dumps(rows, indent=2).encode()))
    lines = load_problems([str(tmp_path / f"qa.jsonl{suffix}")], DataConfig(prompt_key="question", answer_key="answer",
                                                                          lenient=True), "train")
    assert [p.ground_truth for p in lines.problems] == ["1", "2", "3"] and lines.num_malformed_skipped == 1
    # a bad line is named by its line in the decompressed text, as `zcat FILE | sed -n Np` shows it
    with pytest.raises(DataError, match=rf"qa\.jsonl{suffix} line 5: invalid JSON"):
        load_problems([str(tmp_path / f"qa.jsonl{suffix}")], QA, "train")
    array = load_problems([str(tmp_path / f"qa.json{suffix}")], QA, "train")
    assert [p.ground_truth for p in array.problems] == ["1", "2", "3"]


def test_csv_and_tsv_rows_are_read_as_text_and_named_by_their_line(tmp_path: Path) -> None:
    rows = [{"question": "What is 0.30 + 0.70?", "answer": "1.00"},  # text: "1.00", not 1.0
            {"question": "Line one,\nline two: 2 + 2?", "answer": "4"},  # a quoted line break
            {"question": "A chat?", "answer": "007"}]
    _csv(tmp_path / "qa.csv", rows)
    loaded = load_problems([str(tmp_path / "qa.csv")], QA, "train")
    assert [(p.prompt, p.ground_truth) for p in loaded.problems] == [(r["question"], r["answer"]) for r in rows]
    _csv(tmp_path / "qa.tsv", rows, delimiter="\t")
    assert [p.ground_truth for p in load_problems([str(tmp_path / "qa.tsv")], QA, "train").problems] == [
        "1.00", "4", "007"]
    # a DAPO-schema export: the dotted column name and the chat list as its JSON text
    chat = json.dumps([{"role": "user", "content": "1+1?"}])
    _csv(tmp_path / "dapo.csv", [{"prompt": chat, "reward_model.ground_truth": "2"}])
    [problem] = load_problems([str(tmp_path / "dapo.csv")], DataConfig(), "train").problems
    assert problem.prompt == [{"role": "user", "content": "1+1?"}] and problem.ground_truth == "2"
    # pandas' to_csv of a chat-list column writes Python's repr of it: read as the list, not as its text
    _csv(tmp_path / "pandas.csv", [{"prompt": str([{"role": "user", "content": "1+1?"}]), "answer": "2"},
                                   {"prompt": "[{not a chat} list]", "answer": "3"}])
    loaded = load_problems([str(tmp_path / "pandas.csv")], DataConfig(answer_key="answer"), "train")
    assert [p.prompt for p in loaded.problems] == [[{"role": "user", "content": "1+1?"}], "[{not a chat} list]"]
    # pandas' to_csv of DAPO-Math read from parquet: the reward_model struct as its repr, and a
    # chat list of two messages as NumPy's str(), without a comma between them (that stopped at
    # "missing ground truth ... set data.answer_key", and read the list as plain text)
    messages = numpy.array([{"content": "Be brief.", "role": "system"}, {"content": "1+1?", "role": "user"}],
                           dtype=object)
    _csv(tmp_path / "from_parquet.csv", [{"prompt": str(messages), "data_source": "math_dapo",
                                          "reward_model": str({"ground_truth": "2", "style": "rule-lab"})}])
    [problem] = load_problems([str(tmp_path / "from_parquet.csv")], DataConfig(), "train").problems
    assert problem.prompt == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+1?"}]
    assert problem.ground_truth == "2"
    # a row of another field count, and undecodable bytes, are that row's error (the record's first line)
    (tmp_path / "bad.csv").write_bytes(b"question,answer\n\"a\nb?\",1\nq2?,2,extra\nq\xe93?,3\n  \nq4?,4\n")
    with pytest.raises(DataError, match=r"bad\.csv line 4: 3 fields, the header \(line 1\) has 2"):
        load_problems([str(tmp_path / "bad.csv")], QA, "train")
    lenient = load_problems([str(tmp_path / "bad.csv")], DataConfig(prompt_key="question", answer_key="answer",
                                                                     lenient=True), "train")
    assert [p.ground_truth for p in lenient.problems] == ["1", "4"] and lenient.num_malformed_skipped == 2
    assert lenient.warnings[1].startswith(f"skipped: {tmp_path / 'bad.csv'} line 5: undecodable bytes, not UTF-8")
    (tmp_path / "twice.csv").write_text("question,answer,answer\nq?,1,2\n")  # which answer? neither, silently
    with pytest.raises(DataError, match=r"twice\.csv: the header \(line 1\) names the column 'answer' twice"):
        load_problems([str(tmp_path / "twice.csv")], QA, "train")


def test_a_directory_stops_naming_the_files_of_its_split_it_cannot_read(tmp_path: Path) -> None:
    """Files that hold data of a type dapo does not read are named, not left out; files that are
    not data (a card, a licence, images, the Hub's metadata) are left alone."""
    hub = tmp_path / "hub"
    (hub / "data").mkdir(parents=True)
    (hub / "data" / "train-00000-of-00002.jsonl").write_bytes(_jsonl(_rows(0, 2)))
    (hub / "data" / "train-00001-of-00002.arrow").write_bytes(b"not read")
    (hub / "data" / "test-00000-of-00001.jsonl").write_bytes(_jsonl(_rows(100, 2)))
    for name in ("README.md", "LICENSE", "LICENSE.txt", ".gitattributes", "cover.png", "dataset_infos.json"):
        (hub / name).write_text("{}")
    message = (r"hub: holds 1 data file\(s\) of the train split of a type dapo does not read: "
               r"data/train-00001-of-00002\.arrow; dapo reads \.parquet, \.jsonl, \.json, \.csv, \.tsv")
    with pytest.raises(DataError, match=message):
        data_files(str(hub), "train")
    with pytest.raises(DataError, match=message):
        load_problems([str(hub)], QA, "train")
    assert [Path(f).name for f in data_files(str(hub), "eval")] == ["test-00000-of-00001.jsonl"]  # another split's
    [problem] = data_problems([str(hub)], "data.train_files")
    assert problem.startswith("data.train_files: ") and "train-00001-of-00002.arrow" in problem
    plain = tmp_path / "plain"  # no split layout: every data file is the split's
    plain.mkdir()
    (plain / "rows.jsonl").write_bytes(_jsonl(_rows(0, 1)))
    (plain / "more.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd")
    (plain / "notes.txt").write_text("a text file is rows to `datasets`\n")
    with pytest.raises(DataError, match=r"plain: holds 2 data file\(s\) of a type dapo does not read: "
                                        r"more\.jsonl\.zst, notes\.txt;"):
        load_problems([str(plain)], QA, "eval")
    (plain / "more.jsonl.zst").unlink()
    (plain / "notes.txt").unlink()
    (plain / "dataset_infos.json").write_text(json.dumps({"default": {"description": ""}}))  # not rows
    assert len(load_problems([str(plain)], QA, "eval").problems) == 1


def test_a_named_file_of_a_type_not_read_says_what_is(tmp_path: Path) -> None:
    (tmp_path / "qa.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd")
    with pytest.raises(DataError, match=r"qa\.jsonl\.zst: unknown file type; expected \.parquet, \.jsonl, \.json, "
                                        r"\.csv, \.tsv \(plain or compressed \.gz, \.bz2, \.xz\)"):
        load_problems([str(tmp_path / "qa.jsonl.zst")], QA, "train")
    [problem] = data_problems([str(tmp_path / "qa.jsonl.zst")], "data.train_files")
    assert "qa.jsonl.zst" in problem and ".csv" in problem
    (tmp_path / "QA.JSONL").write_bytes(_jsonl(_rows(0, 1)))  # a suffix in capitals is the same type
    assert len(load_problems([str(tmp_path / "QA.JSONL")], QA, "train").problems) == 1
    assert data_problems([str(tmp_path / "QA.JSONL")], "data.train_files") == []
    pq.write_table(pa.Table.from_pylist(_rows(0, 2)), tmp_path / "qa.parquet")
    assert data_problems([str(tmp_path)], "data.train_files") != []  # the .zst beside them is named


def test_a_json_array_after_blank_lines_or_indentation_is_read_as_an_array(tmp_path: Path):
    """It was read as JSON lines: "line 2: invalid JSON" for a valid file."""
    path = tmp_path / "a.json"
    path.write_text('\n  [{"prompt": "1+1?", "answer": "2"}]\n')
    loaded = load_problems([str(path)], DataConfig(prompt_key="prompt", answer_key="answer"), "train")
    assert [problem.ground_truth for problem in loaded.problems] == ["2"]


def test_a_csv_field_over_the_csv_module_s_128_kib_limit_is_read(tmp_path: Path):
    """A long prompt (a 200,000-character document) made the file unreadable ("field larger than field limit")."""
    path = tmp_path / "a.csv"
    path.write_text("prompt,answer\n" + "x" * 200_000 + ",7\n")
    loaded = load_problems([str(path)], DataConfig(prompt_key="prompt", answer_key="answer"), "train")
    assert [problem.ground_truth for problem in loaded.problems] == ["7"] and len(loaded.problems[0].prompt) == 200_000
