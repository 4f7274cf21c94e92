"""Entries of data.*_files that name several files: a Hugging Face Hub snapshot directory (split
by file or folder names), a directory of shards, a glob; and the errors when they name none."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dapo.config import DataConfig, load_config
from dapo.data import DataError, load_problems
from dapo.data.files import data_files
from dapo.preflight import data_problems


def _dapo_rows(first: int, count: int) -> list[dict]:
    return [{"data_source": "math_dapo", "prompt": [{"role": "user", "content": f"Solve: problem {i}"}],
             "reward_model": {"ground_truth": str(i), "style": "rule"}} for i in range(first, first + count)]


def _parquet(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def test_a_hub_snapshot_reads_its_splits_shards_in_order_and_names_the_shard_of_a_bad_row(tmp_path: Path):
    """hf download --local-dir: data/train-0000k-of-00002.parquet and a test shard,
    with a README and the download's own .cache folder beside them."""
    snapshot = tmp_path / "snapshot"
    _parquet(snapshot / "data" / "train-00001-of-00002.parquet", _dapo_rows(3, 2))
    _parquet(snapshot / "data" / "train-00000-of-00002.parquet", _dapo_rows(0, 3))
    _parquet(snapshot / "data" / "test-00000-of-00001.parquet", _dapo_rows(100, 2))
    _parquet(snapshot / ".cache" / "huggingface" / "train-stale.parquet", _dapo_rows(50, 1))
    (snapshot / "README.md").write_text("# a dataset card\n")
    train = load_problems([str(snapshot)], DataConfig(), "train")
    assert [p.ground_truth for p in train.problems] == ["0", "1", "2", "3", "4"]  # shard 0, then shard 1
    assert [Path(source).name for source in train.sources] == ["train-00000-of-00002.parquet",
                                                               "train-00001-of-00002.parquet"]
    held_out = load_problems([str(snapshot)], DataConfig(), "eval")
    assert [p.ground_truth for p in held_out.problems] == ["100", "101"]

    bad = _dapo_rows(5, 2)
    bad[1]["reward_model"] = {"style": "rule"}  # no ground truth
    _parquet(snapshot / "data" / "train-00001-of-00002.parquet", bad)
    with pytest.raises(DataError, match=r"train-00001-of-00002\.parquet row 1 \(0-based\): missing ground truth"):
        load_problems([str(snapshot)], DataConfig(), "train")


def test_split_folders_and_a_directory_without_splits(tmp_path: Path):
    by_folder = tmp_path / "by_folder"
    (by_folder / "validation").mkdir(parents=True)
    (by_folder / "validation" / "aime.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in _dapo_rows(7, 1)))
    _parquet(by_folder / "train" / "part.parquet", _dapo_rows(0, 1))
    assert [Path(f).name for f in data_files(str(by_folder), "eval")] == ["aime.jsonl"]
    assert [Path(f).name for f in data_files(str(by_folder), "train")] == ["part.parquet"]
    # BytedTsinghua-SIA/DAPO-Math-17k's layout: one file, no split in its name: read for either
    plain = tmp_path / "DAPO-Math-17k"
    _parquet(plain / "data" / "dapo-math-17k.parquet", _dapo_rows(0, 2))
    assert [Path(f).name for f in data_files(str(plain), "train")] == ["dapo-math-17k.parquet"]
    assert len(load_problems([str(plain)], DataConfig(), "eval").problems) == 2


def test_rows_without_a_data_source_are_named_after_their_dataset_not_their_shard(tmp_path: Path):
    """eval/<data_source>/ groups the held-out metrics: a Hub snapshot's two test shards are one
    dataset (before: two groups, "test-00000-of-00002" and "test-00001-of-00002"), and the files
    of a folder of benchmarks are one each."""
    rows = [{k: v for k, v in row.items() if k != "data_source"} for row in _dapo_rows(0, 4)]
    snapshot = tmp_path / "aime-2024"
    _parquet(snapshot / "data" / "test-00000-of-00002.parquet", rows[:2])
    _parquet(snapshot / "data" / "test-00001-of-00002.parquet", rows[2:])
    assert {p.data_source for p in load_problems([str(snapshot)], DataConfig(), "eval").problems} == {"aime-2024"}
    # its validation split is another source (before: merged with the test split's, one eval/aime-2024/)
    _parquet(snapshot / "data" / "validation-00000-of-00001.parquet", rows[:1])
    merged = load_problems([str(snapshot)], DataConfig(), "eval").problems
    assert [p.data_source for p in merged] == ["aime-2024"] * 4 + ["aime-2024-validation"]
    (snapshot / "data" / "validation-00000-of-00001.parquet").unlink()
    glob = str(snapshot / "data" / "test-*.parquet")  # no directory entry: the shards' folder
    assert {p.data_source for p in load_problems([glob], DataConfig(), "eval").problems} == {"data"}
    benchmarks = tmp_path / "benchmarks"
    _parquet(benchmarks / "aime.parquet", rows[:2])
    _parquet(benchmarks / "math500.parquet", rows[2:])
    loaded = load_problems([str(benchmarks)], DataConfig(), "eval")
    assert [p.data_source for p in loaded.problems] == ["aime", "aime", "math500", "math500"]
    _parquet(benchmarks / "aime.parquet", _dapo_rows(0, 2))  # a row's own data_source wins
    assert {p.data_source for p in load_problems([str(benchmarks)], DataConfig(), "eval").problems} == {
        "math_dapo", "math500"}
    # a `datasets` directory named for its split is its dataset's (was "test"), as gsm8k/test.jsonl is
    import datasets

    datasets.Dataset.from_list(rows[:2]).save_to_disk(str(tmp_path / "gsm8k" / "test"))
    datasets.DatasetDict({"test": datasets.Dataset.from_list(rows[:2])}).save_to_disk(str(tmp_path / "math" / "eval"))
    for name in ("gsm8k/test", "math/eval"):
        assert {p.data_source for p in load_problems([str(tmp_path / name)], DataConfig(), "eval").problems} == {
            name.split("/")[0]}


def test_split_words_anywhere_in_a_name_keep_the_splits_apart(tmp_path: Path):
    """`datasets` reads gsm8k_test.parquet as the test split (a split word between separators):
    before, only a name starting with one counted, and both files were read for both splits,
    training on the held-out problems. A file naming no split beside them is left out, and said."""
    folder = tmp_path / "gsm8k"
    _parquet(folder / "gsm8k_train.parquet", _dapo_rows(0, 2))
    _parquet(folder / "gsm8k_test.parquet", _dapo_rows(100, 1))
    _parquet(folder / "math-validation.parquet", _dapo_rows(200, 1))
    _parquet(folder / "contest.parquet", _dapo_rows(300, 1))  # "test" inside a word: no split
    assert [Path(f).name for f in data_files(str(folder), "train")] == ["gsm8k_train.parquet"]
    assert [Path(f).name for f in data_files(str(folder), "eval")] == ["gsm8k_test.parquet", "math-validation.parquet"]
    held_out = load_problems([str(folder)], DataConfig(), "eval")
    assert [p.ground_truth for p in held_out.problems] == ["100", "200"]
    assert any("left out 1 file(s) whose names name no split, e.g. contest.parquet" in w for w in held_out.warnings)


def test_a_datasetdict_without_the_split_is_an_error_naming_what_to_give(tmp_path: Path):
    """Before, a DatasetDict holding only "test" was read as training data."""
    import datasets

    rows = [{"prompt": "1+1?", "reward_model": {"ground_truth": "2"}}]
    datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "aime"))
    assert len(load_problems([str(tmp_path / "aime")], DataConfig(), "eval").problems) == 1
    with pytest.raises(DataError, match=r"none of them the train split .* name its directory: .*aime/test"):
        load_problems([str(tmp_path / "aime")], DataConfig(), "train")
    assert len(load_problems([str(tmp_path / "aime" / "test")], DataConfig(), "train").problems) == 1


def test_a_glob_reads_its_matches_in_sorted_order(tmp_path: Path):
    for index in (2, 0, 1):
        _parquet(tmp_path / "shards" / f"part-{index}.parquet", _dapo_rows(index * 10, 1))
    loaded = load_problems([str(tmp_path / "shards" / "part-*.parquet")], DataConfig(), "train")
    assert [p.ground_truth for p in loaded.problems] == ["0", "10", "20"]


def test_entries_naming_no_file_are_errors_before_and_at_load(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    _parquet(tmp_path / "only_train" / "train.parquet", _dapo_rows(0, 1))
    cases = {
        str(tmp_path / "shards" / "*.parquet"): "the pattern matches no file",
        f"{tmp_path}/a.parquet,{tmp_path}/b.parquet": r"file not found \(several files are a list: \[",
        str(tmp_path / "empty"): r"a directory with no data files \(\.parquet, \.jsonl, \.json, \.csv, \.tsv",
        str(tmp_path / "only_train"): "holds files of the train split\\(s\\) only, none of the eval split",
    }
    for entry, message in cases.items():
        with pytest.raises(DataError, match=message):
            load_problems([entry], DataConfig(), "eval")
    cfg = load_config([], overrides=[f"data.eval_files=[{entry}]" for entry in list(cases)[:1]])
    [problem] = data_problems(cfg.data.eval_files, "data.eval_files")
    assert problem.startswith("data.eval_files: ") and "the pattern matches no file" in problem
    assert data_problems([str(tmp_path / "only_train")], "data.train_files") == []


def test_a_glob_over_both_splits_of_a_snapshot_reads_only_the_splits_own(tmp_path: Path):
    """Before, ``snapshot/**/*.parquet`` as training data read the test shards too: training on
    the held-out problems. A glob whose matches name one split (or none) is read as matched."""
    snapshot = tmp_path / "test_runs" / "snapshot"  # a split word above the pattern names nothing
    _parquet(snapshot / "data" / "train-00000-of-00001.parquet", _dapo_rows(0, 2))
    _parquet(snapshot / "data" / "test-00000-of-00001.parquet", _dapo_rows(100, 1))
    _parquet(snapshot / "data" / "extra.parquet", _dapo_rows(200, 1))
    pattern = str(snapshot / "**" / "*.parquet")
    train = load_problems([pattern], DataConfig(), "train")
    assert sorted(p.ground_truth for p in train.problems) == ["0", "1", "200"]
    assert any("left out 1 file(s) of another split than train, e.g. data/test-00000-of-00001.parquet" in w
               for w in train.warnings)
    assert sorted(p.ground_truth for p in load_problems([pattern], DataConfig(), "eval").problems) == ["100", "200"]
    test_only = str(snapshot / "data" / "test-*.parquet")  # named on purpose: read as matched
    assert [p.ground_truth for p in load_problems([test_only], DataConfig(), "train").problems] == ["100"]
