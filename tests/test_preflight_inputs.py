"""Preflight (dapo.preflight) at the boundaries of what it refuses: a reward file read, not
imported, that binds its function in a way Python accepts; tokenizers beside the model or
elsewhere; heads of a multimodal model's text config; the device index; the extras a run needs;
the warnings of a warm-up as long as the run and of bfloat16 weights; and the checkpoints a
near-miss path is told about."""

from __future__ import annotations

import importlib.util
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import save_file

from dapo.config import builtin_config_path, load_config
from dapo.preflight import (
    TOKENIZER_FILES,
    check_run,
    device_problems,
    extras_problems,
    missing_model_problem,
    model_problems,
    reward_problems,
)
from tests.test_preflight import fake_model_dir

DEFAULT = [builtin_config_path("default")]


@pytest.mark.parametrize("source", [
    # a fast scorer where installed, a plain one else: what a reward author writes for a cluster
    "try:\n    from math_verify_fast import compute_score\nexcept ImportError:\n"
    "    from os.path import basename as compute_score\n",
    "import sys\nif sys.platform:\n    from os.path import basename as compute_score\n",
    "from os.path import basename as compute_score\n",
    "def __getattr__(name):\n    return len\n",  # (a module __getattr__ makes any name)
])
def test_a_reward_function_bound_as_python_allows_is_not_refused(tmp_path, source):
    rewards = tmp_path / "rewards.py"
    rewards.write_text(source)
    cfg = load_config([], [f"output_dir={tmp_path / 'run'}", f"reward.functions=[{{path: {rewards}:compute_score}}]"])
    assert reward_problems(cfg) == []
    rewards.write_text(source.replace("compute_score", "score"))
    cfg_typo = load_config([], [f"output_dir={tmp_path / 'run'}", f"reward.functions=[{{path: {rewards}:compute_score}}]"])
    assert reward_problems(cfg_typo) == ([] if "__getattr__" in source else [
        f"reward.functions: '{rewards}:compute_score': rewards.py defines no 'compute_score' (its functions: [])"])


@pytest.mark.parametrize("name", TOKENIZER_FILES)
def test_any_one_tokenizer_file_is_a_tokenizer_and_tokenizer_path_is_where_it_is_read(tmp_path, name):
    model = fake_model_dir(tmp_path / "model", tokenizer=False)
    tokenizer = tmp_path / "tokenizer"
    tokenizer.mkdir()
    (tokenizer / name).write_text("{}")

    def problems(*overrides: str) -> list[str]:
        return model_problems(load_config(DEFAULT, [f"model.path={model}", *overrides]))

    [beside] = problems()
    assert beside.startswith(f"model.path={str(model)!r} has no tokenizer files")
    assert problems(f"model.tokenizer_path={tokenizer}") == []
    (model / name).write_text("{}")
    assert problems() == []
    [elsewhere] = problems(f"model.tokenizer_path={tmp_path}")  # the model's own files are not read then
    assert elsewhere.startswith(f"model.tokenizer_path={str(tmp_path)!r} has no tokenizer files")


def test_a_multimodal_model_s_text_heads_are_checked_against_the_sequence_parallel_group(tmp_path):
    model = fake_model_dir(tmp_path / "model")
    (model / "config.json").write_text(json.dumps({
        "model_type": "llava", "num_attention_heads": 16, "num_key_value_heads": 8,  # (a vision tower's, say)
        "text_config": {"max_position_embeddings": 32768, "num_attention_heads": 14, "num_key_value_heads": 2}}))
    overrides = [f"model.path={model}", f"output_dir={tmp_path / 'run'}", "resources.devices_per_node=4",
                 "trainer.packing=true", "trainer.sequence_parallel_size=4"]
    [heads] = model_problems(load_config([builtin_config_path("dapo_recipe")], overrides))
    assert "has 14 attention and 2 key/value heads, which 4 must divide" in heads


def test_a_device_index_past_the_machine_s_devices_is_refused_for_a_run_in_this_process(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)

    def problems(*overrides: str) -> list[str]:
        return device_problems(load_config(DEFAULT, overrides))

    assert problems("trainer.device=cuda:0") == problems("trainer.device=cuda") == []
    assert problems("trainer.device=cuda:1") == ["trainer.device='cuda:1' but this machine has 1 cuda device(s) (0-0)"]
    # one rank runs here even with a cluster's address: its device must be here
    assert problems("trainer.device=cuda:1", "resources.ray_address=auto") == problems("trainer.device=cuda:1")
    # several ranks on a cluster: the ranks' machines have the devices, not this driver
    assert problems("trainer.device=cuda:1", "resources.ray_address=auto", "resources.devices_per_node=2") == []


def test_the_extras_a_run_needs_are_named_and_an_evaluation_needs_no_peft(monkeypatch):
    missing = {"ray", "peft"}
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in missing else find_spec(name, *a))
    two_ranks = load_config(DEFAULT, ["resources.devices_per_node=2"])
    [ray] = extras_problems(two_ranks)
    assert ray.startswith("resources ask for 2 policy ranks, which run on Ray, and Ray is not installed")
    assert extras_problems(load_config(DEFAULT, [])) == []
    lora = load_config(DEFAULT, ["model.lora_rank=8"])
    [peft] = extras_problems(lora)
    assert peft.startswith("model.lora_rank=8 trains LoRA adapters through PEFT, which is not installed")
    assert extras_problems(lora, training=False) == []  # (its checkpoint's merged weights are a plain model)


@pytest.mark.parametrize(("total", "warned"), [(9, True), (10, True), (11, False)])
def test_a_warm_up_as_long_as_the_run_is_warned_about(tmp_path, total, warned):
    cfg = load_config(DEFAULT, [f"output_dir={tmp_path / 'run'}", f"trainer.total_steps={total}",
                                "trainer.warmup_steps=10"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_run(cfg, train_data=False)
    assert any("trainer.warmup_steps=10 is not below" in str(w.message) for w in caught) == warned


@pytest.mark.parametrize(("lora", "warned"), [("0", True), ("8", False)])
def test_bfloat16_weights_are_warned_about_unless_they_are_lora_s_frozen_base(tmp_path, lora, warned):
    cfg = load_config(DEFAULT, [f"output_dir={tmp_path / 'run'}", "model.dtype=bfloat16", "trainer.autocast=none",
                                f"model.lora_rank={lora}"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_run(cfg, train_data=False)
    assert any("model.dtype=bfloat16 trains bfloat16 weights" in str(w.message) for w in caught) == warned


def test_a_checkpoint_the_run_has_not_written_names_the_newest_it_has(tmp_path):
    checkpoints = tmp_path / "run" / "checkpoints"
    for step in range(1, 7):
        (checkpoints / f"step-{step:06d}").mkdir(parents=True)
        (checkpoints / f"step-{step:06d}" / "trainer_state.pt").write_bytes(b"")
    said = missing_model_problem(str(checkpoints / "step-000099"))
    assert said.endswith(f"{checkpoints} holds step-000003, step-000004, step-000005, step-000006 (the newest 4)")
    for step, said_newest in ((1, True), (2, False)):  # five held, then four: all of them
        (checkpoints / f"step-{step:06d}" / "trainer_state.pt").unlink()
        (checkpoints / f"step-{step:06d}").rmdir()
        said = missing_model_problem(str(checkpoints / "step-000099"))
        assert said.endswith("holds step-000003, step-000004, step-000005, step-000006"
                             + (" (the newest 4)" if said_newest else ""))


def test_the_disk_check_counts_the_best_checkpoint_kept_beside_the_newest(tmp_path, monkeypatch):
    model = fake_model_dir(tmp_path / "model")
    save_file({"w": np.zeros(1000, "float32")}, str(model / "model.safetensors"))  # one checkpoint: 12000 bytes
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=36_000))  # room for 3
    base = [f"model.path={model}", f"output_dir={tmp_path / 'run'}", "checkpoint.keep_last=2", "trainer.autocast=none",
            "rollout.native_dtype=float32"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_run(load_config(DEFAULT, base), train_data=False)
        assert not [w for w in caught if "coexist" in str(w.message)]
        check_run(load_config(DEFAULT, [*base, "checkpoint.keep_best=eval/avg@4"]), train_data=False)
    assert any("not the 4 that coexist" in str(w.message) for w in caught)


def test_a_weights_file_given_as_the_model_names_the_folder_holding_it(tmp_path: Path):
    model = fake_model_dir(tmp_path / "model")
    said = missing_model_problem(str(model / "model.safetensors"))
    assert said.endswith(f"the one holding it is {str(model)!r}")
