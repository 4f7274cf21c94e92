"""Dynamic Sampling filters on any reward metric, as verl's ``algorithm.filter_groups.metric`` takes any
key of the reward's extra info: ``algorithm.filter_metric=reward`` (after overlong shaping, verl's
seq_reward / seq_final_reward) or ``<function>/<key>``, a reward function's own metric. A name of no
function of the run is refused before the model loads; a response the function gave no value for is
read as its group's others (no spread of its own), said once."""

from __future__ import annotations

import math
import warnings

import pytest

from dapo.config import ConfigError, load_config
from dapo.rewards.types import RewardResult
from dapo.trainer.batch import Sample
from dapo.trainer.scoring import filter_value
from tests.trainer.test_trainer_sampler import sampler

NAN = math.nan


@pytest.mark.parametrize("metric", ["reward", "acc", "score", "auto", "my_fn/format_ok", "a.reward#2/score"])
def test_the_config_takes_the_built_in_metrics_and_a_functions(metric):
    assert load_config(overrides=[f"algorithm.filter_metric={metric}"]).algorithm.filter_metric == metric


@pytest.mark.parametrize(("metric", "said"), [
    ("bogus", "or a reward function's metric '<function>/<key>'"),
    ("/key", "'<function>/<key>'"), ("my_fn/", "'<function>/<key>'"),
    ("seq_reward", "for 'seq_reward' set algorithm.filter_metric=reward"),
    ("seq_final_reward", "for 'seq_final_reward' set algorithm.filter_metric=reward")])
def test_other_names_are_refused_saying_what_is_taken(metric, said):
    with pytest.raises(ConfigError, match="algorithm.filter_metric") as refused:
        load_config(overrides=[f"algorithm.filter_metric={metric}"])
    assert said in str(refused.value)


def _round(values_by_group, scores=None, rewards=None):
    """A round whose group g holds responses with ``values_by_group[g]`` as their filter values."""
    def generate_round(problems, round_index):
        samples = []
        for g, problem in enumerate(problems[: len(values_by_group)]):
            for i, value in enumerate(values_by_group[g]):
                samples.append(Sample(100 * round_index + g, problem.uid, [1], [2], [0.0], False,
                                      score=scores[g][i] if scores else 0.0, acc=False,
                                      reward=rewards[g][i] if rewards else 0.0, filter_value=value))
        return samples
    return generate_round


def test_a_functions_metric_keeps_the_groups_where_it_varies():
    groups = [[1, 1, 1, 1], [0, 1, 1, 1], [0.5, NAN, 0.5, 0.7], [NAN, 1, NAN, 1], [NAN] * 4, [2, NAN, 2, 2]]
    ds = sampler(filter_metric="fn/format_ok", max_gen_rounds=1, prompts_per_step=2, gen_prompts_per_round=6)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        batch, report = ds.next_batch(_round(groups), step=0)
        ds.next_batch(_round(groups), step=1)
    assert report.groups_generated == 6 and report.groups_kept == 2  # groups 1 and 2 vary; a missing value does not
    assert {s.group_id for s in batch} == {1, 2}
    missing = [str(w.message) for w in said if "no value for it" in str(w.message)]
    assert len(missing) == 1 and "8 of 24 responses" in missing[0] and "'format_ok'" in missing[0]


def test_the_reward_after_overlong_shaping_keeps_a_group_the_score_drops():
    """Four right answers, one cut into the overlong buffer: the scores are alike, the rewards not."""
    scores, rewards = [[1.0] * 4], [[1.0, 1.0, 0.75, 1.0]]
    kept = {}
    for metric in ("score", "reward"):
        ds = sampler(filter_metric=metric, max_gen_rounds=1, prompts_per_step=1, gen_prompts_per_round=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, report = ds.next_batch(_round([[0.0] * 4], scores, rewards), step=0)
        kept[metric] = report.groups_kept
    assert kept == {"score": 0, "reward": 1}


def test_a_responses_value_is_its_functions_metric_or_nan():
    result = RewardResult(score=1.0, acc=True, pred="", extra={"fn/format_ok": 1, "fn/score": 0.25})
    assert filter_value(result, "fn/format_ok") == 1.0 and filter_value(result, "fn/score") == 0.25
    assert math.isnan(filter_value(result, "fn/other")) and math.isnan(filter_value(result, "gn/format_ok"))
    assert filter_value(result, "acc") == 0.0 and filter_value(result, "reward") == 0.0  # read from the Sample's fields


def test_samples_with_no_value_compare_equal_after_a_checkpoint(tmp_path):
    import torch

    ds = sampler(filter_metric="fn/k")
    ds.surplus = [[Sample(7, "u", [1], [3], [-0.1], False, filter_value=NAN),
                   Sample(7, "u", [1], [4], [-0.2], False, filter_value=0.5)]]
    torch.save(ds.state_dict(), tmp_path / "state.pt")
    resumed = sampler(filter_metric="fn/k")
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    assert resumed.surplus == ds.surplus and resumed.surplus[0][1].filter_value == 0.5
    assert Sample(7, "u", [1], [3], [-0.1], False, filter_value=NAN) != Sample(7, "u", [1], [3], [-0.1], False)


LABELLED_REWARD = '''
def constant_with_parity(response, ground_truth, extra):
    return {"score": 1.0, "acc": True, "odd": float(len(response) % 2)}
'''


def test_a_trainer_filters_on_a_functions_metric_and_refuses_another_name(tiny_model_dir, tmp_path):
    """The run's reward is constant (filtering on the score would train nothing) and its function
    reports the response's parity: filtering on that keeps groups; a typo is refused at the start."""
    from dapo.trainer import Trainer
    from tests.trainer.conftest import tiny_config

    reward_file = tmp_path / "labelled.py"
    reward_file.write_text(LABELLED_REWARD)
    with pytest.raises(ConfigError, match=r"names no reward function of this run: theirs are "
                                          r"\['constant_with_parity'\], so a metric of one is e.g. "
                                          r"'constant_with_parity/score'"):
        Trainer(tiny_config(tiny_model_dir, tmp_path / "typo", reward_file, "algorithm.filter_metric=constant/odd",
                            fn="constant_with_parity"))
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file,
                                  "algorithm.filter_metric=constant_with_parity/odd", "algorithm.max_gen_rounds=6",
                                  "rollout.temperature=1.5", fn="constant_with_parity"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = trainer.step_once()
        assert result.metrics["sampling/groups_trained"] > 0
        assert result.metrics["sampling/filtered_ratio"] < 1
    finally:
        trainer.close()


def test_the_sampler_itself_refuses_a_metric_it_cannot_read():
    with pytest.raises(ValueError, match=r"filter_metric='nope': 'acc', 'score', 'reward' or '<function>/<key>'"):
        sampler(filter_metric="nope")
    with pytest.raises(ValueError, match="filter_metric='auto'"):  # the config resolves it first
        sampler(filter_metric="auto")
