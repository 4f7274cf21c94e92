"""The held-out files' column settings (data.eval_*_key): documented, set and nulled as the others."""

from __future__ import annotations

import pytest

from dapo.config import load_config
from dapo.config.explain import explain


@pytest.mark.parametrize(("key", "words"), [("data.eval_prompt_key", "data.prompt_key"),
                                            ("data.eval_answer_key", "data.answer_key"),
                                            ("data.eval_data_source_key", "data.data_source_key")])
def test_eval_keys_explain_and_default_to_the_data_keys(key: str, words: str) -> None:
    cfg = load_config([], [])
    text = explain(cfg, key)
    assert text.splitlines()[0] == f"{key} (str | None) = None" and words in text and "eval_files" in text
    field = key.split(".")[1]
    assert getattr(load_config([], [f"{key}=question"]).data, field) == "question"
    assert getattr(load_config([], [f"{key}=question", f"{key}=null"]).data, field) is None
