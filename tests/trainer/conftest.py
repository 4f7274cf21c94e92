"""Fixtures for trainer tests: a tiny random Qwen2 with the built-in tokenizer, and configs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from dapo.builtin import build_tokenizer
from dapo.config import builtin_config_path, load_config

# Reward of the tiny-model tests: correct when the response has an odd number of characters,
# so a random policy gets mixed groups and every step has gradient signal.
PARITY_REWARD = '''
def parity(response, ground_truth, extra):
    odd = len(response) % 2 == 1
    return {"score": 1.0 if odd else -1.0, "acc": odd}

def always_right(response, ground_truth, extra):
    return {"score": 1.0, "acc": True}
'''


def make_tiny_model(directory: Path, seed: int = 0, dtype: torch.dtype = torch.float32, hidden_size: int = 32) -> Path:
    tokenizer = build_tokenizer()
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config).to(dtype)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture()
def short_rank_death_grace(monkeypatch: pytest.MonkeyPatch) -> float:
    """The driver's wait for a rank's death after another rank's error (10 s) cut to 4 s: the
    tests whose failing rank leaves a peer blocked wait it out in full; a death they expect shows
    within a second or two."""
    from dapo.trainer import ray_faults

    monkeypatch.setattr(ray_faults, "RANK_DEATH_GRACE_S", 4.0)
    return 4.0


@pytest.fixture()
def reward_file(tmp_path: Path) -> Path:
    path = tmp_path / "rewards.py"
    path.write_text(PARITY_REWARD)
    return path


def tiny_overrides(model_dir: Path, run_dir: Path, reward_file: Path, fn: str = "parity") -> list[str]:
    return [
        f"output_dir={run_dir}",
        f"model.path={model_dir}",
        "data.train_files=[builtin:arithmetic]",
        "data.eval_files=[builtin:arithmetic]",
        "data.template=none",
        "data.builtin_train_size=200",
        "data.builtin_eval_size=8",
        "rollout.n=4",
        "rollout.max_response_length=12",
        "algorithm.overlong_buffer_len=4",
        "algorithm.max_gen_rounds=3",
        "reward.verifier_weight=0",
        f"reward.functions=[{{path: '{reward_file}:{fn}'}}]",
        "reward.num_workers=1",
        "trainer.total_steps=3",
        "trainer.prompts_per_step=4",
        "trainer.gen_prompts_per_round=6",
        "trainer.mini_batch_prompts=2",
        "trainer.micro_batch_tokens=64",
        "trainer.lr=1e-3",
        "trainer.warmup_steps=1",
        "trainer.device=cpu",
        "eval.k=2",
        "eval.every_steps=2",
        "checkpoint.every_steps=1",
        "checkpoint.keep_last=10",
        "logging.progress=false",
    ]


def tiny_config(model_dir: Path, run_dir: Path, reward_file: Path, *extra: str, fn: str = "parity"):
    """The embedded default with tiny overrides: the same config `dapo train <overrides>` builds."""
    overrides = tiny_overrides(model_dir, run_dir, reward_file, fn) + list(extra)
    return load_config([builtin_config_path("default")], overrides)
