"""A damaged weights file, and a policy that diverged, said in one line (a multi-rank audit found a
35-60-line traceback for each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dapo.cli.main import main
from dapo.errors import DamagedWeightsError, NonFiniteError, UserError
from tests.trainer.conftest import make_tiny_model


def _truncate(file: Path) -> None:
    with file.open("r+b") as handle:
        handle.truncate(file.stat().st_size // 2)  # an interrupted download or copy


def _eval_args(tmp_path: Path, model: Path) -> list[str]:
    eval_file = tmp_path / "eval.jsonl"
    eval_file.write_text('{"prompt": "1 + 1 =", "answer": "2"}\n')
    return ["eval", str(model), "default", f"data.eval_files=[{eval_file}]", "data.answer_key=answer",
            "--save-dir", str(tmp_path / "evaluation")]


def test_a_truncated_weights_file_is_named_in_one_line(tmp_path, capsys):
    model = make_tiny_model(tmp_path / "model")
    _truncate(model / "model.safetensors")
    assert main(_eval_args(tmp_path, model)) == 2
    err = capsys.readouterr().err
    assert f"dapo eval: error: cannot read the weights of {model}: model.safetensors is damaged or incomplete" in err
    assert "Traceback (most recent call last)" not in err


def test_a_truncated_tokenizer_file_is_said_in_one_line(tmp_path, capsys):
    """An interrupted copy of tokenizer.json raised a JSONDecodeError, with a traceback."""
    model = make_tiny_model(tmp_path / "model")
    _truncate(model / "tokenizer.json")
    assert main(_eval_args(tmp_path, model)) == 2
    err = capsys.readouterr().err
    assert f"dapo eval: error: cannot read the tokenizer of {model} (JSONDecodeError: " in err
    assert "is damaged or incomplete (an interrupted download or copy?)" in err and "Traceback" not in err


def test_a_truncated_checkpoint_file_is_named(tmp_path):
    from transformers import AutoModelForCausalLM

    from dapo.trainer.checkpoint import load_model_weights

    model_dir = make_tiny_model(tmp_path / "model")
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    _truncate(model_dir / "model.safetensors")
    with pytest.raises(DamagedWeightsError, match=rf"cannot read {model_dir / 'model.safetensors'}: damaged or incomplete"):
        load_model_weights(model, model_dir)


def test_a_diverged_policy_is_said_in_one_line(tmp_path, capsys, monkeypatch):
    """The native engine's non-finite logits: a RuntimeError (as before) that the command says as a user error."""
    import dapo.trainer

    def diverged(*args, **kwargs):
        raise NonFiniteError("the policy's next-token logits were not finite (row 0 of the batch): the weights may "
                             "have diverged (NaN or inf)")

    assert issubclass(NonFiniteError, RuntimeError) and issubclass(NonFiniteError, UserError)
    monkeypatch.setattr(dapo.trainer, "evaluate_model", diverged)
    assert main(_eval_args(tmp_path, make_tiny_model(tmp_path / "model"))) == 2
    err = capsys.readouterr().err
    assert ("dapo eval: error: the policy's next-token logits were not finite (row 0 of the batch): the weights may "
            "have diverged (NaN or inf)\n") in err and "Traceback (most recent call last)" not in err
