"""How the driver splits a generate() over the policy ranks' engines (no Ray needed: the ranks
are stand-ins that record what they were asked)."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest
import torch

from dapo.rollout.base import Completion, GenerationResult, SamplingParams, request_seed
from dapo.trainer.batch import deal_prompts
from dapo.trainer.ray_faults import RankCalls
from dapo.trainer.ray_policy import RayRolloutEngine


class FakeRank:
    def __init__(self, rank: int) -> None:
        self.rank, self.calls = rank, []
        self.generate = SimpleNamespace(remote=self._generate)

    def _generate(self, prompts, params):
        self.calls.append((prompts, params.seed, params.request_seeds))
        completions = [Completion(i, [self.rank, p[0], j], [0.0] * 3, "stop")
                       for i, p in enumerate(prompts) for j in range(params.n)]
        return GenerationResult(completions, seconds=1.0 + self.rank, num_generated_tokens=3 * len(completions))


def fake_group(world: int, engine_tp: int = 1):
    group = SimpleNamespace(world_size=world, engine_tp=engine_tp, ranks=[FakeRank(r) for r in range(world)],
                            _submit=lambda calls: [method.remote(*args) for method, args in calls], gets=[])
    group._get = lambda refs, collective=True, cancellable=False: group.gets.append((collective, cancellable)) or list(refs)
    group._call = functools.partial(RankCalls._call, group)  # the real one: it passes cancellable on
    return group


class TensorParallelRank(FakeRank):
    """A rank of a vLLM tensor-parallel group: its samples depend on the prompts and seed only."""

    def _generate(self, prompts, params):
        self.calls.append((prompts, params.seed, params.request_seeds))
        completions = [Completion(i, [params.seed % 97, p[0], j], [0.0] * 3, "stop")
                       for i, p in enumerate(prompts) for j in range(params.n)]
        return GenerationResult(completions, seconds=1.0, num_generated_tokens=3 * len(completions))


def test_prompts_are_dealt_evenly_and_completions_come_back_in_prompt_order():
    group = fake_group(2)
    prompts = [[10 + i] * length for i, length in enumerate([9, 1, 2, 8, 3])]
    result = RayRolloutEngine(group).generate(prompts, SamplingParams(n=2, seed=7))
    # 3 and 2 prompts holding 12 and 11 prompt tokens (9+1+2 | 8+3; contiguous halves: 10 | 13)
    assert [call[0] for call in group.ranks[0].calls] == [[prompts[0], prompts[1], prompts[2]]]
    assert [call[0] for call in group.ranks[1].calls] == [[prompts[3], prompts[4]]]
    # each rank samples with its own seed (the hf engine's), each prompt with the seed it would have in
    # one engine's call (the native and vLLM engines'): the samples do not depend on the rank count
    assert [r.calls[0][1] for r in group.ranks] == [request_seed(7, 0), request_seed(7, 1)]
    assert [r.calls[0][2] for r in group.ranks] == [[request_seed(7, i) for i in (0, 1, 2)],
                                                    [request_seed(7, i) for i in (3, 4)]]
    assert [c.prompt_index for c in result.completions] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert all(c.token_ids[1] == prompts[c.prompt_index][0] for c in result.completions)
    assert result.seconds == 2.0 and result.num_generated_tokens == 30  # parallel: the slower rank
    assert group.gets == [(False, True)]  # each rank alone: a Ctrl-C cancels it (RankCalls._get)
    given = RayRolloutEngine(group).generate(prompts, SamplingParams(n=2, seed=7, request_seeds=[50, 51, 52, 53, 54]))
    assert [r.calls[1][2] for r in group.ranks] == [[50, 51, 52], [53, 54]] and len(given.completions) == 10


@pytest.mark.parametrize("world", [2, 3, 4])
def test_dealt_prompts_are_equal_in_number_and_balanced_in_tokens(world):
    lengths = [int(x) for x in torch.randint(1, 500, (37,), generator=torch.Generator().manual_seed(world))]
    shares = deal_prompts(lengths, world)
    assert sorted(i for share in shares for i in share) == list(range(37))
    counts = [len(share) for share in shares]
    assert max(counts) - min(counts) <= 1
    loads = [sum(lengths[i] for i in share) for share in shares]
    # never worse than one prompt's length apart (an equal-count contiguous split is far off here)
    assert max(loads) - min(loads) <= max(lengths)
    contiguous = [lengths[len(lengths) * r // world: len(lengths) * (r + 1) // world] for r in range(world)]
    assert max(loads) - min(loads) < max(map(sum, contiguous)) - min(map(sum, contiguous))


def test_more_ranks_than_prompts_leaves_the_extra_ranks_idle():
    group = fake_group(3)
    result = RayRolloutEngine(group).generate([[4]], SamplingParams(n=1, seed=0))
    assert [len(r.calls) for r in group.ranks] == [1, 0, 0]
    assert [c.prompt_index for c in result.completions] == [0]


def test_tensor_parallel_engines_give_each_of_their_ranks_the_same_prompts_and_seed():
    group = fake_group(4, engine_tp=2)
    group.ranks = [TensorParallelRank(r) for r in range(4)]
    prompts = [[10 + i] * (i + 1) for i in range(5)]
    result = RayRolloutEngine(group).generate(prompts, SamplingParams(n=2, seed=3))
    calls = [r.calls for r in group.ranks]
    assert calls[0] == calls[1] and calls[2] == calls[3]  # ranks 0-1 are engine 0, ranks 2-3 engine 1
    assert calls[0][0][1] == request_seed(3, 0) and calls[2][0][1] == request_seed(3, 1)
    assert sorted(len(c[0][0]) for c in (calls[0], calls[2])) == [2, 3]  # 5 prompts over 2 engines
    # each completion once (from the engine's first rank), in prompt order
    assert [c.prompt_index for c in result.completions] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert result.num_generated_tokens == 30
    assert group.gets == [(True, False)]  # its ranks all-reduce: never cancelled on one rank alone


def test_tensor_parallel_ranks_that_disagree_stop_the_run():
    group = fake_group(2, engine_tp=2)  # FakeRank's samples carry its rank: the two ranks disagree
    with pytest.raises(RuntimeError, match="ranks of vLLM engine 0 sampled different tokens"):
        RayRolloutEngine(group).generate([[1], [2]], SamplingParams(n=1, seed=0))
