"""`dapo config --explain`: every field's documentation comes from the comment above it in the
schema, so the help cannot drift from the code."""

from __future__ import annotations

import pytest

from dapo.cli.main import main
from dapo.config import builtin_config_path, load_config
from dapo.config.explain import explain, field_docs


def test_every_config_field_is_documented():
    docs = field_docs()
    assert len(docs) > 80
    assert not [key for key, (doc, _) in docs.items() if len(doc) < 8]


def test_explain_shows_the_schema_comment_type_and_this_configs_value():
    paper = load_config([builtin_config_path("dapo_qwen2.5_32b")])
    text = explain(paper, "algorithm.clip_ratio_high")
    assert text.splitlines()[0] == "algorithm.clip_ratio_high (float) = 0.28"
    assert "Clip-Higher" in text
    # a field under a shared comment gets that comment
    assert "Sampling for training rollouts" in explain(paper, "rollout.top_p")
    section = explain(paper, "checkpoint")
    assert [line.split(" ")[0] for line in section.splitlines() if not line.startswith(" ")] == [
        "checkpoint.every_steps", "checkpoint.every_minutes", "checkpoint.on_signal", "checkpoint.keep_last", "checkpoint.keep_best", "checkpoint.resume",
        "checkpoint.hf_export"]


def test_cli_explain_and_its_error(capsys):
    assert main(["config", "--explain", "trainer.warmup_steps"]) == 0
    assert "training steps" in capsys.readouterr().out.lower()
    assert main(["config", "--explain", "trainer.nope"]) == 2
    assert "no config field 'trainer.nope'" in capsys.readouterr().err


@pytest.mark.parametrize("key", ["output_dir", "algorithm.plugins", "rollout.vllm_dtype"])
def test_new_and_top_level_fields_explain(key):
    assert explain(load_config([], []), key).startswith(key + " (")


def test_a_list_of_mappings_explains_its_items_fields():
    # reward.functions said "see RewardFunctionSpec", a class the CLI user cannot see
    text = explain(load_config([], ["reward.functions=[{path: r.py:fn, weight: 0.5}]"]), "reward.functions")
    lines = text.splitlines()
    assert lines[0] == "reward.functions (list[RewardFunctionSpec]) = [RewardFunctionSpec(path='r.py:fn', weight=0.5, batch_size=0, timeout_s=None)]"
    assert "  reward.functions[].path (str), default ''" in lines
    assert "  reward.functions[].weight (float), default 1.0" in lines
    assert "package.module:function" in text and "Weight of this function's score" in text
    assert explain(load_config([], []), "trainer.betas").startswith("trainer.betas (list[float]) = [0.9, 0.999]")


def test_explaining_a_misspelled_or_bare_key_suggests_the_field(capsys):
    from dapo.cli.main import main

    assert main(["config", "--explain", "trainer.lrr"]) == 2
    assert "no config field 'trainer.lrr' (did you mean trainer.lr," in capsys.readouterr().err
    assert main(["config", "--explain", "lr"]) == 2
    assert "(did you mean trainer.lr?)" in capsys.readouterr().err
    # a bare name in several sections names each (it named eval.top_p alone, a close match, not rollout's)
    assert main(["config", "--explain", "top_p"]) == 2
    assert "(did you mean rollout.top_p, eval.top_p?)" in capsys.readouterr().err
    assert main(["config", "--explain", "seed"]) == 2
    assert "(did you mean trainer.seed, eval.seed?)" in capsys.readouterr().err


def test_grad_clip_has_its_own_documentation_not_its_neighbours():
    """A field without a comment of its own showed the one before it (trainer.grad_clip: the weight
    decay's); fields documented together share one comment on purpose, but none borrows a neighbour's."""
    from dapo.config.explain import field_docs

    assert "Clip the gradient's global norm" in field_docs()["trainer.grad_clip"][0]


def test_a_list_items_field_is_explained_by_the_name_the_lists_explanation_gives_it():
    """`--explain reward.functions` lists `reward.functions[].weight`; asking for that name said
    'no config field'."""
    cfg = load_config([builtin_config_path("default")])
    assert explain(cfg, "reward.functions[].weight") == (
        "reward.functions[].weight (float), default 1.0\n    Weight of this function's score in the summed reward.")
    every_item_field = explain(cfg, "reward.functions[]")
    assert [line.split(" ")[0] for line in every_item_field.splitlines() if not line.startswith(" ")] == [
        "reward.functions[].path", "reward.functions[].weight", "reward.functions[].batch_size",
        "reward.functions[].timeout_s"]
    with pytest.raises(ValueError, match="no config field 'reward.functions\\[\\].wieght'"):
        explain(cfg, "reward.functions[].wieght")


def test_a_key_inside_a_mapping_field_is_explained_by_the_mapping():
    """`data.chat_template_kwargs.enable_thinking=false` is how the mapping's own documentation
    says to set one key; `--explain` of that same key said 'no config field'."""
    cfg = load_config([], ["data.chat_template_kwargs.enable_thinking=false"])
    assert explain(cfg, "data.chat_template_kwargs.enable_thinking").splitlines()[0] == (
        "data.chat_template_kwargs.enable_thinking = False: a key of data.chat_template_kwargs (dict[str, Any])")
    assert explain(cfg, "data.chat_template_kwargs.thinking_budget").startswith(
        "data.chat_template_kwargs.thinking_budget = unset: a key of")
    assert "enable_thinking" in explain(cfg, "data.chat_template_kwargs.thinking_budget")
    with pytest.raises(ValueError, match="no config field 'data.chat_template_kwarg.x'"):
        explain(cfg, "data.chat_template_kwarg.x")


def test_explaining_a_verl_or_trl_name_explains_this_projects_setting():
    """``--explain`` took verl's keys for misspellings (data.train_batch_size: "did you mean
    data.train_files?"), where an override of the same key named trainer.prompts_per_step."""
    config = load_config([])
    said = explain(config, "data.train_batch_size")
    assert said.startswith("data.train_batch_size is not a config field here; this project's name for it: "
                           "trainer.prompts_per_step\ntrainer.prompts_per_step (int) = ")
    assert "rollout.n (int) = 16" in explain(config, "actor_rollout_ref.rollout.n")  # (the schema's value)
    both = explain(config, "epsilon")  # TRL's symmetric clip: both bounds, explained
    assert "(TRL's epsilon)" in both and "algorithm.clip_ratio_low (float)" in both and "clip_ratio_high (float)" in both
    assert "offloads no parameters or optimizer state" in explain(config, "actor_rollout_ref.actor.fsdp_config.param_offload")
    assert "rollout.max_response_length (int)" in explain(config, "actor_rollout_ref.rollout.response_length")


def test_a_registry_field_names_its_entries_a_plugins_with_where_it_is_defined(tmp_path, capsys):
    """`--explain algorithm.advantage` listed the built-in names alone: a plugin's, given in the same
    command, was nowhere to be seen."""
    from dapo import algo

    plugin = tmp_path / "my_algo.py"
    plugin.write_text("from dapo.algo import register_advantage\n\n\n@register_advantage('centered')\n"
                      "def centered(scores, group_ids, eps):\n    return scores - scores.mean()\n")
    try:
        assert main(["config", "--explain", "algorithm.advantage", f"algorithm.plugins=[{plugin}]"]) == 0
    finally:
        algo.ADVANTAGE_ESTIMATORS.pop("centered", None)
    said = capsys.readouterr().out.splitlines()[-1]
    assert said.startswith("    registered now: grpo, dr_grpo, rloo, opo, reinforce_pp_baseline, centered (")
    assert f"centered ({plugin}:4)" in said  # (its decorator's line)
    assert "registered now: token-mean, seq-mean-token-mean," in explain(load_config([], []), "algorithm.loss_agg_mode")
    assert "registered now" not in explain(load_config([], []), "algorithm.clip_ratio_low")
