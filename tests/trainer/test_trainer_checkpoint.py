import errno
import os
import re
import stat
import warnings
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from dapo.errors import DamagedCheckpointError
from dapo.trainer.checkpoint import (
    BEST_LINK,
    SETTING_ASIDE,
    begin_checkpoint,
    link_best,
    list_checkpoints,
    load_model_weights,
    load_trainer_state,
    save_checkpoint,
    set_aside_checkpoints_after,
)
from dapo.trainer.hf_export import export_hf_from_shards
from dapo.trainer.resume import ResumePoint, resolve_resume
from dapo.trainer.setup import stop_token_ids_of
from tests.rollout.conftest import tiny_qwen3_moe
from tests.trainer.test_trainer_setup import chat_tokenizer


def test_checkpoint_is_a_hf_model_dir_and_keeps_last_k(tiny_model_dir: Path, tmp_path: Path):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, step, model, tokenizer, {"step": step}, "a: 1\n", keep_last=2)
    kept = list_checkpoints(tmp_path)
    assert [p.name for p in kept] == ["step-000002", "step-000003"]
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".")]
    loaded = AutoModelForCausalLM.from_pretrained(kept[-1])
    for (name, a), b in zip(model.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(a, b), name
    assert AutoTokenizer.from_pretrained(kept[-1]).decode([5, 6]) == tokenizer.decode([5, 6])
    assert load_trainer_state(kept[-1])["step"] == 3
    assert resolve_resume("auto", tmp_path) == ResumePoint(kept[-1], automatic=True)
    assert resolve_resume(str(kept[0]), tmp_path) == ResumePoint(kept[0], automatic=False)  # a step back, named
    assert resolve_resume("never", tmp_path) is None


def test_an_old_checkpoint_that_cannot_be_removed_stays_and_the_new_one_counts(tiny_model_dir: Path, tmp_path: Path,
                                                                                monkeypatch):
    """keep_last's removal of an older checkpoint failing (a file another user owns, a network
    disk) happens after the new checkpoint is published: a warning, not "checkpoint not written"."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    save_checkpoint(tmp_path, 1, model, tokenizer, {"step": 1}, "a: 1\n", keep_last=1)
    rename = Path.rename

    def refused(path: Path, target):
        if "-deleting-" in str(target):
            raise PermissionError(13, "Permission denied", str(path))
        return rename(path, target)

    monkeypatch.setattr(Path, "rename", refused)
    with pytest.warns(UserWarning, match="step-000002 is written, but removing the older step-000001 failed"):
        written = save_checkpoint(tmp_path, 2, model, tokenizer, {"step": 2}, "a: 1\n", keep_last=1)
    assert written.name == "step-000002" and load_trainer_state(written)["step"] == 2
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-000001", "step-000002"]


@pytest.mark.parametrize("code", ["EINVAL", "EIO"])
def test_a_directory_flush_that_fails_after_the_rename_still_counts_the_checkpoint(tiny_model_dir: Path,
                                                                                   tmp_path: Path, monkeypatch, code):
    """A filesystem that cannot fsync a directory (EINVAL: some network and FUSE filesystems) is
    not an error; an I/O error flushing the checkpoints folder after the rename has published the
    checkpoint is a warning, not "checkpoint not written" (the checkpoint is there and resumes)."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    real_fsync = os.fsync

    def refused(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", refused)
    if code == "EINVAL":
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            written = save_checkpoint(tmp_path, 1, model, tokenizer, {"step": 1}, "a: 1\n", keep_last=1)
    else:
        (tmp_path / "checkpoints").mkdir()  # (a missing folder's creation is flushed before any write)
        with pytest.raises(OSError, match="Input/output error"):  # before the rename: the checkpoint's own files
            save_checkpoint(tmp_path, 1, model, tokenizer, {"step": 1}, "a: 1\n", keep_last=1)
        assert list_checkpoints(tmp_path) == []
        monkeypatch.setattr("dapo.trainer.checkpoint.fsync_tree", lambda root: None)
        with pytest.warns(UserWarning, match="step-000001 is written, but flushing .* failed"):
            written = save_checkpoint(tmp_path, 1, model, tokenizer, {"step": 1}, "a: 1\n", keep_last=1)
    assert list_checkpoints(tmp_path) == [written] and load_trainer_state(written)["step"] == 1


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_checkpoint_files_have_the_umask_s_modes_not_safetensors_0600(tiny_model_dir: Path, tmp_path: Path, umask: int):
    """A team sharing a run directory (umask 022) can read the weights as it reads the config; a
    private umask (077) stays private."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    previous = os.umask(umask)
    try:
        path = save_checkpoint(tmp_path, 1, model, tokenizer, {"step": 1}, "", keep_last=1)
    finally:
        os.umask(previous)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.iterdir()}
    assert "model.safetensors" in modes and "trainer_state.pt" in modes
    assert modes == dict.fromkeys(modes, 0o666 & ~umask), modes
    assert stat.S_IMODE(path.stat().st_mode) == 0o777 & ~umask


def test_checkpoints_set_aside_stay_readable_by_the_run_directory_s_group(tmp_path: Path):
    """The folder abandoned checkpoints move into took mkdtemp's 0700: a team sharing the run
    directory (umask 002) could no longer open them."""
    for step in (1, 2):
        (tmp_path / "checkpoints" / f"step-{step:06d}").mkdir(parents=True)
        (tmp_path / "checkpoints" / f"step-{step:06d}" / "trainer_state.pt").write_bytes(b"")
    previous = os.umask(0o002)
    try:
        folder = set_aside_checkpoints_after(tmp_path, 1)
    finally:
        os.umask(previous)
    assert folder is not None and [p.name for p in folder.iterdir()] == ["step-000002"]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o775


def test_a_set_aside_killed_partway_leaves_the_later_checkpoints_hidden_and_the_next_moves_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Going back to step 2 moves steps 3 and 4 one rename each: killed after the first, step 4
    stayed under checkpoints/ and resume=auto resumed the attempt the user had abandoned."""
    for step in (2, 3, 4):
        (tmp_path / "checkpoints" / f"step-{step:06d}").mkdir(parents=True)
        (tmp_path / "checkpoints" / f"step-{step:06d}" / "trainer_state.pt").write_bytes(b"")
    (tmp_path / "checkpoints" / "best").symlink_to("step-000004")  # checkpoint.keep_best's
    rename, moved = Path.rename, []

    def killed_on_the_second_move(self: Path, target: Path) -> Path:
        if "abandoned-" in str(target) and len(moved) == 1:
            raise KeyboardInterrupt
        moved.append(self.name)
        return rename(self, target)

    monkeypatch.setattr(Path, "rename", killed_on_the_second_move)
    with pytest.raises(KeyboardInterrupt):
        set_aside_checkpoints_after(tmp_path, 2)
    monkeypatch.setattr(Path, "rename", rename)
    assert (tmp_path / "checkpoints" / "step-000004").is_dir()  # not moved yet, and not listed
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-000002"]
    assert resolve_resume("auto", tmp_path).path.name == "step-000002"
    with pytest.warns(UserWarning, match=r"moved 1 checkpoint\(s\) after step 2 \(step-000004\)"):
        set_aside_checkpoints_after(tmp_path, 2)  # the resume of step 2 moves what was left
    # (not a best link left dangling: from_pretrained(RUN/checkpoints/best) would fail)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir() if not p.name.startswith("abandoned-")) == [
        "step-000002"]
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("abandoned-*/step-*")) == ["step-000003", "step-000004"]


def test_half_written_checkpoint_is_ignored(tiny_model_dir: Path, tmp_path: Path):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    save_checkpoint(tmp_path, 1, model, tokenizer, {"step": 1}, "", keep_last=3)
    # a run killed while writing step 2 leaves only a hidden temp dir
    (tmp_path / "checkpoints" / ".tmp-step-000002-123").mkdir()
    (tmp_path / "checkpoints" / "step-000003").mkdir()  # no trainer_state.pt: incomplete
    assert resolve_resume("auto", tmp_path).path.name == "step-000001"


def test_load_weights_round_trip(tiny_model_dir: Path, tmp_path: Path):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        model.model.embed_tokens.weight.add_(1.0)
    path = save_checkpoint(tmp_path, 4, model, tokenizer, {}, "", keep_last=1)
    fresh = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    load_model_weights(fresh, path)
    assert torch.equal(fresh.lm_head.weight, model.lm_head.weight)


def test_resume_from_missing_path_says_why(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="trainer_state.pt"):
        resolve_resume(str(tmp_path / "nope"), tmp_path)


@pytest.mark.parametrize("damage", ["random bytes", "cut short"])
def test_a_damaged_trainer_state_is_named_without_torch_s_advice_to_load_it_unsafely(tmp_path: Path, damage: str):
    """torch's message for bytes that are no pickle says to retry with weights_only=False (which
    runs what the bytes say): wrong advice for a damaged file; the error names the file and what
    was found instead."""
    state = tmp_path / "trainer_state.pt"
    if damage == "random bytes":
        state.write_bytes(bytes(range(256)) * 4)
    else:
        torch.save({"step": 3, "weights": torch.zeros(1000)}, state)
        os.truncate(state, state.stat().st_size // 2)
    with pytest.raises(DamagedCheckpointError, match=rf"cannot read {re.escape(str(state))}: damaged or incomplete") as caught:
        load_trainer_state(tmp_path)
    assert "weights_only" not in str(caught.value) and "\n" not in str(caught.value)
    expected = "its bytes are no saved state: " if damage == "random bytes" else "failed finding central directory;"
    assert expected in str(caught.value)


def test_a_rank_s_damaged_rng_file_reaches_the_driver_as_the_checkpoint_s_error(tmp_path: Path):
    """A policy rank's generators file cut short: the error names it and its checkpoint, and
    survives the pickling that brings it from the rank to the driver (which then says which
    checkpoint to resume instead)."""
    import pickle

    from dapo.trainer.rng import load_rank_rng, rank_rng_path, save_rank_rng

    rank_rng_path(tmp_path, 1).parent.mkdir(parents=True)
    save_rank_rng(tmp_path, 1)
    os.truncate(rank_rng_path(tmp_path, 1), 100)
    with pytest.raises(DamagedCheckpointError, match=re.escape(f"cannot read {rank_rng_path(tmp_path, 1)}")) as caught:
        load_rank_rng(tmp_path, 1)
    sent = pickle.loads(pickle.dumps(caught.value))
    assert str(sent) == str(caught.value) and sent.checkpoint == tmp_path


def test_a_moe_model_whose_experts_are_renamed_on_save_loads_back(tmp_path: Path):
    # transformers keeps a Qwen3-MoE's experts fused in memory and writes them one by one
    from dapo.builtin import build_tokenizer

    tokenizer = build_tokenizer()
    trained = tiny_qwen3_moe(seed=0, vocab_size=len(tokenizer))
    path = save_checkpoint(tmp_path, 1, trained, tokenizer, {}, "", keep_last=1)
    fresh = tiny_qwen3_moe(seed=1, vocab_size=len(tokenizer))
    load_model_weights(fresh, path)
    for (name, expected), actual in zip(trained.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(expected, actual), name


def test_the_multi_rank_export_of_a_moe_model_is_what_save_pretrained_writes(tmp_path: Path):
    # vLLM and transformers 4 read a MoE's experts one by one, as save_pretrained writes them; the
    # export from the ranks' shards wrote the in-memory fused tensors (experts.gate_up_proj)
    from safetensors.torch import load_file

    from dapo.builtin import build_tokenizer

    tokenizer = build_tokenizer()
    model = tiny_qwen3_moe(vocab_size=len(tokenizer))
    model.save_pretrained(tmp_path / "save_pretrained")
    export_hf_from_shards(tmp_path / "export", model, tokenizer, rank=0)
    expected = load_file(tmp_path / "save_pretrained" / "model.safetensors")
    written = load_file(tmp_path / "export" / "model.safetensors")
    assert sorted(written) == sorted(expected) and "model.layers.0.mlp.experts.3.up_proj.weight" in written
    for name, tensor in expected.items():
        assert torch.equal(written[name], tensor), name
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "export")
    for (name, tensor), reloaded in zip(model.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(tensor, reloaded), name


def test_a_checkpoint_half_deleted_by_a_kill_during_rotation_is_cleaned_up(tiny_model_dir: Path, tmp_path: Path,
                                                                          monkeypatch):
    import shutil

    from dapo.trainer import checkpoint
    from dapo.trainer.run_dir import remove_stale_checkpoint_temps

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    save_checkpoint(tmp_path, 1, model, tokenizer, {}, "", keep_last=1)
    real_rmtree = shutil.rmtree

    def killed_midway(path, ignore_errors=False):
        if not (Path(path) / "trainer_state.pt").is_file():  # not a checkpoint being rotated out
            return real_rmtree(path, ignore_errors=ignore_errors)
        (Path(path) / "trainer_state.pt").unlink()  # deleted first, the weights not yet
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint.shutil, "rmtree", killed_midway)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path, 2, model, tokenizer, {}, "", keep_last=1)
    monkeypatch.setattr(checkpoint.shutil, "rmtree", real_rmtree)
    with pytest.warns(UserWarning, match="removed 1 incomplete checkpoint"):
        assert remove_stale_checkpoint_temps(tmp_path) == 1
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step-000002"]




@pytest.mark.parametrize(("resume", "said"), [("auto", "the same command resumes"), ("never", "checkpoint.resume=auto"),
                                               ("/runs/a/checkpoints/step-000004", "the same command resumes")])
def test_a_stopped_run_is_told_how_it_resumes_under_each_checkpoint_resume(resume, said):
    """(the reward stop said "checkpoint.resume=auto resumes" under a named checkpoint, where the
    run's own newest, which the same command resumes, had just been written; Ctrl-C's note did not)"""
    from dapo.trainer.checkpoint import how_to_resume

    assert how_to_resume(resume).startswith(said)


def test_the_export_stops_generation_on_every_token_the_rollouts_stopped_on(tiny_model_dir: Path, tmp_path: Path):
    """A base model's generation_config lists its EOS alone (Qwen2.5 base: <|endoftext|>), while
    the rollouts also stop at the chat template's <|im_end|>, which a policy trained on chat
    prompts ends its answers with. The export wrote the base's list: from_pretrained + generate
    (and servers that read generation_config.json) ran on past every answer's end."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = chat_tokenizer()
    stops = stop_token_ids_of(model, tokenizer)
    assert stops == [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>")]
    checkpoint = save_checkpoint(tmp_path, 1, model, tokenizer, {"step": 1}, "a: 1\n", keep_last=1)
    assert GenerationConfig.from_pretrained(checkpoint).eos_token_id == stops
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id  # the live model's is left alone
    exported = AutoModelForCausalLM.from_pretrained(checkpoint)
    assert stop_token_ids_of(exported, AutoTokenizer.from_pretrained(checkpoint)) == stops  # a resume's: the same


def test_best_is_not_linked_to_a_checkpoint_that_is_not_there(tmp_path: Path):
    """A dangling checkpoints/best would fail from_pretrained(best) with a confusing error."""
    (tmp_path / "checkpoints").mkdir()
    link_best(tmp_path, 5)
    assert not (tmp_path / "checkpoints" / BEST_LINK).is_symlink()


def test_a_checkpoint_is_built_in_an_empty_directory_whatever_a_failed_save_left(tmp_path: Path):
    """A container's process has the same PID each run: a failed save's leftovers in its
    temporary directory would otherwise end up in the next checkpoint."""
    stale = tmp_path / "checkpoints" / f".tmp-step-000003-{os.getpid()}"
    stale.mkdir(parents=True)
    (stale / "model.safetensors").write_text("stale")
    assert list(begin_checkpoint(tmp_path, 3).iterdir()) == []


def test_a_set_aside_marker_left_by_a_kill_after_its_last_move_is_removed_by_the_next(tmp_path: Path):
    """A set-aside killed after its moves, before it removed checkpoints/.setting-aside: the marker
    hid every later checkpoint the resumed run wrote (resume=auto went back, keep_last never saw
    them) until the next set-aside, which has nothing to move, removes it."""
    for step in (1, 2, 3):
        (tmp_path / "checkpoints" / f"step-{step:06d}").mkdir(parents=True)
        (tmp_path / "checkpoints" / f"step-{step:06d}" / "trainer_state.pt").write_bytes(b"")
    (tmp_path / "checkpoints" / SETTING_ASIDE).write_text("3")
    assert set_aside_checkpoints_after(tmp_path, 3) is None
    (tmp_path / "checkpoints" / "step-000004").mkdir()
    (tmp_path / "checkpoints" / "step-000004" / "trainer_state.pt").write_bytes(b"")
    assert [p.name for p in list_checkpoints(tmp_path)][-1] == "step-000004"


def test_a_re_saved_step_whose_swap_fails_keeps_the_old_one_for_the_next_start(tiny_model_dir: Path, tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch):
    """Re-saving a step (the final checkpoint at a periodic one's step) swaps by renames: a failure
    or kill between them leaves the published one as .old-step-N-<pid>, which the next start puts
    back; it is never deleted before the new one is in place."""
    from dapo.trainer.run_dir import remove_stale_checkpoint_temps

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    save_checkpoint(tmp_path, 2, model, tokenizer, {"step": 2, "first": True}, "", keep_last=2)
    rename = Path.rename

    def failing_publish(self: Path, target: Path) -> Path:
        if self.name.startswith(".tmp-step-") and Path(target).name == "step-000002":
            raise OSError(errno.EIO, "I/O error")
        return rename(self, target)

    monkeypatch.setattr(Path, "rename", failing_publish)
    with pytest.raises(OSError):
        save_checkpoint(tmp_path, 2, model, tokenizer, {"step": 2, "first": False}, "", keep_last=2)
    monkeypatch.setattr(Path, "rename", rename)
    with pytest.warns(UserWarning, match="restored checkpoint"):
        remove_stale_checkpoint_temps(tmp_path)
    [restored] = list_checkpoints(tmp_path)
    assert load_trainer_state(restored)["first"] is True
    load_model_weights(AutoModelForCausalLM.from_pretrained(tiny_model_dir), restored)


@pytest.mark.parametrize("change", ["missing", "unexpected"])
def test_weights_that_do_not_match_the_model_are_refused_naming_the_tensor(tiny_model_dir: Path, change: str):
    """A checkpoint missing a tensor (a copy cut short, a renamed layer) would leave that layer at
    its initial values; a foreign tensor would be dropped unsaid."""
    from dapo.trainer.checkpoint import load_full_weights

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    weights = dict(model.state_dict())
    name = "model.layers.0.mlp.down_proj.weight"
    if change == "missing":
        del weights[name]
    else:
        name = "model.layers.0.mlp.extra.weight"
        weights[name] = torch.zeros(2)
    with pytest.raises(RuntimeError, match=rf"does not match the model: .*{re.escape(name)}"):
        load_full_weights(model, weights, "checkpoint c")
