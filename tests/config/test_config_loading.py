import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dapo.config import ConfigError, builtin_config_path, load_config, save_config


def test_yaml_then_overrides_later_wins(tmp_path: Path):
    path = tmp_path / "run.yaml"
    path.write_text("trainer:\n  lr: 0.001\n  seed: 3\nrollout:\n  n: 4\n")
    cfg = load_config([path], ["trainer.lr=2e-5", "algorithm.clip_ratio_c=null", "data.train_files=[a.parquet]"])
    assert cfg.trainer.lr == 2e-5 and cfg.trainer.seed == 3 and cfg.rollout.n == 4
    assert cfg.algorithm.clip_ratio_c is None and cfg.data.train_files == ["a.parquet"]


def test_resolved_config_round_trips(tmp_path: Path):
    cfg = load_config(overrides=["trainer.lr=3e-6", "reward.functions=[{path: f.py:g, weight: 0.5}]"])
    save_config(cfg, tmp_path / "c.yaml")
    again = load_config([tmp_path / "c.yaml"])
    assert again == cfg


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("algorithm.clip_ratio_c=1.0", "must be > 1"),
        ("checkpoint.every_minutes=-1", r"checkpoint.every_minutes must be >= 0 \(0: off\)"),
        ("trainer.mini_batch_prompts=48", "does not divide"),
        ("trainer.lrr=1", "unknown config key"),
        ("rollout.engine=sglang", "not one of"),
        ("trainer.lr=fast", "should be of type float|is not a number"),
        ("algorithm.loss_agg_mode=sum", "not one of"),
        ("rollout.n=1", "dynamic_sampling needs rollout.n >= 2"),
        ("algorithm.old_logprobs=cached", "not one of"),
        ("rollout.stop_strings=[User:]", 'reads User: as a mapping, quote it: "User:"'),
        ("reward.max_response_chars=0", "must be >= 1"),
        ("algorithm.advantage_eps=0", "advantage_eps must be > 0"),
        ("trainer.lrr=1", r"did you mean trainer.lr\?"),
        ("trainer.total_steps=true", "total_steps=True should be of type int"),
        ("checkpoint.resume=false", "resume=False should be of type str"),
        ("trainer.min_lr_ratio=5", r"min_lr_ratio must be in \[0, 1\]"),
        ("trainer.weight_decay=-1", "weight_decay must be >= 0"),
        ("trainer.num_threads=-3", "num_threads must be >= 0"),
        ("eval.max_problems=-1", "max_problems must be >= 0"),
        ("trainer.gen_prompts_per_round=1", "can never fill trainer.prompts_per_step"),
        ("model.attn_implementation=bogus", "attn_implementation='bogus' is not one of"),
        ("eval.temperature=0", "for greedy decoding set eval.top_k=1"),
        # each boundary of its range (a third mutation audit found them untested)
        ("algorithm.clip_ratio_low=1", r"clip_ratio_low must be in \(0, 1\)"),
        ("algorithm.tis_cap=0.5", "tis_cap must be >= 1"),
        ("algorithm.max_surplus_fraction=1", r"max_surplus_fraction must be in \[0, 1\)"),
        ("trainer.betas=[0.9,1.0]", r"betas must be two values in \[0, 1\)"),  # AdamW's bias correction: 1 - 1**t = 0
        ("rollout.top_p=0", r"top_p must be in \(0, 1\]"),
        ("reward.functions=[{path: 'x.py:f', batch_size: -1}]", "batch_size must be >= 0"),
        ("trainer.total_steps=3.5", "should be of type int"),  # not truncated to 3
    ],
)
def test_invalid_values_say_why(override: str, message: str):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=[override])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [  # accepted before, and then trained silently on zero updates or toward wrong answers
        (["algorithm.advantage=rloo", "rollout.n=1", "algorithm.dynamic_sampling=false"],
         "rloo needs rollout.n >= 2"),
        (["reward.correct_score=0", "reward.incorrect_score=0"], "must be greater than reward.incorrect_score"),
        (["reward.correct_score=-1", "reward.incorrect_score=1"], "must be greater than reward.incorrect_score"),
        (["reward.verifier_weight=-1"], "would reward wrong answers over right ones"),
        (["algorithm.overlong_buffer_len=0"], "overlong_buffer_len=0 never punishes"),
        (["model.dtype=float16"], "the first update writes NaN/inf into the weights"),
        (["algorithm.overlong_buffer_len=64", "rollout.max_response_length=64"], "must be smaller than"),  # ramp from 0
        (["rollout.engine=vllm", "rollout.temperature=2.5"], "outside what rollout.engine=vllm samples at"),
        (["trainer.lrr=1", "rollout.nn=2"], "unknown config keys in several sections"),
        (["checkpoint.on_signal=finish"], "checkpoint.on_signal"),  # (else a typo stopped at once)
    ],
)
def test_settings_that_would_train_on_nothing_or_backwards_are_refused(overrides: list[str], message: str):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=overrides)


def test_packing_on_the_embedded_default_says_the_one_setting_still_missing():
    """It said "choose one" of packing and shared_prompt, which the user had not set (the default
    turns it on), and asked sequence parallelism for trainer.packing=true given on the same line."""
    default = [builtin_config_path("default")]
    with pytest.raises(ConfigError) as refused:
        load_config(default, ["trainer.packing=true"])
    assert "the embedded default turns shared_prompt on): to pack, set trainer.shared_prompt=false too" in str(refused.value)
    with pytest.raises(ConfigError) as refused:
        load_config(default, ["trainer.packing=true", "trainer.sequence_parallel_size=2"])
    assert "set trainer.shared_prompt=false" in str(refused.value) and "set trainer.packing=true" not in str(refused.value)
    with pytest.raises(ConfigError, match="ranks: set trainer.packing=true trainer.shared_prompt=false"):
        load_config(default, ["trainer.sequence_parallel_size=2"])
    load_config(default, ["trainer.packing=true", "trainer.sequence_parallel_size=2", "trainer.shared_prompt=false",
                          "resources.devices_per_node=2", "trainer.num_threads=1"])


def test_what_those_refusals_leave_allowed():
    """Each refusal above stops at its boundary: the settings next to it load as given."""
    # a user function as the whole reward: the verifier's scores do not matter
    cfg = load_config(overrides=["reward.verifier_weight=0", "reward.correct_score=0", "reward.incorrect_score=0",
                                 "reward.functions=[{path: f.py:g, weight: 1.0}]"])
    assert (cfg.reward.verifier_weight, cfg.reward.correct_score, cfg.reward.incorrect_score) == (0, 0, 0)
    cfg = load_config(overrides=["algorithm.overlong_buffer_len=0", "algorithm.overlong_soft_punishment=false"])
    assert (cfg.algorithm.overlong_buffer_len, cfg.algorithm.overlong_soft_punishment) == (0, False)
    cfg = load_config(overrides=["algorithm.advantage=grpo", "rollout.n=1", "algorithm.dynamic_sampling=false"])
    assert (cfg.algorithm.advantage, cfg.rollout.n) == ("grpo", 1)
    # one step inside each boundary
    cfg = load_config(overrides=["algorithm.advantage=rloo", "rollout.n=2", "algorithm.dynamic_sampling=false"])
    assert (cfg.algorithm.advantage, cfg.rollout.n) == ("rloo", 2)
    cfg = load_config(overrides=["reward.correct_score=0.001", "reward.incorrect_score=0"])
    assert cfg.reward.correct_score > cfg.reward.incorrect_score
    cfg = load_config(overrides=["algorithm.overlong_buffer_len=1", "algorithm.overlong_soft_punishment=true"])
    assert cfg.algorithm.overlong_buffer_len == 1
    assert load_config(overrides=["model.dtype=bfloat16"]).model.dtype == "bfloat16"  # warned in preflight, not refused


def test_tis_cap_with_rollout_old_logprobs_says_why():
    with pytest.raises(ConfigError, match="tis_cap has nothing to correct"):
        load_config(overrides=["algorithm.old_logprobs=rollout", "algorithm.tis_cap=2.0"])


@pytest.mark.parametrize("truncation", ["rollout.top_p=0.7", "rollout.top_k=20"])
def test_rollout_old_logprobs_with_truncated_sampling_is_refused_naming_recompute(truncation):
    """The engine's log-probs are of the top-p/top-k truncated, renormalised distribution and the
    trainer's are not: as pi_old they would start the ratio at the kept mass (0.7, not 1) and clip
    the negative-advantage tokens of the first update."""
    with pytest.raises(ConfigError, match=r"ratio would start below 1 .* algorithm.old_logprobs=recompute"):
        load_config(overrides=["algorithm.old_logprobs=rollout", truncation])
    assert load_config(overrides=["algorithm.old_logprobs=recompute", "algorithm.tis_cap=2", truncation])


def test_override_without_equals_is_rejected():
    with pytest.raises(ConfigError, match="key=value"):
        load_config(overrides=["trainer.lr"])


def test_paper_config_carries_the_reference_hyperparameters():
    cfg = load_config([builtin_config_path("dapo_qwen2.5_32b")])
    a, t, r, e = cfg.algorithm, cfg.trainer, cfg.rollout, cfg.eval
    assert (a.clip_ratio_low, a.clip_ratio_high, a.clip_ratio_c) == (0.2, 0.28, 10.0)
    assert a.loss_agg_mode == "token-mean" and a.kl_coef == 0 and a.entropy_coef == 0
    assert a.dynamic_sampling and a.filter_metric == "acc" and a.max_gen_rounds == 10
    assert (r.max_response_length, a.overlong_buffer_len, a.overlong_penalty_factor) == (20480, 4096, 1.0)
    assert (r.n, t.prompts_per_step, t.gen_prompts_per_round, t.mini_batch_prompts) == (16, 512, 1536, 32)
    assert t.optimizer_steps_per_rollout == 16
    assert (t.lr, t.warmup_steps, t.lr_schedule, t.weight_decay, t.grad_clip) == (1e-6, 10, "constant", 0.1, 1.0)
    assert (r.temperature, r.top_p, e.temperature, e.top_p, e.k) == (1.0, 1.0, 1.0, 0.7, 32)
    assert cfg.data.max_prompt_length == 2048
    # fp32 master weights and AdamW state, bf16 compute on bf16 copies (verl's FSDP mixed
    # precision); surplus groups dropped, as verl does
    assert cfg.model.dtype == "float32" and t.param_dtype == "bf16" and r.vllm_dtype == "bfloat16"
    assert not a.keep_surplus_groups


@pytest.mark.parametrize("name", ["default", "dapo_qwen2.5_32b", "qwen2.5_1.5b_1gpu"])
def test_no_shipped_config_trains_pure_low_precision_weights(name: str):
    # AdamW on bf16 weights at lr ~1e-6 rounds most updates away: bf16 belongs in autocast or
    # trainer.param_dtype's copies
    assert load_config([builtin_config_path(name)]).model.dtype == "float32"


@pytest.mark.parametrize("name", ["default", "dapo_qwen2.5_32b", "qwen2.5_1.5b_1gpu"])
def test_shipped_configs_load_and_only_use_known_keys(name: str):
    path = builtin_config_path(name)
    load_config([path])
    assert yaml.safe_load(path.read_text())


def test_unknown_shipped_config_lists_the_shipped_ones():
    with pytest.raises(ConfigError, match="default"):
        builtin_config_path("nope")


def test_multi_rank_runs_take_a_kl_penalty():
    """Each policy rank holds a shard of the reference model (tests/trainer/test_trainer_ray.py)."""
    cfg = load_config([], ["resources.devices_per_node=2", "algorithm.kl_coef=0.01", "algorithm.kl_estimator=k3"])
    assert cfg.algorithm.kl_coef == 0.01 and cfg.resources.world_size == 2
    assert load_config([], ["resources.nnodes=2", "resources.devices_per_node=4"]).resources.world_size == 8


def test_tensor_parallel_engines_must_tile_each_node():
    ok = load_config([], ["resources.nnodes=2", "resources.devices_per_node=8", "rollout.engine=vllm",
                          "rollout.vllm_tensor_parallel_size=4"])
    assert ok.rollout.vllm_tensor_parallel_size == 4
    with pytest.raises(ConfigError, match=r"devices_per_node \(6\) divisible by it"):
        load_config([], ["resources.devices_per_node=6", "rollout.engine=vllm", "rollout.vllm_tensor_parallel_size=4"])
    # an engine that holds the whole model is refused it on ranks and in one process alike (one process
    # took it without a word); one process's vLLM engine may split the model over the node's devices
    for devices in (2, 1):
        with pytest.raises(ConfigError, match="rollout.engine=native holds the whole model"):
            load_config([], [f"resources.devices_per_node={devices}", "rollout.engine=native",
                             "rollout.vllm_tensor_parallel_size=2"])
    assert load_config([], ["rollout.engine=vllm", "rollout.vllm_tensor_parallel_size=2"]).resources.world_size == 1


def test_an_empty_list_value_is_the_empty_list():
    assert load_config(overrides=["data.eval_files="]).data.eval_files == []


def test_the_own_model_recipe_does_not_evaluate_on_the_built_in_task():
    assert load_config([builtin_config_path("dapo_recipe")]).data.eval_files == []


def test_auto_filter_metric_is_correctness_with_the_verifier_and_the_reward_without():
    """Without the verifier a user reward's correctness is score > 0 unless it says otherwise:
    filtering on it would drop groups whose scores differ (non-zero advantages) as all correct."""
    assert load_config().resolved_filter_metric() == "acc"  # the paper's filter
    user_reward = ["reward.verifier_weight=0", "reward.functions=[{path: 'rewards.py:graded'}]"]
    assert load_config(overrides=user_reward).resolved_filter_metric() == "score"
    chosen = load_config(overrides=[*user_reward, "algorithm.filter_metric=acc"])
    assert chosen.resolved_filter_metric() == "acc"


def test_a_section_whose_keys_are_all_commented_out_changes_nothing(tmp_path: Path):
    """YAML reads such a section as null: it reset the section an earlier file set, and refused
    an override into it."""
    (tmp_path / "a.yaml").write_text("trainer:\n  lr: 2.0e-5\n")
    (tmp_path / "b.yaml").write_text("trainer:\n  # lr: 3.0e-5\neval:\n  # k: 8\n")
    cfg = load_config([tmp_path / "a.yaml", tmp_path / "b.yaml"], ["eval.k=4"])
    assert cfg.trainer.lr == 2.0e-5 and cfg.eval.k == 4


def test_a_list_whose_items_are_all_commented_out_is_empty(tmp_path: Path):
    """YAML reads ``eval_files:`` with its items commented out as null: the empty list the schema
    documents (no evaluation), not a list of one null refused as "[0]=None"."""
    (tmp_path / "a.yaml").write_text("data:\n  eval_files:\n    # - eval.parquet\nreward:\n  functions:\n"
                                     "    # - {path: rewards.py:fn}\nalgorithm:\n  plugins:\n")
    cfg = load_config([tmp_path / "a.yaml"])
    assert cfg.data.eval_files == [] and cfg.reward.functions == [] and cfg.algorithm.plugins == []


def test_a_plugin_package_in_the_working_directory_stays_a_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A run's saved config (and a rank's) makes local files absolute; a plugin that is a package
    found in the working directory is a module name, made a path it failed to import as a file."""
    from dapo.config.loading import config_from_dict, config_to_dict, with_absolute_paths

    (tmp_path / "my_pkg").mkdir()
    (tmp_path / "my_pkg" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    saved = with_absolute_paths(config_to_dict(load_config([], ["algorithm.plugins=[my_pkg]"])))
    assert saved["algorithm"]["plugins"] == ["my_pkg"]
    assert config_from_dict(saved).algorithm.plugins == ["my_pkg"]


def test_the_builtin_keyword_stays_one_beside_a_folder_of_that_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A run started where a builtin/ folder lies saved model.path as that folder: its ranks and
    its resumes then loaded the folder, not the built-in model."""
    from dapo.config.loading import config_to_dict, with_absolute_paths

    (tmp_path / "builtin").mkdir()
    monkeypatch.chdir(tmp_path)
    for given in ("builtin", "builtin:mixed"):
        saved = with_absolute_paths(config_to_dict(load_config([], [f"model.path={given}", "data.train_files=[builtin]"])))
        assert saved["model"]["path"] == given and saved["data"]["train_files"] == ["builtin"]


def test_an_integer_in_scientific_notation_is_an_integer():
    assert load_config(overrides=["trainer.total_steps=1e3"]).trainer.total_steps == 1000
    with pytest.raises(ConfigError, match="total_steps"):
        load_config(overrides=["trainer.total_steps=1.5e0"])


def test_a_config_file_repeating_a_section_is_refused_not_half_read(tmp_path: Path):
    """PyYAML keeps a repeated key's last copy: the first trainer: section's settings were lost."""
    path = tmp_path / "dup.yaml"
    path.write_text("trainer:\n  lr: 1.0e-6\nrollout:\n  n: 4\ntrainer:\n  total_steps: 3\n")
    with pytest.raises(ConfigError, match=r"dup\.yaml is not valid YAML: line 5, column 1: the key 'trainer' appears twice"):
        load_config([path])


def test_yaml_dates_and_booleans_in_text_fields():
    # an unquoted 2024-06-01 is a date to YAML: a text field takes it as written
    assert load_config([], ["output_dir=2024-06-01"]).output_dir == "2024-06-01"
    with pytest.raises(ConfigError, match="trainer.autocast=False should be of type str; YAML reads no/off/false"):
        load_config([], ["trainer.autocast=no"])


def test_a_quoted_tilde_in_output_dir_and_tokenizer_path_is_the_home_directory(monkeypatch):
    """(the shell expands ~ only unquoted and at a word's start: output_dir=~/runs/x made ./~/runs/x,
    and an unexpanded tokenizer path was taken for a Hub repository id)"""
    monkeypatch.setenv("HOME", "/home/someone")
    cfg = load_config([], ["output_dir=~/runs/x", "model.tokenizer_path=~/tok"])
    assert (cfg.output_dir, cfg.model.tokenizer_path) == ("/home/someone/runs/x", "/home/someone/tok")


def test_values_that_fail_later_or_silently_are_refused_with_the_reason(tmp_path):
    """Each was accepted: an empty stop string crashed after the model loaded, an empty
    output_dir wrote the run into the working directory, ' #3' was dropped as a YAML comment."""
    cases = {
        "rollout.stop_strings=['']": "empty string, which would match anywhere",
        "output_dir=": "output_dir is empty",
        "model.cache_dir=": "model.cache_dir is empty",
        "output_dir=runs/exp #3": r"would drop what follows it; quote the value \(in a shell, the whole override "
                                  r"too\): \"output_dir='runs/exp #3'\"",
        # YAML syntax at a value's start: a glob read as an alias, @ as reserved
        "data.train_files=*.parquet": r"quote it \(in a shell, the whole override too\): \"data.train_files='\*.parquet'\"",
        "data.train_files=[*.parquet, b.jsonl]": r": \"data.train_files=\['\*.parquet', 'b.jsonl'\]\"",
        "model.path=@org/x": r"YAML reads '@' at the start of a value as syntax: quote it",
    }
    for override, message in cases.items():
        with pytest.raises(ConfigError, match=message):
            load_config(overrides=[override])
    assert load_config(overrides=["output_dir='runs/exp #3'"]).output_dir == "runs/exp #3"
    assert load_config(overrides=["data.train_files=['*.parquet']"]).data.train_files == ["*.parquet"]
    assert load_config(overrides=["output_dir=runs/exp#3"]).output_dir == "runs/exp#3"  # no space: not a comment


def test_a_fractional_float_for_a_whole_number_is_refused_not_truncated():
    """A float reaches coerce as a float from a config built in Python (or JSON): 3.0 is 3, 3.5 is no int."""
    from dapo.config.coerce import coerce

    assert coerce(3.0, int, "trainer.total_steps") == 3
    with pytest.raises(ConfigError, match="should be of type int"):
        coerce(3.5, int, "trainer.total_steps")


def test_a_value_of_the_wrong_type_is_shown_as_written(tmp_path):
    """The reader keeps a number's text for its field to read: an error showed [1] as ['1'],
    a number as if quoted text."""
    config = tmp_path / "my.yaml"
    config.write_text("trainer: {lr: [1, 2e-6]}\nrollout: {stop_strings: ['5']}\n")
    with pytest.raises(ConfigError, match=r"trainer.lr=\[1, 2e-6\] should be of type float"):
        load_config([config])
    config.write_text("data: {chat_template_kwargs: [3]}\n")
    with pytest.raises(ConfigError, match=r"data.chat_template_kwargs must be a mapping of names to values, got \[3\]"):
        load_config([config])
    config.write_text("trainer: {lr: {a: 1, 'b': '2'}}\n")
    with pytest.raises(ConfigError, match=r"trainer.lr=\{'a': 1, 'b': '2'\} should be of type float"):
        load_config([config])


def test_config_files_a_user_may_hand_in_by_mistake_or_by_yaml_habit(tmp_path):
    """A data file given as CONFIG, a key YAML reads as a bool, a merge key (<<), which PyYAML
    itself accepts: a one-line error or the merged settings, not a traceback or a refusal."""
    data = tmp_path / "train.parquet"
    data.write_bytes(b"PAR1\xb0\xff\x00")
    with pytest.raises(ConfigError, match=r"is not a YAML text file \(a data file goes in data.train_files="):
        load_config([data])
    with pytest.raises(ConfigError, match=r"dapo_recipe.yaml does not exist; the shipped config 'dapo_recipe' is "
                                          r"named without a path or .yaml: dapo_recipe$"):
        load_config([tmp_path / "configs" / "dapo_recipe.yaml"])  # (the README once said configs/...)
    with pytest.raises(ConfigError, match=r"mine.yaml does not exist$"):
        load_config([tmp_path / "mine.yaml"])
    (tmp_path / "dir.yaml").mkdir()  # was "Is a directory: dir.yaml"
    with pytest.raises(ConfigError, match=r"dir.yaml is a directory: a CONFIG is a YAML file or a shipped config"):
        load_config([tmp_path / "dir.yaml"])
    latin1 = tmp_path / "mine.yaml"  # saved by an editor in Latin-1: was "a data file goes in data.train_files"
    latin1.write_bytes("# r\xe9glages\ntrainer:\n  lr: 1.0e-5\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"mine.yaml is not UTF-8 text \(byte 0xe9 at offset 3\): save it as UTF-8"):
        load_config([latin1])
    boolean_key = tmp_path / "b.yaml"
    boolean_key.write_text("trainer:\n  lr: 1.0e-5\n  yes: 3\n")
    with pytest.raises(ConfigError, match=r"config key\(s\) \[True\] under trainer are not names"):
        load_config([boolean_key])
    merged = tmp_path / "merge.yaml"
    merged.write_text("trainer:\n  <<: {lr: 3.0e-5, seed: 4}\n  seed: 5\n")
    cfg = load_config([merged])
    assert (cfg.trainer.lr, cfg.trainer.seed) == (3.0e-5, 5)
    twice = tmp_path / "twice.yaml"
    twice.write_text("trainer:\n  seed: 4\n  seed: 5\n")
    with pytest.raises(ConfigError, match="appears twice"):
        load_config([twice])


def test_a_seed_outside_what_numpy_and_the_round_seeds_take_is_refused():
    """trainer.seed is multiplied by 1_000_003 for each round's seed (int64) and vLLM seeds numpy
    ([0, 2**32)): a larger one crashed mid-run with a traceback."""
    assert load_config([], [f"trainer.seed={2**32 - 1}"]).trainer.seed == 2**32 - 1
    for seed in (2**32, 10**14, -1):
        with pytest.raises(ConfigError, match=r"trainer.seed=.* must be in \[0, 2\*\*32\)"):
            load_config([], [f"trainer.seed={seed}"])
        with pytest.raises(ConfigError, match=r"eval.seed=.* must be in \[0, 2\*\*32\)"):
            load_config([], [f"eval.seed={seed}"])


def test_rewards_whose_every_weight_is_zero_are_refused(tmp_path):
    """A reward function of weight 0 beside verifier_weight=0 passed the 'nothing scores' check,
    and every reward of the run was 0 (no group had signal, no update ever happened)."""
    spec = "{path: 'r.py:f', weight: 0}"
    with pytest.raises(ConfigError, match="every reward would be 0"):
        load_config([], ["reward.verifier_weight=0", f"reward.functions=[{spec}]"])
    assert load_config([], ["reward.verifier_weight=0", "reward.functions=[{path: 'r.py:f', weight: 0.5}]"])


def test_the_saved_config_names_the_model_cache_directory_absolute(tmp_path, monkeypatch):
    """model.cache_dir is where the built-in base model is installed: a relative one named
    another directory from another working directory."""
    from dapo.config.loading import config_to_dict, with_absolute_paths

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for given, expected in [("cache", tmp_path / "cache"), ("~/c", tmp_path / "home" / "c")]:
        saved = with_absolute_paths(config_to_dict(load_config([], [f"model.cache_dir={given}"])))
        assert saved["model"]["cache_dir"] == str(expected)


def test_importing_the_config_loads_no_torch():
    """The registries (and ADVANTAGE_CALL, POLICY_LOSS_CALL, LOSS_AGG_CALL, read off the functions
    that call their entries) come with torch: AlgorithmConfig imports them when one is built, so
    that a tool that only reads or writes configs starts without it."""
    code = "import sys\nimport dapo.config\nassert 'torch' not in sys.modules, 'dapo.config imported torch'\n"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_clip_higher_bound_below_the_lower_one_is_said_not_refused():
    """An asymmetric-clip ablation (eps_high < eps_low) trains, as verl's does, with a warning."""
    with pytest.warns(UserWarning, match=r"clip_ratio_high=0\.1 < clip_ratio_low=0\.2: .* opposite of DAPO's Clip-Higher") as said:
        cfg = load_config(overrides=["algorithm.clip_ratio_high=0.1"])
    assert (cfg.algorithm.clip_ratio_low, cfg.algorithm.clip_ratio_high) == (0.2, 0.1)
    # raised in dapo's source, so the CLI says it as "dapo train: warning: ...", not as Python's
    # "<string>:26: UserWarning" of the dataclass's generated __init__
    from dapo.warning_format import is_dapo_source

    assert all(is_dapo_source(record.filename) for record in said), [record.filename for record in said]
