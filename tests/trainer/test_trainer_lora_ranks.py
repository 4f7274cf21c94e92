"""LoRA on FSDP2 policy ranks (Ray, gloo on CPU): the ranks' update is one process's (adapters
alone train, the KL reference is the base model), their engines decode the merged weights, their
shards hold the adapters alone, rank 0 writes PEFT's adapter/ and the merged export, and the
shards resume in one process."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from peft import PeftModel
from torch.distributed.checkpoint import FileSystemReader
from transformers import AutoModelForCausalLM

from dapo.trainer import Trainer
from dapo.trainer.metrics import read_metrics
from dapo.trainer.policy_weights import AdapterMismatchError
from dapo.trainer.run_dir import SHARDED_DIR
from dapo.trainer.step_metrics import update_metrics
from tests.trainer.conftest import tiny_config
from tests.trainer.test_trainer_lora import IDS, LORA
from tests.trainer.test_trainer_policy import make_samples
from tests.trainer.test_trainer_ray import TWO_RANKS, one_process_and_two_ranks

pytest.importorskip("ray")
pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")


# a Ray run of two ranks and a reference (15-35 s)
@pytest.mark.slow
def test_lora_on_two_ranks_updates_as_one_process_with_its_base_model_as_kl_reference(
        tiny_model_dir, reward_file, tmp_path):
    """Values: the ranks start from rank 0's adapters (B = 0, the same A as one process), sum their
    gradients over the adapters' shards, and their KL reference is the policy with its adapters off
    (0 at the first update, then one process's)."""
    import ray

    exact = ["trainer.autocast=none", "trainer.micro_batch_tokens=24", "trainer.lr=1e-2",
             "algorithm.kl_coef=0.1", "algorithm.kl_estimator=k3"]
    with one_process_and_two_ranks(tiny_model_dir, reward_file, tmp_path, *LORA, *exact) as (one, two):
        runs = []
        for trainer in (one, two):
            samples = make_samples(torch.Generator().manual_seed(0))
            metrics, after = [], None
            for _ in range(2):
                for sample, logprobs in zip(samples, trainer.policy.compute_logprobs(samples).logprobs):
                    sample.old_logprobs = logprobs
                metrics.append(update_metrics([trainer.policy.update(samples)], samples, trainer.policy.lr))
            after = torch.from_numpy(np.concatenate(trainer.policy.compute_logprobs(samples).logprobs))
            runs.append((metrics, after))
        (single, single_after), (ranks, ranks_after) = runs
        for a, b in zip(single, ranks):
            assert b["actor/loss"] == pytest.approx(a["actor/loss"], rel=1e-5, abs=1e-7)
            assert b["actor/grad_norm"] == pytest.approx(a["actor/grad_norm"], rel=1e-4)
            assert b["actor/kl_ref"] == pytest.approx(a["actor/kl_ref"], rel=1e-4, abs=1e-9)
        assert ranks[0]["actor/kl_ref"] == 0.0 and ranks[1]["actor/kl_ref"] > 1e-6
        assert float((ranks_after - single_after).abs().max()) < 1e-4
        # each rank: shards of frozen base weights and trainable adapters, no reference copy
        held = ray.get([rank.__ray_call__.remote(lambda r: (
            r.policy.ref_model is None,
            sorted({n.split(".")[-3] if ".lora_" in n else "base" for n, p in r.model.named_parameters()
                    if p.requires_grad}))) for rank in two.policy.ranks])
        assert held == [(True, ["lora_A", "lora_B"])] * 2


@pytest.mark.slow  # a Ray run, then a resume (about 11 s)
def test_a_lora_run_on_two_ranks_checkpoints_its_adapters_and_resumes_in_one_process(
        tiny_model_dir, reward_file, tmp_path):
    exact = ["rollout.native_dtype=model", "trainer.autocast=none", "algorithm.old_logprobs=recompute",
             "algorithm.keep_surplus_groups=false", "trainer.lr=1e-2"]
    run = tmp_path / "two"
    trainer = Trainer(tiny_config(tiny_model_dir, run, reward_file, *LORA, *TWO_RANKS, *exact,
                                  "trainer.total_steps=2", "checkpoint.hf_export=final"))
    summary = trainer.train()
    assert summary.steps == 2
    # the engines decode the merged weights the ranks train: no stale or unmerged copy
    mismatch = [r["mismatch/rollout_trainer_logprob_diff"] for r in read_metrics(run) if "actor/loss" in r]
    assert len(mismatch) == 2 and max(mismatch) < 1e-5, mismatch
    final = run / "checkpoints" / "step-000002"
    # the shards hold the adapters and their AdamW state alone: no copy of the base weights
    saved = FileSystemReader(str(final / SHARDED_DIR)).read_metadata().state_dict_metadata
    model_entries = [name for name in saved if name.startswith("model.")]
    assert model_entries and all(".lora_A." in name or ".lora_B." in name for name in model_entries)
    # PEFT's adapters on the base model and the merged export compute the same policy
    exported = AutoModelForCausalLM.from_pretrained(final)
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir), final / "adapter")
    with torch.no_grad():
        merged_logits, adapted_logits = exported(IDS).logits, adapted(IDS).logits
        base_logits = AutoModelForCausalLM.from_pretrained(tiny_model_dir)(IDS).logits
    assert torch.allclose(merged_logits, adapted_logits, atol=1e-5)
    assert not torch.allclose(merged_logits, base_logits, atol=1e-3), "the adapters did not train"
    assert (run / "checkpoints" / "step-000001" / "adapter" / "adapter_model.safetensors").is_file()
    assert json.loads((final / "adapter" / "adapter_config.json").read_text())["r"] == 4
    # one process resumes the ranks' shards (DCP reshards the adapters) onto model.path's base weights
    one = Trainer(tiny_config(tiny_model_dir, run, reward_file, *LORA, "trainer.total_steps=3"))
    try:
        assert one.resume() and one.step == 2
        with torch.no_grad():
            assert torch.allclose(one.model(IDS).logits, merged_logits, atol=1e-5)
        assert one.policy.optimizer.state  # the adapters' AdamW moments came back too
    finally:
        one.close()
    # ... and a run without adapters is refused them, before DCP is asked
    (final / "dapo_config.yaml").rename(tmp_path / "saved.yaml")  # (with it, preflight refuses: test_trainer_lora)
    full = Trainer(tiny_config(tiny_model_dir, tmp_path / "full", reward_file, "trainer.num_threads=1",
                               f"checkpoint.resume={final}"))
    try:
        with pytest.raises(AdapterMismatchError, match="trained with LoRA adapters"):
            full.resume()
    finally:
        full.close()


# a Ray run of two ranks and a reference, per case (15-35 s)
@pytest.mark.slow
@pytest.mark.parametrize("precision", [
    ("model.dtype=bfloat16", "model.gradient_checkpointing=true"),  # a bf16 base, its layers recomputed
    ("trainer.param_dtype=bf16",),  # float32 masters, bf16 compute (FSDP2's MixedPrecisionPolicy)
], ids=["bf16-base-checkpointed", "param-dtype-bf16"])
def test_lora_on_two_ranks_in_bf16_updates_as_one_process(tiny_model_dir, reward_file, tmp_path, precision):
    """The LoRA cases the float32 test above leaves out: the ranks' update is one process's within
    bf16's rounding, the adapters are float32 and alone trainable, and the base keeps its dtype."""
    import ray

    settings = ["trainer.autocast=none", "trainer.micro_batch_tokens=24", "trainer.lr=1e-2", *precision]
    with one_process_and_two_ranks(tiny_model_dir, reward_file, tmp_path, *LORA, *settings) as (one, two):
        runs = []
        for trainer in (one, two):
            samples = make_samples(torch.Generator().manual_seed(0))
            before = trainer.policy.compute_logprobs(samples).logprobs
            for sample, logprobs in zip(samples, before):
                sample.old_logprobs = logprobs
            metrics = update_metrics([trainer.policy.update(samples)], samples, trainer.policy.lr)
            after = torch.from_numpy(np.concatenate(trainer.policy.compute_logprobs(samples).logprobs))
            runs.append((metrics, torch.from_numpy(np.concatenate(before)), after))
        (single, single_before, single_after), (ranks, ranks_before, ranks_after) = runs
        assert ranks["actor/skipped_updates"] == 0 and np.isfinite(ranks["actor/loss"])
        assert ranks["actor/loss"] == pytest.approx(single["actor/loss"], rel=2e-2, abs=1e-4)
        assert ranks["actor/grad_norm"] == pytest.approx(single["actor/grad_norm"], rel=5e-2)
        assert float((ranks_after - ranks_before).abs().max()) > 1e-2, "the adapters did not train"
        assert float((ranks_after - single_after).abs().max()) < 5e-2
        base_dtype = torch.bfloat16 if "model.dtype=bfloat16" in precision else torch.float32
        held = ray.get([rank.__ray_call__.remote(lambda r: sorted({
            (("lora" if ".lora_" in n else "base"), str(p.dtype).removeprefix("torch."), p.requires_grad)
            for n, p in r.model.named_parameters()})) for rank in two.policy.ranks])
        expected = sorted({("lora", "float32", True), ("base", str(base_dtype).removeprefix("torch."), False)})
        assert held == [expected] * 2
