"""Ulysses sequence parallelism (trainer.sequence_parallel_size=2) on two Ray policy ranks, gloo
on CPU: each rank computes half of every packed row, attention between two all-to-alls, and the
update, log-probs and KL equal one process's on the same mini-batch."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from dapo.cli.main import main as dapo_main
from dapo.config import ConfigError, builtin_config_path, load_config
from dapo.preflight import PreflightError, check_run
from dapo.trainer import Trainer
from dapo.trainer.batch import Sample, collate
from dapo.trainer.metrics import read_metrics
from dapo.trainer.sequence_parallel import SequenceGroup, shard_packed
from dapo.trainer.step_metrics import update_metrics
from tests.trainer.conftest import tiny_config
from tests.trainer.test_trainer_policy import make_samples
from tests.trainer.test_trainer_ray import TWO_RANKS

PACKED = ["trainer.packing=true", "trainer.shared_prompt=false", "trainer.autocast=none", "trainer.micro_batch_tokens=40", "trainer.lr=1e-2",
          "eval.every_steps=0"]
SEQUENCE_PARALLEL = [*TWO_RANKS, "trainer.sequence_parallel_size=2"]


def test_a_chunk_holds_its_tokens_and_their_labels_from_the_whole_row():
    samples = [Sample(0, "0", [5, 6, 7], [8, 9], [-1.0] * 2, False), Sample(1, "1", [10, 11], [12, 13, 14], [-1.0] * 3, False)]
    whole = collate(samples, pad_token_id=0, layout="packed")  # a row of 5 + 5 tokens
    chunks = [shard_packed(whole, SequenceGroup(None, rank, 3), pad_token_id=0) for rank in range(3)]
    # padded to 12 with a padding sequence of its own; 4 tokens a rank; the row's bounds whole
    assert [c["packed_input_ids"].tolist() for c in chunks] == [[[5, 6, 7, 8]], [[9, 10, 11, 12]], [[13, 14, 0, 0]]]
    assert [c["packed_position_ids"].tolist() for c in chunks] == [[[0, 1, 2, 3]], [[4, 0, 1, 2]], [[3, 4, 0, 1]]]
    assert all(c["packed_cu_seq_lens"].tolist() == [0, 5, 10, 12] for c in chunks)
    # rank 0's last position (8) predicts 9, the first token of rank 1's chunk
    assert [c["packed_labels"].tolist() for c in chunks] == [[[8, 9]], [[12, 13]], [[14]]]
    assert [c["packed_logits_index"].tolist() for c in chunks] == [[2, 3], [2, 3], [0]]
    # every response token is in exactly one chunk's loss
    masks = torch.stack([c["response_mask"] for c in chunks])
    assert torch.equal(masks.sum(0), whole["response_mask"]) and torch.equal(masks.sum(0), masks.amax(0))
    assert all(torch.equal(c["sequence_chunk_mask"], c["response_mask"] > 0) for c in chunks)


def test_sequence_parallelism_needs_packing_a_token_sum_and_whole_groups(tiny_model_dir, reward_file, tmp_path):
    run = (tiny_model_dir, tmp_path / "run", reward_file)
    with pytest.raises(ConfigError, match="set trainer.packing=true trainer.shared_prompt=false$"):
        tiny_config(*run, *TWO_RANKS, "trainer.sequence_parallel_size=2")
    with pytest.raises(ConfigError, match="ranks: set trainer.shared_prompt=false$"):  # packing given: the rest
        tiny_config(*run, *TWO_RANKS, "trainer.sequence_parallel_size=2", "trainer.packing=true")
    with pytest.raises(ConfigError, match="seq-mean-token-mean is not a sum over tokens"):
        tiny_config(*run, *SEQUENCE_PARALLEL, *PACKED, "algorithm.loss_agg_mode=seq-mean-token-mean")
    with pytest.raises(ConfigError, match=r"resources.devices_per_node \(1 x 2 = 2\), must be a multiple of it"):
        tiny_config(*run, *TWO_RANKS, *PACKED, "trainer.sequence_parallel_size=3")
    # refused by the config, not by each rank after loading the weights
    with pytest.raises(ConfigError, match="not model.attn_implementation=flash_attention_2: set it to sdpa"):
        tiny_config(*run, *SEQUENCE_PARALLEL, *PACKED, "model.attn_implementation=flash_attention_2")


def test_attention_a_chunk_cannot_compute_is_refused_at_set_up():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from dapo.errors import UserError
    from dapo.trainer.packed_attention import use_packed_attention
    from dapo.trainer.sequence_parallel import check_sequence_parallel_attention

    def model(**config) -> Qwen2ForCausalLM:
        made = Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                            num_key_value_heads=2, intermediate_size=64, **config))
        use_packed_attention(made)
        return made

    check_sequence_parallel_attention(model(), 2)
    with pytest.raises(UserError, match="4 attention and 2 key/value heads, which 4 must divide"):
        check_sequence_parallel_attention(model(), 4)
    with pytest.raises(UserError, match="dynamic RoPE"):
        check_sequence_parallel_attention(model(rope_parameters={"rope_type": "dynamic", "factor": 2.0,
                                                               "rope_theta": 10000.0}), 2)
    windowed = model(use_sliding_window=True, sliding_window=16, max_window_layers=0)
    with pytest.raises(UserError, match="causal over whole sequences"):
        check_sequence_parallel_attention(windowed, 2)
    flash = model()
    flash.config._attn_implementation = "flash_attention_2"  # (not installed here: as a GPU run would name it)
    with pytest.raises(UserError, match="set model.attn_implementation=sdpa"):
        check_sequence_parallel_attention(flash, 2)


def test_heads_that_do_not_split_over_the_group_are_found_before_the_ranks_start(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2", "max_position_embeddings": 32768,
                                                   "num_attention_heads": 14, "num_key_value_heads": 2}))
    (model / "model.safetensors").write_bytes(b"\0" * 1024)
    (model / "tokenizer.json").write_text("{}")
    overrides = [f"model.path={model}", f"output_dir={tmp_path / 'run'}", "resources.devices_per_node=4",
                 "trainer.packing=true", "trainer.sequence_parallel_size=4"]
    with pytest.raises(PreflightError, match="14 attention and 2 key/value heads, which 4 must divide"):
        check_run(load_config([builtin_config_path("dapo_recipe")], overrides))
    check_run(load_config([builtin_config_path("dapo_recipe")], [*overrides[:2], "resources.devices_per_node=2",
                                                                 "trainer.packing=true", "trainer.sequence_parallel_size=2"]))
    # the built-in model's too (4 attention heads, 2 key/value heads), from its recipe
    builtin = [f"output_dir={tmp_path / 'run'}", *overrides[2:], "trainer.shared_prompt=false"]
    with pytest.raises(PreflightError, match="built-in model .* has 4 attention and 2 key/value heads, which 4 must"):
        check_run(load_config([builtin_config_path("default")], builtin))


# four ranks on two cores: two groups of two, the driver dealing the mini-batch to the groups
TWO_GROUPS = ["resources.devices_per_node=4", "resources.cpus_per_rank=0.5", "trainer.num_threads=1",
              "trainer.sequence_parallel_size=2"]


# a Ray run of two ranks or more, 15-45 s each: all in the slow suite (the default one keeps the
# all-to-alls alone, test_trainer_sequence_all_to_all, and the one-process tests above)
@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
@pytest.mark.parametrize("checkpointing, ranks", [
    pytest.param(False, SEQUENCE_PARALLEL, id="", marks=pytest.mark.slow),
    pytest.param(True, SEQUENCE_PARALLEL, id="gradient-checkpointing", marks=pytest.mark.slow),
    pytest.param(False, TWO_GROUPS, id="two-groups", marks=pytest.mark.slow)])
def test_two_sequence_parallel_ranks_update_as_one_process_then_train(tiny_model_dir, reward_file, tmp_path,
                                                                      checkpointing, ranks, capsys):
    """Values: the driver gives a group's ranks the same samples, each computes half of every row,
    the log-probs they return are whole, the loss, gradient norm, KL and updated weights one
    process's (with gradient checkpointing, each layer's all-to-alls run again in its recompute;
    with two groups, FSDP2 sums over both)."""
    exact = [*PACKED, "algorithm.kl_coef=0.1", "algorithm.kl_estimator=k3",
             f"model.gradient_checkpointing={str(checkpointing).lower()}"]
    one = Trainer(tiny_config(tiny_model_dir, tmp_path / "one", reward_file, "trainer.num_threads=1", *exact))
    try:
        two = Trainer(tiny_config(tiny_model_dir, tmp_path / "two", reward_file, *ranks, *exact,
                                  "trainer.total_steps=2"))
        try:
            groups = 2 if ranks is TWO_GROUPS else 1
            assert f"ranks in {groups} sequence-parallel group(s) of 2" in capsys.readouterr().out
            runs = []
            for trainer in (one, two):
                samples = make_samples(torch.Generator().manual_seed(0))
                # one sequence longer than a micro-batch's budget (a row of it alone, split in halves)
                samples.append(Sample(3, "3", [5, 6, 7], list(range(10, 60)), [-1.0] * 50, False, advantage=1.0))
                metrics, first = [], None
                for _ in range(2):
                    logprobs = trainer.policy.compute_logprobs(samples).logprobs
                    first = first if first is not None else np.concatenate(logprobs)
                    for sample, values in zip(samples, logprobs):
                        sample.old_logprobs = values - 0.05  # ratio != 1: the clipping paths run
                    metrics.append(update_metrics([trainer.policy.update(samples)], samples, trainer.policy.lr))
                after = np.concatenate(trainer.policy.compute_logprobs(samples).logprobs)
                runs.append((first, metrics, after))
            (one_first, single, one_after), (two_first, ranks, two_after) = runs
            assert np.abs(two_first - one_first).max() < 1e-5  # the whole rows' log-probs, from the halves
            for a, b in zip(single, ranks):
                for key in ("actor/loss", "actor/pg_loss", "actor/kl_ref", "actor/clip_frac_low", "actor/clip_frac_high",
                            "actor/approx_kl", "actor/response_tokens"):
                    assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-7), key
                assert b["actor/grad_norm"] == pytest.approx(a["actor/grad_norm"], rel=1e-4)
            assert ranks[1]["actor/kl_ref"] > 1e-6
            assert np.abs(two_after - one_after).max() < 1e-4
            summary = two.train()  # and a run: generation, dynamic sampling, checkpoints, as without
            assert summary.steps == 2
            rows = [r for r in read_metrics(tmp_path / "two") if "actor/loss" in r]
            assert len(rows) == 2 and all(np.isfinite(r["actor/loss"]) for r in rows)
            # its checkpoint evaluates in one process (sequence parallelism splits a training forward only)
            final = tmp_path / "two" / "checkpoints" / "step-000002"
            assert dapo_main(["eval", str(final), "--save-dir", str(tmp_path / "eval"), "eval.k=2"]) == 0
        finally:
            two.close()
    finally:
        one.close()
