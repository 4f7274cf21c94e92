"""Algorithm plugins: the example of docs/extending.md registers an advantage estimator and a
policy loss from a file, config selects them by name, and a training step runs with them."""

from __future__ import annotations

import json
import re
import sys
import warnings
from pathlib import Path

import pytest

from dapo import algo
from dapo.config import ConfigError
from dapo.trainer import Trainer
from tests.trainer.conftest import tiny_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"


@pytest.fixture
def doc_plugin(tmp_path: Path):
    """docs/extending.md's my_algo.py, written to a file; its registrations are undone after."""
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    path = tmp_path / "my_algo.py"
    path.write_text(code)
    yield path
    algo.ADVANTAGE_ESTIMATORS.pop("median_baseline", None)
    algo.POLICY_LOSSES.pop("plain_pg", None)


def test_a_plugin_from_a_file_is_selectable_by_name_and_trains(doc_plugin, tiny_model_dir, reward_file, tmp_path, monkeypatch,
                                                                capsys):
    command = re.search(r"```bash\ndapo train (.*?)\n```", DOC.read_text(), re.S).group(1).split()
    assert command[0] == "algorithm.plugins=[my_algo.py]"
    overrides = [f"algorithm.plugins=[{doc_plugin}]", *command[1:], "trainer.total_steps=1"]
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *overrides)
    assert (cfg.algorithm.advantage, cfg.algorithm.policy_loss) == ("median_baseline", "plain_pg")
    calls = {"median_baseline": 0, "plain_pg": 0}

    def counted(registry, name):
        inner = registry[name]

        def wrapper(*args, **kwargs):
            calls[name] += 1
            return inner(*args, **kwargs)

        monkeypatch.setitem(registry, name, wrapper)

    counted(algo.ADVANTAGE_ESTIMATORS, "median_baseline")
    counted(algo.POLICY_LOSSES, "plain_pg")
    trainer = Trainer(cfg)
    # rehearsed before the run loads: the loss on the whole synthetic batch and on each half (do they add up?)
    assert calls == {"median_baseline": 1, "plain_pg": 3}
    trainer.train()
    assert calls["median_baseline"] == 2 and calls["plain_pg"] >= 3 + 2  # one per micro-batch of the two updates
    assert trainer.policy.version == 2  # both optimizer updates of the step were made
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [record for record in logged if "actor/loss" in record]  # (the evaluations' records have none)
    assert len(steps) == 1 and 0 <= steps[0]["actor/plugin/ratio_above_2"] <= 1  # the loss's own metric, per token
    # the run's start names the plugins it runs, where each is defined (here: the counting wrappers)
    assert re.search(r"algorithm plugins: advantage median_baseline \(.*\.py:\d+\), policy_loss plain_pg "
                     r"\(.*\.py:\d+\)\n", capsys.readouterr().out)


def test_the_median_baseline_is_what_its_docstring_says(doc_plugin):
    import torch

    from dapo.config import load_config

    load_config([], [f"algorithm.plugins=[{doc_plugin}]"])
    scores = torch.tensor([1.0, -1.0, -1.0, 3.0, 0.5, 0.5, 1.0, -1.0, -1.0, 1.0], dtype=torch.float64)
    groups = torch.tensor([7, 7, 7, 2, 2, 2, 5, 5, 5, 5])
    advantages = algo.compute_advantages("median_baseline", scores, groups)
    # an even group's median is its middle two's mean (torch.median's lower one gave [2, 0, 0, 2])
    assert advantages.tolist() == [2.0, 0.0, 0.0, 2.5, 0.0, 0.0, 1.0, -1.0, -1.0, 1.0]


def test_unknown_names_and_broken_plugins_are_config_errors_that_say_why(tmp_path):
    from dapo.config import load_config

    with pytest.raises(ConfigError, match=r"algorithm.policy_loss='nope' is not one of \['decoupled_clip'\]"):
        load_config([], ["algorithm.policy_loss=nope"])
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(ConfigError, match=r"algorithm.plugins entry .*broken.py.*RuntimeError: boom"):
        load_config([], [f"algorithm.plugins=[{broken}]"])


BROKEN_PLUGINS = '''
import dataclasses
import torch
from dapo.algo import LOSS_AGG_MODES, POLICY_LOSSES, PolicyLossStats, compute_policy_loss, register_advantage

@register_advantage("one_short")
def one_short(scores, group_ids, eps):
    return (scores - scores.mean())[:-1]

@register_advantage("no_eps")
def no_eps(scores, group_ids):
    return scores - scores.mean()

@LOSS_AGG_MODES.register("no_norm_const")
def no_norm_const(masked_loss, token_mask, num_tokens, num_seqs):
    return masked_loss.sum() / num_tokens

@POLICY_LOSSES.register("loss_only")
def loss_only(*args, **kwargs):
    return compute_policy_loss(*args, **kwargs)[0]

@POLICY_LOSSES.register("no_stats")
def no_stats(*args, **kwargs):
    return compute_policy_loss(*args, **kwargs)[0], None

@dataclasses.dataclass
class MoreStats(PolicyLossStats):
    extra_count: torch.Tensor = None

@POLICY_LOSSES.register("more_stats")
def more_stats(*args, **kwargs):
    loss, stats = compute_policy_loss(*args, **kwargs)
    return loss, MoreStats(**vars(stats), extra_count=stats.token_count)

@POLICY_LOSSES.register("raises")
def raises(logprobs, old_logprobs, advantages, response_mask, **kwargs):
    return kwargs["token_level_rewards"]

@register_advantage("verl_ported")
def verl_ported(token_level_rewards, response_mask, index, epsilon=1e-6):  # verl's estimator's parameters
    return token_level_rewards

@LOSS_AGG_MODES.register("swapped")
def swapped(token_mask, masked_loss, num_tokens, num_seqs, norm_const):
    return (masked_loss * token_mask).sum() / num_tokens

@POLICY_LOSSES.register("on_gpu_only")
def on_gpu_only(logprobs, *args, **kwargs):  # a loss whose tensors a CPU batch cannot meet (the rehearsal's fault)
    raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!")

@POLICY_LOSSES.register("no_stats_past_3_tokens")
def no_stats_past_3_tokens(logprobs, *args, **kwargs):
    loss, stats = compute_policy_loss(logprobs, *args, **kwargs)
    return loss, stats if logprobs.shape[1] <= 3 else None

@POLICY_LOSSES.register("four_args")
def four_args(logprobs, old_logprobs, advantages, response_mask):
    return compute_policy_loss(logprobs, old_logprobs, advantages, response_mask, clip_ratio_low=0.2, clip_ratio_high=0.28)
'''


@pytest.fixture
def broken_plugin(tmp_path: Path):
    path = tmp_path / "broken_algo.py"
    path.write_text(BROKEN_PLUGINS)
    yield path
    for registry, name in [(algo.ADVANTAGE_ESTIMATORS, "one_short"), (algo.POLICY_LOSSES, "loss_only"),
                           (algo.POLICY_LOSSES, "no_stats"), (algo.POLICY_LOSSES, "four_args"), (algo.POLICY_LOSSES, "more_stats"),
                           (algo.POLICY_LOSSES, "raises"), (algo.POLICY_LOSSES, "on_gpu_only"),
                           (algo.ADVANTAGE_ESTIMATORS, "verl_ported"), (algo.LOSS_AGG_MODES, "swapped"), (algo.POLICY_LOSSES, "no_stats_past_3_tokens"),
                           (algo.ADVANTAGE_ESTIMATORS, "no_eps"), (algo.LOSS_AGG_MODES, "no_norm_const")]:
        registry.pop(name, None)


@pytest.mark.parametrize(("override", "message"), [
    # one advantage short: the last response would have trained at advantage 0, unnoticed
    ("algorithm.advantage=one_short", r"advantage estimator 'one_short' \(.*broken_algo.py:\d+\) returned shape "
                                      r"\((\d+),\) for \d+ responses: it must return shape \(\d+,\)"),
    ("algorithm.policy_loss=loss_only", r"policy loss 'loss_only' \(.*broken_algo.py:\d+\) returned a Tensor: "
                                        r"it must return \(loss, stats\)"),
    # no stats: the clip fractions, KL and ratio metrics would have vanished from the logs
    ("algorithm.policy_loss=no_stats", r"policy loss 'no_stats' \(.*broken_algo.py:\d+\) returned stats of type "
                                       r"NoneType"),
    # a subclass with fields of its own: the sum of micro-batches rebuilt the class and failed after an update
    ("algorithm.policy_loss=more_stats", r"policy loss 'more_stats' \(.*broken_algo.py:\d+\) returned stats of type "
                                         r"MoreStats: .* not a subclass"),
], ids=["advantage-one-short", "loss-without-stats-tuple", "stats-none", "stats-subclass"])
def test_a_plugin_that_breaks_its_contract_is_named_before_the_run_loads(
        broken_plugin, override, message, tiny_model_dir, reward_file, tmp_path):
    """(found at the first update before: after minutes of loading and a rollout, on a large model)"""
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", reward_file, f"algorithm.plugins=[{broken_plugin}]", override,
                      "trainer.total_steps=1")
    with pytest.raises(algo.PluginError, match=message + r".* \(found before the run loaded, on a synthetic batch"):
        Trainer(cfg)
    run_dir = tmp_path / "run"
    assert not run_dir.exists() or not any(run_dir.iterdir())  # nothing started: no config, logs or workers


def test_a_plugin_that_raises_on_the_rehearsal_is_refused_before_the_run_loads(
        broken_plugin, tiny_model_dir, reward_file, tmp_path):
    """An exception on the synthetic batch was only a warning: the run loaded the model and made a
    rollout, then the same exception stopped it. Refused now, as a broken contract is."""
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", reward_file, f"algorithm.plugins=[{broken_plugin}]",
                      "algorithm.policy_loss=raises", "trainer.total_steps=1")
    with pytest.raises(algo.PluginError, match=r"policy loss 'raises', raises \(.*broken_algo.py:\d+\), raised KeyError: "
                                               r"'token_level_rewards', on a synthetic batch .*response_mask float32"):
        Trainer(cfg)
    run_dir = tmp_path / "run"
    assert not run_dir.exists() or not any(run_dir.iterdir())


def test_a_plugin_that_raises_of_a_device_on_the_rehearsal_is_a_warning_and_the_first_real_call_stops_the_run(
        broken_plugin, tiny_model_dir, reward_file, tmp_path):
    """An exception that names a device may be the rehearsal's own fault (a loss that moves its
    tensors to a GPU), so it does not refuse the run; the same exception on a real batch stops it
    before any update."""
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", reward_file, f"algorithm.plugins=[{broken_plugin}]",
                      "algorithm.policy_loss=on_gpu_only", "trainer.total_steps=1")
    with pytest.warns(UserWarning, match=r"policy loss 'on_gpu_only', on_gpu_only \(.*broken_algo.py:\d+\), raised "
                                         r"RuntimeError: Expected all tensors to be on the same device.* the run goes on"):
        trainer = Trainer(cfg)
    try:
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            trainer.step_once()
        assert trainer.policy.version == 0
    finally:
        trainer.close()


def test_a_plugin_whose_bug_shows_only_on_real_batches_is_named_at_its_first_call_before_any_update(
        broken_plugin, tiny_model_dir, reward_file, tmp_path):
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", reward_file, f"algorithm.plugins=[{broken_plugin}]",
                      "algorithm.policy_loss=no_stats_past_3_tokens", "trainer.total_steps=1")
    trainer = Trainer(cfg)  # its rehearsal's 3 tokens pass
    try:
        with pytest.raises(algo.PluginError, match=r"policy loss 'no_stats_past_3_tokens' \(.*broken_algo.py:\d+\) "
                                                   r"returned stats of type NoneType"):
            trainer.step_once()
        assert trainer.policy.version == 0  # no update was made with it
    finally:
        trainer.close()


@pytest.mark.parametrize(("override", "message"), [
    ("algorithm.policy_loss=four_args", r"algorithm.policy_loss='four_args' \(.*broken_algo.py:\d+\) cannot be called "
                                        r"as the trainer calls it.*unexpected keyword argument 'clip_ratio_low'"),
    ("algorithm.advantage=no_eps", r"algorithm.advantage='no_eps' \(.*broken_algo.py:\d+\) cannot be called as the "
                                   r"trainer calls it, fn\(scores, group_ids, eps\): too many positional arguments"),
    ("algorithm.loss_agg_mode=no_norm_const",
     r"algorithm.loss_agg_mode='no_norm_const' \(.*broken_algo.py:\d+\) cannot be called as the trainer calls it, "
     r"fn\(masked_loss, token_mask, num_tokens, num_seqs, norm_const\): too many positional arguments"),
    # verl's estimator signature bound positionally: response_mask held the group ids, index eps (it trained)
    ("algorithm.advantage=verl_ported",
     r"algorithm.advantage='verl_ported' \(.*broken_algo.py:\d+\) takes 'token_level_rewards' as its argument 1, where "
     r"the trainer passes 'scores': it is called positionally, fn\(scores, group_ids, eps\), .*verl's \(B, T\) rewards"),
    ("algorithm.loss_agg_mode=swapped",
     r"algorithm.loss_agg_mode='swapped' .* takes 'token_mask' as its argument 1, where the trainer passes 'masked_loss'"),
], ids=["policy-loss", "advantage", "loss-agg-mode", "verl-estimator", "swapped-names"])
def test_a_plugin_the_trainer_cannot_call_is_a_config_error_naming_its_file(broken_plugin, override, message):
    from dapo.config import load_config

    with pytest.raises(ConfigError, match=message):
        load_config([], [f"algorithm.plugins=[{broken_plugin}]", override])


def test_a_plugin_file_that_runs_twice_under_two_module_names_says_so(tmp_path, monkeypatch):
    """A plugin listed by its path that another plugin also imports by another module name (its
    package's) runs twice: the duplicate registration names the first definition and the two
    module names. Imported by its own name, it runs once (it was 'dapo_user_...' and ran twice)."""
    from dapo.config import load_config

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "twice_losses.py").write_text(
        "from dapo.algo import POLICY_LOSSES, compute_policy_loss\n"
        "@POLICY_LOSSES.register('twice_clip')\n"
        "def twice_clip(*args, **kwargs):\n    return compute_policy_loss(*args, **kwargs)\n")
    (tmp_path / "pkg" / "once_advs.py").write_text("import twice_losses\n")  # its own name: the same module
    (tmp_path / "twice_advs.py").write_text("import pkg.twice_losses\n")  # its package's: a second one
    monkeypatch.setattr(sys, "path", list(sys.path))  # the plugin's directory, appended, is taken off after
    losses = tmp_path / "pkg" / "twice_losses.py"
    try:
        load_config([], [f"algorithm.plugins=[{losses}, {tmp_path / 'pkg' / 'once_advs.py'}]"])
        assert algo.POLICY_LOSSES["twice_clip"].__module__ == "twice_losses"
        with pytest.raises(ConfigError, match=r"policy loss 'twice_clip' is already registered by twice_clip "
                                              r"\(.*twice_losses.py:\d+\): the same file ran twice, as modules "
                                              r"'twice_losses' and 'pkg.twice_losses'"):
            load_config([], [f"algorithm.plugins=[{losses}, {tmp_path / 'twice_advs.py'}]"])
    finally:
        algo.POLICY_LOSSES.pop("twice_clip", None)
        for name in ("twice_losses", "once_advs", "twice_advs", "pkg", "pkg.twice_losses"):
            sys.modules.pop(name, None)


def test_a_registration_without_its_name_is_refused_where_it_is_written(tmp_path):
    """@register_advantage without ("name") would register nothing: the config would then call
    the plugin's name unknown, with the plugin listed."""
    from dapo.config import load_config

    plugin = tmp_path / "no_name.py"
    plugin.write_text("from dapo.algo import register_advantage\n"
                      "@register_advantage\ndef my_estimator(scores, group_ids, eps):\n    return scores\n")
    with pytest.raises(ConfigError, match=r"no_name.py raised TypeError: advantage estimator registration needs a "
                                          r"non-empty name.*got my_estimator \(.*no_name.py:2\)"):
        load_config([], [f"algorithm.plugins=[{plugin}]", "algorithm.advantage=my_estimator"])
    assert "my_estimator" not in algo.ADVANTAGE_ESTIMATORS


def test_tis_cap_with_a_loss_that_takes_no_importance_weights_is_refused(doc_plugin):
    """docs/extending.md's plain_pg swallows importance_weights in its **unused: algorithm.tis_cap
    would have trained exactly as without it, and nothing said so."""
    from dapo.config import load_config

    overrides = [f"algorithm.plugins=[{doc_plugin}]", "algorithm.old_logprobs=recompute", "algorithm.tis_cap=2"]
    with pytest.raises(ConfigError, match=r"tis_cap=2\.0 would change nothing: algorithm\.policy_loss='plain_pg' "
                                          rf"\({re.escape(str(doc_plugin))}:\d+\) takes no importance_weights"):
        load_config(overrides=[*overrides, "algorithm.policy_loss=plain_pg"])
    assert load_config(overrides=overrides).algorithm.tis_cap == 2  # decoupled_clip multiplies by them


def test_the_rehearsal_and_the_update_pass_a_plugin_loss_the_same_arguments(tiny_model_dir, monkeypatch):
    """Both call a policy loss through call_policy_loss, whose signature is the one list of what a
    loss is passed (POLICY_LOSS_CALL): a plugin is rehearsed with the update's arguments, no more
    and no fewer (the rehearsal had its own copy of the keyword list). The built-in loss and
    docs/extending.md's table take that list too."""
    import inspect

    from transformers import AutoModelForCausalLM

    from dapo.algo.policy_loss import POLICY_LOSS_CALL
    from dapo.algo.rehearsal import rehearse_plugins
    from dapo.config import AlgorithmConfig, TrainerConfig
    from dapo.trainer.batch import Sample
    from dapo.trainer.policy import PolicyWorker

    calls: list[tuple[int, list[str]]] = []

    def recording(*args, importance_weights, **kwargs):  # (importance_weights named: tis_cap's config check)
        calls.append((len(args), sorted([*kwargs, "importance_weights"])))
        return algo.compute_policy_loss(*args, importance_weights=importance_weights, **kwargs)

    monkeypatch.setitem(algo.POLICY_LOSSES, "recording", recording)
    rehearse_plugins("grpo", "recording", "token-mean", advantage_eps=1e-6, clip_ratio_low=0.2, clip_ratio_high=0.28,
                     clip_ratio_c=10.0, norm_const=8.0, tis_cap=2.0)
    # the whole synthetic batch, each half (whether the losses add up over micro-batches), and the whole again
    # with other importance weights (whether tis_cap would change anything)
    assert len(calls) == 4
    trainer_cfg = TrainerConfig(prompts_per_step=1, mini_batch_prompts=1, micro_batch_tokens=1000, lr=1e-3,
                                warmup_steps=0)
    worker = PolicyWorker(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                          AlgorithmConfig(policy_loss="recording", tis_cap=2.0), trainer_cfg, pad_token_id=0,
                          temperature=1.0, total_steps=1, norm_const=8.0)
    worker.update([Sample(0, "u", [5, 6], [7, 8, 9], [-1.0] * 3, False, advantage=1.0, old_logprobs=[-1.1] * 3)])
    rehearsed, *updated = calls
    positional, keywords = POLICY_LOSS_CALL
    assert updated and all(call == rehearsed for call in updated)
    assert rehearsed == (len(positional), sorted(keywords))
    built_in = inspect.signature(algo.compute_policy_loss).parameters.values()
    assert [p.name for p in built_in if p.kind is p.KEYWORD_ONLY] == list(keywords)
    documented = re.search(r"like `dapo.algo.compute_policy_loss`: `fn\((.*?)\) ->", DOC.read_text()).group(1)
    assert documented == ", ".join([*positional, "*", *keywords])


def documented_call(key: str) -> list[str]:
    """The argument names of docs/extending.md's signature for ``algorithm.<key>``, shapes and types dropped."""
    row = re.search(rf"^\| `algorithm\.{key}` \|.*`fn\((.*?)\) ->", DOC.read_text(), re.M).group(1)
    return [argument.split()[0] for argument in re.sub(r"\s*\([^)]*\)", "", row).split(", ")]


def test_the_rehearsal_and_the_step_pass_a_plugin_estimator_and_aggregation_the_same_arguments(
        tiny_model_dir, reward_file, tmp_path, monkeypatch):
    """Both call an advantage estimator through compute_advantages and an aggregation mode through
    call_loss_aggregation (by way of aggregate_loss), whose signatures are the one lists of what
    each is passed (ADVANTAGE_CALL, LOSS_AGG_CALL): a plugin is rehearsed with the step's
    arguments, no more and no fewer, and with the configured eps and norm_const, not a default
    that a call leaving them out would pass. A step's every aggregation is covered: the policy
    loss's, the entropy bonus's and the KL penalty's. The built-in entries and docs/extending.md's
    table take those lists too."""
    import inspect
    import traceback

    from dapo.algo.advantages import ADVANTAGE_CALL, OPTIONAL_ADVANTAGE_ARGUMENTS, grpo_advantages
    from dapo.algo.aggregation import LOSS_AGG_CALL, token_mean

    calls: dict[str, list[tuple[int, list[str], object]]] = {"advantage": [], "loss_agg_mode": []}
    sites: set[tuple[str, int]] = set()  # the lines outside dapo.algo that led to an aggregation

    def recording(key: str, built_in, setting: str):
        position = list(inspect.signature(built_in).parameters).index(setting)

        def record(*args, **kwargs):
            value = kwargs.get(setting, args[position] if len(args) > position else None)
            calls[key].append((len(args), sorted(kwargs), value))
            if key == "loss_agg_mode":
                sites.add(next((f.name, f.lineno) for f in reversed(traceback.extract_stack()[:-1])
                               if "/dapo/algo/" not in f.filename))
            return built_in(*args, **kwargs)

        return record

    monkeypatch.setitem(algo.ADVANTAGE_ESTIMATORS, "recording", recording("advantage", grpo_advantages, "eps"))
    monkeypatch.setitem(algo.LOSS_AGG_MODES, "recording", recording("loss_agg_mode", token_mean, "norm_const"))
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "algorithm.advantage=recording",
                      "algorithm.loss_agg_mode=recording", "algorithm.advantage_eps=0.001",
                      "algorithm.loss_agg_norm_const=7", "algorithm.entropy_coef=0.001", "algorithm.kl_coef=0.001",
                      "trainer.total_steps=1")
    trainer = Trainer(cfg)
    assert [len(made) for made in calls.values()] == [1, 3]  # the aggregation: on the whole batch and each half
    sites.clear()
    trainer.train()
    assert len(sites) >= 3  # the policy loss's, the entropy bonus's and the KL penalty's aggregations
    for (key, made), (registry, (positional, keywords), setting) in zip(calls.items(), [
            (algo.ADVANTAGE_ESTIMATORS, ADVANTAGE_CALL, 0.001), (algo.LOSS_AGG_MODES, LOSS_AGG_CALL, 7.0)]):
        rehearsed, *stepped = made
        assert stepped and all(call == rehearsed for call in stepped), key
        assert rehearsed == (len(positional), sorted(keywords), setting), key
        for fn in registry.values():
            if fn.__module__.startswith("dapo.algo."):  # the built-in entries (opo: and an optional argument it names)
                named = [p.name for p in inspect.signature(fn).parameters.values() if p.name not in OPTIONAL_ADVANTAGE_ARGUMENTS]
                assert named == [*positional, *keywords], fn
        assert documented_call(key) == [*positional, *(["*", *keywords] if keywords else [])], key


def test_sequence_parallelism_runs_a_plugin_loss_only_when_marked_token_level(doc_plugin, tiny_model_dir, reward_file,
                                                                             tmp_path):
    """A rank of a sequence-parallel group sees a chunk of each sequence: an unmarked plugin loss
    (it might take a sequence-level ratio over the chunk) is refused, naming it and the mark;
    docs/extending.md's plain_pg, marked as that page says, is accepted."""
    from tests.trainer.test_trainer_sequence_parallel import PACKED, SEQUENCE_PARALLEL

    run = (tiny_model_dir, tmp_path / "run", reward_file, f"algorithm.plugins=[{doc_plugin}]",
           "algorithm.policy_loss=plain_pg", *SEQUENCE_PARALLEL, *PACKED)
    with pytest.raises(ConfigError, match=r"policy_loss=plain_pg is not marked token-level.*token_level = True"):
        tiny_config(*run)
    algo.POLICY_LOSSES["plain_pg"].token_level = True
    assert tiny_config(*run).algorithm.policy_loss == "plain_pg"
    assert "token_level = True" in DOC.read_text()


def test_a_resume_names_the_plugin_and_reward_sources_edited_since_the_checkpoint(
        doc_plugin, tiny_model_dir, reward_file, tmp_path):
    """The config names the same files, so only their sources can tell that the algorithm changed."""
    overrides = [f"algorithm.plugins=[{doc_plugin}]", "algorithm.advantage=median_baseline", "eval.every_steps=0",
                 "eval.before_training=false"]
    Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *overrides, "trainer.total_steps=1")).train()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*other code than it was saved with")
        Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *overrides, "trainer.total_steps=2")).train()
    doc_plugin.write_text(doc_plugin.read_text() + "\n# edited\n")
    reward_file.write_text(reward_file.read_text() + "\n# edited\n")
    with pytest.warns(UserWarning, match=rf"resuming step-000002 with other code than it was saved with: the source "
                                         rf"of {reward_file}, {doc_plugin} changed since"):
        Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *overrides, "trainer.total_steps=3")).train()


def test_an_estimator_that_names_response_lengths_gets_the_step_s(tiny_model_dir, reward_file, tmp_path, monkeypatch):
    """The optional argument reaches a plugin that names it, in the rehearsal (the synthetic batch's 3, 2, 1, ...
    tokens) and in the step (each response's token count, as in its Sample); the config accepts its signature."""
    seen: list[list[int]] = []

    def by_length(scores, group_ids, eps, *, response_lengths):
        seen.append(response_lengths.tolist())
        return algo.compute_advantages("opo", scores, group_ids, eps, response_lengths=response_lengths)

    monkeypatch.setitem(algo.ADVANTAGE_ESTIMATORS, "by_length", by_length)
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "algorithm.advantage=by_length",
                                  "trainer.total_steps=1"))
    batches = []
    next_batch = trainer.sampler.next_batch

    def recorded(*args, **kwargs):
        batch, report = next_batch(*args, **kwargs)
        batches.append([len(sample.response_ids) for sample in batch])
        return batch, report

    trainer.sampler.next_batch = recorded
    try:
        assert seen == [[3, 2, 1, 3, 2, 1, 3, 2]]  # the rehearsal's 2 prompts x rollout.n=4, of 3, 2, 1 tokens in turn
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trainer.train()
        assert seen[1:] == batches and batches[0]  # each trained response's token count, in the batch's order
    finally:
        trainer.close()
