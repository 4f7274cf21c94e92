"""How ``key=value`` overrides and YAML files are read into typed fields, and how a run's saved
config names its paths: each case here was silently wrong before (a section reset to its
defaults, a number read as octal, a path a later run read from another directory)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from dapo.config import ConfigError, load_config
from dapo.config.loading import absolute_local_path, config_to_dict, with_absolute_paths


@pytest.mark.parametrize("override", ["trainer=null", "trainer=~", "trainer=", "trainer=3"])
def test_an_override_cannot_null_a_whole_section(tmp_path: Path, override: str):
    """``trainer=null`` reset every trainer setting of the config files to its default, silently;
    Hydra and verl users expect an error, and one naming how to set the section's fields."""
    (tmp_path / "run.yaml").write_text("trainer:\n  lr: 2.0e-5\n")
    with pytest.raises(ConfigError, match=rf"override '{override}': trainer is a section, not one value .* "
                                          r"trainer\.FIELD=value \(e\.g\. trainer\.total_steps=100\)"):
        load_config([tmp_path / "run.yaml"], [override])
    with pytest.raises(ConfigError, match="model is a section"):  # before a later override fills it again
        load_config([], ["model=null", "model.path=builtin"])


def test_an_empty_section_in_a_file_or_an_empty_mapping_override_changes_nothing(tmp_path: Path):
    (tmp_path / "a.yaml").write_text("trainer:\n  lr: 2.0e-5\n")
    for empty in ("trainer:\n", "trainer: null\n", "trainer: ~\n", "trainer: {}\n"):
        (tmp_path / "b.yaml").write_text(empty)
        assert load_config([tmp_path / "a.yaml", tmp_path / "b.yaml"], ["trainer={}"]).trainer.lr == 2.0e-5


def test_an_override_through_a_value_says_it_is_not_a_section():
    with pytest.raises(ConfigError, match=r"override 'trainer.lr.x=1': trainer.lr is a value, not a section"):
        load_config([], ["trainer.lr.x=1"])


def test_a_relative_or_home_resume_path_is_saved_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The saved config (RUN_DIR/config.yaml, each checkpoint's) kept checkpoint.resume as typed:
    rerun from another directory, it named another (or no) checkpoint."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    checkpoint = tmp_path / "other" / "checkpoints" / "step-000002"
    checkpoint.mkdir(parents=True)
    (tmp_path / "auto").mkdir()  # a directory named like the keyword does not make it a path

    def saved(resume: str) -> str:
        return with_absolute_paths(config_to_dict(load_config([], [f"checkpoint.resume={resume}"])))["checkpoint"]["resume"]

    assert saved("other/checkpoints/step-000002") == str(checkpoint)
    assert saved("gone/step-000001") == str(tmp_path / "gone" / "step-000001")  # deleted since: where it was
    assert saved("~/ckpt") == str(tmp_path / "home" / "ckpt")
    assert (saved("auto"), saved("never")) == ("auto", "never")
    with pytest.raises(ConfigError, match="checkpoint.resume is empty"):  # (it would be saved as the cwd)
        load_config([], ["checkpoint.resume="])


def test_a_home_relative_local_path_is_saved_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """model.path=~/m was saved as typed, so an automatic resume of the same run given /home/me/m
    refused it as a changed model.path."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "m").mkdir()
    assert absolute_local_path("~/m") == str(tmp_path / "m")
    assert absolute_local_path("~/absent") == "~/absent"  # no local file: kept (a Hub id, a later error)


TEXTS = ["010", "0777", "0x10", "0o10", "1e3", "1_000", ".5", "0.10", "1.", "1:30", "12:30:00", "2024-6-1", "-0"]


@pytest.mark.parametrize("text", TEXTS)
def test_a_text_field_keeps_what_was_written(tmp_path: Path, text: str):
    """YAML 1.1 read these as numbers or dates: model.path=010 named the directory "8", 1:30 was
    "90", 0.10 "0.1", 2024-6-1 "2024-06-01"."""
    cfg = load_config([], [f"model.path={text}", f"logging.wandb_project={text}", f"rollout.stop_strings=[{text}]"])
    assert cfg.model.path == cfg.logging.wandb_project == text and cfg.rollout.stop_strings == [text]
    (tmp_path / "run.yaml").write_text(f"model:\n  path: {text}\noutput_dir: {text}\n")
    cfg = load_config([tmp_path / "run.yaml"])
    assert cfg.model.path == cfg.output_dir == text


def test_the_cli_reads_the_model_path_override_as_written():
    from dapo.cli.args import model_path_override

    assert model_path_override(["model.path=010"]) == "010"


@pytest.mark.parametrize(("text", "number"), [
    ("010", 10), ("08", 8), ("0777", 777), ("0x10", 16), ("0o10", 8), ("0b11", 3), ("1_000", 1000),
    ("1e3", 1000), ("3.0", 3), ("+5", 5), ("1e23", 10**23),
])
def test_an_integer_field_reads_decimal_not_yaml_1_1_octal(tmp_path: Path, text: str, number: int):
    """010 was octal 8 (and 08 refused), 1e23 went through a float (99999999999999991611392)."""
    assert load_config([], [f"trainer.total_steps={text}"]).trainer.total_steps == number
    (tmp_path / "run.yaml").write_text(f"trainer:\n  total_steps: {text}\n")
    assert load_config([tmp_path / "run.yaml"]).trainer.total_steps == number


@pytest.mark.parametrize(("text", "number"), [("010", 10.0), ("0777", 777.0), (".5", 0.5), ("1e-6", 1e-6),
                                              ("0x10", 16.0), ("1_000", 1000.0)])
def test_a_float_field_reads_decimal_not_yaml_1_1_octal(text: str, number: float):
    assert load_config([], [f"trainer.grad_clip={text}"]).trainer.grad_clip == number


@pytest.mark.parametrize(("override", "message"), [
    ("eval.seed=1:30", r"eval.seed='1:30' should be of type int"),  # YAML 1.1's base 60: 90
    ("eval.seed=12:30:00", "should be of type int"),
    ("trainer.lr=1:30", r"trainer.lr='1:30' is not a number"),
    ("eval.seed=1e999999999", "should be of type int"),  # refused, not built digit by digit
    ("trainer.lr=.inf", "must be a finite number"),
    ("trainer.total_steps=2024-06-01", "should be of type int"),
])
def test_what_is_no_number_is_refused_naming_the_field(override: str, message: str):
    with pytest.raises(ConfigError, match=message):
        load_config([], [override])


@pytest.mark.parametrize(("section", "values", "message"), [
    ("AlgorithmConfig", {"overlong_penalty_factor": float("inf")}, r"algorithm.overlong_penalty_factor=inf"),
    ("RewardConfig", {"functions": [{"path": "r.py:f", "weight": float("nan")}]}, r"reward.functions\[0\].weight=nan"),
    ("RewardConfig", {"timeout_s": float("inf")}, r"reward.timeout_s=inf"),
    ("TrainerConfig", {"lr": float("nan")}, r"trainer.lr=nan"),
    ("RolloutConfig", {"temperature": float("inf")}, r"rollout.temperature=inf"),
])
def test_a_non_finite_number_given_in_python_is_refused_as_one_read_from_yaml_is(section: str, values: dict,
                                                                                 message: str):
    """Python's API took them: overlong_penalty_factor=inf made every short response's reward 0 x inf,
    NaN; a NaN reward function weight, every score NaN."""
    from dapo.config import schema

    with pytest.raises(ConfigError, match=message + ": must be a finite number"):
        getattr(schema, section)(**values)


def test_an_empty_builtin_operator_list_is_refused_not_replaced_by_plus():
    """(the task generator silently used "+" for an empty list)"""
    with pytest.raises(ConfigError, match="data.builtin_ops is empty"):
        load_config([], ["data.builtin_ops=[]"])


def test_every_section_is_importable_from_the_schema_and_each_module_stays_small():
    """The sections live in their own modules; ``dapo.config.schema`` still names them all."""
    from dapo.config import schema

    for name in schema.__all__:
        assert getattr(schema, name) is not None
    config_dir = Path(schema.__file__).parent
    assert not [p.name for p in config_dir.glob("*.py") if len(p.read_text().splitlines()) > 400]
    assert os.path.basename(schema.__file__) == "schema.py"


@pytest.mark.parametrize("text", ["none", "None", "'null'"])
def test_the_text_none_in_a_text_field_is_the_text_as_hydra_reads_it(tmp_path: Path, text: str):
    """``model.tokenizer_path=none`` silently meant "unset" (the model's directory), so no text
    field could hold the word; as in Hydra/verl only YAML's null is null. It survives a save."""
    word = text.strip("'")
    cfg = load_config([], [f"model.tokenizer_path={text}"])
    assert cfg.model.tokenizer_path == os.path.abspath(word) or cfg.model.tokenizer_path == word
    (tmp_path / "run.yaml").write_text(f"model:\n  tokenizer_path: {text}\n")
    from_file = load_config([tmp_path / "run.yaml"])
    assert from_file.model.tokenizer_path == cfg.model.tokenizer_path
    from dapo.config import save_config

    save_config(cfg, tmp_path / "saved.yaml")
    assert load_config([tmp_path / "saved.yaml"]).model.tokenizer_path == cfg.model.tokenizer_path


@pytest.mark.parametrize("null", ["null", "Null", "NULL", "~"])
def test_yaml_null_still_unsets_a_text_field_and_none_still_unsets_a_number(null: str):
    assert load_config([], [f"model.tokenizer_path={null}"]).model.tokenizer_path is None
    assert load_config([], [f"resources.ray_address={null}"]).resources.ray_address is None
    for none in ("None", "none", null):  # a number has no other reading of the text
        assert load_config([], [f"algorithm.clip_ratio_c={none}"]).algorithm.clip_ratio_c is None
        assert load_config([], [f"eval.seed={none}"]).eval.seed is None


@pytest.mark.parametrize(("override", "message"), [
    ("model.attn_implementation=None", r"attn_implementation='None' is not one of .* null \(not the text None\)"),
    ("resources.ray_address=none", r"ray_address='none' is no Ray address: null \(not the text None"),
    ("resources.ray_address=", r"ray_address='' is no Ray address: .*nor an empty value"),  # was ray.init(address='')
])
def test_the_text_none_where_no_text_fits_is_refused_saying_to_write_null(override: str, message: str):
    with pytest.raises(ConfigError, match=message):
        load_config([], [override])


@pytest.mark.parametrize("override, message", [
    ("trainer={lr:1e-5}", r"\['trainer.lr:1e-5'\] hold a value after a colon without a space.*\{lr: 1e-5\}"),
    ("reward.functions=[{path:r.py:fn,weight:0.5}]",
     r"without a space.*\{path: r.py:fn, weight: 0.5\}"),
])
def test_a_flow_mapping_without_a_space_after_the_colon_says_so(override: str, message: str):
    """Hydra users write ``{lr:1e-5}``; YAML reads it as the key 'lr:1e-5' with no value, which was
    reported as an unknown key (with a "did you mean" pointing at the key that was written)."""
    with pytest.raises(ConfigError, match=message):
        load_config([], [override])


def test_a_section_key_without_a_space_after_the_colon_in_a_file_says_so(tmp_path: Path):
    (tmp_path / "run.yaml").write_text("trainer:\n  lr:1e-5\n")
    with pytest.raises(ConfigError, match=r"trainer must be a mapping, got 'lr:1e-5'; .*write `lr: 1e-5`"):
        load_config([tmp_path / "run.yaml"])


def test_a_bare_reward_function_spec_says_how_to_write_it():
    with pytest.raises(ConfigError, match=r"reward.functions\[0\] must be a mapping, got 'r.py:fn' .*\{path: r.py:fn\}"):
        load_config([], ["reward.functions=[r.py:fn]"])


@pytest.mark.parametrize("override", ["+trainer.lr=1e-5", "++trainer.lr=1e-5", "~trainer.lr"])
def test_hydra_prefixes_say_to_set_the_field_plainly(override: str):
    """verl users write +key=value; it was an unknown key '+trainer' (did you mean trainer?)."""
    with pytest.raises(ConfigError, match=r"Hydra's \+ / \+\+ / ~ prefixes are not read here: every field .*"
                                          r"leave its override out to keep the default \(trainer\.lr=value\)"):
        load_config([], [override])


def test_a_hydra_delete_without_a_value_gets_the_same_advice_not_a_circle(capsys):
    """`dapo config ~trainer.lr` said "an override needs '=' (e.g. ~trainer.lr=VALUE)", and that one
    that the prefix is not read."""
    from dapo.cli.main import main

    assert main(["config", "~trainer.lr"]) == 2
    assert "Hydra's + / ++ / ~ prefixes are not read here: every field" in capsys.readouterr().err


# (the second form is how validation errors name an item: reward.functions[0].weight='abc' is not a number)
@pytest.mark.parametrize("key", ["reward.functions.0.weight", "reward.functions[0].weight"])
def test_a_list_item_override_says_to_give_the_whole_list(key: str):
    with pytest.raises(ConfigError, match=r"reward.functions is a list, whose items are not set one by one .* "
                                          r"reward.functions=\[\.\.\.\]"):
        load_config([], [f"{key}=0.5"])


@pytest.mark.parametrize("key", ["prompt_key", "answer_key"])
def test_an_empty_column_key_is_a_config_error_not_a_missing_column_in_every_row(key: str):
    with pytest.raises(ConfigError, match=rf"data.{key} is empty: name the column"):
        load_config([], [f"data.{key}="])


def test_unknown_keys_of_several_sections_are_all_said_at_once(tmp_path: Path):
    """A YAML file with a typo in two sections: one per run, the second found after the first was fixed."""
    config = tmp_path / "typos.yaml"
    config.write_text("algorithim:\n  clip_ratio_high: 0.3\ntrainer:\n  lr: 1e-5\n  warmup_step: 3\n")
    with pytest.raises(ConfigError, match=r"^unknown config keys in several sections: algorithim \(did you mean "
                                          r"algorithm\?\), trainer.warmup_step \(did you mean trainer.warmup_steps\?\), "
                                          r"rollout.tempreature \(did you mean rollout.temperature\?\)$"):
        load_config([config], ["rollout.tempreature=1.0"])
    with pytest.raises(ConfigError, match=r"^unknown config key\(s\) \['trainer.warmup_step'\] .*valid keys under trainer"):
        load_config([], ["trainer.warmup_step=3"])  # one section: its valid keys listed, as before


@pytest.mark.parametrize(("override", "guess"), [
    ("trainer.output_dir=runs/x", "output_dir"),  # TRL's TrainingArguments hold it: was no guess
    ("model.lr=1e-6", "trainer.lr"),
    ("data.seed=3", "trainer.seed or eval.seed"),
    ("total_steps=5", "trainer.total_steps"),
    ("trainer.warmup_step=3", "trainer.warmup_steps"),  # a spelling in its own section comes first
])
def test_a_setting_written_in_another_section_is_named_where_it_is(override: str, guess: str):
    with pytest.raises(ConfigError, match=rf"\['{re.escape(override.partition('=')[0])}'\] \(did you mean {guess}\?\)"):
        load_config([], [override])


@pytest.mark.parametrize(("verl_key", "ours"), [
    ("data.train_batch_size=512", "trainer.prompts_per_step"),  # was "did you mean data.builtin_eval_size"
    ("trainer.n_gpus_per_node=8", "resources.devices_per_node"),
    ("algorithm.adv_estimator=grpo", "algorithm.advantage"),  # was algorithm.kl_estimator
    ("actor_rollout_ref.actor.policy_loss.loss_mode=vanilla", r"algorithm.policy_loss \(verl's vanilla: decoupled_clip\) \(verl's "
                                                               r"actor_rollout_ref.actor.policy_loss.loss_mode\)"),
    ("trainer.nnodes=2", "resources.nnodes"),  # was no guess
    ("actor_rollout_ref.actor.optim.lr=1e-6", r"trainer.lr \(verl's actor_rollout_ref.actor.optim.lr\)"),
    ("algorithm.filter_groups.enable=true", r"algorithm.dynamic_sampling \(verl's algorithm.filter_groups.enable\)"),
    # verl's symmetric clip: was "did you mean algorithm.clip_ratio_c", the dual-clip bound
    ("algorithm.clip_ratio=0.2", r"algorithm.clip_ratio_low and algorithm.clip_ratio_high \(DAPO's decoupled clip: "
                                 r"0.2 and 0.28\)"),
    ("trainer.val_before_train=false", "eval.before_training"),  # was no guess
])
def test_a_verl_key_is_answered_with_this_projects_name_for_it(verl_key: str, ours: str):
    with pytest.raises(ConfigError, match=rf"\(did you mean {ours}\?\)"):
        load_config([], [verl_key])


def test_a_verl_section_in_a_yaml_file_is_answered_for_each_of_its_keys(tmp_path: Path):
    """verl's actor_rollout_ref as a YAML mapping: each key this project names, in one message (the
    first alone was named before: one key fixed a run)."""
    config = tmp_path / "verl.yaml"
    config.write_text("actor_rollout_ref:\n  actor:\n    optim:\n      lr: 1e-6\n    clip_ratio_high: 0.28\n"
                      "    ppo_micro_batch_size_per_gpu: 4\n  rollout:\n    n: 16\n")
    with pytest.raises(ConfigError, match=re.escape(
            "(did you mean trainer.lr (verl's actor_rollout_ref.actor.optim.lr), algorithm.clip_ratio_high (verl's "
            "actor_rollout_ref.actor.clip_ratio_high), trainer.micro_batch_tokens (a token budget, not a count) "
            "(verl's actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu), rollout.n (verl's "
            "actor_rollout_ref.rollout.n)?)")):
        load_config([config], [])


@pytest.mark.parametrize(("verl_override", "ours"), [
    # verl's DAPO recipe scripts write these (recipe/dapo/*.sh); they had no answer
    ("+reward_model.reward_kwargs.overlong_buffer_cfg.len=4096",
     r"this project's name for reward_model.reward_kwargs.overlong_buffer_cfg.len: algorithm.overlong_buffer_len"),
    ("+actor_rollout_ref.actor.optim.lr=1e-6", r"this project's name for actor_rollout_ref.actor.optim.lr: trainer.lr"),
    ("algorithm.kl_ctrl.kl_coef=0.0", r"did you mean algorithm.kl_coef \(a KL loss term"),
    ("trainer.total_epochs=1", r"did you mean trainer.total_steps \(training steps, not epochs\)"),
    ("actor_rollout_ref.model.use_remove_padding=true", r"did you mean trainer.packing"),
    ("+actor_rollout_ref.model.override_config.attention_dropout=0.",
     r"override_config.attention_dropout: model.disable_dropout \(true by default\)"),
    # answers that sent a verl user to a setting computing something else (a helper's audit):
    # calculate_log_probs records the engine's log-probs (always done here); taken as pi_old they are
    # rollout_correction.bypass_mode's
    ("actor_rollout_ref.rollout.calculate_log_probs=true", r"did you mean algorithm.tis_cap \(nothing to switch on"),
    ("+algorithm.rollout_correction.bypass_mode=true", r"algorithm.old_logprobs \(rollout: the engine's log-probs"),
    ("+algorithm.rollout_correction.rollout_is=sequence", r"algorithm.tis_cap \(per-token .* sequence level has no"),
    ("+custom_reward_function.path=my.py", r"reward.functions \(path: FILE:compute_score; verl's signature is understood"),
    ("+reward.reward_kwargs.overlong_buffer_cfg.len=4096", r"algorithm.overlong_buffer_len"),  # verl-recipe's later spelling
    ("+actor_rollout_ref.actor.kl_loss_type=low_var_kl", r"algorithm.kl_estimator \(verl's low_var_kl is k3"),
    ("+actor_rollout_ref.actor.optim.weight_decay=0.1", r"trainer.decay_biases_and_norms=true"),
    # same mode names, other normaliser; verl's 0 is "unlimited"
    ("+actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm", r"also divided by the number of responses"),
    ("+algorithm.filter_groups.max_num_gen_batches=0", r"algorithm.max_gen_rounds \(at least 1, no 'unlimited' 0"),
    ("+data.apply_chat_template_kwargs.enable_thinking=false", r"data.chat_template_kwargs"),
])
def test_verl_recipe_keys_are_answered_with_this_projects_names(verl_override: str, ours: str):
    with pytest.raises(ConfigError, match=ours):
        load_config([], [verl_override])


@pytest.mark.parametrize(("trl_key", "ours"), [
    ("learning_rate=1e-6", r"trainer.lr \(TRL's learning_rate\)"),  # was no guess, as most of these
    ("trainer.num_generations=8", r"rollout.n \(TRL's num_generations\)"),
    ("max_completion_length=64", r"rollout.max_response_length \(TRL's max_completion_length\)"),
    ("epsilon_high=0.28", r"algorithm.clip_ratio_high \(TRL's epsilon_high\)"),
    # TRL's epsilon_high defaults to epsilon: clip_ratio_low alone kept 0.28 above, [0.8, 1.28] for [0.8, 1.2]
    ("chat_template_kwargs.enable_thinking=false", r"data.chat_template_kwargs \(TRL's chat_template_kwargs\)"),
    ("epsilon=0.2", r"algorithm.clip_ratio_low and algorithm.clip_ratio_high \(TRL's epsilon_high defaults to epsilon"),
    # TRL counts optimizer steps, a dapo-rl step makes several
    ("max_steps=1000", r"trainer.total_steps \(rollout steps, each of .* TRL's max_steps counts optimizer steps"),
    ("trl.max_steps=1000", r"trainer.total_steps \(rollout steps"),  # a TRL section: its fields were not answered
    # spelling guesses, or none: gradient_accumulation_steps was "did you mean checkpoint.every_steps"
    ("gradient_accumulation_steps=4", r"trainer.micro_batch_tokens \(micro-batches .* accumulate into each optimizer step"),
    ("steps_per_generation=4", r"trainer.mini_batch_prompts \(a rollout of trainer.prompts_per_step prompts makes"),
    ("generation_batch_size=64", r"trainer.gen_prompts_per_round \(prompts per generation round, not completions\)"),
    ("max_prompt_length=512", r"data.max_prompt_length \(a longer prompt is dropped, data.overlong_prompts, not truncated"),
    ("warmup_ratio=0.1", r"trainer.warmup_steps \(rollout steps, not a share of the run\)"),
    ("vllm_mode=colocate", r"rollout.engine \(vllm: colocated with the policy"),
    ("vllm_importance_sampling_correction=true", r"algorithm.tis_cap \(truncated importance sampling"),
    ("importance_sampling_level=sequence", r"algorithm.policy_loss \(the ratio is per token"),
    ("repetition_penalty=1.1", r"rollout.temperature with rollout.top_p and rollout.top_k"),
])
def test_a_trl_key_is_answered_with_this_projects_name_for_it(trl_key: str, ours: str):
    with pytest.raises(ConfigError, match=rf"\(did you mean {ours}.*\?\)"):
        load_config([], [trl_key])


@pytest.mark.parametrize(("override", "ours"), [
    ("algorithm.loss_agg_mode=dapo", "algorithm.loss_agg_mode=token-mean (TRL's loss_type=dapo"),
    ("algorithm.loss_agg_mode=grpo", "algorithm.loss_agg_mode=seq-mean-token-mean (TRL's loss_type=grpo"),
    ("algorithm.loss_agg_mode=dr_grpo", "algorithm.loss_agg_mode=seq-mean-token-sum-norm (TRL's loss_type=dr_grpo"),
    ("algorithm.advantage=reinforce_plus_plus_baseline", "algorithm.advantage=reinforce_pp_baseline (verl's"),
    ("algorithm.policy_loss=vanilla", "algorithm.policy_loss=decoupled_clip (verl's loss_mode=vanilla"),
])
def test_a_peers_name_for_an_algorithm_value_is_answered_with_this_projects(override: str, ours: str):
    """TRL's loss_type values (dapo, grpo, dr_grpo) and verl's names were refused with the plugin
    hint alone; the registered name each is, is said."""
    with pytest.raises(ConfigError, match=rf"; for '{override.partition('=')[2]}' set {re.escape(ours)}"):
        load_config([], [override])


def test_every_peer_value_names_a_registered_one():
    from dapo import algo
    from dapo.config.training import FILTER_METRICS
    from dapo.config.verl_names import PEER_VALUES

    registries = {"loss_agg_mode": algo.LOSS_AGG_MODES, "advantage": algo.ADVANTAGE_ESTIMATORS,
                  "policy_loss": algo.POLICY_LOSSES, "filter_metric": FILTER_METRICS}
    for key, values in PEER_VALUES.items():
        for said in values.values():
            assert said.startswith("none:") or said.split(" ", 1)[0] in registries[key], (key, said)


@pytest.mark.parametrize("key", ["resources.gpus_per_node=8", "resources.num_gpus=8", "n_gpus=8",
                                 "resources.n_gpus_per_node=8"])
def test_a_count_of_gpus_is_answered_with_devices_per_node(key: str):
    """resources.gpus_per_node was answered "did you mean resources.cpus_per_rank" (a spelling guess)."""
    with pytest.raises(ConfigError, match=r"did you mean resources.devices_per_node \(GPUs per node"):
        load_config([], [key])


def test_a_gpu_setting_that_is_no_count_gets_no_devices_answer():
    with pytest.raises(ConfigError) as refused:
        load_config([], ["rollout.gpu_memory_utilization=0.5"])
    assert "devices_per_node" not in str(refused.value)


def test_every_verl_name_maps_to_a_setting_that_exists():
    from dapo.config import DAPOConfig
    from dapo.config.coerce import field_type
    from dapo.config.verl_names import TRL_NAMES, VERL_NAMES

    for verl_key, ours in {**VERL_NAMES, **TRL_NAMES}.items():
        # the answer's first word, and any other dotted name in it (it may name two, and say more)
        for setting in {ours.split(" ", 1)[0], *re.findall(r"\b[a-z_]+\.[a-z_]+\b", ours)}:
            assert field_type(DAPOConfig, setting.split(".")) is not None, verl_key


def test_all_linear_in_a_longer_target_list_is_refused():
    """PEFT reads all-linear as its shorthand only alone: [all-linear,q_proj] adapted q_proj alone."""
    with pytest.raises(ConfigError, match=r"all-linear already takes every linear layer .* give it alone"):
        load_config([], ["model.lora_target_modules=[all-linear,q_proj]"])
    assert load_config([], ["model.lora_target_modules=[all-linear]"]).model.lora_target_modules == ["all-linear"]


def test_a_mapping_setting_takes_a_mapping_whole_or_key_by_key(tmp_path: Path):
    """data.chat_template_kwargs, the config's one mapping of free keys: set whole, by key (also in
    a YAML file), emptied by `=`; anything but a mapping is refused, named."""
    assert load_config([], ["data.chat_template_kwargs={enable_thinking: false, mode: fast}"]).data.chat_template_kwargs == {
        "enable_thinking": False, "mode": "fast"}
    config = tmp_path / "qwen3.yaml"
    config.write_text("data:\n  chat_template_kwargs:\n    enable_thinking: true\n")
    assert load_config([config], ["data.chat_template_kwargs.mode=fast"]).data.chat_template_kwargs == {
        "enable_thinking": True, "mode": "fast"}
    assert load_config([config], ["data.chat_template_kwargs="]).data.chat_template_kwargs == {}
    with pytest.raises(ConfigError, match=r"data.chat_template_kwargs must be a mapping of names to values, got \[1\]"):
        load_config([], ["data.chat_template_kwargs=[1]"])
    with pytest.raises(ConfigError, match=r"data.chat_template_kwargs sets add_generation_prompt, which the prompt "):
        load_config([], ["data.chat_template_kwargs.add_generation_prompt=false"])
    # (accepted and unused before)
    with pytest.raises(ConfigError, match=r"data.use_chat_template=false renders the prompts without one: drop one"):
        load_config([config], ["data.use_chat_template=false"])
    assert load_config([config], ["data.use_chat_template=false", "data.chat_template_kwargs=null"])
    # numbers are numbers there (a template comparing thinking_budget >= 0 failed on "512"), also nested
    assert load_config([], ["data.chat_template_kwargs={thinking_budget: 512, scale: 0.5, tags: [1, x]}"]).data.chat_template_kwargs == {
        "thinking_budget": 512, "scale": 0.5, "tags": [1, "x"]}
    # Hydra's + on this project's own key: set it as it is, not "TRL's chat_template_kwargs"
    with pytest.raises(ConfigError, match=r"\(data.chat_template_kwargs.enable_thinking=value\)$"):
        load_config([], ["+data.chat_template_kwargs.enable_thinking=false"])


def test_quoted_text_in_a_mapping_setting_stays_text_and_reads_back_the_same(tmp_path: Path):
    """A number written unquoted is a number, but quoted ('3') it is text, as in YAML: every string
    that looked like a number became one, so a value set from Python as '3' turned into 3 once the
    config was saved and read back (a resume, `dapo eval CHECKPOINT`): a template comparing
    version == '3' rendered another prompt."""
    from dapo.config import DAPOConfig, DataConfig, save_config
    from dapo.config.loading import config_from_dict

    kwargs = {"version": "3", "budget": "1e3", "scale": 1000.0, "tags": ["7", 7]}
    config = DAPOConfig(data=DataConfig(chat_template_kwargs=kwargs))
    save_config(config, tmp_path / "saved.yaml")
    assert load_config([tmp_path / "saved.yaml"]).data.chat_template_kwargs == kwargs
    assert config_from_dict(config_to_dict(config)).data.chat_template_kwargs == kwargs  # (Ray ranks)
    assert load_config([], ["data.chat_template_kwargs.version='3'", "data.chat_template_kwargs.n=3"]
                       ).data.chat_template_kwargs == {"version": "3", "n": 3}
    file = tmp_path / "qwen3.yaml"
    file.write_text("data:\n  chat_template_kwargs: {version: \"3\", budget: 1e3, tags: ['7', 7]}\n")
    assert load_config([file]).data.chat_template_kwargs == {"version": "3", "budget": 1000.0, "tags": ["7", 7]}
    # a text field still reads an unquoted number as the text written
    assert load_config([], ["model.path=010", "trainer.seed=010"]).model.path == "010"
    assert type(load_config([], ["model.path=010"]).model.path) is str


def test_a_peers_config_file_is_answered_one_key_a_line(tmp_path: Path):
    """A TRL GRPOConfig's fields in a YAML file were answered in one line of some 2000 characters;
    more than three unknown keys are listed one a line, each with its answer."""
    config = tmp_path / "trl.yaml"
    config.write_text("learning_rate: 1.0e-6\nbeta: 0.0\nnum_generations: 8\nbf16: true\nnot_a_setting: 1\n")
    with pytest.raises(ConfigError) as refused:
        load_config([config], [])
    assert str(refused.value).splitlines() == [
        "unknown config keys (5, TRL's names among them, each answered with this project's):",
        "  beta: did you mean algorithm.kl_coef (TRL's beta)?",
        "  bf16: did you mean trainer.autocast (TRL's bf16)?",
        "  learning_rate: did you mean trainer.lr (TRL's learning_rate)?",
        "  not_a_setting: no setting of a name like it",
        "  num_generations: did you mean rollout.n (TRL's num_generations)?",
        "valid keys under the top level: ['algorithm', 'checkpoint', 'data', 'eval', 'logging', 'model', 'output_dir', "
        "'python_path', 'resources', 'reward', 'rollout', 'trainer']",
    ]
    with pytest.raises(ConfigError, match=r"(?s)^unknown config keys in several sections \(4\):\n  trainer.lrr: did you mean "
                                          r"trainer.lr\?\n.*\n  data.x: no setting of a name like it$"):
        load_config([], ["trainer.lrr=1", "rollout.nn=2", "trainer.foo=1", "data.x=2"])
