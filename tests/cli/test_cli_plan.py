"""`dapo plan`: placement and a per-device memory estimate, without a cluster."""

from __future__ import annotations

import pytest

from dapo.cli.main import main
from dapo.cli.plan import GIB, plan
from dapo.config import builtin_config_path, load_config
from tests.trainer.conftest import make_tiny_model


def test_paper_config_plan_names_its_placement_and_fits_an_80gb_gpu(capsys):
    assert main(["plan", "dapo_qwen2.5_32b", "--params", "32.8e9"]) == 0
    out = capsys.readouterr().out
    assert "16 node(s) x 8 device(s) = 128 policy rank(s) on Ray (auto)" in out
    # 16 bytes a parameter (fp32 weights, grads, AdamW m and v) over 128 ranks
    assert f"{32.8e9 * 16 / 128 / GIB:9.2f} GiB" in out
    # vLLM tensor parallel 4: a quarter of the bf16 weights per GPU, 32 engines
    assert f"weights {2 * 32.8e9 / 4 / GIB:.1f} GiB in bf16" in out and "(32 engine(s))" in out
    assert "DOES NOT FIT" not in out


@pytest.mark.parametrize(("overrides", "gathered_bytes"),
                         [([], 2), (["trainer.param_dtype=none", "trainer.autocast=bf16"], 4)])
def test_plan_gathers_the_layers_in_the_dtype_they_compute_in(overrides, gathered_bytes):
    """trainer.param_dtype=bf16 (the 32B config's): FSDP2 all-gathers bf16 copies of the float32
    shards; under autocast it gathers the float32 shards themselves."""
    cfg = load_config([builtin_config_path("dapo_qwen2.5_32b")], overrides)
    out = plan(cfg, params=32.8e9)
    row = next(line for line in out.splitlines() if "gathered layers" in line)
    assert row.endswith(f"{2 * 32.8e9 / 64 * gathered_bytes / GIB:9.2f} GiB")
    assert ("computing on bf16 copies" in out) == (gathered_bytes == 2)


def test_a_one_process_plan_counts_the_bf16_copy_of_the_whole_model():
    cfg = load_config([builtin_config_path("qwen2.5_1.5b_1gpu")], ["trainer.param_dtype=bf16", "trainer.autocast=none"])
    out = plan(cfg, params=1.54e9)
    row = next(line for line in out.splitlines() if "bf16 weights + grads" in line)
    assert row.endswith(f"{1.54e9 * 4 / GIB:9.2f} GiB") and "gathered layers" not in out  # no FSDP2 units
    assert "FSDP2" not in out and "sharded" not in out and "the policy, whole" in out


def test_plan_counts_vllm_weights_in_the_dtype_it_loads_them(capsys):
    assert main(["plan", "dapo_qwen2.5_32b", "rollout.vllm_dtype=float32", "--params", "32.8e9"]) == 0
    assert f"weights {4 * 32.8e9 / 4 / GIB:.1f} GiB in float32" in capsys.readouterr().out


def test_plan_says_when_a_whole_engine_per_rank_does_not_fit(capsys):
    assert main(["plan", "dapo_qwen2.5_32b", "rollout.vllm_tensor_parallel_size=1", "--params", "32.8e9"]) == 1
    assert "DOES NOT FIT: vLLM's share (40 GiB" in capsys.readouterr().out


def test_plan_counts_a_local_models_parameters_without_loading_weights(tmp_path):
    tiny_model_dir = make_tiny_model(tmp_path / "model")
    cfg = load_config([builtin_config_path("default")], [f"model.path={tiny_model_dir}", "resources.devices_per_node=2"])
    text = plan(cfg)
    assert "2 policy rank(s) on Ray (a local Ray started by dapo train)" in text
    from transformers import AutoModelForCausalLM

    params = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(tiny_model_dir).parameters())
    assert f"({params / 1e9:.2f}B parameters, 2 layers, hidden 32" in text


def test_plan_without_the_model_directory_asks_for_its_size(capsys):
    assert main(["plan", "dapo_qwen2.5_32b"]) == 2
    assert "--params" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError):
        plan(load_config([builtin_config_path("dapo_qwen2.5_32b")]))


def test_plan_of_the_embedded_default_uses_the_built_in_models_shape(tmp_path, monkeypatch):
    """`dapo plan` with no argument plans the embedded default: the built-in model's shape comes
    from its recipe (nothing is built or installed into the cache)."""
    monkeypatch.setenv("HOME", str(tmp_path))  # an empty ~/.cache/dapo-rl
    cfg = load_config([builtin_config_path("default")], [f"model.cache_dir={tmp_path / 'cache'}"])
    text = plan(cfg)
    assert "(0.00B parameters, 4 layers, hidden 256" in text
    assert not (tmp_path / "cache").exists()


def test_plan_counts_every_saved_activation_without_gradient_checkpointing(capsys):
    """Without model.gradient_checkpointing each layer keeps ~34 bytes x hidden per token for the
    backward pass, not only its 2-byte input: the 32B recipe would then not fit an 80 GB GPU."""
    cfg = load_config([builtin_config_path("dapo_qwen2.5_32b")])
    tokens, hidden, layers = cfg.trainer.micro_batch_tokens, 5120, 64
    assert f"{tokens * hidden * 2 * layers / GIB:9.2f} GiB" in plan(cfg, params=32.8e9)
    assert main(["plan", "dapo_qwen2.5_32b", "--params", "32.8e9", "model.gradient_checkpointing=false"]) == 1
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "activations (no checkpointing)" in line)
    assert row.endswith(f"{tokens * hidden * 34 * layers / GIB:9.2f} GiB")
    assert "DOES NOT FIT" in out and "set model.gradient_checkpointing=true" in out


def test_a_model_not_on_this_machine_gets_the_shape_of_the_qwen25_model_nearest_in_size_and_says_so(capsys):
    from dapo.cli.main import main

    assert main(["plan", "qwen2.5_1.5b_1gpu", "--params", "7.6e9"]) == 1  # 7.6B does not fit its one GPU
    out = capsys.readouterr().out
    assert "28 layers, hidden 3584" in out and "nearest in size" in out  # Qwen2.5-7B, not the 1.5B's 1536
    for bad in (["--params", "-5"], ["--params", "nan"], ["--params", "inf"], ["--device-gib", "nan"]):
        assert main(["plan", "qwen2.5_1.5b_1gpu", *bad]) == 2  # nan printed 'nan GiB'; inf, a traceback
        assert "--params and --device-gib must be finite numbers > 0" in capsys.readouterr().err


def engine_rows(out: str) -> list[str]:
    return [line for line in out.splitlines() if "engine (full copy)" in line or "engine's" in line]


def test_a_native_engine_counts_its_working_weights_and_a_rank_its_own_copy_too():
    one = ["rollout.engine=native", "rollout.native_dtype=model"]
    base = [builtin_config_path("qwen2.5_1.5b_1gpu")]
    gib = [f"{1.54e9 * size / GIB:9.2f} GiB" for size in (2, 4)]
    # one process: no copy of the model, but fused (on CPU also packed) projections per generation
    working = engine_rows(plan(load_config(base, one), params=1.54e9))
    assert len(working) == 1 and "float32 working weights" in working[0] and working[0].endswith(gib[1])
    cast = engine_rows(plan(load_config(base, [*one[:1], "rollout.native_dtype=bfloat16"]), params=1.54e9))
    assert len(cast) == 1 and "bfloat16 working weights" in cast[0] and cast[0].endswith(gib[0])
    ranks = engine_rows(plan(load_config(base, [*one, "resources.devices_per_node=2"]), params=1.54e9))
    assert [row.endswith(gib[1]) for row in ranks] == [True, True]  # each rank's float32 copy, and working weights


def test_plan_counts_the_logits_their_gradient_and_the_log_prob_chunks():
    """bf16 logits (tokens x vocabulary), the backward's gradient of the same size, and two float32
    chunks of 4096 rows the log-prob pass works in: 4.6 GiB more than the float32 logits alone it
    counted before, at the 32B recipe's 24,576 tokens."""
    cfg = load_config([builtin_config_path("dapo_qwen2.5_32b")])
    tokens, vocab = cfg.trainer.micro_batch_tokens, 152064
    expected = 2 * tokens * vocab * 2 + 2 * 4096 * vocab * 4  # param_dtype=bf16
    row = next(line for line in plan(cfg, params=32.8e9).splitlines() if "logits, their gradient" in line)
    assert row.endswith(f"{expected / GIB:9.2f} GiB")
