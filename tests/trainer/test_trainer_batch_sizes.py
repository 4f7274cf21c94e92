"""Micro-batch sizes, the normalisers' sequence count, and how samples and prompts are dealt to ranks (from a mutation audit:
each test kills a mutant the suite let through)."""

from __future__ import annotations

import pytest

from dapo.trainer.batch import (
    Sample,
    check_update_inputs,
    collate,
    count_loss_tokens,
    iter_micro_batches,
)


def sample(group: int, prompt: list[int], response: list[int], weight: float = 1.0) -> Sample:
    return Sample(group_id=group, uid=str(group), prompt_ids=prompt, response_ids=response,
                  rollout_logprobs=[-0.5] * len(response), truncated=False, loss_weight=weight)

def test_packed_micro_batches_count_prompt_and_response_tokens():
    samples = [sample(i, [1] * 3, [2] * 2) for i in range(6)]
    assert samples[0].num_tokens == 5
    assert [len(m) for m in iter_micro_batches(samples, 10, "packed")] == [2, 2, 2]

def test_a_micro_batch_of_empty_responses_still_has_one_response_column():
    batch = collate([sample(0, [5, 6], [])], pad_token_id=0, layout="shared_prompt")
    assert batch["responses"].tolist() == [[0]] and batch["response_mask"].tolist() == [[0.0]]
    assert batch["continuation_input_ids"].shape == (1, 1)

def test_a_micro_batch_is_sized_by_its_own_samples_not_the_previous_ones():
    samples = [sample(0, [1] * 10, [2] * 10)] + [sample(i, [1], [2]) for i in range(1, 11)]
    assert [len(m) for m in iter_micro_batches(samples, 20)] == [1, 10]

def test_an_empty_response_is_no_sequence_of_the_loss():
    assert count_loss_tokens([sample(0, [1], [2, 3]), sample(0, [1], [])]) == (2.0, 1.0)

def test_a_sequence_normaliser_below_the_shares_count_is_refused():
    share = [sample(0, [1], [2, 3]), sample(0, [1], [4])]
    assert check_update_inputs(share, 3.0, 2.0, on_policy=True) == (3.0, 2.0)
    with pytest.raises(ValueError, match=r"below this rank's share \(3.0, 2.0\)"):
        check_update_inputs(share, 3.0, 1.0, on_policy=True)

def test_ranks_are_dealt_longest_first():
    from dapo.trainer.batch import split_across_ranks
    samples = [sample(i, [1], [2] * (n - 1)) for i, n in enumerate([3, 5, 3, 4, 3])]
    loads = [sum(s.num_tokens for s in share) for share in split_across_ranks(samples, 2)]
    assert sorted(loads) == [8, 10]

def test_no_rank_is_dealt_a_prompt_past_its_count():
    from dapo.trainer.batch import deal_prompts
    assert deal_prompts([10, 1, 1, 1], 2) == [[0, 3], [1, 2]]
