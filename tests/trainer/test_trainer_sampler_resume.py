"""A checkpoint's kept surplus groups are trained after a resume only when they were made under the
run's settings (a resume-with-changes audit: groups sampled at temperature 1.0 were trained with
their 1.0 log-probs as pi_old in a run resumed at 0.5, approx_kl 0.233 against 0.00016, unsaid;
groups of the old rollout.n beside the new, and of the old length limit)."""

from __future__ import annotations

import copy
import dataclasses
import warnings

import pytest
import torch

from dapo.config import load_config
from dapo.config.loading import config_to_dict, user_code_locations, with_absolute_paths
from dapo.data.records import Problem
from dapo.trainer.sampler import DynamicSampler, PromptStream
from dapo.trainer.surplus import surplus_settings
from dapo.user_code import source_digests
from tests.trainer.test_trainer_sampler import PROBLEMS, make_round


def settings(*overrides: str) -> dict:
    """As the trainer makes them, with its code's digests (RunState.user_code)."""
    cfg = load_config([], list(overrides))
    sources = source_digests(user_code_locations(with_absolute_paths(config_to_dict(cfg))))
    return surplus_settings(config_to_dict(cfg), cfg.resolved_filter_metric(), sources)


def sampler_with_surplus(made_under: dict) -> DynamicSampler:
    """A sampler that kept one surplus group (of 4 mixed ones, 3 trained) under ``made_under``."""
    sampler = DynamicSampler(PromptStream(PROBLEMS, seed=0, shuffle=False), prompts_per_step=3, gen_prompts_per_round=4,
                             max_gen_rounds=5, dynamic_sampling=True, filter_metric="acc", keep_surplus=True,
                             surplus_settings=made_under)
    sampler.next_batch(make_round(lambda p: [1, 0, 0, 1]), step=0)
    assert len(sampler.surplus) == 1
    return sampler


def resumed(state: dict, now: dict, problems: list[Problem] = PROBLEMS) -> DynamicSampler:
    sampler = DynamicSampler(PromptStream(problems, seed=0, shuffle=False), prompts_per_step=3, gen_prompts_per_round=4,
                             max_gen_rounds=5, dynamic_sampling=True, filter_metric="acc", keep_surplus=True,
                             surplus_settings=now)
    sampler.load_state_dict(state)
    return sampler


@pytest.mark.parametrize("change", ["rollout.temperature=0.5", "rollout.n=8", "rollout.max_response_length=16000",
                                    "algorithm.overlong_buffer_len=8", "reward.correct_score=2.0",
                                    "data.template=none", "data.chat_template_kwargs={enable_thinking: false}",
                                    "rollout.native_dtype=float32", "model.tokenizer_path=/other/tokenizer",
                                    "data.answer_key=flipped", "data.data_source_key=source",
                                    "algorithm.advantage=rloo", "algorithm.filter_metric=score"])
def test_surplus_made_under_other_settings_is_dropped_said_and_counted(change, tmp_path):
    before = sampler_with_surplus(settings("rollout.engine=native"))
    torch.save(before.state_dict(), tmp_path / "state.pt")  # as a checkpoint holds it
    state = torch.load(tmp_path / "state.pt", weights_only=True)
    with pytest.warns(UserWarning, match=rf"{change.split('=')[0]} changed since this checkpoint: the 1 surplus "
                                         r"group\(s\) it kept .* dropped, not trained"):
        after = resumed(state, settings("rollout.engine=native", change))
    assert after.surplus == []
    batch, report = after.next_batch(make_round(lambda p: [1, 0, 0, 1], counter=[100]), step=1)
    assert report.groups_carried_in == 0 and report.groups_discarded == 1  # (the round's own excess is carried out)
    assert report.groups_carried_out == 1
    assert not any(s.carried_over for s in batch)


def test_a_reward_function_named_relative_or_absolute_is_one_setting(tmp_path, monkeypatch):
    """A resume that names the run's reward file by its absolute path (or the run by its relative
    one) makes the kept groups under the same function: they are trained, not dropped."""
    (tmp_path / "my_reward.py").write_text("def score(response, ground_truth):\n    return 1.0\n")
    monkeypatch.chdir(tmp_path)
    relative = settings("reward.functions=[{path: 'my_reward.py:score'}]")
    absolute = settings(f"reward.functions=[{{path: '{tmp_path / 'my_reward.py'}:score'}}]")
    assert relative == absolute
    assert relative != settings("reward.functions=[{path: 'my_reward.py:other'}]")
    # a checkpoint written before the settings named files absolute holds the path as its command gave it
    state = sampler_with_surplus(relative).state_dict()
    state["surplus_settings"]["reward.functions"][0]["path"] = "my_reward.py:score"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "reward.functions changed": nothing did
        assert len(resumed(state, absolute).surplus) == 1


def test_surplus_scored_by_a_reward_function_edited_since_is_dropped(tmp_path):
    """The kept groups' scores are the old function's: trained after the fix, they would be wrong numbers."""
    reward = tmp_path / "my_reward.py"
    reward.write_text("def score(response, ground_truth):\n    return 1.0\n")
    override = f"reward.functions=[{{path: '{reward}:score'}}]"
    state = sampler_with_surplus(settings(override)).state_dict()
    reward.write_text("def score(response, ground_truth):\n    return 0.5\n")
    with pytest.warns(UserWarning, match="reward.functions sources changed since this checkpoint: the 1 surplus"):
        assert resumed(state, settings(override)).surplus == []
    # a checkpoint written before the digests were kept, or a digest not known on one side (a module
    # found in one attempt's sys.path only): nothing to compare, kept
    unknown = copy.deepcopy(state)
    unknown["surplus_settings"]["reward.functions sources"] = {str(reward): None}
    del state["surplus_settings"]["reward.functions sources"]
    for kept in (state, unknown):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert len(resumed(kept, settings(override)).surplus) == 1


def test_surplus_made_under_the_same_settings_is_trained_and_an_older_checkpoint_keeps_its_own():
    before = sampler_with_surplus(settings())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = resumed(before.state_dict(), settings("trainer.lr=1e-5", "algorithm.clip_ratio_high=0.3"))
        older = resumed({k: v for k, v in before.state_dict().items() if k != "surplus_settings"},
                        settings("rollout.temperature=0.5"))  # written before the settings were kept: unknown
    assert len(same.surplus) == 1 and len(older.surplus) == 1
    _, report = same.next_batch(make_round(lambda p: [1, 0, 0, 1], counter=[100]), step=1)
    assert report.groups_carried_in == 1


@pytest.mark.parametrize(("engine", "change"), [("hf", "rollout.native_dtype=float16"), ("hf", "rollout.vllm_dtype=float16"),
                                               ("native", "rollout.vllm_dtype=float16")])
def test_a_setting_of_another_engine_than_the_runs_keeps_the_surplus(engine: str, change: str):
    """The hf engine never reads rollout.native_dtype, nor the native engine rollout.vllm_dtype: a
    resume that changed it dropped the kept groups as made under other settings."""
    before = sampler_with_surplus(settings(f"rollout.engine={engine}"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(resumed(before.state_dict(), settings(f"rollout.engine={engine}", change)).surplus) == 1


def test_surplus_of_other_training_data_is_dropped():
    before = sampler_with_surplus(settings())
    other = [Problem(uid=f"x{i}", prompt="q", ground_truth="1") for i in range(10)]
    with pytest.warns(UserWarning) as said:
        after = resumed(before.state_dict(), settings(), problems=other)
    assert after.surplus == []
    assert any("the training data, trainer.seed or data.shuffle changed since this checkpoint: the 1 surplus" in str(w.message) for w in said)


def test_a_checkpoint_from_before_reward_verifier_keeps_its_surplus_under_dapo_rl_only():
    """Written before reward.verifier was a surplus setting, a checkpoint's groups were dapo-rl's:
    every resume of one dropped them, saying "reward.verifier changed"; under math_dapo they did change."""
    state = sampler_with_surplus(settings()).state_dict()
    del state["surplus_settings"]["reward.verifier"], state["surplus_settings"]["data.chat_template_kwargs"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(resumed(copy.deepcopy(state), settings()).surplus) == 1
    with pytest.warns(UserWarning, match="reward.verifier changed since this checkpoint"):
        assert resumed(state, settings("reward.verifier=math_dapo")).surplus == []


@pytest.mark.parametrize("edit", ["ground_truth", "data_source", "extra"])
def test_surplus_scored_against_answers_edited_since_is_dropped(edit: str):
    """The data's order is of its prompts alone: a resume after the answers of the same prompts
    were edited (the same file, or another named by checkpoint.resume) trained the kept groups with
    the old answers' scores, unsaid. The cursor still goes on: the prompts' order is the same."""
    before = sampler_with_surplus(settings())
    edited = [dataclasses.replace(p, **{edit: {"index": 1} if edit == "extra" else "other"}) if p.uid == "3" else p
              for p in PROBLEMS]
    with pytest.warns(UserWarning, match=r"the training data's answers \(ground truths, data sources or other fields\) "
                                         r"changed since this checkpoint: the 1 surplus group\(s\)"):
        after = resumed(before.state_dict(), settings(), problems=edited)
    assert after.surplus == [] and after.stream.cursor == before.stream.cursor
    older = before.state_dict()  # written before the answers were kept: unknown, taken as the same
    del older["stream"]["answers_key"]
    for key in ("model.tokenizer_path", "data.answer_key", "data.data_source_key"):
        del older["surplus_settings"][key]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(resumed(older, settings("data.answer_key=flipped"), problems=edited).surplus) == 1
