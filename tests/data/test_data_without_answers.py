"""data.answer_key=null: rows without a ground truth (a TRL dataset of prompts, judged by reward
functions alone). Every file form reads them, parquet's columnar path and the row-wise one alike;
a named answer column that a file lacks is still an error, never an empty ground truth."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dapo.config import ConfigError, DataConfig, load_config
from dapo.data import DataError, load_problems

ROWS = [{"prompt": "Write a haiku", "topic": "sea"}, {"prompt": "Write a limerick", "topic": "cat"}]


def _files(tmp_path: Path) -> dict[str, Path]:
    jsonl = tmp_path / "prompts.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    parquet = tmp_path / "prompts.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), parquet)
    return {"jsonl": jsonl, "parquet": parquet}


@pytest.mark.parametrize("form", ["jsonl", "parquet"])
def test_rows_without_a_ground_truth_load_with_answer_key_null(tmp_path: Path, form: str) -> None:
    path = _files(tmp_path)[form]
    loaded = load_problems([str(path)], DataConfig(train_files=[str(path)], answer_key=None), split="train")
    assert [(p.prompt, p.ground_truth, p.extra) for p in loaded.problems] == [
        ("Write a haiku", "", {"topic": "sea"}), ("Write a limerick", "", {"topic": "cat"})]
    # the default answer column, which these files lack: an error naming the way out, not "" answers
    with pytest.raises(DataError, match=r"missing ground truth at 'reward_model.ground_truth' .*set data.answer_key, "
                                        r"or data.answer_key=null where the rows have no ground truth"):
        load_problems([str(path)], DataConfig(train_files=[str(path)]), split="train")


def test_answer_key_null_needs_the_verifier_off() -> None:
    """The built-in verifier judges each response against its ground truth: with none, every
    response would be wrong."""
    with pytest.raises(ConfigError, match=r"data.answer_key=null reads rows without a ground truth, .* set "
                                          r"reward.verifier_weight=0"):
        load_config([], ["data.answer_key=null"])
    cfg = load_config([], ["data.answer_key=null", "reward.verifier_weight=0",
                           "reward.functions=[{path: 'rewards.py:fmt'}]"])
    assert cfg.data.answer_key is None
    with pytest.raises(ConfigError, match=r"data.answer_key is empty: .*or null for rows without one"):
        load_config([], ["data.answer_key=' '"])
