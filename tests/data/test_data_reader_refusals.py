"""JSON, JSON-array and CSV files a reader must refuse or read as rows (from a mutation audit:
each test kills a mutant the suite let through)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dapo.config import DataConfig
from dapo.data import DataError, load_problems
from dapo.data.readers import rows_of


def test_json_lines_whose_columns_are_all_objects_of_the_same_fields_are_rows_not_one_object(tmp_path: Path) -> None:
    rows = [{"prompt": {"text": "1+1?"}, "answer": {"text": "2"}}, {"prompt": {"text": "2+2?"}, "answer": {"text": "4"}}]
    (tmp_path / "qa.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = load_problems([str(tmp_path / "qa.json")], DataConfig(prompt_key="prompt.text", answer_key="answer.text"),
                           "train")
    assert [(p.prompt, p.ground_truth) for p in loaded.problems] == [("1+1?", "2"), ("2+2?", "4")]

@pytest.mark.parametrize("text, reason", [
    ('[{"question": "1+1?", "answer": 2},]', r"Expecting value at line 1 column 36"),  # (R6) json.loads refuses [x,]
    ('[{"question": "1+1?", "answer": 2}]\n[{"question": "2+2?", "answer": 4}]', r"Extra data at line 2 column 1"),  # (R7)
])
def test_a_json_array_file_that_json_load_refuses_is_refused(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "qa.json"
    path.write_text(text)
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    for lenient in (False, True):  # the second array's row was silently dropped
        with pytest.raises(DataError, match=r"qa\.json: invalid JSON array \(" + reason + r"\)"):
            load_problems([str(path)], DataConfig(prompt_key="question", answer_key="answer", lenient=lenient), "eval")

def test_a_datasetdict_of_only_a_train_split_is_not_read_as_eval_data(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    rows = [{"question": "1+1?", "answer": "2"}]
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "ds"))
    with pytest.raises(DataError, match=r"none of them the eval split"):
        load_problems([str(tmp_path / "ds")], DataConfig(prompt_key="question", answer_key="answer"), "eval")

def test_a_csv_row_error_names_the_headers_own_line(tmp_path: Path) -> None:
    path = tmp_path / "qa.csv"
    path.write_text("\n\nquestion,answer\n1+1?\n")
    with pytest.raises(DataError, match=r"qa\.csv line 4: 1 fields, the header \(line 3\) has 2"):
        load_problems([str(path)], DataConfig(prompt_key="question", answer_key="answer"), "train")

def test_a_quote_never_closed_in_the_csv_header_stops_the_file_even_when_lenient(tmp_path: Path) -> None:
    path = tmp_path / "qa.csv"
    path.write_text('question,"answer\n1+1?,2\n2+2?,4\n')
    with pytest.raises(DataError, match=r"qa\.csv line 1: a quoted field opened on this line is never closed, "
                                        r"so lines 1-3"):
        list(rows_of(str(path), "train"))
