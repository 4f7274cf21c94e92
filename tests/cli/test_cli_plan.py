"""`dapo plan`: placement and a per-device memory estimate, without a cluster."""

from __future__ import annotations

import pytest

from dapo.cli.main import main
from dapo.cli.model_shape import model_shape
from dapo.cli.plan import GIB, _kept_between_updates, plan, training_rows
from dapo.config import builtin_config_path, load_config
from tests.trainer.conftest import make_tiny_model

# Qwen2.5-32B's decoder layer: q, k, v (biased; 8 KV heads of 128) and o projections, the SwiGLU
# MLP (27648 wide) and two RMSNorm weights
HIDDEN = 5120
QWEN32B_LAYER = 2 * HIDDEN * HIDDEN + 2 * HIDDEN * 1024 + HIDDEN + 2 * 1024 + 3 * HIDDEN * 27648 + 2 * HIDDEN


def test_paper_config_plan_names_its_placement_and_fits_an_80gb_gpu(capsys):
    assert main(["plan", "dapo_qwen2.5_32b", "--params", "32.8e9"]) == 0
    out = capsys.readouterr().out
    assert "16 node(s) x 8 device(s) = 128 policy rank(s) on Ray (auto)" in out
    # 16 bytes a parameter (fp32 weights, grads, AdamW m and v) over 128 ranks
    assert f"{32.8e9 * 16 / 128 / GIB:9.2f} GiB" in out
    # vLLM tensor parallel 4: a quarter of the bf16 weights per GPU, 32 engines
    assert f"weights {2 * 32.8e9 / 4 / GIB:.1f} GiB in bf16" in out and "(32 engine(s))" in out
    assert "DOES NOT FIT" not in out
    # what a rank needs to update (39.85 GiB; generating needs less), on devices just short of it and just over it
    cfg = load_config([builtin_config_path("dapo_qwen2.5_32b")])
    [need] = [float(line.split()[-2]) for line in plan(cfg, params=32.8e9).splitlines()
              if line.startswith("  total while updating")]
    assert "DOES NOT FIT" in plan(cfg, params=32.8e9, device_gib=need * 0.97)
    assert "DOES NOT FIT" not in plan(cfg, params=32.8e9, device_gib=need * 1.01)


@pytest.mark.parametrize(("overrides", "gathered_bytes"),
                         [([], 2), (["trainer.param_dtype=none", "trainer.autocast=bf16"], 4)])
def test_plan_gathers_the_layers_in_the_dtype_they_compute_in(overrides, gathered_bytes):
    """trainer.param_dtype=bf16 (the 32B config's): FSDP2 all-gathers bf16 copies of the float32
    shards; under autocast it gathers the float32 shards themselves."""
    cfg = load_config([builtin_config_path("dapo_qwen2.5_32b")], overrides)
    out = plan(cfg, params=32.8e9)
    row = next(line for line in out.splitlines() if "gathered layers" in line)
    assert row.endswith(f"{2 * QWEN32B_LAYER * gathered_bytes / GIB:9.2f} GiB")
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
    assert f"({params:,} parameters, 2 layers, hidden 32" in text


def test_plan_refuses_what_dapo_train_refuses_a_response_longer_than_the_models_context(tmp_path, capsys):
    """A 256-position model with 300-token responses: dapo train refuses it; dapo plan said it fits (rc 0)."""
    tiny_model_dir = make_tiny_model(tmp_path / "model")
    assert main(["plan", "default", f"model.path={tiny_model_dir}", "rollout.max_response_length=300"]) == 1
    assert ("DOES NOT RUN: rollout.max_response_length=300 does not fit the model's context of 256 tokens"
            in capsys.readouterr().out)
    assert main(["plan", "default", f"model.path={tiny_model_dir}", "rollout.max_response_length=64"]) == 0
    assert main(["plan", "default", f"model.path={tiny_model_dir}", "--params", "7e9"]) == 0  # its own size, said
    assert "; --params 7e+09 ignored: the model's own config is on this machine" in capsys.readouterr().out


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
    assert "(3.2M parameters, 4 layers, hidden 256" in text  # it said 0.00B
    assert not (tmp_path / "cache").exists()


def test_plan_counts_every_saved_activation_without_gradient_checkpointing(capsys):
    """Without model.gradient_checkpointing each layer keeps what it saves for the backward pass
    (about 67 x hidden bytes per token for a Qwen2.5 layer in bf16, measured), not only its 2-byte
    input: the 32B recipe would then not fit an 80 GB GPU."""
    cfg = load_config([builtin_config_path("dapo_qwen2.5_32b")])
    tokens, layers = cfg.trainer.micro_batch_tokens, 64
    assert f"{tokens * HIDDEN * 2 * layers / GIB:9.2f} GiB" in plan(cfg, params=32.8e9)
    assert main(["plan", "dapo_qwen2.5_32b", "--params", "32.8e9", "model.gradient_checkpointing=false"]) == 1
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "every layer's (no checkpointing)" in line)
    assert tokens * HIDDEN * 64 * layers / GIB < float(row.split()[-2]) < tokens * HIDDEN * 70 * layers / GIB
    assert "DOES NOT FIT" in out and "set model.gradient_checkpointing=true" in out


def test_a_model_not_on_this_machine_gets_the_shape_of_the_qwen25_model_nearest_in_size_and_says_so(capsys):
    from dapo.cli.main import main

    assert main(["plan", "qwen2.5_1.5b_1gpu", "--params", "7.6e9"]) == 1  # 7.6B does not fit its one GPU
    out = capsys.readouterr().out
    assert "28 layers, hidden 3584" in out and "nearest in size" in out  # Qwen2.5-7B, not the 1.5B's 1536
    for bad in (["--params", "-5"], ["--params", "nan"], ["--params", "inf"], ["--device-gib", "nan"]):
        assert main(["plan", "qwen2.5_1.5b_1gpu", *bad]) == 2  # nan printed 'nan GiB'; inf, a traceback
        assert "--params and --device-gib must be finite numbers > 0" in capsys.readouterr().err
    assert main(["plan", "dapo_qwen2.5_32b", "--params", "32.8"]) == 2  # billions meant: a 33-parameter model "fit"
    assert "--params 32.8 is a count of parameters, not billions: did you mean 32.8e9?" in capsys.readouterr().err
    assert main(["plan", "dapo_qwen2.5_32b", "--params", "1e20"]) == 2  # was planned, with advice on vLLM's share
    assert "more than any model has" in capsys.readouterr().err


def test_vllm_weights_larger_than_the_device_are_not_told_to_take_a_larger_share_of_it(capsys):
    """bf16 weights per engine larger than the whole device: raising vLLM's memory share cannot help."""
    from dapo.cli.main import main

    assert main(["plan", "dapo_qwen2.5_32b", "rollout.vllm_tensor_parallel_size=1", "--params", "1e12"]) == 1
    out = capsys.readouterr().out
    assert "raise rollout.vllm_tensor_parallel_size (the whole device cannot hold them)" in out
    assert main(["plan", "dapo_qwen2.5_32b", "rollout.vllm_tensor_parallel_size=1", "rollout.vllm_gpu_memory_utilization=0.3",
                 "--params", "32.8e9"]) == 1
    assert "raise rollout.vllm_gpu_memory_utilization or rollout.vllm_tensor_parallel_size" in capsys.readouterr().out


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


def test_a_sequence_longer_than_the_micro_batch_budget_is_a_micro_batch_of_its_own():
    """(the plan held every micro-batch to trainer.micro_batch_tokens, where a sample longer than
    it is a micro-batch of its own: qwen2.5_1.5b_1gpu's 1024 + 4096 tokens)"""
    base = [builtin_config_path("qwen2.5_1.5b_1gpu")]

    def outside(budget: int) -> float:
        cfg = load_config(base, [f"trainer.micro_batch_tokens={budget}"])
        return dict(training_rows(cfg, model_shape(cfg, 1.54e9))[0])["activations outside the layers"]

    assert outside(1024) == outside(5120) and outside(10240) == 2 * outside(5120)


def test_a_native_engine_counts_the_kv_cache_of_a_rounds_rows_at_full_length():
    """Every row of a round decodes at once, its cache growing to prompt + response: dapo_recipe's
    192 prompts x 16 responses at 1024 + 4096 tokens, in float32, on Qwen2.5-0.5B's shape (24
    layers, 2 KV heads of 64): 2 x 24 x 2 x 64 x 4 bytes a token, 384 GB, where the update needs
    a few. vLLM pages its cache within its share."""
    cfg = load_config([builtin_config_path("dapo_recipe")], ["model.path=/not/here", "trainer.device=cuda",
                                                             "rollout.native_dtype=model", "model.dtype=float32",
                                                             "rollout.native_kv_cache_gib=0"])
    out = plan(cfg, params=0.49e9)
    kv = 2 * 24 * 2 * 64 * 4 * 192 * 16 * (1024 + 4096)
    [row] = [line for line in out.splitlines() if line.startswith("  KV cache")]
    assert row.startswith("  KV cache, full: 3072 rows x 5120 tokens, float32 ") and row.endswith(f"{kv / GIB:9.2f} GiB")
    assert "total while generating (weights, AdamW, the KV cache)" in out
    # 0 is no limit: the remedy is to set one, not to lower it
    assert ("set rollout.native_kv_cache_gib (0: no limit; a cap decodes a round in chunks) or use "
            "rollout.engine=vllm") in out
    capped_too_high = plan(load_config([builtin_config_path("dapo_recipe")], [
        "model.path=/not/here", "trainer.device=cuda", "rollout.native_dtype=model", "model.dtype=float32",
        "rollout.native_kv_cache_gib=400"]), params=0.49e9)
    assert "lower rollout.native_kv_cache_gib (or trainer.gen_prompts_per_round) or use rollout.engine=vllm" in capped_too_high
    # within dapo_recipe's rollout.native_kv_cache_gib=16: chunks of 8 prompts x 16 rows, 15 GiB
    budgeted = plan(load_config([builtin_config_path("dapo_recipe")], [
        "model.path=/not/here", "trainer.device=cuda", "rollout.native_dtype=model", "model.dtype=float32"]),
        params=0.49e9)
    [row] = [line for line in budgeted.splitlines() if line.startswith("  KV cache")]
    assert row.startswith("  KV cache, full: 128 rows x 5120 tokens") and row.endswith(f"{kv / 24 / GIB:9.2f} GiB")
    assert "KV cache, full" not in plan(load_config([builtin_config_path("dapo_recipe")], [
        "model.path=/not/here", "rollout.engine=vllm"]), params=0.49e9)
    # the cache in the dtype the engine decodes in (bf16: half), and a rank's share of the round's prompts
    for overrides, rows, dtype in ((["rollout.native_dtype=bfloat16"], 3072, "bfloat16"),
                                   (["rollout.native_dtype=model", "resources.devices_per_node=2"], 1536, "float32")):
        shared = plan(load_config([builtin_config_path("dapo_recipe")], [
            "model.path=/not/here", "trainer.device=cuda", "model.dtype=float32", "rollout.native_kv_cache_gib=0",
            *overrides]), params=0.49e9)
        [row] = [line for line in shared.splitlines() if line.startswith("  KV cache")]
        assert row.startswith(f"  KV cache, full: {rows} rows x 5120 tokens, {dtype} ") and row.endswith(
            f"{kv / 2 / GIB:9.2f} GiB")


@pytest.mark.parametrize(("overrides", "fused"), [([], True), (["trainer.fused_logprobs=false"], False),
                                                   (["trainer.device=cuda:1"], True),
                                                   (["trainer.device=mps"], False),  # (CUDA's kernels)
                                                   (["trainer.param_dtype=none", "trainer.autocast=bf16"], True)])
def test_plan_counts_the_logits_their_gradient_and_the_log_prob_chunks(overrides, fused):
    """bf16 logits (tokens x vocabulary) and the backward's gradient of the same size; where the
    fused CUDA kernels do not run, also two float32 chunks of 4096 rows the log-prob pass works in
    (4.6 GiB at the 32B recipe's 24,576 tokens)."""
    cfg = load_config([builtin_config_path("dapo_qwen2.5_32b")], overrides)
    tokens, vocab = cfg.trainer.micro_batch_tokens, 152064
    expected = 2 * tokens * vocab * 2 + (0 if fused else 2 * 4096 * vocab * 4)  # bf16 weights or autocast
    row = next(line for line in plan(cfg, params=32.8e9).splitlines() if "logits, gradient" in line)
    assert row.endswith(f"{expected / GIB:9.2f} GiB")


def test_the_fsdp2_root_unit_and_the_output_layers_gradient_are_counted():
    """FSDP2 keeps the root unit (embeddings, final norm, untied output layer) gathered from the
    forward through the backward, and the output layer's gradient unsharded until it ends."""
    out = plan(load_config([builtin_config_path("dapo_qwen2.5_32b")]), params=32.8e9)
    root = next(line for line in out.splitlines() if "root unit, gathered" in line)
    grad = next(line for line in out.splitlines() if "output layer's gradient" in line)
    assert root.endswith(f"{(2 * 152064 * HIDDEN + HIDDEN) * 2 / GIB:9.2f} GiB")  # bf16
    assert grad.endswith(f"{152064 * HIDDEN * 2 / GIB:9.2f} GiB")


@pytest.mark.parametrize(("model_dtype", "expected"), [("float32", 16), ("bfloat16", 8)])
def test_adamw_states_take_the_weights_dtype(model_dtype, expected):
    """torch's AdamW keeps m and v in the parameters' dtype: 8 bytes a parameter for a bf16 model
    (weights, gradient, m, v at 2 bytes), not 12."""
    cfg = load_config([builtin_config_path("dapo_qwen2.5_32b")],
                      [f"model.dtype={model_dtype}", "trainer.param_dtype=none"])
    row = next(line for line in plan(cfg, params=32.8e9).splitlines() if "weights + grads + AdamW" in line)
    assert row.endswith(f"{32.8e9 * expected / 128 / GIB:9.2f} GiB")


def test_generation_holds_weights_adamw_the_engine_and_its_cache_not_the_updates_gradients():
    """While the native / hf engine generates, the gradients, the bf16 compute copies and
    autocast's cast cache are freed (they were counted, 60 GiB planned as 62); a round is
    prompts_per_step prompts without dynamic sampling (3x too many rows were counted), and the
    hf engine's fix is not the native engine's budget, which it does not read."""
    def generating(text: str) -> float:
        return float(next(line for line in text.splitlines() if "total while generating" in line).split()[-2])

    base = ["model.path=/not/here", "trainer.device=cuda", "model.dtype=float32", "rollout.native_dtype=model",
            "trainer.param_dtype=bf16", "trainer.autocast=none"]
    out = plan(load_config([builtin_config_path("dapo_recipe")], base), params=0.49e9)
    kv = float(next(line for line in out.splitlines() if line.startswith("  KV cache")).split()[-2])
    working = float(next(line for line in out.splitlines() if "working weights" in line).split()[-2])
    assert generating(out) == pytest.approx(0.49e9 * 12 / GIB + working + kv, abs=0.011)  # weights, m, v; not grads
    hf = plan(load_config([builtin_config_path("dapo_recipe")], [*base, "rollout.engine=hf",
                                                                 "algorithm.dynamic_sampling=false"]), params=0.49e9)
    [row] = [line for line in hf.splitlines() if line.startswith("  KV cache")]
    assert row.startswith("  KV cache, full: 1024 rows x 5120 tokens")  # 64 prompts x 16, not gen_prompts_per_round's 192
    assert "native_kv_cache_gib or" not in hf and "lower trainer.prompts_per_step (or use rollout.engine=native" in hf
    assert "DOES NOT FIT" in hf


def test_a_sleeping_vllm_engine_is_not_added_to_the_update():
    """With rollout.vllm_sleep_between_rollouts vLLM gives its share back while the trainer
    updates: the device needs the larger of the update and generation (weights, AdamW and the
    share; the gradients are freed), not their sum."""
    cfg = load_config([builtin_config_path("dapo_qwen2.5_32b")])
    lines = plan(cfg, params=32.8e9).splitlines()
    generating = next(line for line in lines if "total while generating" in line)
    assert generating.endswith(f"{32.8e9 * 12 / 128 / GIB + 40.0:9.2f} GiB")  # fp32 weights + m + v, 50% of 80 GiB
    awake = plan(load_config([builtin_config_path("dapo_qwen2.5_32b")], ["rollout.vllm_sleep_between_rollouts=false"]),
                 params=32.8e9).splitlines()
    updating = float(next(line for line in lines if "total while updating" in line).split()[-2])
    total = float(next(line for line in awake if "total with the vLLM share" in line).split()[-2])
    assert total == pytest.approx(updating + 40.0, abs=0.011)


def test_a_kl_reference_model_is_counted():
    """algorithm.kl_coef > 0: each rank holds a float32 shard of the frozen reference, gathers its
    units in its forward (a moment of its own: resharded before the backward), and keeps the shard
    while vLLM generates; one process a bf16 copy."""
    recipe = [builtin_config_path("dapo_qwen2.5_32b")]
    lines = plan(load_config(recipe, ["algorithm.kl_coef=0.001"]), params=32.8e9).splitlines()
    shard = next(line for line in lines if "sharded reference model" in line)
    assert shard.endswith(f"{32.8e9 / 128 * 4 / GIB:9.2f} GiB")
    gathered = next(line for line in lines if "the reference's forward: its root and layers gathered" in line)
    root = 2 * 152064 * HIDDEN + HIDDEN  # embeddings, untied output layer, final norm: in bf16, with two layers
    assert gathered.endswith(f"{(root + 2 * QWEN32B_LAYER) * 2 / GIB:9.2f} GiB")
    generating = next(line for line in lines if "total while generating" in line)
    assert generating.endswith(f"{32.8e9 * 16 / 128 / GIB + 40.0:9.2f} GiB")  # fp32 weights, m, v + the reference
    without = plan(load_config(recipe), params=32.8e9)
    assert "reference" not in without
    one = plan(load_config(recipe, ["algorithm.kl_coef=0.001", "resources.nnodes=1", "resources.devices_per_node=1"]),
               params=0.5e9).splitlines()
    assert next(line for line in one if "reference model" in line).endswith(f"{0.5e9 * 2 / GIB:9.2f} GiB")


def test_activation_bytes_are_measured_at_the_runs_precision():
    """Two Qwen2.5-32B layers on fake tensors: the layer input is 2 bytes x hidden in bf16 and 4
    under autocast (the residual stream stays float32), where autocast also saves a bf16 copy of
    each weight it casts; a layer keeps 60-75 x hidden bytes a token in bf16."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    from dapo.trainer.activation_memory import measure

    config = Qwen2Config(num_hidden_layers=64, hidden_size=HIDDEN, intermediate_size=27648, num_attention_heads=40,
                         num_key_value_heads=8, vocab_size=152064, tie_word_embeddings=False)

    def measured(compute: torch.dtype, autocast: torch.dtype | None):
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        return measure(model, compute, autocast)

    bf16, autocast = measured(torch.bfloat16, None), measured(torch.float32, torch.bfloat16)
    assert bf16.layer_input == 2 * HIDDEN and autocast.layer_input == 4 * HIDDEN
    assert 60 * HIDDEN < bf16.layer < 75 * HIDDEN and autocast.layer > bf16.layer
    matrices = QWEN32B_LAYER - (HIDDEN + 2 * 1024) - 2 * HIDDEN  # autocast casts the linear weights, not biases/norms
    assert bf16.weight_copies == 0 and autocast.weight_copies == pytest.approx(2 * matrices, rel=1e-3)


def test_a_model_that_cannot_run_on_fake_tensors_gets_a_doubled_rule_of_thumb_and_says_so(monkeypatch):
    import dapo.trainer.activation_memory as activation_memory

    def refuse(*_args, **_kwargs):
        raise RuntimeError("data-dependent shape")

    monkeypatch.setattr(activation_memory, "measure", refuse)
    out = plan(load_config([builtin_config_path("dapo_qwen2.5_32b")], ["model.gradient_checkpointing=false"]),
               params=32.8e9)
    assert "rule of thumb, doubled: its layers could not run on fake tensors (RuntimeError: data-dependent shape):" in out
    row = next(line for line in out.splitlines() if "every layer's" in line)
    assert row.endswith(f"{24576 * HIDDEN * 68 * 64 / GIB:9.2f} GiB")


@pytest.mark.parametrize("targets", ["[all-linear]", "[q_proj,v_proj]", "[self_attn.q_proj]"])
def test_a_lora_plan_counts_adamw_for_the_adapters_alone_as_peft_makes_them(tmp_path, targets):
    from transformers import AutoModelForCausalLM

    from dapo.lora import apply_lora

    tiny_model_dir = make_tiny_model(tmp_path / "model", hidden_size=64)
    cfg = load_config([builtin_config_path("default")],
                      [f"model.path={tiny_model_dir}", "model.lora_rank=8", f"model.lora_target_modules={targets}"])
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    params = sum(p.numel() for p in model.parameters())
    apply_lora(model, 8, 16.0, cfg.model.lora_target_modules)
    adapters = sum(p.numel() for p in model.parameters() if p.requires_grad)  # PEFT's own adapters
    rows = dict(training_rows(cfg, model_shape(cfg, None))[0])
    assert rows["weights (frozen: model.lora_rank)"] == params * 4  # float32, no grads or AdamW state
    assert rows["LoRA adapters + grads + AdamW"] == adapters * 16
    assert "weights + grads + AdamW" not in rows
    assert f"with LoRA adapters ({adapters:,} parameters, rank 8)" in plan(cfg)
    # a bf16 base: its frozen weights at 2 bytes, the adapters float32 as ever (dapo.lora)
    bf16 = load_config([builtin_config_path("default")], [f"model.path={tiny_model_dir}", "model.lora_rank=8",
                                                          f"model.lora_target_modules={targets}", "model.dtype=bfloat16"])
    rows = dict(training_rows(bf16, model_shape(bf16, None))[0])
    assert rows["weights (frozen: model.lora_rank)"] == params * 2 and rows["LoRA adapters + grads + AdamW"] == adapters * 16
    # ... and while it generates: the frozen bf16 weights, the float32 adapters and their two AdamW states
    assert _kept_between_updates(bf16, model_shape(bf16, None)) == params * 2 + 3 * adapters * 4



def test_a_lora_plan_of_a_gpt2_counts_the_adapters_on_its_conv1d_layers(tmp_path):
    """GPT-2's linear layers are Conv1D, which the count took for no linear layer: 0 adapters."""
    from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel

    from dapo.lora import apply_lora

    model_dir = tmp_path / "gpt2"
    GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=1024)).save_pretrained(model_dir)
    cfg = load_config([builtin_config_path("default")], [f"model.path={model_dir}", "model.lora_rank=8"])
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    apply_lora(model, 8, 16.0, cfg.model.lora_target_modules)
    adapters = sum(p.numel() for p in model.parameters() if p.requires_grad)  # PEFT's own adapters
    assert adapters > 0
    assert dict(training_rows(cfg, model_shape(cfg, None))[0])["LoRA adapters + grads + AdamW"] == adapters * 16

def test_a_lora_plan_on_two_ranks_shards_the_frozen_weights_and_keeps_no_reference_copy(tmp_path):
    from transformers import AutoModelForCausalLM

    from dapo.lora import apply_lora

    tiny_model_dir = make_tiny_model(tmp_path / "model", hidden_size=64)
    overrides = [f"model.path={tiny_model_dir}", "model.lora_rank=8", "resources.devices_per_node=2",
                 "algorithm.kl_coef=0.1"]
    cfg = load_config([builtin_config_path("default")], overrides)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    params = sum(p.numel() for p in model.parameters())
    apply_lora(model, 8, 16.0, cfg.model.lora_target_modules)
    adapters = sum(p.numel() for p in model.parameters() if p.requires_grad)
    rows, moments = training_rows(cfg, model_shape(cfg, None))
    rows = dict(rows)
    assert rows["sharded weights (frozen: model.lora_rank)"] == params * 4 / 2
    assert rows["sharded LoRA adapters + grads + AdamW"] == adapters * 16 / 2
    # the KL reference is the policy with its adapters off: no copy; the output layer is frozen: no gradient
    assert not any("reference model" in name or "output layer's gradient" in name for name in rows)
    assert "the reference's forward (adapters off): its layers gathered" in dict(moments)
    full = dict(training_rows(load_config([builtin_config_path("default")], overrides[:1] + overrides[2:]),
                              model_shape(cfg, None))[0])
    assert full["sharded reference model (algorithm.kl_coef)"] == params * 4 / 2


def test_a_sequence_parallel_rank_holds_the_activations_of_its_share_of_the_tokens(tmp_path):
    tiny_model_dir = make_tiny_model(tmp_path / "model", hidden_size=64)
    base = [f"model.path={tiny_model_dir}", "resources.devices_per_node=4", "trainer.packing=true",
            "trainer.shared_prompt=false", "trainer.micro_batch_tokens=8192"]
    whole = load_config([builtin_config_path("default")], base)
    split = load_config([builtin_config_path("default")], [*base, "trainer.sequence_parallel_size=4"])
    rows = [dict(training_rows(cfg, model_shape(cfg, None))[0]) for cfg in (whole, split)]
    name = "activations: every layer's (no checkpointing)"
    assert rows[0][name] / 4 <= rows[1][name] < rows[0][name] / 3  # (plus the gathered weights each layer holds)
    assert "computing 1/4 of each packed row" in plan(split)
    assert "DOES NOT RUN: trainer.sequence_parallel_size=4 splits attention by heads: the model has 4 attention and 2 " \
           "key/value heads" in plan(split)  # (make_tiny_model: 4 and 2)
    assert "DOES NOT RUN" not in plan(load_config([builtin_config_path("default")],
                                                  [*base, "trainer.sequence_parallel_size=2"]))
