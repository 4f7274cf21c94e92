"""Parquet batches read a column at a time (dapo.data.columnar) load exactly what the row-wise
reading loads: the same problems in the same order, every field, the same counts, warnings and
errors, on files holding the cases that reading handles one row at a time."""

from __future__ import annotations

import gc
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dapo.data.columnar as columnar
from dapo.config import DataConfig
from dapo.data import DataError, load_problems

_MESSAGE = pa.struct([("content", pa.string()), ("role", pa.string()), ("name", pa.string())])
DAPO_SCHEMA = pa.schema([
    ("data_source", pa.string()),
    ("prompt", pa.list_(_MESSAGE)),
    ("ability", pa.string()),
    ("reward_model", pa.struct([("ground_truth", pa.string()), ("style", pa.string())])),
    ("extra_info", pa.struct([("index", pa.int64()), ("tags", pa.list_(pa.string())), ("score", pa.float32()),
                              ("flag", pa.bool_()), ("note", pa.string()), ("weight", pa.float64())])),
])


def _chat(*messages: str, role: str = "user", name: str | None = None) -> list[dict[str, Any]]:
    """One message per text, each of ``role`` but a first of several, which is the system's."""
    roles = ["system"] * (len(messages) - 1) + [role] if len(messages) > 1 else [role]
    return [{"content": text, "role": r, "name": name} for r, text in zip(roles, messages)]


def _row(prompt: Any, answer: Any, source: Any = "math", index: int = 0, info: bool = True) -> dict[str, Any]:
    return {
        "data_source": source, "prompt": prompt, "ability": "MATH",
        "reward_model": None if answer is _NO_STRUCT else {"ground_truth": answer, "style": "rule"},
        "extra_info": {"index": index, "tags": ["a", str(index)] if index % 2 else [], "score": 0.3 * index,
                       "flag": index % 3 == 0, "note": None if index % 2 else f"n{index}",
                       "weight": None if index == 5 else index / 7} if info else None,
    }


_NO_STRUCT = object()
# 4 rows a batch (the tests set readers._PARQUET_BATCH_ROWS): 0-7 load, 8-19 hold malformed rows
TRICKY_ROWS = [
    _row(_chat("What is 1+1?"), "2", index=0),
    _row(_chat("Be brief.", "What is 2+2?"), "4", source=None, index=1),  # two messages; no data_source
    _row(_chat("What is 1+1?"), "2", source="", index=2, info=False),  # a copy, its answer; empty source; null struct
    _row(_chat("What is 3+3?", name="bob"), " 6 ", index=3),  # a message's other field; an answer to strip
    _row(_chat("What is 1+1?"), "3", source="other", index=4),  # a copy with another answer, another source
    _row(_chat("Be brief.", "What is 2+2?"), "4", index=5),
    _row(_chat("∫ x dx, für ü"), "x^2/2", index=6),
    _row(_chat("∫ x dx, für ü"), "x²/2", index=7),  # another answer than its first copy, in its batch
    _row(None, "1", index=8),  # malformed: a null prompt
    _row(_chat("What is 4+4?"), "8", index=9),
    _row(_chat("What is 5+5?"), _NO_STRUCT, index=10),  # malformed: no reward_model
    _row(_chat("What is 6+6?"), "  ", index=11),  # malformed: an empty answer
    _row([], "1", index=12),  # malformed: no messages
    _row(_chat("hi", "hello", role="assistant"), "1", index=13),  # malformed: ends with the assistant's
    _row(_chat("   "), "1", index=14),  # malformed: only blanks
    _row(_chat("What is 4+4?"), "8", index=15),
    _row([{"content": None, "role": "user", "name": None}], "1", index=16),  # malformed: null content
    _row(_chat("What is 7+7?"), None, index=17),  # malformed: a null answer
    _row(_chat("What is 8+8?"), "16", index=18),
    _row(_chat("What is 1+1?"), "2", index=19),
]


def _outcome(files: list[str], cfg: DataConfig, split: str) -> Any:
    """Everything a load gives: its problems' fields (where included), counts and warnings, or its error."""
    try:
        loaded = load_problems(files, cfg, split)
    except DataError as error:
        return f"DataError: {error}"
    problems = [(p.uid, p.prompt, p.ground_truth, p.data_source, p.extra, p.verbatim, p.where) for p in loaded.problems]
    return problems, {k: v for k, v in vars(loaded).items() if k != "problems"}


def _both_readings(monkeypatch: pytest.MonkeyPatch, files: list[str], cfg: DataConfig, split: str) -> tuple[Any, Any, int]:
    """The outcome read a column at a time where it can, the outcome read row by row, and how
    many batches the columnar reading took."""
    taken = []
    check = columnar.ColumnarReader.__call__

    def counting(reader: columnar.ColumnarReader, batch: pa.RecordBatch, start: int) -> Any:
        rows = check(reader, batch, start)
        taken.append(rows is not None)
        return rows

    with monkeypatch.context() as patched:
        patched.setattr(columnar.ColumnarReader, "__call__", counting)
        fast = _outcome(files, cfg, split)
    with monkeypatch.context() as patched:
        patched.setattr("dapo.data.loaders._columnar_reader", lambda *_: None)
        row_by_row = _outcome(files, cfg, split)
    return fast, row_by_row, sum(taken)


@pytest.mark.parametrize("lenient", [True, False])
@pytest.mark.parametrize(("split", "dedup"), [("train", True), ("train", False), ("eval", True)])
def test_dapo_schema_with_tricky_rows_loads_as_row_by_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, split: str, dedup: bool, lenient: bool
) -> None:
    monkeypatch.setattr("dapo.data.readers._PARQUET_BATCH_ROWS", 4)
    path = tmp_path / "dapo.parquet"
    pq.write_table(pa.Table.from_pylist(TRICKY_ROWS, schema=DAPO_SCHEMA), path)
    clean = tmp_path / "clean.parquet"  # a second file: the memo and the answers of the first hold
    pq.write_table(pa.Table.from_pylist(TRICKY_ROWS[:8] + TRICKY_ROWS[18:], schema=DAPO_SCHEMA), clean)
    cfg = DataConfig(dedup_train=dedup, lenient=lenient)
    fast, row_by_row, columnar_batches = _both_readings(monkeypatch, [str(path), str(clean)], cfg, split)
    assert fast == row_by_row
    assert columnar_batches == (2 if not lenient else 5)  # (strict: the first malformed row stops it)
    if lenient:
        problems, counts = fast
        assert counts["num_malformed_skipped"] == 8 and counts["num_conflicting_duplicates"] > 0
        assert {p[3] for p in problems} == {"math", "dapo"} | ({"other", "clean"} if split == "eval" or not dedup else set())
    else:
        assert fast.startswith(f"DataError: {path} row 8 (0-based): missing prompt at 'prompt' (null)")


def test_copies_share_their_first_copys_prompt_object(tmp_path: Path) -> None:
    path = tmp_path / "dapo.parquet"
    pq.write_table(pa.Table.from_pylist(TRICKY_ROWS[:8], schema=DAPO_SCHEMA), path)
    loaded = load_problems([str(path)], DataConfig(dedup_train=False), "train")
    assert loaded.problems[0].prompt is loaded.problems[2].prompt is loaded.problems[4].prompt
    assert loaded.problems[0].extra["ability"] is loaded.problems[1].extra["ability"]  # (one object a batch)


@pytest.mark.parametrize(("answers", "columnar_batches"), [
    (pa.array([0.3, 2.0, 1e-5, 0.3, 7.0, 1.5], pa.float32()), 2),
    (pa.array([0.3, 2.0, 1e-5, 0.3, float("nan"), 1.5], pa.float64()), 1),  # nan: malformed
    (pa.array([3, 2, 10**18, 3, None, 1], pa.int64()), 1),  # a null: malformed
    (pa.array(["3", "2", "x", "3", "", "1"], pa.large_string()), 1),  # "": malformed
    (pa.array([True, False, True, True, False, True]), 0),  # a bool: not an answer
])
def test_text_prompts_and_number_answers_load_as_row_by_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answers: pa.Array, columnar_batches: int
) -> None:
    monkeypatch.setattr("dapo.data.readers._PARQUET_BATCH_ROWS", 3)
    questions = pa.array(["What is x?", '[{"role": "user", "content": "chat as JSON text"}]', "[not chat] y?",
                          "What is x?", "z?", "What is x?"], pa.large_string())
    sources = pa.array([1, None, 2, 1, 3, 1], pa.int32())
    path = tmp_path / "qa.parquet"
    pq.write_table(pa.table({"question": questions, "answer": answers, "source": sources}), path)
    for split in ("train", "eval"):
        for lenient in (True, False):
            cfg = DataConfig(prompt_key="question", answer_key="answer", data_source_key="source", lenient=lenient)
            fast, row_by_row, taken = _both_readings(monkeypatch, [str(path)], cfg, split)
            assert fast == row_by_row
            assert taken == columnar_batches


@pytest.mark.parametrize(("keys", "columnar_batches"), [
    ({"answer_key": "reward_model.answer"}, 0),  # a field no struct has: "set data.answer_key"
    ({"prompt_key": "question"}, 0),  # a column the file does not have
    ({"answer_key": "ability.ground_truth"}, 0),  # a path through a text column
    ({"data_source_key": "extra_info.note"}, 1),  # a data source in a struct, null in the second batch
    ({"answer_key": "reward_model"}, 0),  # a struct as the answer: the wrong type
    ({"answer_key": "extra_info.index", "data_source_key": "extra_info.missing"}, 1),
])
def test_keys_the_rows_lack_fail_or_load_as_row_by_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keys: dict[str, str], columnar_batches: int
) -> None:
    monkeypatch.setattr("dapo.data.readers._PARQUET_BATCH_ROWS", 4)
    path = tmp_path / "dapo.parquet"
    rows = [row for row in TRICKY_ROWS[:8] if row["extra_info"] is not None] + [TRICKY_ROWS[2]]
    pq.write_table(pa.Table.from_pylist(rows, schema=DAPO_SCHEMA), path)
    for lenient in (True, False):
        cfg = replace(DataConfig(lenient=lenient), **keys)
        fast, row_by_row, taken = _both_readings(monkeypatch, [str(path)], cfg, "eval")
        assert fast == row_by_row and taken == columnar_batches


def test_a_data_source_in_a_mappings_text_loads_as_row_by_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """data.data_source_key=meta.source through a column of JSON text: the row-wise reading parses
    the text, and the columnar one took the key for missing, so every row's source was the file's
    name (per-source eval metrics wrong), and one malformed row in a batch flipped its rows back."""
    import json

    sources = ["amc", "aime", "amc", "aime", "amc", "aime"]
    path = tmp_path / "meta.parquet"
    pq.write_table(pa.table({"prompt": [f"What is {i}+1?" for i in range(6)], "answer": [str(i + 1) for i in range(6)],
                             "meta": [json.dumps({"source": source}) for source in sources]}), path)
    cfg = DataConfig(prompt_key="prompt", answer_key="answer", data_source_key="meta.source")
    fast, row_by_row, _ = _both_readings(monkeypatch, [str(path)], cfg, "eval")
    assert fast == row_by_row and [problem[3] for problem in fast[0]] == sources


def test_invalid_utf8_part_way_is_a_malformed_row_named_either_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parquet does not check UTF-8: a bad string in the second batch's ``ability`` is that row's
    error (row 5), the same whether the batch is read a column at a time or row by row; a lenient
    load skips it and reads the rest."""
    monkeypatch.setattr("dapo.data.readers._PARQUET_BATCH_ROWS", 4)
    rows = TRICKY_ROWS[:8]
    table = pa.Table.from_pylist(rows, schema=DAPO_SCHEMA)
    raw = pa.array([b"MATH"] * 5 + [b"\xff\xfe"] + [b"MATH"] * 2, pa.binary())
    bad = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())
    path = tmp_path / "bad.parquet"
    pq.write_table(table.set_column(2, "ability", bad), path)
    for lenient in (True, False):
        fast, row_by_row, _ = _both_readings(monkeypatch, [str(path)], DataConfig(lenient=lenient), "train")
        assert fast == row_by_row
        if lenient:
            lenient_load = fast
    assert "bad.parquet row 5 (0-based): undecodable bytes in a string column, not UTF-8" in str(fast)
    good = tmp_path / "good.parquet"
    pq.write_table(table, good)
    _, counts = lenient_load
    _, good_counts = _outcome([str(good)], DataConfig(lenient=True), "train")
    assert counts["num_malformed_skipped"] == good_counts["num_malformed_skipped"] + 1


@pytest.mark.parametrize("array", [
    pa.array([{"a": 1, "b": "x", "c": [1, 2]}, None, {"a": None, "b": None, "c": None}, {"a": 4, "b": "x", "c": []}]),
    pa.array([0.3, 1e-7, -0.0], pa.float32()),
    pa.array([1, None, 3], pa.int8()),
    pa.array([True, False, None]),
    pa.array(["é", None, "é", ""], pa.large_string()),
    pa.array([{"s": {"t": "deep", "u": 2**63 - 1}}, {"s": None}], pa.struct([("s", pa.struct([("t", pa.string()),
                                                                                            ("u", pa.uint64())]))])),
])
def test_python_values_are_to_pylists(array: pa.Array) -> None:
    for piece in (array, array.slice(1), array.slice(1, 2)):  # (a batch may be a slice of its arrays)
        values = columnar.python_values(piece)
        assert values == piece.to_pylist()
        assert [type(value) for value in values] == [type(value) for value in piece.to_pylist()]


def test_the_garbage_collector_is_as_it_was_after_a_load(tmp_path: Path) -> None:
    path = tmp_path / "dapo.parquet"
    pq.write_table(pa.Table.from_pylist(TRICKY_ROWS[:8], schema=DAPO_SCHEMA), path)
    assert gc.isenabled()
    load_problems([str(path)], DataConfig(), "train")
    assert gc.isenabled()
    with pytest.raises(DataError):
        load_problems([str(path)], DataConfig(prompt_key="question"), "train")
    assert gc.isenabled()
    gc.disable()
    try:
        load_problems([str(path)], DataConfig(), "train")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_reward_functions_read_the_data_source_and_prompt_columns_by_their_own_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """data.data_source_key=src: a reward function's extra has "src" (the row's value, as TRL
    passes every column by its name) beside "data_source"; it had only the latter. Columnar and
    row-by-row readings agree."""
    from dapo.rewards.start_checks import function_extra

    path = tmp_path / "qa.parquet"
    pq.write_table(pa.table({"question": ["1+1?", "2+2?"], "answer": ["2", "4"], "src": [7, None],
                             "level": [1, 2]}), path)
    cfg = DataConfig(prompt_key="question", answer_key="answer", data_source_key="src")
    fast, row_by_row, taken = _both_readings(monkeypatch, [str(path)], cfg, "train")
    assert fast == row_by_row and taken == 1
    problems = load_problems([str(path)], cfg, "train").problems
    extras = [function_extra(p.extra, p.data_source, p.prompt) for p in problems]
    assert extras == [{"prompt": "1+1?", "question": "1+1?", "answer": "2", "src": 7, "level": 1, "data_source": "7"},
                      {"prompt": "2+2?", "question": "2+2?", "answer": "4", "src": None, "level": 2,
                       "data_source": "qa"}]
    # the DAPO-Math names: the problem's own prompt and data source, once
    pq.write_table(pa.table({"prompt": ["1+1?"], "answer": ["2"], "data_source": [None]}), path)
    problem = load_problems([str(path)], DataConfig(prompt_key="prompt", answer_key="answer"), "train").problems[0]
    assert function_extra(problem.extra, problem.data_source, problem.prompt) == {
        "prompt": "1+1?", "answer": "2", "data_source": "qa"}
