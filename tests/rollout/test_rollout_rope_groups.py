"""dapo.rollout.rope_groups.rope_rows_alone: within a generation's calls, each row of a RoPE that
follows length (dynamic NTK here) rotates as a fresh module rotates that row alone."""

from __future__ import annotations

import torch
import transformers

from dapo.rollout.hf_compat import rope_length_threshold
from dapo.rollout.rope_groups import rope_rows_alone

THRESHOLD = 12


def _model() -> transformers.LlamaForCausalLM:
    config = transformers.LlamaConfig(vocab_size=16, hidden_size=16, num_attention_heads=2, num_hidden_layers=1,
                                      intermediate_size=16, max_position_embeddings=THRESHOLD,
                                      rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 4.0})
    return transformers.LlamaForCausalLM(config).eval()


def _alone(position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A fresh rotary module's cos and sin for ``position_ids`` (1, T)."""
    return _model().model.rotary_emb(torch.zeros(1, position_ids.shape[1], 16), position_ids)


def test_each_row_rotates_as_alone_after_a_longer_call_grew_the_frequencies() -> None:
    """A call whose rows end exactly at the threshold, after one that grew the frequencies past it
    (a row that has since finished): transformers restores its own frequencies only below the
    threshold, so without a reset before each call these rows rotated by the grown ones."""
    model = _model()
    rotary = model.model.rotary_emb
    with rope_rows_alone(model, rope_length_threshold(model)):
        long_call = torch.stack([torch.arange(20), torch.arange(20).clamp(max=5)])  # rows of 20 and 6 positions
        cos, sin = rotary(torch.zeros(2, 20, 16), long_call)
        for row in range(2):
            own = long_call[row : row + 1, : int(long_call[row].max()) + 1]
            expected_cos, expected_sin = _alone(own)
            torch.testing.assert_close(cos[row : row + 1, : own.shape[1]], expected_cos)
            torch.testing.assert_close(sin[row : row + 1, : own.shape[1]], expected_sin)
        at_threshold = torch.arange(THRESHOLD).repeat(2, 1)  # both rows end at the threshold
        cos, sin = rotary(torch.zeros(2, THRESHOLD, 16), at_threshold)
    expected_cos, expected_sin = _alone(at_threshold[:1])
    torch.testing.assert_close(cos, expected_cos.expand(2, -1, -1))
    torch.testing.assert_close(sin, expected_sin.expand(2, -1, -1))
    assert "forward" not in vars(rotary)  # the module's own forward, put back


def test_a_row_one_position_past_the_threshold_rotates_by_the_grown_frequencies() -> None:
    """A row's length is its largest position + 1: a row of 13 positions (the first decode step after a
    12-token prompt) is past a threshold of 12, a row of 6 is not; each rotates as it would alone."""
    model = _model()
    with rope_rows_alone(model, rope_length_threshold(model)):
        call = torch.stack([torch.arange(THRESHOLD + 1), torch.arange(THRESHOLD + 1).clamp(max=5)])
        cos, sin = model.model.rotary_emb(torch.zeros(2, THRESHOLD + 1, 16), call)
    for row in range(2):
        own = call[row : row + 1, : int(call[row].max()) + 1]
        expected_cos, expected_sin = _alone(own)
        torch.testing.assert_close(cos[row : row + 1, : own.shape[1]], expected_cos)
        torch.testing.assert_close(sin[row : row + 1, : own.shape[1]], expected_sin)
