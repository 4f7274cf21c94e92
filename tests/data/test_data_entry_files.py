"""What a load says about the files an entry names beyond their rows: .ndjson read as the JSON
lines it is; a shard that holds no rows among others that do (a truncated download) named in a
warning, where it added 0 rows unsaid; a glob over a Hub checkout skipping its card, licence and
metadata, counted, where they stopped the load."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import re
from collections.abc import Callable
from pathlib import Path

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


@pytest.mark.parametrize(("name", "compress"), [
    ("qa.ndjson", lambda data: data), ("QA.NDJSON", lambda data: data), ("qa.ndjson.gz", gzip.compress),
    ("qa.ndjson.bz2", bz2.compress), ("qa.ndjson.xz", lzma.compress)])
def test_ndjson_is_read_as_json_lines(tmp_path: Path, name: str, compress: Callable[[bytes], bytes]) -> None:
    """Before, an .ndjson file stopped the load (unknown file type), and a directory holding one
    stopped as holding data of a type not read."""
    path = tmp_path / name
    path.write_bytes(compress(_jsonl(_rows(0, 2)) + b"\n{torn\n"))
    lenient = DataConfig(prompt_key="question", answer_key="answer", lenient=True)
    loaded = load_problems([str(path)], lenient, "train")
    assert [p.ground_truth for p in loaded.problems] == ["1", "2"] and loaded.num_malformed_skipped == 1
    assert {p.data_source for p in loaded.problems} == {"qa" if name.islower() else "QA"}  # not "qa.ndjson"
    with pytest.raises(DataError, match=rf"{re.escape(name)} line 4: invalid JSON"):  # as JSON lines number it
        load_problems([str(path)], QA, "train")
    path.write_bytes(compress(_jsonl(_rows(0, 2))))
    (tmp_path / "more.jsonl").write_bytes(_jsonl(_rows(2, 1)))
    assert len(load_problems([str(tmp_path)], QA, "train").problems) == 3  # a directory reads it beside .jsonl
    assert data_problems([str(path), str(tmp_path)], "data.train_files") == []


@pytest.mark.parametrize("empty", [b"", b"\n  \n\n"], ids=["0 bytes", "blank lines"])
def test_an_empty_shard_among_several_is_named_in_a_warning(tmp_path: Path, empty: bytes) -> None:
    folder = tmp_path / "shards"
    folder.mkdir()
    (folder / "part1.jsonl").write_bytes(_jsonl(_rows(0, 3)))
    (folder / "part2.jsonl").write_bytes(empty)
    (folder / "part3.jsonl").write_bytes(_jsonl(_rows(0, 3)))  # all copies: rows read, none kept; not empty
    for entry in (str(folder), str(folder / "part*.jsonl")):
        loaded = load_problems([entry], QA, "train")
        assert len(loaded.problems) == 3 and loaded.num_duplicates_dropped == 3
        assert loaded.warnings[0].startswith("warning: 1 of the 3 data files holds no rows (empty: "), entry
        assert loaded.warnings[0].endswith(f"): {folder / 'part2.jsonl'}"), entry
        assert "\n  warning: 1 of the 3 data files holds no rows" in loaded.describe("train")
        assert not any("part3.jsonl" in warning for warning in loaded.warnings)
    one = load_problems([str(folder / "part1.jsonl")], QA, "train")  # a file with rows alone: nothing said
    assert one.warnings == []
    (folder / "part1.jsonl").write_bytes(empty)
    (folder / "part3.jsonl").write_bytes(empty)
    with pytest.raises(DataError, match=r"no usable train problems in \[.*shards'\]: they hold no rows$"):
        load_problems([str(folder)], QA, "train")  # every file empty: the error it was


def _hub_checkout(root: Path) -> Path:
    """A Hugging Face dataset repo as `git clone` leaves it: its rows under data/, its card, licence,
    git and `datasets` metadata, a loading script and a lock file beside them."""
    (root / "data").mkdir(parents=True)
    (root / "data" / "train-00000-of-00002.jsonl").write_bytes(_jsonl(_rows(0, 2)))
    (root / "data" / "train-00001-of-00002.ndjson.gz").write_bytes(gzip.compress(_jsonl(_rows(2, 1))))
    (root / "data" / "train-00000-of-00002.jsonl.lock").write_text("")
    for name in ("README.md", "LICENSE", ".gitattributes", "dataset_infos.json", "hub.py"):
        (root / name).write_text("{}\n")
    return root


def test_a_glob_over_a_hub_checkout_skips_and_counts_the_files_that_are_not_data(tmp_path: Path) -> None:
    """Before, ``hub/**`` stopped at README.md (unknown file type)."""
    hub = _hub_checkout(tmp_path / "hub")
    for pattern in ("**", "*/*"):
        assert [Path(f).name for f in data_files(str(hub / pattern), "train")] == [
            "train-00000-of-00002.jsonl", "train-00001-of-00002.ndjson.gz"], pattern
    loaded = load_problems([str(hub / "**")], QA, "train")
    assert [p.ground_truth for p in loaded.problems] == ["1", "2", "3"]
    # (a glob matches no hidden file, .gitattributes: Python's glob leaves them out)
    assert (f"{hub / '**'}: skipped 5 file(s) that are not data: LICENSE, README.md, data/train-00000-of-00002.jsonl"
            ".lock, ... (2 more)") in loaded.warnings
    assert "skipped 5 file(s) that are not data" in loaded.describe("train")
    with pytest.raises(DataError, match=r"README\.md\*: the pattern matches no data file, only 1 file\(s\) that are "
                                        r"not data: README\.md$"):
        load_problems([str(hub / "README.md*")], QA, "train")
    with pytest.raises(DataError, match=r"only 1 file\(s\) that are not data: \.gitattributes$"):  # named: hidden
        data_files(str(hub / ".*"), "train")
    # a directory skips them too (as it did), now counted; a hidden file (.gitattributes) with them
    in_folder = load_problems([str(hub)], QA, "train")
    assert len(in_folder.problems) == 3
    assert any(w.startswith(f"{hub}: skipped 6 file(s) that are not data: .gitattributes, LICENSE,")
               for w in in_folder.warnings)


@pytest.mark.parametrize("name", ["train-00001-of-00002.arrow", "train-extra.txt", "train.xlsx", "train-more.jsonl.zst"])
def test_a_glob_still_stops_at_a_file_of_a_data_type_not_read(tmp_path: Path, name: str) -> None:
    hub = _hub_checkout(tmp_path / "hub")
    (hub / "data" / name).write_bytes(b"rows, of a type dapo does not read")
    with pytest.raises(DataError, match=rf"{re.escape(name)}: unknown file type; expected"):
        load_problems([str(hub / "**")], QA, "train")
    with pytest.raises(DataError, match=rf"hub: holds 1 data file\(s\) of the train split of a type dapo does not "
                                        rf"read: data/{re.escape(name)};"):
        load_problems([str(hub)], QA, "train")


def test_a_file_named_twice_is_read_once_and_said(tmp_path: Path) -> None:
    """Named by itself and by the glob that matches it, a file was read twice: each of its rows
    a second copy, of equal weight with data.dedup_train=false."""
    (tmp_path / "a.jsonl").write_bytes(_jsonl(_rows(0, 3)))
    (tmp_path / "b.jsonl").write_bytes(_jsonl(_rows(3, 2)))
    a = str(tmp_path / "a.jsonl")
    cfg = DataConfig(prompt_key="question", answer_key="answer", dedup_train=False)
    loaded = load_problems([a, str(tmp_path / "*.jsonl"), str(tmp_path / "." / "a.jsonl")], cfg, "train")
    assert [p.ground_truth for p in loaded.problems] == ["1", "2", "3", "4", "5"]
    assert loaded.sources == [a, str(tmp_path / "b.jsonl")]
    assert any(f"{a}: read once, though named twice (named by {a!r} and by " in w for w in loaded.warnings)
