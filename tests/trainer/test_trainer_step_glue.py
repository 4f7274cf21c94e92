"""What one training step hands from sampling to the update, checked by value on a real Trainer:
advantages from the shaped reward (score + overlong penalty), group ids that no two rounds share,
pi_old taken before the first of several updates, ppo_epochs passes over the batch, and the
step's throughput over the tokens it names."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from dapo.trainer import Trainer
from tests.trainer.conftest import tiny_config

# per group of 4 (rollout.n): what the test makes each round's responses score, and their shaped rewards
MIXED_SCORES, MIXED_REWARDS = [1.0, -1.0, 1.0, 1.0], [1.0, -1.0, 0.5, 1.0]  # the third one overlong-penalised
MIXED_PER_ROUND = [1, 2, 6]  # groups with signal in rounds 0, 1, 2 (the others all wrong): 3 rounds to fill 4


@pytest.mark.parametrize("epochs", [1, 2])
def test_a_step_trains_every_group_once_on_advantages_of_its_shaped_rewards_with_pi_old_taken_first(
    tiny_model_dir, reward_file, tmp_path, epochs,
):
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, f"trainer.ppo_epochs={epochs}", "algorithm.old_logprobs=recompute",
                                  "checkpoint.every_steps=0", "eval.every_steps=0"))
    generated: list[set[int]] = []
    updates: list[tuple[bool, list, bool]] = []
    trained_tokens: list[int] = []
    try:
        generate_round, update = trainer.generate_round, trainer.policy.update

        def scored_as_the_test_says(record, problems, round_index):
            samples = generate_round(record, problems, round_index)
            groups = sorted({s.group_id for s in samples})
            generated.append(set(groups))
            for group_index, group in enumerate(groups):
                mixed = group_index < MIXED_PER_ROUND[round_index]
                for position, sample in enumerate(s for s in samples if s.group_id == group):
                    sample.score = MIXED_SCORES[position] if mixed else -1.0
                    sample.reward = MIXED_REWARDS[position] if mixed else -1.0
                    sample.acc = sample.score > 0
                    sample.truncated, sample.loss_weight = False, 1.0
            return samples

        def recorded_update(mini_batch, num_tokens, num_seqs, on_policy, diagnose):
            updates.append((on_policy, [(s.group_id, s.reward, s.advantage) for s in mini_batch],
                            all(len(s.old_logprobs) == len(s.response_ids) for s in mini_batch)))
            trained_tokens.append(sum(len(s.prompt_ids) + len(s.response_ids) for s in mini_batch))
            return update(mini_batch, num_tokens, num_seqs, on_policy, diagnose)

        trainer.generate_round, trainer.policy.update = scored_as_the_test_says, recorded_update
        metrics = trainer.step_once().metrics
        lr_after_the_step = trainer.policy.lr
    finally:
        trainer.close()

    assert len(generated) == 3 and len(set.union(*generated)) == sum(map(len, generated))  # no group id reused
    # 2 mini-batches of 2 groups, ppo_epochs times: each update off pi_old, taken before the first
    assert metrics["actor/updates"] == 2 * epochs and len(updates) == 2 * epochs
    assert all(not on_policy and has_old for on_policy, _, has_old in updates)
    assert metrics["time/old_logprob"] > 0
    first_epoch = [row for _, rows, _ in updates[:2] for row in rows]
    if epochs == 2:
        assert [row for _, rows, _ in updates[2:] for row in rows] == first_epoch  # the same batch again
    sizes = Counter(group for group, _, _ in first_epoch)
    assert len(sizes) == 4 and set(sizes.values()) == {4}  # each trained group whole, none merged with another
    rewards = torch.tensor(MIXED_REWARDS, dtype=torch.float64)
    expected = ((rewards - rewards.mean()) / (rewards.std() + 1e-6)).tolist()  # GRPO, unbiased std
    for group in sizes:
        rows = [row for row in first_epoch if row[0] == group]
        assert [reward for _, reward, _ in rows] == MIXED_REWARDS
        assert [advantage for _, _, advantage in rows] == pytest.approx(expected, rel=1e-6)
    # linear warm-up over trainer.warmup_steps=1 training steps, (s + 1) / (W + 1) of trainer.lr=1e-3:
    # the step trained at half of it (every update of it), the next trains at all of it
    assert metrics["actor/lr"] == pytest.approx(5e-4) and lr_after_the_step == pytest.approx(1e-3)
    # throughput: the trained batch's prompt + response tokens over the step's time (once, not per
    # epoch), and the generated response tokens over the generation's
    assert metrics["perf/tokens_per_s"] * metrics["time/step"] == pytest.approx(sum(trained_tokens[:2]))
    assert metrics["perf/gen_tokens_per_s"] * metrics["time/generate"] == pytest.approx(metrics["rollout/response_tokens"])
