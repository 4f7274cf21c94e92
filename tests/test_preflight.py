"""Validation before anything heavy loads: every problem of a run at once, one line each."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dapo.cli.main import main as dapo_main
from dapo.config import builtin_config_path, load_config
from dapo.preflight import PreflightError, check_run, resume_problems, reward_problems


def fake_model_dir(path: Path, tokenizer: bool = True, context: int = 32768) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"model_type": "qwen2", "max_position_embeddings": context}))
    (path / "model.safetensors").write_bytes(b"\0" * 1024)
    if tokenizer:
        (path / "tokenizer.json").write_text("{}")
    return path


def test_every_problem_is_reported_at_once_in_one_line_each_before_loading(tmp_path, capsys):
    model = fake_model_dir(tmp_path / "model", tokenizer=False)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    started = time.perf_counter()
    code = dapo_main([
        "train", f"model.path={model}", f"data.train_files=[{tmp_path / 'missing.parquet'}]",
        "data.eval_files=[]", "rollout.engine=vllm", "trainer.device=cuda",
        f"reward.functions=[{{path: '{tmp_path / 'nope.py'}:fn'}}]", f"output_dir={blocker / 'run'}",
    ])
    assert code == 2 and time.perf_counter() - started < 30
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("dapo train: error:")]
    expected = ["no tokenizer files", "missing.parquet: file not found", "vLLM is not installed",
                "CUDA is not available", "nope.py does not exist", "cannot be written"]
    for phrase in expected:
        assert sum(phrase in line for line in errors) == 1, (phrase, errors)
    assert len(errors) == len(expected)


def test_a_response_longer_than_the_models_context_is_an_error(tmp_path):
    model = fake_model_dir(tmp_path / "model", context=512)
    cfg = load_config([builtin_config_path("dapo_recipe")], [f"model.path={model}", f"output_dir={tmp_path / 'run'}"])
    with pytest.raises(PreflightError, match=r"max_response_length=4096 does not fit the model's context of 512"):
        check_run(cfg)


def test_a_prompt_and_response_past_the_context_warn_natively_and_refuse_vllm(tmp_path):
    """vLLM ends a request at the context, so responses would be cut short of the overlong buffer."""
    model = fake_model_dir(tmp_path / "model", context=5000)  # dapo_recipe: 1024 + 4096 tokens
    args = [f"model.path={model}", f"output_dir={tmp_path / 'run'}"]
    with pytest.warns(UserWarning, match="past the positions the model was trained on"):
        check_run(load_config([builtin_config_path("dapo_recipe")], args))
    vllm = load_config([builtin_config_path("dapo_recipe")], [*args, "rollout.engine=vllm"])
    with pytest.raises(PreflightError, match=r"1024 \+ 4096 is more than the model's context of 5000 tokens, where vLLM"):
        check_run(vllm)


@pytest.mark.parametrize("positions", [{"model_type": "gpt2", "n_positions": 5000},
                                       {"model_type": "opt", "max_position_embeddings": 5000}])
def test_a_prompt_and_response_past_a_learned_position_table_are_refused(tmp_path, positions):
    """GPT-2 names its context n_positions, which was not read: a run past it failed with an
    IndexError in its first evaluation or rollout; and no position past a learned table exists."""
    model = fake_model_dir(tmp_path / "model")
    (model / "config.json").write_text(json.dumps(positions))
    cfg = load_config([builtin_config_path("dapo_recipe")], [f"model.path={model}", f"output_dir={tmp_path / 'run'}"])
    name = "n_positions" if "n_positions" in positions else "max_position_embeddings"
    with pytest.raises(PreflightError, match=rf"1024 \+ 4096 is more than the model's context of 5000 tokens \({name}, "
                                             "learned positions in .*a position past its table fails the forward"):
        check_run(cfg)


def test_the_builtin_models_context_is_checked_too(tmp_path):
    """The built-in model has no config.json to read until it is built: its recipe's 1024
    positions bound a response all the same (before, 2048-token responses ran past them)."""
    args = [f"output_dir={tmp_path / 'run'}", "model.path=builtin"]
    check_run(load_config([builtin_config_path("default")], args))  # 512 + 64 tokens fit
    long = load_config([builtin_config_path("default")], [*args, "rollout.max_response_length=2048",
                                                          "algorithm.overlong_buffer_len=16"])
    with pytest.raises(PreflightError, match=r"max_response_length=2048 does not fit the model's context of 1024 "
                                             r"tokens \(the built-in model builtin's recipe\); set it below 1024"):
        check_run(long)
    with pytest.warns(UserWarning, match=r"512 \+ 600 is more than the model's context of 1024"):
        check_run(load_config([builtin_config_path("default")], [*args, "rollout.max_response_length=600"]))


def test_a_config_of_ones_own_on_the_builtin_model_is_told_what_fits_at_once(tmp_path, recwarn):
    """A config file of one's own starts from the schema's defaults (the paper's 2048 + 20480
    tokens, a 4096-token overlong buffer, the DAPO template): with the built-in model it was refused
    one setting at a time (the response, then the buffer), with a fix that the prompt length, past
    the context too, could not follow (the template: tests/data/test_data_prompts.py)."""
    own = tmp_path / "my.yaml"
    own.write_text(f"output_dir: {tmp_path / 'run'}\ntrainer: {{prompts_per_step: 8, gen_prompts_per_round: 8, mini_batch_prompts: 4}}\n")
    with pytest.raises(PreflightError) as refused:
        check_run(load_config([own]))
    message = " ".join(str(refused.value).split())
    assert ("rollout.max_response_length=20480 does not fit the model's context of 1024 tokens" in message
            and "e.g. data.max_prompt_length=256 rollout.max_response_length=768, with "
                "algorithm.overlong_buffer_len (now 4096) below the new length" in message
            and "`dapo train default YOUR.yaml` layers a config of your own on them" in message)
    check_run(load_config([own], ["data.max_prompt_length=256", "rollout.max_response_length=768",
                                  "algorithm.overlong_buffer_len=64"]))  # the fix it named, as named
    assert load_config([builtin_config_path("default"), own]).data.template == "none"  # the embedded default's


YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
OLD_YARN = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}  # transformers < 4.45


@pytest.mark.parametrize(("config", "context"), [
    ({"max_position_embeddings": 4096}, 4096),
    ({"max_position_embeddings": 4096, "rope_scaling": YARN}, 16384),  # Qwen2.5's recipe, at 1/8 scale
    ({"max_position_embeddings": 5120, "rope_scaling": OLD_YARN}, 16384),
    ({"max_position_embeddings": 4096, "rope_parameters": {**YARN, "rope_theta": 1e6}}, 16384),  # transformers 5
    ({"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "yarn", "factor": 2}}, 8192),  # original: mpe
    ({"max_position_embeddings": 163840, "rope_scaling": {**YARN, "factor": None}}, 163840),  # factor from the two
    ({"max_position_embeddings": 2048, "rope_scaling": {"type": "linear", "factor": 2.0}}, 4096),
    ({"max_position_embeddings": 2048, "rope_scaling": {"rope_type": "dynamic", "factor": 3}}, 6144),
    ({"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                                         "original_max_position_embeddings": 8192}}, 131072),
    ({"max_position_embeddings": 131072, "rope_scaling": {"type": "longrope", "factor": 32,
                                                         "original_max_position_embeddings": 4096}}, 131072),
    ({"model_type": "gemma3_text", "max_position_embeddings": 131072,
      "rope_scaling": {"rope_type": "linear", "factor": 8.0}}, 131072),  # (already scaled, as vLLM reads it)
    ({"max_position_embeddings": 4096, "rope_parameters": {"full_attention": YARN,
                                                          "sliding_attention": {"rope_type": "default"}}}, 4096),
    ({"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "mystery", "factor": 4.0}}, 4096),
    ({"text_config": {"max_position_embeddings": 4096, "rope_scaling": YARN}}, 16384),
])
def test_the_models_context_counts_a_rope_scaling_that_extends_it(config: dict, context: int):
    """A YaRN-extended model (Qwen2.5 at 128K) was held to its pre-extension 32K, so preflight
    refused the responses it was extended for."""
    from dapo.model_context import model_context

    assert model_context(config)[0] == context


def test_a_yarn_extended_model_takes_responses_past_its_max_position_embeddings(tmp_path):
    model = fake_model_dir(tmp_path / "model", context=4096)
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2", "max_position_embeddings": 4096,
                                                   "rope_scaling": OLD_YARN}))
    args = [f"model.path={model}", f"output_dir={tmp_path / 'run'}", "rollout.engine=vllm"]
    extended = ["rollout.max_response_length=8192", "algorithm.overlong_buffer_len=1024"]
    try:  # (vLLM and CUDA may be missing here: problems of their own)
        check_run(load_config([builtin_config_path("dapo_recipe")], [*args, *extended]))
    except PreflightError as error:
        assert not [problem for problem in error.problems if "context" in problem]
    too_long = ["rollout.max_response_length=16384", "algorithm.overlong_buffer_len=1024"]
    with pytest.raises(PreflightError, match=r"context of 16384 tokens \(rope_scaling yarn: factor 4 x "
                                             r"original_max_position_embeddings 4096 in .*config.json\)"):
        check_run(load_config([builtin_config_path("dapo_recipe")], [*args, *too_long]))


def test_a_directory_that_is_not_a_model_is_named(tmp_path):
    cfg = load_config([builtin_config_path("dapo_recipe")], [f"model.path={tmp_path}", f"output_dir={tmp_path / 'r'}"])
    with pytest.raises(PreflightError, match="has no config.json"):
        check_run(cfg)


def test_a_checkpoint_holding_only_shards_says_how_to_use_it(tmp_path):
    checkpoint = tmp_path / "checkpoints" / "step-000020"
    (checkpoint / "policy").mkdir(parents=True)
    (checkpoint / "policy" / ".metadata").write_bytes(b"")  # what DCP writes, without the HF export
    cfg = load_config([builtin_config_path("dapo_recipe")], [f"model.path={checkpoint}", f"output_dir={tmp_path / 'r'}"])
    with pytest.raises(PreflightError, match=r"holds only the ranks' shards.*checkpoint.resume=PATH.*the run's final") as raised:
        check_run(cfg)
    assert "tokenizer" not in str(raised.value)  # the same problem, not a second one


def test_yaml_syntax_errors_name_the_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("trainer:\n  lr: 1e-6\n   rollout: [\n")
    assert dapo_main(["config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"dapo config: error: config file {bad} is not valid YAML: line 3" in err and "Traceback" not in err
    assert dapo_main(["config", "trainer.betas=[0.9"]) == 2
    assert "is not valid YAML" in capsys.readouterr().err


def test_debug_shows_the_traceback():
    result = subprocess.run([sys.executable, "-m", "dapo.cli.main", "--debug", "config", "trainer.lr=-1"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "Traceback" in result.stderr and "trainer.lr must be in (0, 1]" in result.stderr
    with pytest.raises(ValueError, match=r"trainer.lr must be in \(0, 1\]"):  # after the command as well
        dapo_main(["config", "--debug", "trainer.lr=-1"])


def test_config_values_that_would_crash_later_are_named_up_front(tmp_path):
    from dapo.config import ConfigError
    from dapo.data import DataError, load_problems

    default = [builtin_config_path("default")]
    with pytest.raises(ConfigError, match="trainer.device='gpu' is not a device"):
        load_config(default, ["trainer.device=gpu"])
    with pytest.raises(ConfigError, match="builtin_train_size"):
        load_config(default, ["data.builtin_train_size=-1"])
    with pytest.raises(ConfigError, match=r"trainer.lr must be in \(0, 1\]: AdamW moves every weight by about lr"):
        load_config(default, ["trainer.lr=1e39"])  # past float32: AdamW's step raised inside torch
    assert load_config(default, ["model.attn_implementation=null"]).model.attn_implementation is None
    with pytest.raises(ConfigError, match=r"null \(not the text None\)"):  # as Hydra reads it (dapo.config.coerce)
        load_config(default, ["model.attn_implementation=None"])
    cfg = load_config(default, ["data.builtin_max_digits=1"])
    with pytest.raises(DataError, match="only 85 distinct train problems"):
        load_problems(cfg.data.train_files, cfg.data, "train")
    if importlib.util.find_spec("flash_attn") is None:
        cfg = load_config(default, ["model.attn_implementation=flash_attention_2", f"output_dir={tmp_path}"])
        with pytest.raises(PreflightError, match="flash-attn is not installed"):
            check_run(cfg)


def test_names_and_places_that_would_fail_after_the_model_loads_are_named_up_front(tmp_path, monkeypatch):
    """A built-in model or dataset name with a typo, a device this machine lacks, and a reward
    file under ~ (found, as the scorer will find it)."""
    cfg = load_config([builtin_config_path("default")], [
        "model.path=builtin:additon", "data.train_files=[builtin:arithmetc]", "trainer.device=mps",
        f"output_dir={tmp_path / 'run'}",
    ])
    with pytest.raises(PreflightError) as refused:
        check_run(cfg)
    text = str(refused.value)
    assert "names no built-in base model" in text and "'builtin:addition'" in text
    assert "unknown built-in dataset 'builtin:arithmetc'" in text
    assert "trainer.device='mps' but mps is not available here" in text
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "my_reward.py").write_text("def fn(response, ground_truth, extra):\n    return 1.0\n")
    from dapo.rewards.user_functions import absolute_spec, load_reward_function

    assert load_reward_function(absolute_spec("~/my_reward.py:fn"))("x", "1", {}) == 1.0


def test_preflight_of_the_built_in_model_does_not_load_transformers():
    # a typo in a built-in name is named in a second, before transformers and the model code load
    code = ("import sys\nfrom dapo.config import builtin_config_path, load_config\nfrom dapo.preflight import "
            "model_problems, data_problems\ncfg = load_config([builtin_config_path('default')], ['model.path=builtin:nope'])\n"
            "assert model_problems(cfg) and data_problems(['builtin:nope'], 'data.train_files')\n"
            "assert 'transformers' not in sys.modules and 'dapo.builtin.base_model' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_reward_function_name_the_file_lacks_and_a_bad_resume_are_found_before_loading(tmp_path):
    """(both failed only after the model and the data had loaded: minutes on a large model)"""
    rewards = tmp_path / "rewards.py"
    rewards.write_text("import math\n\ndef brevity(response, ground_truth, extra):\n    return 1.0\n\n"
                       "try:\n    def fancy(response, ground_truth, extra):\n        return 0.0\nexcept Exception:\n"
                       "    pass\nalias = brevity\n")
    broken = tmp_path / "broken.py"
    broken.write_text("def f(response, ground_truth, extra)\n    return 1\n")

    def problems(*overrides):
        cfg = load_config([], [f"output_dir={tmp_path / 'run'}", *overrides])
        return reward_problems(cfg) + resume_problems(cfg)

    assert problems(f"reward.functions=[{{path: {rewards}:brevty}}]") == [
        f"reward.functions: '{rewards}:brevty': rewards.py defines no 'brevty' (its functions: ['brevity'])"]
    assert all(problems(f"reward.functions=[{{path: {rewards}:{name}}}]") == [] for name in ("brevity", "fancy", "alias"))
    # functions made at run time, which the import finds and a reading of the file cannot
    made = tmp_path / "made.py"
    made.write_text("def _make(n):\n    return lambda response, ground_truth, extra: -len(response) / n\n\n"
                    "for n in (10, 100):\n    globals()[f'short_{n}'] = _make(n)\n")
    assert problems(f"reward.functions=[{{path: {made}:short_100}}]") == []
    [syntax] = problems(f"reward.functions=[{{path: {broken}:f}}]")
    assert "broken.py line 1: expected ':'" in syntax
    assert problems("checkpoint.resume=disable") == [
        "checkpoint.resume='disable' is not auto, never or a checkpoint directory (none with a trainer_state.pt "
        "is there)"]


def test_either_layout_of_checkpoint_resumes_with_any_number_of_ranks(tmp_path):
    """A one-process checkpoint was refused for several ranks; rank 0 now shards it for them
    (tests/trainer/test_trainer_ray_whole_resume.py), and shards resume anywhere (DCP reshards)."""
    import torch

    from dapo.trainer.sharded_checkpoint import sharded_policy_state

    def checkpoint(run: Path, policy: dict) -> Path:
        path = run / "checkpoints" / "step-000002"
        path.mkdir(parents=True)
        torch.save({"step": 2, "policy": policy}, path / "trainer_state.pt")
        return path

    one_process = checkpoint(tmp_path / "a", {"model": {}, "optimizer": {}})
    checkpoint(tmp_path / "b", sharded_policy_state(2, 0))

    def problems(run: Path, *overrides: str) -> list[str]:
        return resume_problems(load_config([], [f"output_dir={run}", *overrides]))

    for ranks in ("resources.devices_per_node=1", "resources.devices_per_node=2", "resources.devices_per_node=4"):
        assert problems(tmp_path / "a", ranks) == problems(tmp_path / "b", ranks) == []
        assert problems(tmp_path / "new", ranks, f"checkpoint.resume={one_process}") == []


def test_a_warm_up_as_long_as_the_run_is_said(tmp_path, recwarn):
    default = [builtin_config_path("default")]
    check_run(load_config(default, [f"output_dir={tmp_path / 'a'}", "trainer.total_steps=5", "trainer.warmup_steps=10"]))
    assert any("trainer.warmup_steps=10 is not below trainer.total_steps=5" in str(w.message) for w in recwarn)
    recwarn.clear()
    check_run(load_config(default, [f"output_dir={tmp_path / 'b'}", "trainer.total_steps=50", "trainer.warmup_steps=10"]))
    assert not any("warmup_steps" in str(w.message) for w in recwarn)


def test_groups_of_one_response_are_said_to_have_no_baseline(tmp_path, recwarn):
    """rollout.n=1 with dynamic sampling off runs (as verl), but its advantage is the reward itself:
    the premise checked on the estimator, then the warning, and none for groups of two."""
    import torch

    from dapo.algo import compute_advantages

    rewards = torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64)
    advantages = compute_advantages("grpo", rewards, torch.tensor([0, 1, 2]), eps=1e-6)
    assert torch.equal(advantages, rewards / (1 + 1e-6))  # no baseline: a wrong answer gets 0, not a negative
    default = [builtin_config_path("default")]
    check_run(load_config(default, [f"output_dir={tmp_path / 'a'}", "rollout.n=1", "algorithm.dynamic_sampling=false"]))
    assert any("rollout.n=1 samples groups of one response" in str(w.message) and "no group baseline"
               in str(w.message) for w in recwarn)
    recwarn.clear()
    check_run(load_config(default, [f"output_dir={tmp_path / 'b'}", "rollout.n=2"]))
    assert not any("groups of one" in str(w.message) for w in recwarn)


def test_bfloat16_weights_are_said_to_round_small_steps_away(tmp_path, recwarn):
    """At lr 1e-6 a bfloat16 weight above 5.1e-4 in magnitude cannot move by one AdamW step."""
    import torch

    weight = torch.nn.Parameter((torch.randn(64, 64, generator=torch.Generator().manual_seed(0)) * 0.05).bfloat16())
    before = weight.detach().clone()
    weight.grad = torch.randn(64, 64).bfloat16()
    torch.optim.AdamW([weight], lr=1e-6, weight_decay=0.0).step()
    assert (weight.detach() != before).float().mean() < 0.02  # the warning's premise
    default = [builtin_config_path("default")]
    check_run(load_config(default, [f"output_dir={tmp_path / 'a'}", "model.dtype=bfloat16", "trainer.lr=1e-6"]))
    assert any("every weight larger than 0.00051 in magnitude" in str(w.message) for w in recwarn)
    recwarn.clear()
    check_run(load_config(default, [f"output_dir={tmp_path / 'b'}", "trainer.param_dtype=bf16", "trainer.autocast=none"]))
    assert not any("model.dtype=bfloat16" in str(w.message) for w in recwarn)


def test_a_missing_reward_file_under_home_is_named_where_it_was_looked_for(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    cfg = load_config([], [f"output_dir={tmp_path / 'run'}", "reward.functions=[{path: '~/nope.py:fn'}]"])
    assert reward_problems(cfg) == [f"reward.functions: '~/nope.py:fn': file {tmp_path / 'nope.py'} does not exist"]


def test_a_second_gpu_for_the_policy_with_vllm_in_one_process_is_refused(tmp_path, monkeypatch):
    """vLLM's engine is given no device: it took the first GPU, beside a policy on trainer.device=cuda:1."""
    import torch

    from dapo.preflight import device_problems

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    overrides = ["trainer.device=cuda:1", f"output_dir={tmp_path / 'run'}"]
    with_vllm = load_config([builtin_config_path("default")], [*overrides, "rollout.engine=vllm"])
    assert "CUDA_VISIBLE_DEVICES=1 and trainer.device=cuda" in " ".join(device_problems(with_vllm))
    assert device_problems(load_config([builtin_config_path("default")], overrides)) == []  # the native engine follows it
    first = load_config([builtin_config_path("default")], ["trainer.device=cuda:0", "rollout.engine=vllm"])
    assert device_problems(first) == []
    ranks = load_config([builtin_config_path("default")], [*overrides, "rollout.engine=vllm",
                                                            "resources.devices_per_node=2"])
    assert device_problems(ranks) == []  # each rank on the GPU Ray gives it, its engine beside it
