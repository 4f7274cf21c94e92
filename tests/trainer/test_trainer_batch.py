import torch

from dapo.trainer.batch import (
    Sample,
    collate,
    count_loss_tokens,
    iter_micro_batches,
    split_mini_batches,
)


def sample(group: int, prompt: list[int], response: list[int], weight: float = 1.0) -> Sample:
    return Sample(
        group_id=group, uid=str(group), prompt_ids=prompt, response_ids=response,
        rollout_logprobs=[-0.5] * len(response), truncated=False, loss_weight=weight,
    )


def test_collate_left_pads_prompts_and_right_pads_responses():
    batch = collate([sample(0, [5, 6, 7], [8, 9]), sample(0, [5], [8, 9, 10])], pad_token_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8, 9, 0], [0, 0, 5, 8, 9, 10]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 0], [0, 0, 1, 1, 1, 1]]
    # positions count real tokens only, so a left-padded prompt starts at position 0
    assert batch["position_ids"][1, 2:].tolist() == [0, 1, 2, 3]
    assert batch["responses"].tolist() == [[8, 9, 0], [8, 9, 10]]
    assert batch["response_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]


def test_overlong_filtered_sample_is_masked_and_not_counted():
    kept, filtered = sample(0, [1], [2, 3, 4]), sample(0, [1], [2, 3], weight=0.0)
    assert collate([kept, filtered], 0)["response_mask"][1].sum() == 0
    assert count_loss_tokens([kept, filtered]) == (3.0, 1.0)


def test_micro_batches_respect_token_budget_and_keep_order():
    samples = [sample(i, [1] * 3, [2] * (i + 1)) for i in range(6)]
    micro = list(iter_micro_batches(samples, token_budget=16))
    assert [s for m in micro for s in m] == samples
    for m in micro:
        width = max(len(s.prompt_ids) for s in m) + max(len(s.response_ids) for s in m)
        assert len(m) == 1 or len(m) * width <= 16


def test_mini_batches_never_split_a_group():
    samples = [sample(g, [1], [2]) for g in (7, 7, 3, 3, 9, 9)]
    minis = split_mini_batches(samples, mini_batch_prompts=2)
    assert [[s.group_id for s in m] for m in minis] == [[7, 7, 3, 3], [9, 9]]


def test_collate_dtypes():
    batch = collate([sample(0, [1], [2])], 0)
    assert batch["input_ids"].dtype == torch.long and batch["advantages"].dtype == torch.float32
