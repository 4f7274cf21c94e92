"""data.eval_prompt_key / eval_answer_key / eval_data_source_key: the held-out files' own columns
(train on DAPO-Math-17K's prompt and reward_model.ground_truth, evaluate on a question/answer
file). Before, data.prompt_key applied to every file, and the eval file's error advised setting
it, which then broke the training files."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dapo.config import DataConfig, load_config
from dapo.data import DataError, load_problems


def _files(tmp_path: Path) -> tuple[str, str, str]:
    train = tmp_path / "dapo-math.parquet"
    pq.write_table(pa.Table.from_pylist([
        {"data_source": "math_dapo", "prompt": [{"role": "user", "content": f"Solve {i}"}],
         "reward_model": {"ground_truth": str(i), "style": "rule"}} for i in range(3)]), train)
    held_out = tmp_path / "qa.jsonl"
    held_out.write_text("".join(json.dumps({"question": f"{i} + 1?", "answer": i + 1, "bench": "mine"}) + "\n"
                                for i in range(2)))
    csv = tmp_path / "qa.csv"  # the row-wise reading of another type, and a parquet's columnar one above
    csv.write_text("question,answer,bench\n5 + 1?,6,mine\n")
    return str(train), str(held_out), str(csv)


def test_train_and_eval_files_of_two_schemas_load_each_with_its_keys(tmp_path: Path) -> None:
    train, held_out, csv = _files(tmp_path)
    cfg = DataConfig(eval_prompt_key="question", eval_answer_key="answer", eval_data_source_key="bench")
    assert [p.ground_truth for p in load_problems([train], cfg, "train").problems] == ["0", "1", "2"]
    loaded = load_problems([held_out, csv], cfg, "eval")
    assert [(p.prompt, p.ground_truth, p.data_source) for p in loaded.problems] == [
        ("0 + 1?", "1", "mine"), ("1 + 1?", "2", "mine"), ("5 + 1?", "6", "mine")]
    # reward functions read the columns by their names too, as with data.*_key's
    assert loaded.problems[0].extra == {"question": "0 + 1?", "answer": 1, "bench": "mine"}
    # eval keys are the held-out files' only: the training files keep data.*_key
    swapped = DataConfig(prompt_key="question", answer_key="answer", eval_prompt_key="prompt",
                         eval_answer_key="reward_model.ground_truth")
    assert len(load_problems([held_out], swapped, "train").problems) == 2
    assert len(load_problems([train], swapped, "eval").problems) == 3
    # null: the data.* key, for both splits
    same = DataConfig(prompt_key="question", answer_key="answer")
    assert len(load_problems([held_out], same, "eval").problems) == 2


def test_an_eval_file_missing_its_key_names_the_eval_setting(tmp_path: Path) -> None:
    train, held_out, _ = _files(tmp_path)
    with pytest.raises(DataError, match=r"qa\.jsonl line 1: missing prompt at 'prompt' \(row has keys "
                                        r"\['answer', 'bench', 'question'\]; set data\.eval_prompt_key\)$"):
        load_problems([held_out], DataConfig(), "eval")
    with pytest.raises(DataError, match=r"missing ground truth at 'reward_model\.ground_truth' .*; "
                                        r"set data\.eval_answer_key\)$"):
        load_problems([held_out], DataConfig(eval_prompt_key="question"), "eval")
    with pytest.raises(DataError, match=r"set data\.prompt_key\)$"):  # a training file: the data.* key
        load_problems([held_out], DataConfig(), "train")


@pytest.mark.parametrize("key", ["eval_prompt_key", "eval_answer_key"])
def test_an_empty_eval_key_is_a_config_error(key: str) -> None:
    from dapo.config import ConfigError

    with pytest.raises(ConfigError, match=rf"data\.{key} is empty"):
        load_config([], [f"data.{key}= "])
