"""The run directory's checks (dapo.output_checks): it can be made and written, what the check
made is removed again, and the room one checkpoint takes is sized from the weight files."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from dapo.config import builtin_config_path, load_config
from dapo.output_checks import checkpoint_bytes, output_problems
from dapo.preflight import PreflightError, check_run
from tests.test_preflight import fake_model_dir


def test_the_disk_check_sizes_a_checkpoint_in_the_trained_dtype_with_adamw_state(tmp_path, monkeypatch):
    model = fake_model_dir(tmp_path / "model")
    # 1000 parameters stored in float16, half the bytes of the float32 they train in
    save_file({"w": np.zeros((10, 50), "float16"), "b": np.zeros(500, "float16")}, str(model / "model.safetensors"))
    # float32 compute: no note of a CPU without bf16 instructions among the warnings checked below
    cfg = load_config([builtin_config_path("default")], [f"model.path={model}", f"output_dir={tmp_path / 'run'}",
                                                       "checkpoint.keep_last=2", "trainer.autocast=none",
                                                       "rollout.native_dtype=float32"])
    usage = shutil.disk_usage(tmp_path)

    def free_bytes(free: int):
        monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=free))

    free_bytes(11_999)  # float32 training: 1000 x 4 bytes x (weights + 2 AdamW moments) = 12000
    with pytest.raises(PreflightError, match="needs about"):
        check_run(cfg, train_data=False)
    free_bytes(12_000)
    with pytest.warns(UserWarning, match="not the 3 that coexist"):
        check_run(cfg, train_data=False)
    free_bytes(36_000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_run(cfg, train_data=False)
    cfg.model.dtype = "bfloat16"
    free_bytes(6_000)
    with pytest.warns(UserWarning, match="room for one checkpoint"):
        check_run(cfg, train_data=False)


def test_an_output_dir_that_is_a_file_says_so(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(PreflightError, match=r"output_dir='.*afile' is a file, not a directory"):
        check_run(load_config([], [f"output_dir={tmp_path / 'afile'}"]))


def test_the_directories_tried_are_removed_and_only_those(tmp_path, monkeypatch):
    """The write test made the run directory and its parents and left them (a refused run left an
    empty output_dir); with '..' in the path it removed a directory that was there before."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a" / "c").mkdir(parents=True)
    assert output_problems(Path("a/b/../c"), 0) == [] and output_problems(Path("new/run"), 0) == []
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["a", "a/c"]


def test_weights_shipped_both_as_safetensors_and_bin_are_counted_once(tmp_path):
    """Many Hub repositories hold the same weights twice (model.safetensors and
    pytorch_model.bin); transformers loads the safetensors, and the disk check asked for twice
    the room (refusing a run that fits)."""
    model = fake_model_dir(tmp_path / "model")
    save_file({"w": np.zeros(1000, "float32")}, str(model / "model.safetensors"))
    cfg = load_config([builtin_config_path("dapo_recipe")], [f"model.path={model}"])
    assert checkpoint_bytes(cfg) == 3 * 1000 * 4  # weights + AdamW's two moments, float32
    (model / "pytorch_model.bin").write_bytes(b"\0" * 4000)  # the same 1000 weights again
    assert checkpoint_bytes(cfg) == 3 * 1000 * 4
    (model / "model.safetensors").unlink()  # .bin alone: sized from the file and config's dtype
    assert checkpoint_bytes(cfg) == 3 * 1000 * 4


def test_a_second_copy_of_the_weights_beside_the_loaded_safetensors_is_not_counted(tmp_path):
    """Mistral's repositories hold consolidated.safetensors beside the sharded files that
    transformers loads (by the index): counted, it doubled the room the disk check asked for."""
    model = fake_model_dir(tmp_path / "model")
    (model / "model.safetensors").unlink()
    for shard in (1, 2):
        save_file({f"w{shard}": np.zeros(500, "float32")}, str(model / f"model-0000{shard}-of-00002.safetensors"))
    (model / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"w1": "model-00001-of-00002.safetensors", "w2": "model-00002-of-00002.safetensors"}}))
    save_file({"w1": np.zeros(500, "float32"), "w2": np.zeros(500, "float32")}, str(model / "consolidated.safetensors"))
    cfg = load_config([builtin_config_path("dapo_recipe")], [f"model.path={model}"])
    assert checkpoint_bytes(cfg) == 3 * 1000 * 4
    (model / "model.safetensors.index.json").unlink()
    save_file({"w": np.zeros(1000, "float32")}, str(model / "model.safetensors"))  # one file, and the copy
    assert checkpoint_bytes(cfg) == 3 * 1000 * 4


def test_a_path_through_a_symbolic_link_and_dot_dot_is_checked_where_the_os_puts_it(tmp_path, monkeypatch):
    """``link/../run`` is the run directory beside the link's *target* (the OS follows the link,
    then goes up); read as text it is ./run, where the check made, wrote and removed a directory
    the run never uses (and refused the run when ./run could not be made)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "disk" / "runs").mkdir(parents=True)
    os.symlink(tmp_path / "disk" / "runs", tmp_path / "link")
    (tmp_path / "run").write_text("a file where the text reading would put the run")
    assert output_problems(Path("link/../run"), 0) == []
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "disk", "disk/runs", "link", "run"]


def test_a_symbolic_link_to_nothing_on_the_way_is_refused_as_the_run_would_fail_on_it(tmp_path, monkeypatch):
    """Followed, a dangling link passed the check (the target made, written, removed); the run's own
    mkdir then failed on it (File exists) after the checks said yes."""
    monkeypatch.chdir(tmp_path)
    os.symlink(tmp_path / "gone", tmp_path / "link")
    for run_dir in ("link", "link/run"):
        assert output_problems(Path(run_dir), 0) == [
            f"output_dir={run_dir!r} cannot be made: link is a symbolic link to {tmp_path / 'gone'}, which does not exist"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link"]


def test_a_checkpoints_folder_that_cannot_be_written_is_found_before_training(tmp_path, monkeypatch):
    """A run directory made writable again, its checkpoints/ left read-only, trained steps then stopped at
    the first checkpoint (the test's root ignores modes: the write is refused by hand)."""
    import tempfile

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    real = tempfile.NamedTemporaryFile

    def refusing(*args, dir=None, **kwargs):  # noqa: A002 (tempfile's name)
        if Path(dir).name == "checkpoints":
            raise PermissionError(13, "Permission denied", str(Path(dir) / ".write-test-x"))
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", refusing)
    assert output_problems(run, 0) == [f"output_dir={str(run)!r} cannot be written ({run / 'checkpoints'}): "
                                       "Permission denied"]
    (run / "checkpoints").rmdir()  # a fresh run has none yet: the run directory alone is tried
    assert output_problems(run, 0) == []


def test_sizes_below_a_gib_are_said_in_mib(tmp_path, monkeypatch):
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=80 * 2**20))
    assert output_problems(tmp_path / "run", 100 * 2**20) == [
        f"output_dir={str(tmp_path / 'run')!r} has 80.0 MiB free, and one checkpoint of this model (weights + "
        "optimizer state) needs about 100.0 MiB"]
