"""Sharded checkpoints round-trip exactly: 2 gloo ranks (FSDP2) save their shards of the model,
optimizer and scheduler state with torch.distributed.checkpoint, take another step, and load; the
model, AdamW's moments and step count, and the schedule equal what was saved bit for bit, in the
ranks that saved them and in freshly built ones (a resume), which then take the same next step.
The same checkpoint holds a Hugging Face export of the saved weights, and loads into one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict
from transformers import AutoModelForCausalLM, AutoTokenizer

from dapo.config import AlgorithmConfig, TrainerConfig
from dapo.trainer.optim import LOSS_SCALE_INIT
from dapo.trainer.policy import PolicyWorker
from dapo.trainer.run_dir import SHARDED_DIR
from dapo.trainer.sharded_checkpoint import (
    load_sharded_policy,
    missing_shards,
    save_sharded_policy,
)
from dapo.trainer.surplus import sample_state
from tests.trainer.test_trainer_policy import make_samples, worker

WORKER = Path(__file__).with_name("dcp_checkpoint_worker.py")
WHOLE_WORKER = Path(__file__).with_name("whole_to_shards_worker.py")
ROOT = Path(__file__).resolve().parents[2]
MOMENTS = ("exp_avg", "exp_avg_sq", "step")


def assert_identical(a: Any, b: Any, where: str = "") -> None:
    """Equal bit for bit: tensors by torch.equal (same dtype and shape), containers recursively."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for key in a:
            assert_identical(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for index, (x, y) in enumerate(zip(a, b)):
            assert_identical(x, y, f"{where}[{index}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


@pytest.fixture(scope="module")
def round_trip(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """Run the 2-rank worker once; its states and the checkpoint directory it wrote."""
    tmp = tmp_path_factory.mktemp("dcp")
    samples = make_samples(torch.Generator().manual_seed(7))
    for index, sample in enumerate(samples):  # off-policy ratios: a step that moves everything
        sample.old_logprobs = [-4.0 - 0.1 * (index % 3)] * len(sample.response_ids)
    torch.save([sample_state(s) for s in samples], tmp / "samples.pt")
    checkpoint, out = tmp / "checkpoint", tmp / "states.pt"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(WORKER), str(tiny_model_dir), str(tmp / "samples.pt"), str(checkpoint), str(out)]
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    return torch.load(out, weights_only=True), checkpoint


def test_sharded_checkpoint_round_trip_is_bit_exact(round_trip):
    states, _ = round_trip
    saved, moved = states["saved"], states["moved"]
    # the step after saving changed every part, so equality below is not vacuous
    assert any(not torch.equal(saved["model"][k], moved["model"][k]) for k in saved["model"])
    for key, moments in saved["optimizer"]["state"].items():
        assert set(MOMENTS) <= moments.keys(), key
        assert not torch.equal(moments["exp_avg"], moved["optimizer"]["state"][key]["exp_avg"]), key
        assert moments["step"].item() == 1 and moved["optimizer"]["state"][key]["step"].item() == 2, key
    assert saved["scheduler"]["last_epoch"] == 1 and moved["scheduler"]["last_epoch"] == 2
    assert saved["scheduler"]["_last_lr"] != moved["scheduler"]["_last_lr"]
    assert_identical(states["reloaded"], saved, "loaded into the ranks that saved")
    assert_identical(states["resumed"], saved, "loaded into fresh ranks")
    after_reload, after_resume = states["next_steps"]
    assert_identical(after_resume, after_reload, "the next step")


def test_every_rank_writes_its_own_shard_and_rank_0_the_hf_export(round_trip, tiny_model_dir):
    states, checkpoint = round_trip
    shards = sorted((checkpoint / SHARDED_DIR).glob("*.distcp"))
    assert [p.name for p in shards] == ["__0_0.distcp", "__1_0.distcp"]
    assert (checkpoint / SHARDED_DIR / ".metadata").exists()
    # every weight and both AdamW moments: two chunks (row halves), one in each rank's file
    metadata = FileSystemReader(checkpoint / SHARDED_DIR).read_metadata()
    files = {(index.fqn, tuple(index.offset or ())): info.relative_path for index, info in metadata.storage_data.items()}
    names = [f"model.{name}" for name in states["saved"]["model"] if name != "lm_head.weight"]  # tied: once
    names += [f"optimizer.state.{name}.{moment}" for name in states["saved"]["optimizer"]["state"]
              for moment in ("exp_avg", "exp_avg_sq")]
    assert "model.lm_head.weight" not in metadata.state_dict_metadata
    for name in names:
        chunks = metadata.state_dict_metadata[name].chunks
        assert [tuple(c.sizes)[0] for c in chunks] == [chunks[0].sizes[0]] * 2, name
        assert sorted(files[name, tuple(c.offsets)] for c in chunks) == ["__0_0.distcp", "__1_0.distcp"], name
    exported = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    for name, tensor in exported.state_dict().items():
        assert torch.equal(tensor, states["saved"]["model"][name]), name
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert AutoTokenizer.from_pretrained(checkpoint).decode([5, 6]) == tokenizer.decode([5, 6])


def test_the_hf_export_streams_into_files_of_bounded_size_that_load_as_one_model(round_trip):
    states, checkpoint = round_trip
    small = checkpoint.parent / f"{checkpoint.name}-small-files"
    index = json.loads((small / "model.safetensors.index.json").read_text())
    files = sorted({*index["weight_map"].values()})
    assert len(files) >= 3 and files[0] == f"model-00001-of-{len(files):05d}.safetensors"
    assert sorted(p.name for p in small.glob("*.safetensors")) == files  # no temporary part left
    sizes = {name: sum(t.numel() * t.element_size() for t in load_file(small / name).values()) for name in files}
    for name, size in sizes.items():  # at most 16 kB, unless the file holds one larger tensor
        assert size <= 16_000 or len(load_file(small / name)) == 1, (name, size)
    assert index["metadata"]["total_size"] == sum(sizes.values())
    assert "lm_head.weight" not in index["weight_map"]  # tied: written once, as save_pretrained does
    assert json.loads((small / "config.json").read_text())["architectures"] == ["Qwen2ForCausalLM"]
    assert [p.name for p in checkpoint.glob("*.safetensors")] == ["model.safetensors"]  # default: one file
    exported = AutoModelForCausalLM.from_pretrained(small, dtype=torch.float32)
    for name, tensor in exported.state_dict().items():
        assert torch.equal(tensor, states["saved"]["model"][name]), name


@pytest.mark.filterwarnings("error:torch.distributed is disabled")  # one process by design: no warning to read
def test_one_process_resumes_the_shards_of_two_ranks(round_trip, tiny_model_dir):
    states, checkpoint = round_trip
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    trainer = TrainerConfig(prompts_per_step=3, mini_batch_prompts=3, micro_batch_tokens=40, lr=1e-2,
                            warmup_steps=3, grad_clip=1e9)
    worker = PolicyWorker(model, AlgorithmConfig(), trainer, pad_token_id=0, temperature=1.0, total_steps=8,
                          norm_const=16.0)
    load_sharded_policy(checkpoint, model, worker.optimizer, worker.scheduler)  # no process group: DCP reshards
    saved = states["saved"]
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, saved["model"][name]), name
    assert_identical(get_optimizer_state_dict(model, worker.optimizer), saved["optimizer"], "one process")
    assert_identical(worker.scheduler.state_dict(), saved["scheduler"], "one process")


def test_two_ranks_resume_a_one_process_checkpoint_and_go_on_as_one_process(tiny_model_dir, tmp_path):
    """A run started in one process and moved to several ranks was refused (its AdamW state was
    not sharded). Rank 0 now reads it as one process does and every rank gets its shard: weights,
    AdamW's moments and step count and the schedule equal the one process's bit for bit (AdamW by
    parameter name), and the next step matches one process's to float32 rounding. A checkpoint
    from before the first update leaves the ranks' AdamW fresh (no zero-lr step counted), and so
    does a parameter it holds no AdamW state for (never given a gradient)."""
    samples = make_samples(torch.Generator().manual_seed(7))
    for index, sample in enumerate(samples):  # off-policy ratios: a step that moves everything
        sample.old_logprobs = [-4.0 - 0.1 * (index % 3)] * len(sample.response_ids)
    torch.save([sample_state(s) for s in samples], tmp_path / "samples.pt")
    out = tmp_path / "states.pt"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(WHOLE_WORKER), str(tiny_model_dir), str(tmp_path / "samples.pt"), str(out)]
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    states = torch.load(out, weights_only=True)
    assert states["fresh_after_early"]
    assert_identical(states["resumed"], states["saved"], "resumed")
    assert states["resumed"]["optimizer"]["state"]["model.embed_tokens.weight"]["step"] == 1
    assert "model.norm.weight" not in states["resumed"]["optimizer"]["state"]  # no state: fresh, as saved
    ranks, one = states["next_ranks"], states["next_one"]
    assert ranks["scheduler"] == one["scheduler"]
    for name, tensor in one["model"].items():
        moved = (tensor - states["saved"]["model"][name]).abs().max()
        assert moved > 0 or name.endswith("bias"), name  # (the step moves the weights)
        torch.testing.assert_close(ranks["model"][name], tensor, rtol=1e-5, atol=1e-6, msg=name)
    for name, moments in one["optimizer"]["state"].items():
        for key in MOMENTS:
            torch.testing.assert_close(ranks["optimizer"]["state"][name][key], moments[key], rtol=1e-5, atol=1e-9,
                                       msg=f"{name}.{key}")


def test_a_checkpoint_before_the_first_update_leaves_adamw_as_fresh(tiny_model_dir, tmp_path):
    """torch builds a fresh optimizer's state for saving by a zero-lr step; the first real update
    after such a save (e.g. checkpoint.every_steps=1 and no group with signal in step 1) must still
    be AdamW's first (its bias correction), as in a run that never saved, and so must a resume."""
    def fresh() -> PolicyWorker:
        return worker(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32), 10_000)

    samples = make_samples(torch.Generator().manual_seed(0))
    never_saved, saved = fresh(), fresh()
    save_sharded_policy(tmp_path, saved.model, saved.optimizer, saved.scheduler)
    resumed = fresh()
    load_sharded_policy(tmp_path, resumed.model, resumed.optimizer, resumed.scheduler)
    for policy in (never_saved, saved, resumed):
        policy.update(samples, on_policy=True)
    expected = never_saved.model.state_dict()
    for policy in (saved, resumed):
        assert {float(state["step"]) for state in policy.optimizer.state.values()} == {1.0}
        assert all(torch.equal(tensor, expected[name]) for name, tensor in policy.model.state_dict().items())


def test_sharded_state_resumes_when_some_parameters_never_had_a_gradient(tmp_path):
    """AdamW keeps no state for a parameter that never had a gradient (a multimodal class's vision
    tower in a text-only run: Gemma 3 loads as Gemma3ForConditionalGeneration), so the shards hold
    none; the resume asked DCP for it anyway and failed ("Missing key in checkpoint state_dict")."""
    from dapo.trainer.sharded_checkpoint import load_sharded_policy, save_sharded_policy

    def policy() -> tuple[torch.nn.Module, torch.optim.Optimizer, Any]:
        torch.manual_seed(0)
        model = torch.nn.ModuleDict({"text": torch.nn.Linear(2, 2), "vision": torch.nn.Linear(2, 2)})
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
        return model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)

    def train(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        model["text"](torch.ones(1, 2)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()

    model, optimizer, scheduler = policy()
    train(model, optimizer)
    save_sharded_policy(tmp_path, model, optimizer, scheduler)
    resumed, resumed_optimizer, resumed_scheduler = policy()
    load_sharded_policy(tmp_path, resumed, resumed_optimizer, resumed_scheduler)
    for _ in range(2):  # the next updates are the uninterrupted run's
        train(model, optimizer)
        train(resumed, resumed_optimizer)
    assert all(torch.equal(tensor, resumed.state_dict()[name]) for name, tensor in model.state_dict().items())


@pytest.mark.parametrize(("saved_scale", "resumed_scale"), [(None, 65536.0), (1024.0, None), (1024.0, 65536.0)])
def test_sharded_state_resumes_across_a_change_of_float16_loss_scaling(tmp_path, saved_scale, resumed_scale):
    """A run resumed with trainer.autocast=fp16 from shards saved without it (or the reverse):
    the loss-scale entries one side lacks must not make the load fail; a saved scale is kept."""
    from dapo.trainer.sharded_checkpoint import load_sharded_policy, save_sharded_policy

    def policy(scale: float | None):
        layer = torch.nn.Linear(2, 2)
        optimizer = torch.optim.AdamW([{"params": [layer.weight]}, {"params": [layer.bias], "weight_decay": 0.0}])
        if scale is not None:
            optimizer.param_groups[0].update(loss_scale=scale, updates_since_overflow=0)
        return layer, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)

    layer, optimizer, scheduler = policy(saved_scale)
    layer(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    save_sharded_policy(tmp_path, layer, optimizer, scheduler)
    resumed_layer, resumed_optimizer, resumed_scheduler = policy(resumed_scale)
    load_sharded_policy(tmp_path, resumed_layer, resumed_optimizer, resumed_scheduler)
    assert torch.equal(resumed_layer.weight, layer.weight)
    expected = saved_scale if resumed_scale is not None else None
    assert resumed_optimizer.param_groups[0].get("loss_scale") == expected


@pytest.mark.parametrize(("saved_autocast", "resumed_autocast", "expected_scale", "expected_since_overflow"),
                         [("none", "fp16", LOSS_SCALE_INIT, 0), ("fp16", "bf16", 1.0, None), ("fp16", "fp16", 1024.0, 7)])
def test_a_sharded_resume_has_the_float16_loss_scale_of_the_resumed_run(tiny_model_dir, tmp_path, saved_autocast,
                                                                        resumed_autocast, expected_scale,
                                                                        expected_since_overflow):
    """What the loss-scale entries the load leaves out become: a run resumed with
    trainer.autocast=fp16 from shards saved without it starts at LOSS_SCALE_INIT; one resumed
    without fp16 has no scale; an fp16 run resumed with fp16 keeps its saved (halved) scale."""
    def policy(autocast: str) -> PolicyWorker:
        trainer = TrainerConfig(prompts_per_step=3, mini_batch_prompts=3, lr=1e-2, warmup_steps=0, autocast=autocast)
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
        return PolicyWorker(model, AlgorithmConfig(), trainer, pad_token_id=0, temperature=1.0, total_steps=10,
                            norm_const=16.0)

    saved = policy(saved_autocast)
    if saved_autocast == "fp16":
        saved.optimizer.param_groups[0].update(loss_scale=1024.0, updates_since_overflow=7)  # after 6 overflows
    save_sharded_policy(tmp_path, saved.model, saved.optimizer, saved.scheduler)
    resumed = policy(resumed_autocast)
    resumed.load_shards(tmp_path)
    assert resumed.loss_scale == expected_scale
    assert resumed.optimizer.param_groups[0].get("updates_since_overflow") == expected_since_overflow


def test_a_checkpoint_missing_a_ranks_shard_as_the_driver_sees_it_is_named(tmp_path):
    """Several nodes without a shared output_dir: each rank wrote on its own node, and the driver
    published a checkpoint that could not resume (found only at the resume)."""
    policy = tmp_path / SHARDED_DIR
    policy.mkdir()
    assert missing_shards(tmp_path, 2) == [f"{SHARDED_DIR}/.metadata", f"{SHARDED_DIR}/rng-rank00000.pt",
                                           f"{SHARDED_DIR}/rng-rank00001.pt"]
    (policy / ".metadata").write_bytes(b"")
    (policy / "rng-rank00000.pt").write_bytes(b"")
    assert missing_shards(tmp_path, 2) == [f"{SHARDED_DIR}/rng-rank00001.pt"]
    (policy / "rng-rank00001.pt").write_bytes(b"")
    assert missing_shards(tmp_path, 2) == []


def test_a_checkpoint_without_sharded_state_says_how_to_go_on(tmp_path: Path) -> None:
    """(DCP's own error was a bare 'No such file ... policy/.metadata')"""
    layer = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(layer.parameters())
    with pytest.raises(FileNotFoundError, match=r"holds no sharded policy state .* checkpoint.resume=never"):
        load_sharded_policy(tmp_path, layer, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0))
