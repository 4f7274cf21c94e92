import pickle

import numpy as np
import torch

from dapo.trainer.batch import (
    Sample,
    as_logprobs,
    collate,
    count_loss_tokens,
    fill_normalisers,
    has_logprobs,
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


def test_a_normaliser_given_alone_is_kept_and_the_other_counted():
    """A sharded caller passing the mini-batch's global token count alone (all the token-mean loss
    needs) keeps it: this share's own count (3 tokens) would weigh its tokens 40/3 times too much."""
    share = [sample(0, [1], [2, 3, 4]), sample(0, [1], [2, 3], weight=0.0)]
    assert fill_normalisers(share, 40.0, None) == (40.0, 1.0)
    assert fill_normalisers(share, None, 8.0) == (3.0, 8.0)
    assert fill_normalisers(share, None, None) == (3.0, 1.0)
    assert fill_normalisers(share, 40.0, 8.0) == (40.0, 8.0)


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


def test_a_sample_holds_its_log_probs_as_float32_arrays_and_pickles_them_as_buffers():
    """Ray pickles every Sample it sends a policy rank: a list of floats went float by float
    (9 bytes and a list slot a token), a float32 array goes as one buffer (4 bytes a token)."""
    tokens = 10_000
    rollout = (-np.arange(tokens, dtype=np.float64) / 7).tolist()  # float64 values: rounded once
    s = Sample(0, "u", [1, 2], list(range(tokens)), rollout, False, old_logprobs=rollout)
    for values in (s.rollout_logprobs, s.old_logprobs):
        assert isinstance(values, np.ndarray) and values.dtype == np.float32 and values.shape == (tokens,)
    # rounded as the collate's float32 tensors always rounded the lists; still one array for both
    assert s.old_logprobs is s.rollout_logprobs
    assert torch.equal(torch.from_numpy(s.rollout_logprobs), torch.tensor(rollout, dtype=torch.float32))
    ids_only = len(pickle.dumps(Sample(0, "u", [1, 2], list(range(tokens)), [], False), protocol=5))
    blob = pickle.dumps(s, protocol=5)
    assert len(blob) - ids_only < 4 * tokens + 500  # the shared array once, 4 bytes a token
    back = pickle.loads(blob)
    assert back == s and back.old_logprobs is back.rollout_logprobs
    s.old_logprobs = s.rollout_logprobs + 1  # now its own
    blob = pickle.dumps(s, protocol=5)
    assert 8 * tokens < len(blob) - ids_only < 8 * tokens + 500


def test_absent_old_logprobs_are_an_empty_array_and_collate_as_not_given():
    given, absent = sample(0, [1], [2, 3]), sample(0, [1], [2])
    given.old_logprobs = np.array([-1.0, -2.0], dtype=np.float32)
    assert absent.old_logprobs.dtype == np.float32 and len(absent.old_logprobs) == 0
    assert has_logprobs(given.old_logprobs) and not has_logprobs(absent.old_logprobs) and not has_logprobs(None)
    read_only = np.array([-1.5, -2.5], dtype=np.float32)
    read_only.setflags(write=False)  # as Ray's zero-copy buffers on a rank
    given.rollout_logprobs = read_only
    batch = collate([given, absent], 0)
    assert batch["has_old_logprobs"].tolist() == [True, False]
    assert batch["old_logprobs"].tolist() == [[-1.0, -2.0], [0.0, 0.0]]
    assert batch["rollout_logprobs"].tolist() == [[-1.5, -2.5], [-0.5, 0.0]]
    # a list assigned after construction (older callers) collates the same
    given.old_logprobs = [-1.0, -2.0]
    assert torch.equal(collate([given, absent], 0)["old_logprobs"], batch["old_logprobs"])
    assert as_logprobs(torch.tensor([[1.0], [2.0]])).tolist() == [1.0, 2.0]
