from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from dapo.trainer.checkpoint import (
    list_checkpoints,
    load_model_weights,
    load_trainer_state,
    resolve_resume,
    save_checkpoint,
)


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
    assert resolve_resume("auto", tmp_path) == kept[-1]
    assert resolve_resume("never", tmp_path) is None


def test_half_written_checkpoint_is_ignored(tiny_model_dir: Path, tmp_path: Path):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    save_checkpoint(tmp_path, 1, model, tokenizer, {"step": 1}, "", keep_last=3)
    # a run killed while writing step 2 leaves only a hidden temp dir
    (tmp_path / "checkpoints" / ".tmp-step-000002-123").mkdir()
    (tmp_path / "checkpoints" / "step-000003").mkdir()  # no trainer_state.pt: incomplete
    assert resolve_resume("auto", tmp_path).name == "step-000001"


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


def test_a_moe_model_whose_experts_are_renamed_on_save_loads_back(tmp_path: Path):
    # transformers keeps a Qwen3-MoE's experts fused in memory and writes them one by one
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    from dapo.builtin import build_tokenizer

    tokenizer = build_tokenizer()
    config = Qwen3MoeConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_experts=4,
        num_experts_per_tok=2, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
        max_position_embeddings=64, tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    trained = Qwen3MoeForCausalLM(config)
    path = save_checkpoint(tmp_path, 1, trained, tokenizer, {}, "", keep_last=1)
    torch.manual_seed(1)
    fresh = Qwen3MoeForCausalLM(config)
    load_model_weights(fresh, path)
    for (name, expected), actual in zip(trained.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(expected, actual), name


def test_a_resume_seeing_fewer_gpus_than_the_save_restores_those_it_sees(monkeypatch):
    from dapo.trainer import checkpoint

    restored = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device: restored.append((int(state[0]), device)))
    saved = {"torch": torch.get_rng_state(), "python": __import__("random").getstate(),
             "cuda": [torch.tensor([7], dtype=torch.uint8)] * 8}  # saved with 8 GPUs visible
    checkpoint.set_rng_state(saved)
    assert restored == [(7, 0)]


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
