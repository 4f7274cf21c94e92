"""Log-probs from the policy ranks to the driver: one float32 array per rank's reply, not a list of
Python floats per token (which Ray pickled float by float: seconds a step at 512 x 10k tokens),
and the same values as the float32 arrays the driver's samples hold. (The time it saves:
`benchmarks/bench_ray_transport.py`.)"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from dapo.trainer.ray_transport import LogprobRows
from tests.trainer.conftest import tiny_config

TWO_RANKS = ["resources.devices_per_node=2", "trainer.num_threads=1"]


def test_rows_come_back_as_the_float32_values_exactly_in_one_buffer():
    lengths = [3, 0, 5, 1]
    flat = torch.randn(sum(lengths)) * 10
    flat[2] = float("-inf")  # a masked pad token's log-prob
    rows = LogprobRows.of(flat, lengths)
    assert rows.values.dtype == np.float32 and rows.values.shape == (9,)
    received = pickle.loads(pickle.dumps(rows, protocol=5))
    back = received.rows()
    expected = flat.tolist()
    assert [row.tolist() for row in back] == [expected[0:3], [], expected[3:8], expected[8:9]]
    # what a Sample holds: float32 arrays, each its own (none keeps the reply's buffer alive)
    assert all(row.dtype == np.float32 and row.ndim == 1 for row in back)
    assert not any(np.shares_memory(row, received.values) for row in back)
    with pytest.raises(ValueError, match="9 log-probs for rows of 10 tokens"):
        LogprobRows.of(flat, [*lengths, 1])
    # 4 bytes a token, not a pickled float (9 bytes) and a list slot per token
    big = LogprobRows.of(torch.zeros(100_000), [1000] * 100)
    assert len(pickle.dumps(big, protocol=5)) < 4 * 100_000 + 2_000


# a Ray run (10 s); the default suite keeps the arrays' pickled size above
@pytest.mark.slow
def test_a_ranks_log_probs_reach_the_driver_as_an_array_and_land_in_the_samples_as_arrays(tiny_model_dir, reward_file,
                                                                                          tmp_path):
    import ray

    from dapo.trainer import Trainer
    from tests.trainer.test_trainer_policy import make_samples

    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *TWO_RANKS))
    try:
        samples = make_samples(torch.Generator().manual_seed(0))
        # (a collective: every rank must get the call; here each the whole batch)
        replies = ray.get([rank.compute_logprobs.remote(samples) for rank in trainer.policy.ranks], timeout=120)
        sums, rows = replies[0]
        assert isinstance(rows, LogprobRows) and rows.values.dtype == np.float32 and sums.logprobs == []
        assert rows.lengths.tolist() == [len(s.response_ids) for s in samples]
        result = trainer.policy.compute_logprobs(samples)
        assert [len(lp) for lp in result.logprobs] == [len(s.response_ids) for s in samples]
        assert all(isinstance(lp, np.ndarray) and lp.dtype == np.float32 for lp in result.logprobs)
        assert np.array_equal(replies[1][1].values, rows.values)
        # the same weights on both ranks (each its share): rank 0's pass over them all agrees
        assert np.abs(np.concatenate([np.float32(lp) for lp in result.logprobs]) - rows.values).max() < 1e-5
        assert result.tokens == pytest.approx(sums.tokens)
    finally:
        trainer.close()
