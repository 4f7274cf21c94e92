"""Settings that, broken, would train a wrong run without a word (from a mutation audit of the config
layer: each test here failed on a change that every other test let through): the defaults a partial
YAML file inherits, the checks that refuse a value the trainer would misread, the coercion of a
plain string into a list, and where verl's keys point."""

import pytest
import yaml

from dapo.config import ConfigError, DAPOConfig, TrainerConfig, builtin_config_path, load_config
from dapo.config.loading import config_from_dict, config_to_dict
from dapo.config.verl_names import TRL_NAMES, VERL_NAMES

REFERENCE = builtin_config_path("dapo_qwen2.5_32b")

# Where the dataclass defaults leave the reference run on purpose (schema.py's docstring gives why)
# or for the run's size, place and files, with the default each takes.
DEFAULTS_APART_FROM_THE_REFERENCE = {
    "model.path": "builtin", "model.gradient_checkpointing": False,
    "data.train_files": ["builtin:arithmetic"], "data.eval_files": ["builtin:arithmetic"],
    "reward.verifier": "dapo-rl", "rollout.engine": "native", "rollout.vllm_enforce_eager": False,
    "rollout.vllm_gpu_memory_utilization": 0.6, "rollout.vllm_tensor_parallel_size": 1, "rollout.vllm_dtype": "auto",
    "algorithm.filter_metric": "auto", "algorithm.keep_surplus_groups": True,
    "trainer.total_steps": 100, "trainer.micro_batch_tokens": 16384, "trainer.decay_biases_and_norms": False,
    "trainer.device": "auto", "trainer.param_dtype": "none",
    "eval.every_steps": 0, "eval.top_k": None,  # (None and the reference's 0: no top-k either way)
    "checkpoint.keep_last": 2, "checkpoint.hf_export": "every",
    "resources.nnodes": 1, "resources.devices_per_node": 1, "resources.ray_address": None,
}


def test_the_defaults_are_the_reference_run_s_hyperparameters_but_for_the_named_exceptions():
    """schema.py promises that the algorithm's defaults follow the DAPO reference run: a YAML file that
    leaves out clip_ratio_high, overlong_buffer_len, lr, warmup_steps, grad_clip, max_response_length,
    eval.top_p, ... inherits the reference's. Every key the reference file sets is compared."""
    written = yaml.safe_load(REFERENCE.read_text())
    defaults, reference = DAPOConfig(), load_config([REFERENCE])
    apart = {}
    for section, values in written.items():
        for key in values if isinstance(values, dict) else ():
            default = getattr(getattr(defaults, section), key)
            if default != getattr(getattr(reference, section), key):
                apart[f"{section}.{key}"] = default
    assert apart == DEFAULTS_APART_FROM_THE_REFERENCE
    # the surplus a step keeps, which the reference (keep_surplus_groups: false) never sets
    assert defaults.algorithm.max_surplus_fraction == 0.5 and defaults.trainer.autocast == "none"


@pytest.mark.parametrize(("overrides", "message"), [
    # any schedule but "constant" would run as cosine
    (["trainer.lr_schedule=linear"], r"trainer.lr_schedule='linear' is not one of \['constant', 'cosine'\]"),
    # would drop the KL term without a reference model, silently
    (["algorithm.kl_coef=-0.1"], "algorithm.kl_coef must be >= 0"),
    (["algorithm.clip_ratio_low=0"], r"algorithm.clip_ratio_low must be in \(0, 1\)"),
    # math_dapo reads the "Answer:" line: an extractor would be ignored
    (["reward.verifier=math_dapo", "reward.extractor=boxed"], "reward.extractor=boxed is dapo-rl's verifier's"),
    (["reward.functions=[{path: 'a.py:f', timeout_s: 0}]"], "timeout_s must be > 0"),
    (["checkpoint.keep_last=0"], "checkpoint.keep_last must be >= 1"),
    (["checkpoint.keep_best=eval/avg@32", "eval.every_steps=5", "checkpoint.hf_export=final",
      "resources.devices_per_node=2"], "set checkpoint.hf_export=every"),
    (["trainer.param_dtype=bf16", "trainer.autocast=bf16"], "choose one"),
    (["trainer.forward=native", "trainer.shared_prompt=false"], "computes the shared-prompt layout"),
    (["data.builtin_min_digits=4"], "data.builtin_min_digits must be >= 1 and <= data.builtin_max_digits"),
])
def test_a_value_the_trainer_would_misread_is_refused_with_why(overrides: list[str], message: str):
    with pytest.raises(ConfigError, match=message):
        load_config([], overrides)


def test_the_bounds_of_vllm_s_temperature_are_inclusive():
    assert load_config([], ["rollout.engine=vllm", "rollout.temperature=2.0"]).rollout.temperature == 2.0
    with pytest.raises(ConfigError, match=r"outside what rollout.engine=vllm samples at"):
        load_config([], ["rollout.engine=vllm", "rollout.temperature=2.01"])


def test_one_string_for_a_list_setting_is_one_item_not_its_characters():
    """`rollout.stop_strings=</answer>` split into characters would cut every response at its first
    `<`, `/`, `a`, ... without an error."""
    cfg = load_config([], ["rollout.stop_strings=</answer>", "model.lora_target_modules=q_proj",
                           "data.train_files=x.parquet"])
    assert cfg.rollout.stop_strings == ["</answer>"]
    assert cfg.model.lora_target_modules == ["q_proj"]
    assert cfg.data.train_files == ["x.parquet"]


def test_a_whole_number_in_a_template_mapping_stays_an_int():
    """A template's `range(n)` fails on 3.0, and `{{ n }}` prints "3.0"."""
    kwargs = load_config([], ["data.chat_template_kwargs.n=3", "data.chat_template_kwargs.t=0.5"]).data.chat_template_kwargs
    assert type(kwargs["n"]) is int and kwargs == {"n": 3, "t": 0.5}


def test_a_tree_from_python_or_safe_load_takes_an_int_for_a_float_setting():
    values = config_to_dict(DAPOConfig())
    values["trainer"]["lr"], values["algorithm"]["clip_ratio_c"] = 1, 10
    cfg = config_from_dict(values)
    assert type(cfg.trainer.lr) is float and cfg.trainer.lr == 1.0 and cfg.algorithm.clip_ratio_c == 10.0


def test_the_optimizer_steps_of_a_rollout_count_every_ppo_epoch():
    """What a resume counts as updates made: mini-batches per step times epochs."""
    assert TrainerConfig(ppo_epochs=2, prompts_per_step=64, mini_batch_prompts=16).optimizer_steps_per_rollout == 8
    assert TrainerConfig(ppo_epochs=1, prompts_per_step=512, mini_batch_prompts=32).optimizer_steps_per_rollout == 16


# verl's keys of the DAPO recipe scripts whose answer a user would follow into a wrong run if it
# named the neighbouring setting (low for high, the step's prompts for the mini-batch's, ...).
VERL_TARGETS = {
    "actor_rollout_ref.actor.clip_ratio_low": "algorithm.clip_ratio_low",
    "actor_rollout_ref.actor.clip_ratio_high": "algorithm.clip_ratio_high",
    "actor_rollout_ref.actor.clip_ratio_c": "algorithm.clip_ratio_c",
    "actor_rollout_ref.actor.ppo_mini_batch_size": "trainer.mini_batch_prompts",
    "data.train_batch_size": "trainer.prompts_per_step",
    "data.gen_batch_size": "trainer.gen_prompts_per_round",
    "trainer.test_freq": "eval.every_steps",
    "trainer.save_freq": "checkpoint.every_steps",
    "actor_rollout_ref.rollout.top_p": "rollout.top_p",
    "actor_rollout_ref.rollout.val_kwargs.top_p": "eval.top_p",
    "actor_rollout_ref.rollout.val_kwargs.temperature": "eval.temperature",
    "actor_rollout_ref.rollout.val_kwargs.n": "eval.k",
    "actor_rollout_ref.rollout.response_length": "rollout.max_response_length",
    "actor_rollout_ref.rollout.prompt_length": "data.max_prompt_length",
    "actor_rollout_ref.actor.optim.lr_warmup_steps": "trainer.warmup_steps",
    "actor_rollout_ref.actor.kl_loss_coef": "algorithm.kl_coef",
    "actor_rollout_ref.actor.entropy_coeff": "algorithm.entropy_coef",
    "reward_model.overlong_buffer.len": "algorithm.overlong_buffer_len",
    "reward_model.overlong_buffer.penalty_factor": "algorithm.overlong_penalty_factor",
    "algorithm.filter_groups.metric": "algorithm.filter_metric",
}


@pytest.mark.parametrize(("verl_key", "ours"), VERL_TARGETS.items())
def test_a_verl_key_names_the_setting_that_means_the_same(verl_key: str, ours: str):
    assert VERL_NAMES[verl_key].split(" ")[0] == ours
    with pytest.raises(ConfigError, match=rf"\(did you mean {ours}[ ?]"):
        load_config([], [f"{verl_key}=1"])


def test_every_peer_name_points_at_a_setting_that_exists():
    tree = config_to_dict(DAPOConfig())
    settings = {f"{section}.{key}" for section, values in tree.items() if isinstance(values, dict) for key in values}
    settings |= set(tree)  # (a whole section: TRL's logging_steps is answered with `logging`)
    for names in (VERL_NAMES, TRL_NAMES):
        for peer, ours in names.items():
            assert ours.split(" ")[0] in settings, (peer, ours)
