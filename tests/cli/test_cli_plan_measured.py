"""`dapo plan`'s memory estimate against the peak torch measures in a real update, in one process
and on two FSDP2 ranks."""

from __future__ import annotations

import pytest

from dapo.config import builtin_config_path, load_config


@pytest.mark.parametrize("overrides", [["model.gradient_checkpointing=true"],
                                       ["model.gradient_checkpointing=false", "trainer.autocast=bf16"]])
def test_the_estimate_bounds_the_measured_peak_of_a_real_update(tmp_path, overrides):
    """One policy update of a small Qwen2 on this CPU, every tensor's bytes tracked (torch's
    MemTracker), against the plan's estimate for the same config: the estimate is not below the
    peak, and not far above it (it counts the gradients, which the first micro-batch's peak
    comes before)."""
    import torch
    from torch.distributed._tools.mem_tracker import MemTracker
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from dapo.builtin import build_tokenizer
    from dapo.cli.model_shape import model_shape
    from dapo.cli.plan import training_rows
    from dapo.trainer.batch import Sample
    from dapo.trainer.policy import PolicyWorker
    from dapo.trainer.setup import load_model_and_tokenizer

    tokens, vocab = 1024, 2048
    Qwen2ForCausalLM(Qwen2Config(vocab_size=vocab, hidden_size=128, intermediate_size=688, num_hidden_layers=4,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=tokens,
                                 tie_word_embeddings=False)).save_pretrained(tmp_path)
    build_tokenizer().save_pretrained(tmp_path)
    cfg = load_config([builtin_config_path("qwen2.5_1.5b_1gpu")], [
        f"model.path={tmp_path}", "model.dtype=float32", "trainer.device=cpu", "rollout.engine=hf",
        f"trainer.micro_batch_tokens={tokens}", "trainer.forward=hf", "trainer.packing=false",
        "trainer.shared_prompt=false", "trainer.autocast=none", "trainer.param_dtype=none",
        # the sample below is as long as a sequence may be (a longer one is a micro-batch of its own)
        "data.max_prompt_length=8", f"rollout.max_response_length={tokens - 8}", "algorithm.overlong_buffer_len=16",
        *overrides])
    rows, moments = training_rows(cfg, model_shape(cfg, None))
    estimate = sum(size for _, size in rows) + max(size for _, size in moments)

    model, _, _ = load_model_and_tokenizer(cfg.model, torch.device("cpu"))
    worker = PolicyWorker(model, cfg.algorithm, cfg.trainer, pad_token_id=0, temperature=1.0, total_steps=2,
                          norm_const=1.0)
    ids = torch.randint(3, vocab, (tokens,), generator=torch.Generator().manual_seed(0)).tolist()
    sample = Sample(group_id=0, uid="a", prompt_ids=ids[:8], response_ids=ids[8:], rollout_logprobs=[-7.0] * (tokens - 8),
                    truncated=False, advantage=1.0, old_logprobs=[-7.0] * (tokens - 8))
    tracker = MemTracker()
    tracker.track_external(model, worker.optimizer)
    for _ in range(2):  # the second holds AdamW's states from the start
        tracker.reset_mod_stats()
        with tracker:
            worker.update([sample], on_policy=True)
    peak = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]
    print(f"one process {overrides}: estimate {estimate / 2**20:.1f} MiB, measured peak {peak / 2**20:.1f} MiB, "
          f"{estimate / peak:.2f}x")  # (the README's figures: pytest -s -k measured_peak)
    assert peak <= estimate <= 1.3 * peak, f"estimate {estimate / 2**20:.1f} MiB, measured peak {peak / 2**20:.1f} MiB"


@pytest.mark.slow  # two torchrun ranks (about 13 s); the default suite keeps the one-process estimate's test
def test_the_per_rank_estimate_bounds_the_measured_peak_of_two_fsdp2_ranks(tmp_path):
    """Two gloo ranks shard a Qwen2 with a large vocabulary (so the root unit and the logits
    matter) at the 32B recipe's precision and checkpointing; each rank's measured peak is at
    most the plan's per-rank estimate (which assumes a GPU's 4096-row log-prob chunks, above
    this CPU's, hence the wider upper bound)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from transformers import Qwen2Config, Qwen2ForCausalLM

    from dapo.builtin import build_tokenizer

    Qwen2ForCausalLM(Qwen2Config(vocab_size=8192, hidden_size=128, intermediate_size=688, num_hidden_layers=4,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                                 tie_word_embeddings=False)).save_pretrained(tmp_path / "model")
    build_tokenizer().save_pretrained(tmp_path / "model")
    root = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(Path(__file__).with_name("plan_peak_worker.py")), str(tmp_path / "model"), str(tmp_path / "out.json")]
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    measured = json.loads((tmp_path / "out.json").read_text())
    print(f"two FSDP2 ranks: estimate {measured['estimate'] / 2**20:.1f} MiB, measured peak "
          f"{measured['peak'] / 2**20:.1f} MiB, {measured['estimate'] / measured['peak']:.2f}x")
    assert measured["peak"] <= measured["estimate"] <= 2.0 * measured["peak"], measured
