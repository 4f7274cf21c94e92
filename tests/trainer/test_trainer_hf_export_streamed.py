"""The streamed Hugging Face export (what a sharded policy's rank 0 writes, one gathered tensor at a
time), in one process: laid out as save_pretrained lays it out, one file or several under an index,
and loaded by from_pretrained to the same weights, a tied output layer included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from dapo.rollout.base import tied_duplicates
from dapo.trainer.hf_export import save_hf_model_streamed


@pytest.mark.parametrize("max_file_bytes", [2**40, 16_000])
def test_a_streamed_export_loads_to_the_same_weights(tiny_model_dir: Path, tmp_path: Path, max_file_bytes: int) -> None:
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.01)  # trained: not the weights on disk
    skipped = tied_duplicates(model)
    weights = ((name, tensor) for name, tensor in model.state_dict().items() if name not in skipped)
    save_hf_model_streamed(tmp_path / "export", model, tokenizer, weights, max_file_bytes)
    files = sorted(p.name for p in (tmp_path / "export").glob("*.safetensors"))
    assert not list((tmp_path / "export").glob(".part-*"))
    if max_file_bytes > 2**30:
        assert files == ["model.safetensors"]
    else:
        index = json.loads((tmp_path / "export" / "model.safetensors.index.json").read_text())
        assert len(files) > 1 and set(index["weight_map"].values()) == set(files)
        assert set(index["weight_map"]) == {name for name in model.state_dict() if name not in skipped}
        assert files[0] == f"model-00001-of-{len(files):05d}.safetensors"
        total = sum(t.numel() * t.element_size() for n, t in model.state_dict().items() if n not in skipped)
        assert index["metadata"]["total_size"] == total
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "export")
    expected = model.state_dict()
    for name, tensor in loaded.state_dict().items():
        torch.testing.assert_close(tensor, expected[name], rtol=0, atol=0, msg=name)
