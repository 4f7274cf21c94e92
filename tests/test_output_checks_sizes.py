"""How big one checkpoint is, as the disk check sizes it (dapo.output_checks.checkpoint_bytes):
files as transformers and the Hub write them (an index of shards holding many tensors each, a
header's __metadata__, a config's dtype under either name), and the copies each kind of run
keeps; and the rotation's room, warned about at its boundary."""

from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pytest
from safetensors.numpy import save_file

from dapo.config import builtin_config_path, load_config
from dapo.output_checks import checkpoint_bytes, output_problems
from tests.test_preflight import fake_model_dir

RECIPE = [builtin_config_path("dapo_recipe")]


def test_a_shard_holding_many_tensors_is_counted_once(tmp_path):
    model = fake_model_dir(tmp_path / "model")
    (model / "model.safetensors").unlink()
    save_file({"w": np.zeros(600, "float32"), "b": np.zeros(400, "float32")}, str(model / "model-00001-of-00001.safetensors"))
    (model / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"w": "model-00001-of-00001.safetensors", "b": "model-00001-of-00001.safetensors"}}))
    assert checkpoint_bytes(load_config(RECIPE, [f"model.path={model}"])) == 3 * 1000 * 4


def test_a_header_s_metadata_is_no_tensor_and_the_rest_is_counted(tmp_path):
    """save_pretrained's files carry {"format": "pt"}: read as a tensor, the file counted 0."""
    model = fake_model_dir(tmp_path / "model")
    save_file({"w": np.zeros(1000, "float32")}, str(model / "model.safetensors"), metadata={"format": "pt"})
    assert checkpoint_bytes(load_config(RECIPE, [f"model.path={model}"])) == 3 * 1000 * 4


@pytest.mark.parametrize("key", ["torch_dtype", "dtype"])  # (transformers 5 writes "dtype")
def test_bin_weights_are_sized_by_the_dtype_their_config_names(tmp_path, key):
    model = fake_model_dir(tmp_path / "model")
    (model / "model.safetensors").unlink()
    (model / "pytorch_model.bin").write_bytes(b"\0" * 2000)  # 1000 bfloat16 weights
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2", key: "bfloat16"}))
    assert checkpoint_bytes(load_config(RECIPE, [f"model.path={model}"])) == 3 * 1000 * 4


@pytest.mark.parametrize(("overrides", "copies"), [
    ([], 3),  # weights and AdamW's two moments
    (["resources.devices_per_node=2", "checkpoint.hf_export=final"], 3),  # the ranks' shards of the same
    (["resources.devices_per_node=2", "checkpoint.hf_export=every"], 4),  # and each checkpoint's gathered export
    (["model.lora_rank=8"], 1),  # the merged weights; the adapters and their moments are small
])
def test_each_kind_of_run_keeps_its_own_copies_of_the_weights(tmp_path, overrides, copies):
    model = fake_model_dir(tmp_path / "model")
    save_file({"w": np.zeros(1000, "float32")}, str(model / "model.safetensors"))
    assert checkpoint_bytes(load_config(RECIPE, [f"model.path={model}", *overrides])) == copies * 1000 * 4


@pytest.mark.parametrize(("free", "warned"), [(24_000, True), (35_999, True), (36_000, False)])
def test_room_for_the_checkpoints_that_coexist_while_the_oldest_rotates_out(tmp_path, monkeypatch, free, warned):
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=free))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert output_problems(tmp_path / "run", 12_000, keep_last=2) == []
    assert any("not the 3 that coexist" in str(w.message) for w in caught) == warned


def test_dapo_eval_s_save_dir_is_named_as_its_option(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert output_problems(blocker, 0, key="--save-dir") == [f"--save-dir={str(blocker)!r} is a file, not a directory"]
    (tmp_path / "gone").symlink_to(tmp_path / "nothing")
    [dangling] = output_problems(tmp_path / "gone" / "eval", 0, key="--save-dir")
    assert dangling.startswith(f"--save-dir={str(tmp_path / 'gone' / 'eval')!r} cannot be made")
