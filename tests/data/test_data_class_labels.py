"""A `datasets` ClassLabel answer (MMLU's A/B/C/D) loads as its name, not its index: read as the
index, the ground truth "2" scored every response "C" wrong, unsaid."""

from __future__ import annotations

import gzip
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dapo.config import DataConfig
from dapo.data import load_problems
from dapo.data.class_labels import Items, label_names, named_batch

FEATURES = datasets.Features({
    "question": datasets.Value("string"),
    "answer": datasets.ClassLabel(names=["A", "B", "C", "D"]),
    "reward_model": {"ground_truth": datasets.ClassLabel(names=["yes", "no"]), "style": datasets.Value("string")},
    "subject": datasets.ClassLabel(names=["algebra", "geometry"]),
})
ROWS = {
    "question": [f"question {i}" for i in range(6)],
    "answer": [2, 0, 3, 1, 2, 0],
    "reward_model": [{"ground_truth": i % 2, "style": "rule"} for i in range(6)],
    "subject": [0, 1, 0, 1, 0, 1],
}


def _loaded(path: Path, answer_key: str, split: str = "train", **keys: str) -> list[tuple[str, str, object]]:
    cfg = DataConfig(prompt_key="question", answer_key=answer_key, data_source_key="subject", lenient=True, **keys)
    return [(p.ground_truth, p.data_source, p.extra["answer"]) for p in load_problems([str(path)], cfg, split).problems]


@pytest.mark.parametrize("form", ["parquet", "parquet.gz", "save_to_disk", "DatasetDict"])
def test_a_class_label_column_loads_as_its_names(tmp_path: Path, form: str) -> None:
    dataset = datasets.Dataset.from_dict(ROWS, features=FEATURES)
    if form.startswith("parquet"):
        path = tmp_path / "mmlu.parquet"
        dataset.to_parquet(str(path))  # (the Hub's parquet files: the features in the schema's metadata)
        assert b"huggingface" in pq.read_schema(path).metadata
        if form == "parquet.gz":
            path.with_suffix(".parquet.gz").write_bytes(gzip.compress(path.read_bytes()))
            path = path.with_suffix(".parquet.gz")
    elif form == "save_to_disk":
        dataset.save_to_disk(str(path := tmp_path / "mmlu"))
    else:
        datasets.DatasetDict({"test": dataset}).save_to_disk(str(path := tmp_path / "mmlu"))
    split = "eval" if form == "DatasetDict" else "train"
    expected_sources = ["algebra", "geometry"] * 3
    assert _loaded(path, "answer", split) == [
        (name, source, name) for name, source in zip("CADBCA", expected_sources)
    ]
    assert [truth for truth, _, _ in _loaded(path, "reward_model.ground_truth", split)] == ["yes", "no"] * 3


def test_a_row_without_a_label_is_a_null_answer(tmp_path: Path) -> None:
    """-1 is `datasets`' "no label": a missing answer (skipped where lenient), not the answer "-1"."""
    rows = {**ROWS, "answer": [2, -1, 3, 1, 2, 0]}
    datasets.Dataset.from_dict(rows, features=FEATURES).to_parquet(str(path := tmp_path / "mmlu.parquet"))
    cfg = DataConfig(prompt_key="question", answer_key="answer", lenient=True)
    loaded = load_problems([str(path)], cfg, "train")
    assert [p.ground_truth for p in loaded.problems] == ["C", "D", "B", "C", "A"]
    assert loaded.warnings == [f"skipped: {path} row 1 (0-based): missing ground truth at 'answer' (null)"]


def test_an_integer_column_without_labels_stays_a_number(tmp_path: Path) -> None:
    features = datasets.Features({"question": datasets.Value("string"), "answer": datasets.Value("int64")})
    datasets.Dataset.from_dict({"question": ["1+1?"], "answer": [2]}, features=features).to_parquet(
        str(path := tmp_path / "plain.parquet"))
    cfg = DataConfig(prompt_key="question", answer_key="answer")
    assert [p.ground_truth for p in load_problems([str(path)], cfg, "train").problems] == ["2"]


@pytest.mark.parametrize("form", ["parquet", "save_to_disk"])
def test_a_list_of_labels_reads_as_a_list_of_names(tmp_path: Path, form: str) -> None:
    """A multi-label column (Sequence(ClassLabel)), top level, in a struct, or in a list of structs,
    reaches a reward function's extra fields as names: read as indices, a function comparing a
    response's topics with them scored every sample wrong."""
    topics = datasets.ClassLabel(names=["algebra", "geometry", "number theory"])
    features = datasets.Features({
        "question": datasets.Value("string"), "answer": datasets.Value("string"),
        "topics": datasets.Sequence(topics),
        "meta": {"tags": datasets.List(topics), "votes": datasets.List({"label": topics})},
    })
    rows = {"question": ["q0", "q1", "q2"], "answer": ["1", "2", "3"], "topics": [[2, 0], [], [1, -1]],
            "meta": [{"tags": [1], "votes": [{"label": 0}, {"label": 2}]}, {"tags": [], "votes": []},
                     {"tags": [0, 2], "votes": [{"label": 1}]}]}
    dataset = datasets.Dataset.from_dict(rows, features=features)
    if form == "parquet":
        dataset.to_parquet(str(path := tmp_path / "topics.parquet"))
    else:
        dataset.save_to_disk(str(path := tmp_path / "topics"))
    cfg = DataConfig(prompt_key="question", answer_key="answer")
    extras = [p.extra for p in load_problems([str(path)], cfg, "train").problems]
    assert [extra["topics"] for extra in extras] == [["number theory", "algebra"], [], ["geometry", None]]
    assert [extra["meta"] for extra in extras] == [
        {"tags": ["geometry"], "votes": [{"label": "algebra"}, {"label": "number theory"}]},
        {"tags": [], "votes": []},
        {"tags": ["algebra", "number theory"], "votes": [{"label": "geometry"}]},
    ]


def test_a_slice_of_a_batch_names_its_own_rows() -> None:
    """A list column's offsets and values index the whole child array: a slice (a later batch of
    a file) names its own rows' labels, and a null list stays null."""
    batch = pa.RecordBatch.from_pydict({"topics": pa.array([[0], [1, 1], None, [0, 1]], pa.list_(pa.int64()))})
    named = named_batch(batch.slice(1, 3), {"topics": Items(["yes", "no"])})
    assert named.column(0).to_pylist() == [["no", "no"], None, ["yes", "no"]]
    assert label_names({"old": {"_type": "Sequence", "feature": {"k": {"_type": "ClassLabel", "names": ["a"]}}}}) \
        == {"old": {"k": Items(["a"])}}  # datasets < 4's Sequence of a dict: a dict of lists
