"""What the policy ranks say reaches the user as one process says it: a rank's UserError (any
subclass, also one whose ``__init__`` takes other arguments than its message) as the one line the
CLI prints, not Ray's page of traceback; dapo-rl's warnings as the CLI's one line, from rank 0 only
(every rank raises the same), and a skipped update said once, by the driver."""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from dapo.errors import UserError
from dapo.trainer import ray_rank
from dapo.trainer.ray_policy import RayPolicyGroup
from dapo.trainer.ray_rank import PolicyRank, RankUserError, rank_warnings
from dapo.trainer.update_stats import UpdateStats

DAPO_FILE = str(Path(ray_rank.__file__).resolve())  # a warning raised in dapo-rl's own code


class _ShardMissing(UserError):  # pickles and unpickles as it is
    pass


class _CorruptWeights(UserError):  # unpickled as _CorruptWeights(message): a TypeError
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path} is not a safetensors file: {reason}")


def test_a_rank_methods_user_error_its_driver_cannot_rebuild_comes_as_its_message():
    """Without Ray (the test below does it through a rank): a UserError that survives pickling
    leaves a rank method as it is, one whose class would not unpickle as its message and kind."""
    from dapo.trainer.ray_rank import driver_readable_errors

    @driver_readable_errors
    def method(self, error: UserError) -> None:
        raise error

    with pytest.raises(_ShardMissing, match=r"^policy/__1_0\.distcp is missing$"):
        method(None, _ShardMissing("policy/__1_0.distcp is missing"))
    with pytest.raises(RankUserError, match=r"^/m/model\.safetensors is not a safetensors file: header too large$") \
            as raised:
        method(None, _CorruptWeights("/m/model.safetensors", "header too large"))
    assert raised.value.kind == "_CorruptWeights" and isinstance(raised.value, UserError)


# a Ray run (9 s); the default suite keeps a rank's error raised at once (test_trainer_ray) and
# the rank's own conversion above
@pytest.mark.slow
def test_a_user_error_subclass_raised_in_a_rank_is_raised_by_the_driver_as_the_rank_raised_it():
    ray = pytest.importorskip("ray")

    class ShardMissing(UserError):  # pickles and unpickles as it is
        pass

    class CorruptWeights(UserError):  # unpickled as CorruptWeights(message): a TypeError, before
        def __init__(self, path: str, reason: str) -> None:
            super().__init__(f"{path} is not a safetensors file: {reason}")
            self.path = path

    def raising(make_error):  # (made in the rank: CorruptWeights does not even reach it as an argument)
        def plant(rank) -> None:
            class Policy:
                @property
                def lr(self) -> float:
                    raise make_error()
            rank.policy = Policy()
        return plant

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        actor = ray.remote(num_cpus=0)(PolicyRank).remote({}, 0, 1, "train")
        group = object.__new__(RayPolicyGroup)
        group._ray, group.ranks = ray, [actor]
        ray.get(actor.__ray_call__.remote(raising(lambda: ShardMissing("policy/__1_0.distcp is missing"))))
        with pytest.raises(ShardMissing, match=r"^policy/__1_0\.distcp is missing$"):
            group._get([actor.ready.remote()])
        ray.get(actor.__ray_call__.remote(raising(lambda: CorruptWeights("/m/model.safetensors", "header too large"))))
        with pytest.raises(RankUserError, match=r"^/m/model\.safetensors is not a safetensors file: header too large$") \
                as raised:
            group._get([actor.ready.remote()])
        assert raised.value.kind == "CorruptWeights" and isinstance(raised.value, UserError)  # the CLI's one line
        assert group.broken is None
        # the rank process formats dapo-rl's warnings as the CLI does (the driver passed its command on)
        formatted = ray.get(actor.__ray_call__.remote(
            lambda rank: warnings.formatwarning("loss is nan", UserWarning, DAPO_FILE, 297, "warnings.warn(...)")))
        assert formatted == "dapo train: warning: loss is nan\n"
    finally:
        ray.shutdown()


@pytest.fixture
def rank_process(monkeypatch):
    """Python's formatwarning and a showwarning that writes it to stderr, as in a rank's process
    (not pytest's, which records them), both put back after."""
    monkeypatch.setattr(warnings, "formatwarning", warnings._formatwarning_orig)
    with warnings.catch_warnings():  # (puts showwarning back)
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: sys.stderr.write(
            warnings.formatwarning(message, category, filename, lineno, line))
        yield


@pytest.mark.parametrize("rank", [0, 1])
def test_a_ranks_warnings_are_one_line_and_dapos_own_come_from_rank_0_only(rank_process, capsys, rank):
    rank_warnings(rank, "train")
    warnings.warn_explicit("rollout.native_dtype=bf16 has no effect", UserWarning, DAPO_FILE, 112)
    warnings.warn_explicit("a library's deprecation", FutureWarning, "/site-packages/lib/x.py", 7)
    err = capsys.readouterr().err
    ours = "dapo train: warning: rollout.native_dtype=bf16 has no effect\n"
    assert (ours in err) == (rank == 0)
    assert ray_rank.__file__ not in err and "UserWarning" not in err  # no source line, no Python format
    assert "/site-packages/lib/x.py:7: FutureWarning: a library's deprecation" in err  # as the CLI shows it


def test_without_the_cli_a_rank_keeps_pythons_format(rank_process, capsys):
    rank_warnings(1, None)
    warnings.warn_explicit("rollout.native_dtype=bf16 has no effect", UserWarning, DAPO_FILE, 112)
    assert f"{DAPO_FILE}:112: UserWarning: rollout.native_dtype=bf16 has no effect" in capsys.readouterr().err


class Update:
    def __init__(self, reply) -> None:
        self.reply = reply

    def remote(self, *args):
        return self.reply


def group_of(replies: list[UpdateStats]) -> RayPolicyGroup:
    """A driver whose ranks' updates return ``replies``."""
    group = object.__new__(RayPolicyGroup)
    group._ray = SimpleNamespace(get=lambda refs: list(refs))
    group.ranks = [SimpleNamespace(update=Update(reply)) for reply in replies]
    group.world_size, group.version, group.num_nonfinite_skipped = len(replies), 0, 0
    group.sequence_parallel_size = 1
    return group


@pytest.mark.parametrize("order", ["peer first", "seen first"])
def test_an_update_every_rank_skipped_is_said_once_by_the_driver_with_the_reason(order):
    """One rank saw the NaN; the other only that another rank's loss was not finite: one warning,
    as one process words it, with the reason of the rank that saw it (whatever its rank)."""
    from tests.trainer.test_trainer_policy import make_samples

    samples = make_samples(torch.Generator().manual_seed(0))
    for sample in samples:
        sample.old_logprobs = [0.0] * len(sample.response_ids)
    replies = [UpdateStats(loss=math.nan, skip_reason="another rank's loss is not finite"),
               UpdateStats(loss=math.nan, skip_reason="loss is nan")]
    group = group_of(replies if order == "peer first" else replies[::-1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stats = group.update(samples)
    assert stats.skipped and stats.skip_reason == "loss is nan"
    assert group.num_nonfinite_skipped == 1 and group.version == 0
    assert [str(w.message) for w in caught] == ["skipped an optimizer update: loss is nan; weights left unchanged"]
    assert caught[0].filename.startswith(str(Path(ray_rank.__file__).parents[1]))  # dapo-rl's: the CLI's one line
    # an update the ranks made says nothing
    group = group_of([UpdateStats(loss=0.5), UpdateStats(loss=0.25)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stats = group.update(samples)
    assert not stats.skipped and stats.skip_reason == "" and group.version == 1 and not caught


def test_a_rank_says_nothing_of_an_update_it_skipped_and_hands_the_driver_why(tiny_model_dir):
    """The rank's own PolicyWorker skips the update (a NaN advantage): no warning in the rank's
    process (the driver says it, once for all ranks), its reason in the stats the driver gets.
    Before, the rank raised the warning and its showwarning picked it out by its text."""
    from transformers import AutoModelForCausalLM

    from dapo.trainer.batch import count_loss_tokens
    from tests.trainer.test_trainer_policy import make_samples, worker

    rank = PolicyRank({}, 0, 1)
    rank.policy = worker(AutoModelForCausalLM.from_pretrained(tiny_model_dir), 1000)
    samples = make_samples(torch.Generator().manual_seed(1))
    for sample, logprobs in zip(samples, rank.policy.compute_logprobs(samples).logprobs):
        sample.old_logprobs = logprobs
    samples[5].advantage = math.nan
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stats = rank.update(samples, *count_loss_tokens(samples), False, None)
    assert not caught
    assert stats.skipped and stats.skip_reason == "loss is nan" and rank.policy.num_nonfinite_skipped == 1
    assert stats.skip_message == "skipped an optimizer update: loss is nan; weights left unchanged"
