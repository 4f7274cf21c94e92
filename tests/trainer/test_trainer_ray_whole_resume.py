"""A run started in one process goes on on two policy ranks (a model that outgrew one device, a
job moved to more GPUs): its one-process checkpoint was refused there, since its AdamW state is
not sharded; rank 0 now reads it as one process does and sends each rank its shard."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from dapo.trainer import Trainer
from dapo.trainer.metrics import read_metrics
from dapo.trainer.run_dir import SHARDED_DIR
from tests.trainer.conftest import tiny_config

pytest.importorskip("ray")
TWO_RANKS = ["resources.devices_per_node=2", "trainer.num_threads=1"]
# float32 engines and trainer, pi_old recomputed, no surplus carried: the ranks sample and train
# what one process does, to float32 rounding
EXACT = ["rollout.native_dtype=model", "trainer.autocast=none", "algorithm.old_logprobs=recompute",
         "algorithm.keep_surplus_groups=false", "checkpoint.every_steps=1"]


def step_row(run: Path, step: int) -> dict:
    return next(row for row in read_metrics(run) if row.get("step") == step and "actor/loss" in row)


@pytest.mark.slow  # three runs, one of them on Ray (about 13 s on 2 cores)
@pytest.mark.parametrize("lora", [[], ["model.lora_rank=4", "model.lora_alpha=8"]], ids=["full", "lora"])
def test_a_one_process_run_goes_on_on_two_ranks_as_it_would_in_one(tiny_model_dir, reward_file, tmp_path, lora):
    """Every weight trained, or LoRA adapters (AdamW's state theirs alone, the base model.path's)."""
    run, reference = tmp_path / "run", tmp_path / "reference"
    Trainer(tiny_config(tiny_model_dir, run, reward_file, "trainer.num_threads=1", *EXACT, *lora,
                        "trainer.total_steps=2")).train()
    step_2 = run / "checkpoints" / "step-000002"
    assert not (step_2 / SHARDED_DIR).exists()  # one process's: its AdamW state in trainer_state.pt
    # the step after it, in one process (a run of its own, resumed from that checkpoint) ...
    Trainer(tiny_config(tiny_model_dir, reference, reward_file, "trainer.num_threads=1", *EXACT, *lora,
                        "trainer.total_steps=3", f"checkpoint.resume={step_2}")).train()
    # ... and on two ranks, the same run directory resumed by itself
    with pytest.warns(UserWarning, match="resources.devices_per_node"):
        summary = Trainer(tiny_config(tiny_model_dir, run, reward_file, *TWO_RANKS, *EXACT, *lora,
                                      "trainer.total_steps=3")).train()
    assert summary.resumed_at == 2 and summary.steps == 3
    ranks, one = step_row(run, 3), step_row(reference, 3)
    assert ranks["actor/lr"] == one["actor/lr"]  # the schedule went on where it was
    assert ranks["actor/loss"] == pytest.approx(one["actor/loss"], rel=1e-4, abs=1e-7)
    assert ranks["actor/grad_norm"] == pytest.approx(one["actor/grad_norm"], rel=1e-4)
    # the ranks' checkpoint is theirs (shards), its export the weights one process reaches
    step_3 = run / "checkpoints" / "step-000003"
    assert (step_3 / SHARDED_DIR / ".metadata").is_file()
    weights = [AutoModelForCausalLM.from_pretrained(r / "checkpoints" / "step-000003").state_dict()
               for r in (run, reference)]
    moved = AutoModelForCausalLM.from_pretrained(step_2).state_dict()
    for name, tensor in weights[1].items():
        torch.testing.assert_close(weights[0][name], tensor, rtol=1e-4, atol=1e-6, msg=name)
    assert any(not torch.equal(weights[1][name], moved[name]) for name in moved)  # step 3 trained
