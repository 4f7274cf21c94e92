"""The data summary `dapo train` / `dapo eval` print says what happened to the rows, in words that
match it (found by a user-journey audit)."""

from __future__ import annotations

import json
from pathlib import Path

from dapo.config import DataConfig
from dapo.data import load_problems

KEYS = dict(prompt_key="question", answer_key="answer")


def _write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_an_eval_files_copies_are_said_to_be_evaluated_once_not_zero_dropped(tmp_path):
    rows = [{"question": "1 + 1", "answer": "2"}, {"question": "1 + 1", "answer": "2"},
            {"question": "2 + 2", "answer": "4"}, {"question": "2 + 2", "answer": "5"}]
    loaded = load_problems([_write_jsonl(tmp_path / "eval.jsonl", rows)], DataConfig(**KEYS), "eval")
    line = loaded.describe("eval")
    assert "2 problems from" in line and "(4 rows; 2 repeated prompts evaluated once;" in line
    assert "warning: 1 copy of a prompt had another answer than its first copy" in line
    train = load_problems([_write_jsonl(tmp_path / "train.jsonl", rows)], DataConfig(**KEYS), "train")
    assert "2 duplicate prompts dropped" in train.describe("train")
    assert "dropped); the first 1 evaluated (eval.max_problems)\n" in loaded.describe("eval", max_problems=1)
    assert "evaluated (eval.max_problems)" not in loaded.describe("eval", max_problems=2)  # leaves none out
    # the logged count says the same (it was 0 for an eval file whatever its copies: metrics audit)
    assert loaded.counts("eval")["data/eval_duplicates_dropped"] == 2 == train.counts("train")["data/train_duplicates_dropped"]


def test_a_row_skipped_in_lenient_mode_is_not_told_to_set_lenient(tmp_path):
    rows = [{"question": "1 + 1", "answer": "2"}, {"question": "2 + 2"}]
    path = _write_jsonl(tmp_path / "eval.jsonl", rows)
    loaded = load_problems([path], DataConfig(**KEYS, lenient=True), "eval")
    assert loaded.num_malformed_skipped == 1
    assert "fix or drop this row)" in loaded.warnings[0] and "data.lenient" not in loaded.warnings[0]
