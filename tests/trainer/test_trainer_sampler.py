import warnings

import pytest

from dapo.data.records import Problem
from dapo.trainer.batch import Sample
from dapo.trainer.sampler import DynamicSampler, PromptStream
from dapo.trainer.step_metrics import rollout_metrics

PROBLEMS = [Problem(uid=str(i), prompt=f"p{i}", ground_truth=str(i)) for i in range(10)]


def test_stream_resumes_exactly_across_epochs():
    stream = PromptStream(PROBLEMS, seed=3)
    first = [p.uid for p in stream.take(7)]
    state = stream.state_dict()
    rest = [p.uid for p in stream.take(9)]
    resumed = PromptStream(PROBLEMS, seed=3)
    resumed.load_state_dict(state)
    assert [p.uid for p in resumed.take(9)] == rest
    assert sorted(first + rest[:3]) == sorted(p.uid for p in PROBLEMS)  # one epoch = each once


@pytest.mark.parametrize("changed", ["fewer problems", "other problems", "other seed", "no shuffle"])
def test_a_cursor_into_changed_data_starts_a_new_epoch_saying_so(changed):
    stream = PromptStream(PROBLEMS, seed=3)
    stream.take(8)  # epoch 0, position 8
    problems = {"fewer problems": PROBLEMS[:5],
                "other problems": [Problem(uid=f"x{i}", prompt="q", ground_truth="1") for i in range(10)]}
    resumed = PromptStream(problems.get(changed, PROBLEMS), seed=4 if changed == "other seed" else 3,
                           shuffle=changed != "no shuffle")
    with pytest.warns(UserWarning, match=r"changed since this checkpoint.*epoch 0, position 8.*new epoch \(1\)"):
        resumed.load_state_dict(stream.state_dict())
    assert (resumed.epoch, resumed.cursor) == (1, 0)
    assert len(resumed.take(len(resumed.problems))) == len(resumed.problems)  # a whole epoch, no IndexError


def test_without_shuffling_another_seed_continues_the_epoch():
    """The unshuffled order is the data's whatever the seed: a resume with another trainer.seed
    goes on with the epoch's rest (it skipped to a new epoch, never training that rest); a
    checkpoint whose key held the seed (before 2026-11-29) continues too."""
    stream = PromptStream(PROBLEMS, seed=3, shuffle=False)
    stream.take(4)
    resumed = PromptStream(PROBLEMS, seed=4, shuffle=False)
    resumed.load_state_dict(stream.state_dict())
    assert [p.uid for p in resumed.take(6)] == ["4", "5", "6", "7", "8", "9"]
    older = PromptStream(PROBLEMS, seed=3, shuffle=False)
    older.load_state_dict({**stream.state_dict(), "order_key": stream._order_key(seeded=True)})
    assert (older.epoch, older.cursor) == (0, 4)


def test_a_cursor_past_the_end_from_an_older_checkpoint_starts_a_new_epoch():
    resumed = PromptStream(PROBLEMS[:5], seed=3)
    with pytest.warns(UserWarning, match="new epoch"):
        resumed.load_state_dict({"epoch": 2, "cursor": 8})  # no order_key: written before it was kept
    assert (resumed.epoch, resumed.cursor) == (3, 0) and len(resumed.take(7)) == 7


def test_each_epoch_is_shuffled_anew():
    """The order's seed takes the epoch: every epoch repeated the first one's order."""
    stream = PromptStream(PROBLEMS, seed=3)
    first, second = [p.uid for p in stream.take(10)], [p.uid for p in stream.take(10)]
    assert sorted(first) == sorted(second) and first != second


def test_a_checkpoint_at_the_end_of_an_epoch_resumes_as_the_same_data():
    """A cursor at exactly the data's length is the end of an epoch, not changed data: the resume
    goes on without a warning (and keeps the surplus groups, which changed data drops)."""
    stream = PromptStream(PROBLEMS, seed=3)
    stream.take(10)
    state = stream.state_dict()
    resumed = PromptStream(PROBLEMS, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resumed.load_state_dict(state) is True
    assert [p.uid for p in resumed.take(10)] == [p.uid for p in stream.take(10)]


def make_round(acc_of, n=4, counter=None):
    """A fake generation round: group g gets correctness pattern acc_of(problem)."""
    counter = counter if counter is not None else [0]

    def generate_round(problems, round_index):
        samples = []
        for problem in problems:
            gid = counter[0]
            counter[0] += 1
            for acc in acc_of(problem)[:n]:
                samples.append(Sample(gid, problem.uid, [1], [2], [0.0], False, score=float(acc), acc=bool(acc)))
        return samples

    return generate_round


def sampler(**kw):
    args = dict(prompts_per_step=3, gen_prompts_per_round=4, max_gen_rounds=5, dynamic_sampling=True,
                filter_metric="acc", keep_surplus=True)
    args.update(kw)
    return DynamicSampler(PromptStream(PROBLEMS, seed=0, shuffle=False), **args)


def test_refills_until_batch_full_and_carries_surplus():
    # even-numbered problems have mixed outcomes, odd ones are all wrong
    mixed = make_round(lambda p: [1, 0, 0, 1] if int(p.uid) % 2 == 0 else [0, 0, 0, 0])
    ds = sampler()
    batch, report = ds.next_batch(mixed, step=0)
    assert len({s.group_id for s in batch}) == 3
    assert report.gen_rounds == 2 and report.groups_generated == 8
    assert report.groups_all_wrong == 4 and report.groups_all_correct == 0
    assert report.groups_carried_out == 1 and len(ds.surplus) == 1
    _, next_report = ds.next_batch(mixed, step=1)
    assert next_report.groups_carried_in == 1


def test_a_round_that_fills_the_batch_exactly_is_the_last_and_no_limit_was_hit():
    """Three groups with signal of four generated, for a step of three: one round, no surplus, and
    no round-limit warning (the limit is reached only by a batch left short)."""
    ds = sampler(max_gen_rounds=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batch, report = ds.next_batch(make_round(lambda p: [1, 0, 0, 1] if int(p.uid) % 4 else [1] * 4), step=0)
    assert len({s.group_id for s in batch}) == 3 and report.gen_rounds == 1
    assert not report.hit_round_limit and report.groups_carried_out == 0


def test_the_acc_filter_drops_a_group_all_correct_whose_scores_differ_by_a_bonus():
    """filter_metric=acc keeps a group by its correctness alone (DAPO's 0 < #correct < G): all
    correct, with a function's bonus spreading the scores, is no group with signal."""
    def bonus(problems, round_index):
        return [Sample(g, problem.uid, [1], [2], [0.0], False, score=1.0 + 0.2 * (i == 1), acc=True)
                for g, problem in enumerate(problems) for i in range(4)]

    with pytest.warns(UserWarning):
        batch, report = sampler(max_gen_rounds=1).next_batch(bonus, step=0)
    assert batch == [] and report.groups_all_correct == 4
    kept, _ = sampler(filter_metric="score", max_gen_rounds=1).next_batch(bonus, step=0)
    assert len(kept) == 12  # by the score, the bonus is a spread


def test_all_correct_reward_hits_the_round_limit_with_a_reason():
    ds = sampler(max_gen_rounds=2)
    with pytest.warns(UserWarning, match="all-correct"):
        batch, report = ds.next_batch(make_round(lambda p: [1, 1, 1, 1]), step=0)
    assert batch == [] and report.hit_round_limit and report.groups_all_correct == 8


def test_a_round_limit_hit_every_step_is_said_in_full_once_then_at_the_10th_and_100th():
    """A solved task hits the limit every step: one full warning, not one per step."""
    ds = sampler(max_gen_rounds=1)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        for step in range(100):
            _, report = ds.next_batch(make_round(lambda p: [1, 1, 1, 1]), step=step)
            assert report.hit_round_limit  # every step's metric says it
    messages = [str(warning.message) for warning in said]
    assert len(messages) == 3
    assert "0 of 3 groups with mixed outcomes after 1 generation rounds" in messages[0]
    assert "Said in full once" in messages[0]
    assert "10 times so far, this time with 0 of 3 groups" in messages[1]
    assert "100 times so far" in messages[2]


def test_non_binary_scores_filter_on_variance():
    ds = sampler(filter_metric="score", max_gen_rounds=1, prompts_per_step=4)

    def graded(problems, round_index):
        out = []
        for g, problem in enumerate(problems):
            scores = [0.5, 0.5, 0.5, 0.5] if g == 0 else [0.2, 0.7, 0.7, 0.7]
            out += [Sample(g, problem.uid, [1], [2], [0.0], False, score=s, acc=False) for s in scores]
        return out

    with pytest.warns(UserWarning):
        batch, report = ds.next_batch(graded, step=0)
    assert report.groups_kept == 3 and {s.group_id for s in batch} == {1, 2, 3}



def test_groups_scored_alike_with_mixed_correctness_are_counted_in_the_warning():
    """Filtering on the score, a group whose responses score alike but differ in acc (a user reward
    whose "acc" is not its score) is neither all-correct nor all-wrong: the warning's counts added
    up to fewer groups than were filtered."""
    def alike(problems, round_index):
        return [Sample(g, problem.uid, [1], [2], [0.0], False, score=0.5, acc=i % 2 == 0)
                for g, problem in enumerate(problems) for i in range(4)]

    ds = sampler(filter_metric="score", max_gen_rounds=1)
    with pytest.warns(UserWarning, match="0 groups were all-correct, 0 all-wrong, 4 scored alike with mixed "
                                         "correctness and 0 all truncated"):
        ds.next_batch(alike, step=0)

def test_constant_score_groups_are_all_correct_or_all_wrong_by_their_acc():
    # a hard task: every response scores -1 and is wrong; with filter_metric=score the groups are
    # constant at the round's highest score, which must not make them "all-correct"
    def all_wrong(problems, round_index):
        return [Sample(g, problem.uid, [1], [2], [0.0], False, score=-1.0, acc=False)
                for g, problem in enumerate(problems) for _ in range(4)]

    ds = sampler(filter_metric="score", max_gen_rounds=1)
    with pytest.warns(UserWarning, match="0 groups were all-correct, 4 all-wrong and 0 all truncated"):
        _, report = ds.next_batch(all_wrong, step=0)
    assert (report.groups_all_correct, report.groups_all_wrong) == (0, 4)

    def bonus(problems, round_index):  # one group earns a bonus above 1; the others are all correct
        return [Sample(g, problem.uid, [1], [2], [0.0], False, score=1.5 if g == 0 else 1.0, acc=True)
                for g, problem in enumerate(problems) for _ in range(4)]

    ds = sampler(filter_metric="score", max_gen_rounds=1)
    with pytest.warns(UserWarning):
        _, report = ds.next_batch(bonus, step=0)
    assert (report.groups_all_correct, report.groups_all_wrong) == (4, 0)


def test_a_group_whose_every_response_overlong_filtering_masked_is_refilled():
    # mixed outcomes, but every response truncated and masked out of the loss: nothing to train on,
    # and it took one of the step's slots
    def round_(problems, round_index):
        return [Sample(g + 10 * round_index, problem.uid, [1], [2], [0.0], truncated=g == 0, score=float(acc),
                       acc=bool(acc), loss_weight=0.0 if g == 0 else 1.0)
                for g, problem in enumerate(problems) for acc in (1, 0, 0, 1)]

    ds = sampler(prompts_per_step=4)
    batch, report = ds.next_batch(round_, step=0)
    assert report.groups_all_masked == 2 and report.gen_rounds == 2  # group 0 of each round
    assert report.groups_generated - report.groups_kept == 2
    assert len({s.group_id for s in batch}) == 4 and all(s.loss_weight == 1.0 for s in batch)
    # the step's logged ratio counts them among the filtered: 2 of the 8 groups generated
    assert rollout_metrics(report, batch, [])["sampling/filtered_ratio"] == 2 / 8


def test_every_generated_group_has_its_outcome():
    """completions.jsonl's group_outcome: what became of each group dynamic sampling saw."""
    # (score, acc) of each response, by problem: filtering on the score
    patterns = {0: [(1, 1)] * 4, 1: [(0, 0)] * 4, 2: [(0.5, 1), (0.5, 0)] * 2,
                3: [(1, 1), (0, 0)] * 2, 4: [(1, 1), (0, 0)] * 2, 5: [(1, 1), (0, 0)] * 2,
                6: [(1, 1), (0, 0)] * 2, 7: [(1, 1), (0, 0)] * 2, 8: [(1, 1), (0, 0)] * 2}

    def round_(problems, round_index):
        return [Sample(int(p.uid), p.uid, [1], [2], [0.0], truncated=p.uid == "8", score=float(score), acc=bool(acc),
                       loss_weight=0.0 if p.uid == "8" else 1.0)
                for p in problems for score, acc in patterns[int(p.uid)]]

    ds = sampler(filter_metric="score", prompts_per_step=3, gen_prompts_per_round=9, max_surplus_fraction=0.34)
    batch, report = ds.next_batch(round_, step=0)
    assert report.group_outcomes == {0: "all_correct", 1: "all_wrong", 2: "alike", 3: "trained", 4: "trained",
                                     5: "trained", 6: "carried", 7: "discarded", 8: "all_masked"}
    assert {s.group_id for s in batch} == {3, 4, 5} and [g[0].group_id for g in ds.surplus] == [6]
    _, report = sampler(dynamic_sampling=False, prompts_per_step=3).next_batch(round_, step=0)
    assert report.group_outcomes == {0: "trained", 1: "trained", 2: "trained"}  # all train, signal or not


@pytest.mark.parametrize(("next_step", "carried_in"), [(1, 1), (2, 0), (5, 0)])
def test_surplus_more_than_one_step_stale_is_discarded(next_step, carried_in):
    """Surplus groups train the next step only: two steps on, their policy is two updates old."""
    ds = sampler()
    mixed = make_round(lambda p: [1, 0, 1, 0])
    ds.next_batch(mixed, step=0)
    assert len(ds.surplus) == 1
    _, report = ds.next_batch(mixed, step=next_step)
    assert report.groups_carried_in == carried_in and report.groups_discarded >= 1 - carried_in


def test_without_dynamic_sampling_every_group_trains_and_no_signal_groups_are_counted():
    # problems 0, 3, 6 all-correct; 1, 4 all-wrong; 2, 5 mixed: 7 groups, of which 5 have no signal
    pattern = {0: [1, 1, 1, 1], 1: [0, 0, 0, 0], 2: [1, 0, 0, 0]}
    ds = sampler(dynamic_sampling=False, prompts_per_step=7)
    batch, report = ds.next_batch(make_round(lambda p: pattern[int(p.uid) % 3]), step=0)
    assert len({s.group_id for s in batch}) == 7 and report.gen_rounds == 1
    assert report.groups_generated == 7 and report.groups_kept == 2  # kept: with signal, as dynamic sampling would
    assert report.groups_all_correct == 3 and report.groups_all_wrong == 2
    assert rollout_metrics(report, batch, [])["sampling/filtered_ratio"] == pytest.approx(5 / 7)  # was 0


@pytest.mark.parametrize("settings", [{"dynamic_sampling": False}, {"keep_surplus": False}])
def test_surplus_restored_under_other_settings_is_discarded_and_counted(settings):
    # a checkpoint saved with dynamic sampling and surplus on, resumed with one of them off
    mixed = make_round(lambda p: [1, 0, 1, 0])
    saved = sampler()
    saved.next_batch(mixed, step=0)
    resumed = sampler(**settings)
    resumed.surplus = saved.surplus
    batch, report = resumed.next_batch(mixed, step=1)
    assert len(saved.surplus) == 1 and report.groups_carried_in == 0 and report.groups_discarded >= 1
    assert not any(s.carried_over for s in batch) and len({s.group_id for s in batch}) == 3


def test_the_surplus_cap_is_the_fraction_of_a_step_exactly():
    # 0.29 * 100 is 28.999999999999996 in floating point: the cap was 28
    assert [sampler(prompts_per_step=100, max_surplus_fraction=f).max_carried_in for f in (0.29, 0.57, 0.58, 0.5)] == [
        29, 57, 58, 50]


def test_a_fraction_that_rounds_to_a_whole_step_still_leaves_room_for_fresh_groups():
    assert sampler(prompts_per_step=10, max_surplus_fraction=0.99999999).max_carried_in == 9
    assert sampler(prompts_per_step=4, max_surplus_fraction=1.0).max_carried_in == 3


def test_a_resume_with_a_smaller_cap_carries_no_more_than_it():
    """A checkpoint's 3 surplus groups, resumed with max_surplus_fraction giving a cap of 1: 1 is
    carried in, 2 dropped and counted."""
    mixed = make_round(lambda p: [1, 0, 1, 0])
    saved = sampler(prompts_per_step=4, gen_prompts_per_round=7, max_surplus_fraction=0.75)
    saved.next_batch(mixed, step=0)
    assert len(saved.surplus) == 3
    resumed = sampler(prompts_per_step=4, gen_prompts_per_round=7, max_surplus_fraction=0.25)
    resumed.load_state_dict(saved.state_dict())
    _, report = resumed.next_batch(mixed, step=1)
    assert report.groups_carried_in == 1 and report.groups_discarded >= 2


@pytest.mark.parametrize("fraction, cap", [(0.5, 4), (0.0, 0), (0.99, 7)])
def test_carried_over_groups_never_fill_a_step(fraction, cap):
    # 8 groups a step; one round of 24 all-mixed prompts leaves 16 surplus groups behind
    ds = sampler(prompts_per_step=8, gen_prompts_per_round=24, max_surplus_fraction=fraction)
    mixed = make_round(lambda p: [1, 0, 1, 0])
    _, first = ds.next_batch(mixed, step=0)
    # carried out: what the next step will use; the rest is dropped, and counted, now (before, all
    # 16 were "carried out" and the next step dropped 16 - cap)
    assert first.groups_carried_out == cap and first.groups_discarded == 16 - cap
    batch, report = ds.next_batch(mixed, step=1)
    assert report.groups_carried_in == cap < 8 and report.gen_rounds == 1
    assert report.groups_discarded == 16 and report.groups_carried_out == cap  # its own 16 + cap beyond the batch
    carried = {s.group_id for s in batch if s.group_id < 24}
    assert len(carried) == cap and len({s.group_id for s in batch}) == 8
    # marked, and last: the first mini-batch (where old_logprobs=rollout measures the engine/trainer
    # mismatch) holds this step's groups
    assert [s.carried_over for s in batch] == [s.group_id < 24 for s in batch]
    assert sorted(batch, key=lambda s: s.carried_over) == batch


@pytest.mark.parametrize(("verifier_weight", "metric"), [("0", "score"), ("1", "acc")])
def test_the_trainers_sampler_filters_on_the_resolved_metric(tiny_model_dir, reward_file, tmp_path, verifier_weight,
                                                             metric):
    """algorithm.filter_metric=auto (the default) reaches the sampler resolved."""
    from dapo.trainer import Trainer
    from tests.trainer.conftest import tiny_config

    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file,
                                  f"reward.verifier_weight={verifier_weight}"))
    try:
        assert trainer.cfg.algorithm.filter_metric == "auto" and trainer.sampler.filter_metric == metric
    finally:
        trainer.close()


def test_the_surplus_round_trips_a_checkpoint_exactly_as_tensors(tmp_path):
    """The surplus's token ids and log-probs are saved as tensors (pickled lists took seconds per
    100k tokens each way), load with weights_only=True, and come back equal to the last bit;
    an older checkpoint's lists or float64 tensors still load."""
    import dataclasses

    import numpy as np
    import torch

    ds = sampler()
    ds.surplus = [[Sample(7, "u", [1, 50_000], [3, 4, 5], [-0.1, -1 / 3, -2.5e-9], True, score=0.5, acc=True,
                          reward=0.25, advantage=-1.2, loss_weight=0.0, old_logprobs=[-0.2, -0.7, -1e-300],
                          policy_version=3, carried_over=True)]]
    torch.save(ds.state_dict(), tmp_path / "state.pt")
    state = torch.load(tmp_path / "state.pt", weights_only=True)
    assert isinstance(state["surplus"][0][0]["response_ids"], torch.Tensor)
    resumed = sampler()
    resumed.load_state_dict(state)
    assert resumed.surplus == ds.surplus
    held = resumed.surplus[0][0]
    assert held.rollout_logprobs.dtype == np.float32 and held.old_logprobs.dtype == np.float32
    assert state["surplus"][0][0]["old_logprobs"].dtype == torch.float32
    # older checkpoints: the log-probs as float64 tensors, and before those as lists of floats
    as_lists = [[{**dataclasses.asdict(s), "rollout_logprobs": s.rollout_logprobs.tolist(),
                  "old_logprobs": s.old_logprobs.tolist()} for s in group] for group in ds.surplus]
    as_float64 = [[{**fields, **{name: fields[name].to(torch.float64)
                                 for name in ("rollout_logprobs", "old_logprobs")}} for fields in group]
                  for group in state["surplus"]]
    for older in ({**state, "surplus": as_lists}, {**state, "surplus": as_float64}):
        torch.save(older, tmp_path / "older.pt")
        resumed.load_state_dict(torch.load(tmp_path / "older.pt", weights_only=True))
        assert resumed.surplus == ds.surplus
        assert isinstance(resumed.surplus[0][0].old_logprobs, np.ndarray)
        assert resumed.surplus[0][0].old_logprobs.dtype == np.float32
