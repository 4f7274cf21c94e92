"""shape_rewards as the shipped reference config wires it: DAPO.md's Soft Overlong Punishment with
L_max = rollout.max_response_length = 20480 and L_cache = algorithm.overlong_buffer_len = 4096,
added to the verifier's +1/-1, and Overlong Filtering masking truncated responses out of the loss.
Expected values are hand-computed: R_length(|y|) = ((L_max - L_cache) - |y|) / L_cache in the buffer."""

from __future__ import annotations

from dapo.config.loading import builtin_config_path, load_config
from dapo.trainer.batch import Sample
from dapo.trainer.scoring import shape_rewards

# |y| at the buffer's edges: L_max - L_cache (free), +1 (first penalised), L_max - 1, L_max (full -1)
LENGTHS = [16384, 16385, 20479, 20480]
PENALTIES = [0.0, -1 / 4096, -4095 / 4096, -1.0]  # all exact in float64


def samples(score: float) -> list[Sample]:
    return [Sample(0, "u", [1], [5] * n, [0.0] * n, truncated=n == 20480, score=score, acc=score > 0) for n in LENGTHS]


def reference_config(*overrides: str):
    return load_config([builtin_config_path("dapo_qwen2.5_32b")], list(overrides))


def test_reference_config_soft_punishment_at_the_buffer_boundaries() -> None:
    cfg = reference_config()
    for score in (1.0, -1.0):
        batch = samples(score)
        shape_rewards(batch, cfg)
        assert [s.reward for s in batch] == [score + p for p in PENALTIES]
        assert [s.loss_weight for s in batch] == [1.0] * 4  # overlong filtering is off in the reference config


def test_overlong_filtering_masks_only_the_truncated_response() -> None:
    batch = samples(1.0)
    shape_rewards(batch, reference_config("algorithm.overlong_filtering=true"))
    assert [s.loss_weight for s in batch] == [1.0, 1.0, 1.0, 0.0]
    assert [s.reward for s in batch] == [1.0 + p for p in PENALTIES]


def test_punishment_off_leaves_the_score() -> None:
    batch = samples(-1.0)
    shape_rewards(batch, reference_config("algorithm.overlong_soft_punishment=false"))
    assert [s.reward for s in batch] == [-1.0] * 4
