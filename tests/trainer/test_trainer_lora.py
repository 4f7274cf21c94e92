"""LoRA training (model.lora_rank > 0): only the adapters train, the checkpoint's export is the
merged policy (from_pretrained, no PEFT) and its adapter/ is PEFT's, and a resume continues the
adapters and their AdamW state bit for bit."""

from __future__ import annotations

import shutil

import pytest
import torch
from peft import AutoPeftModelForCausalLM, PeftModel
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM

from dapo.cli.main import main as dapo_main
from dapo.errors import UserError
from dapo.preflight import PreflightError
from dapo.trainer import Trainer
from dapo.trainer.metrics import read_metrics
from dapo.trainer.policy_weights import AdapterMismatchError
from tests.trainer.conftest import tiny_config

LORA = ("model.lora_rank=4", "model.lora_alpha=8", "trainer.num_threads=1", "eval.every_steps=0")
IDS = torch.tensor([[5, 6, 7, 8, 9, 10]])


def _logits(model: torch.nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(IDS).logits


# (PEFT's own loading asks transformers for a deprecated attribute)
@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
@pytest.mark.parametrize("checkpointing", [False, True], ids=["", "gradient-checkpointing"])
def test_only_the_adapters_train_and_the_checkpoint_is_the_merged_policy(tiny_model_dir, reward_file, tmp_path,
                                                                         checkpointing, capsys):
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *LORA, "trainer.total_steps=2",
                                  f"model.gradient_checkpointing={str(checkpointing).lower()}"))
    try:
        trainable = {name for name, p in trainer.model.named_parameters() if p.requires_grad}
        assert trainable and all(".lora_A." in name or ".lora_B." in name for name in trainable)
        optimized = {id(p) for group in trainer.policy.optimizer.param_groups for p in group["params"]}
        assert optimized == {id(p) for p in trainer.model.parameters() if p.requires_grad}
        assert "LoRA adapters of rank 4 (alpha 8) on 14 linear layers" in capsys.readouterr().out  # 7 per block
        frozen = {name: p.detach().clone() for name, p in trainer.model.named_parameters() if not p.requires_grad}
        trainer.train()
        assert all(torch.equal(p, frozen[name]) for name, p in trainer.model.named_parameters() if name in frozen)
        policy_logits = _logits(trainer.model)
    finally:
        trainer.close()
    checkpoint = tmp_path / "run" / "checkpoints" / "step-000002"
    exported = AutoModelForCausalLM.from_pretrained(checkpoint)
    assert torch.allclose(_logits(exported), policy_logits, atol=1e-5)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert not torch.allclose(_logits(base), policy_logits, atol=1e-3), "the adapters did not train"
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir), checkpoint / "adapter")
    assert torch.allclose(_logits(adapted), policy_logits, atol=1e-5)
    # TRL's and verl's way to load an adapter directory (it needs the saved task_type, which was null)
    assert torch.allclose(_logits(AutoPeftModelForCausalLM.from_pretrained(checkpoint / "adapter")), policy_logits, atol=1e-5)
    # the export holds base names only, the untargeted weights (embeddings, norms) unchanged
    weights = load_file(str(checkpoint / "model.safetensors"))
    assert not any("lora" in name or "base_layer" in name for name in weights)
    assert torch.equal(weights["model.embed_tokens.weight"], base.model.embed_tokens.weight)


def test_a_resume_continues_the_adapters_bit_for_bit(tiny_model_dir, reward_file, tmp_path):
    Trainer(tiny_config(tiny_model_dir, tmp_path / "reference", reward_file, *LORA)).train()  # 3 steps
    step2 = tmp_path / "reference" / "checkpoints" / "step-000002"
    Trainer(tiny_config(tiny_model_dir, tmp_path / "resumed", reward_file, *LORA, f"checkpoint.resume={step2}")).train()
    trained = [row["step"] for row in read_metrics(tmp_path / "resumed") if "time/step" in row]
    assert trained == [3]  # it trained step 3 alone, from step 2's adapters and AdamW state
    for name in ("model.safetensors", "adapter/adapter_model.safetensors"):
        reference = load_file(str(tmp_path / "reference" / "checkpoints" / "step-000003" / name))
        resumed = load_file(str(tmp_path / "resumed" / "checkpoints" / "step-000003" / name))
        assert reference.keys() == resumed.keys()
        assert all(torch.equal(reference[key], resumed[key]) for key in reference), name


def test_resuming_with_and_without_adapters_across_is_refused(tiny_model_dir, reward_file, tmp_path):
    Trainer(tiny_config(tiny_model_dir, tmp_path / "lora", reward_file, *LORA, "trainer.total_steps=1")).train()
    lora_checkpoint = tmp_path / "lora" / "checkpoints" / "step-000001"
    # found from the checkpoint's config before anything loads (on ranks: before Ray starts them), with the fix
    with pytest.raises(PreflightError, match=r"holds LoRA adapters of rank 4, alpha 8, targets \[all-linear\], not what "
                                             r"this run's model.lora_\* ask; resume it with model.lora_rank=4 "
                                             r"model.lora_alpha=8.0 model.lora_target_modules=\[all-linear\]"):
        Trainer(tiny_config(tiny_model_dir, tmp_path / "full", reward_file, "eval.every_steps=0",
                            f"checkpoint.resume={lora_checkpoint}"))
    for setting in ("model.lora_rank=8", "model.lora_alpha=4", "model.lora_target_modules=[q_proj]"):
        with pytest.raises(PreflightError, match="resume it with model.lora_rank=4"):
            Trainer(tiny_config(tiny_model_dir, tmp_path / "other", reward_file, *LORA, setting,
                                f"checkpoint.resume={lora_checkpoint}"))
    # another list is compared by the layers it adapts: these say which
    every_projection = "[q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj]"
    with pytest.raises(PreflightError, match=r"ask \(only the checkpoint adapts: model.layers.0.mlp.down_proj, "
                                             r"model.layers.1.mlp.down_proj\); resume it with"):
        Trainer(tiny_config(tiny_model_dir, tmp_path / "other", reward_file, *LORA,
                            f"model.lora_target_modules={every_projection}", f"checkpoint.resume={lora_checkpoint}"))
    # the load refuses them too, for a checkpoint without its run config (the last line of defence)
    (lora_checkpoint / "dapo_config.yaml").rename(tmp_path / "saved.yaml")
    with pytest.raises(AdapterMismatchError, match=r"targets 14 layers\) are not this run's .*targets \['q_proj'\]\) \(only the checkpoint adapts: "
                                                   r"model.layers.0.mlp.down_proj, .*, \.\.\.\): resume with"):
        Trainer(tiny_config(tiny_model_dir, tmp_path / "other3", reward_file, *LORA, "model.lora_target_modules=[q_proj]",
                            f"checkpoint.resume={lora_checkpoint}")).train()
    with pytest.raises(AdapterMismatchError, match="trained with LoRA adapters"):
        Trainer(tiny_config(tiny_model_dir, tmp_path / "full2", reward_file, "eval.every_steps=0",
                            f"checkpoint.resume={lora_checkpoint}")).train()
    with pytest.raises(AdapterMismatchError, match=r"not this run's .*resume with the checkpoint's model.lora_\*"):
        Trainer(tiny_config(tiny_model_dir, tmp_path / "other2", reward_file, *LORA, "model.lora_rank=8",
                            f"checkpoint.resume={lora_checkpoint}")).train()


def _other_weights(model_dir):
    """``model_dir``'s weights with one entry changed: another revision of the same model."""
    weights = load_file(str(model_dir / "model.safetensors"))
    weights["model.norm.weight"] = weights["model.norm.weight"] + 0.5
    save_file(weights, str(model_dir / "model.safetensors"), metadata={"format": "pt"})


def test_lora_adapters_resume_on_their_base_weights_wherever_they_are(tiny_model_dir, reward_file, tmp_path):
    """The adapters are of their base model's weights: a resume compares the weights (a fingerprint
    each LoRA checkpoint records), not model.path. The same weights moved resume; other weights at
    another path, or at the same path, are refused."""
    base = shutil.copytree(tiny_model_dir, tmp_path / "base")
    Trainer(tiny_config(base, tmp_path / "lora", reward_file, *LORA, "trainer.total_steps=1")).train()
    step1 = tmp_path / "lora" / "checkpoints" / "step-000001"
    assert (step1 / "base_weights.json").is_file()
    moved = base.rename(tmp_path / "moved")
    with pytest.warns(UserWarning, match="holds the base weights the checkpoint's LoRA adapters were trained on"):
        Trainer(tiny_config(moved, tmp_path / "lora", reward_file, *LORA, "trainer.total_steps=2")).train()
    assert [row["step"] for row in read_metrics(tmp_path / "lora") if "time/step" in row] == [1, 2]
    step2 = tmp_path / "lora" / "checkpoints" / "step-000002"
    other = shutil.copytree(moved, tmp_path / "other")
    _other_weights(other)
    with pytest.raises(UserError, match=r"model.path '.*other' holds other weights than '.*moved' held for the "
                                        r"checkpoint \(fingerprint .*\): LoRA adapters resume on the base weights"):
        Trainer(tiny_config(other, tmp_path / "again", reward_file, *LORA, f"checkpoint.resume={step2}")).train()
    _other_weights(moved)  # a new revision downloaded into the same directory
    with pytest.raises(UserError, match=r"the weights in model.path '.*moved' changed since the checkpoint"):
        Trainer(tiny_config(moved, tmp_path / "lora", reward_file, *LORA, "trainer.total_steps=3")).train()


def test_a_resume_with_another_list_of_the_same_layers_goes_on(tiny_model_dir, reward_file, tmp_path):
    """[all-linear] and the list of every projection by name adapt the same layers: a run trained
    with one resumes with the other (the preflight compared the lists as written, and refused)."""
    Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *LORA, "trainer.total_steps=1")).train()
    every_projection = "[q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj]"
    Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *LORA, "trainer.total_steps=2",
                        f"model.lora_target_modules={every_projection}")).train()
    trained = [row["step"] for row in read_metrics(tmp_path / "run") if "time/step" in row]
    assert trained == [1, 2]  # step 2 from step 1's adapters


def test_a_lora_policys_kl_reference_is_its_base_model_without_a_copy(tiny_model_dir, reward_file, tmp_path):
    """algorithm.kl_coef > 0 with LoRA: the reference is the policy with its adapters off, not a
    second copy of the base weights; loss and actor/kl_ref equal those against a frozen copy."""
    from dapo.trainer.setup import load_reference_model
    from dapo.trainer.step_metrics import update_metrics
    from tests.trainer.test_trainer_policy import make_samples

    kl = ("algorithm.kl_coef=0.1", "algorithm.kl_estimator=k3", "trainer.autocast=none", "trainer.lr=1e-2")
    runs = []
    for copy in (False, True):
        trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / f"run{copy}", reward_file, *LORA, *kl))
        try:
            if copy:
                assert trainer.policy.ref_model is None  # none was loaded
                trainer.policy.ref_model = load_reference_model(tiny_model_dir, trainer.cfg.model, torch.device("cpu"))
            samples = make_samples(torch.Generator().manual_seed(0))
            metrics = []
            for _ in range(2):
                for sample, logprobs in zip(samples, trainer.policy.compute_logprobs(samples).logprobs):
                    sample.old_logprobs = logprobs
                metrics.append(update_metrics([trainer.policy.update(samples)], samples, trainer.policy.lr))
            assert trainer.model.training and all(p.requires_grad for n, p in trainer.model.named_parameters()
                                                  if ".lora_" in n)  # the adapters back on after each pass
            runs.append(metrics)
        finally:
            trainer.close()
    own, copied = runs
    assert own[0]["actor/kl_ref"] == 0.0 and own[1]["actor/kl_ref"] > 1e-6
    for a, b in zip(own, copied):
        assert a["actor/loss"] == pytest.approx(b["actor/loss"], rel=1e-6, abs=1e-8)
        assert a["actor/kl_ref"] == pytest.approx(b["actor/kl_ref"], rel=1e-6, abs=1e-10)


def test_dapo_eval_of_a_lora_checkpoint_scores_its_merged_weights(tiny_model_dir, reward_file, tmp_path, capsys,
                                                                 monkeypatch):
    Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *LORA, "trainer.total_steps=1")).train()
    checkpoint = tmp_path / "run" / "checkpoints" / "step-000001"
    capsys.readouterr()

    def no_adapters(*args, **kwargs):
        raise AssertionError("an evaluation added LoRA adapters to a checkpoint's merged weights")

    monkeypatch.setattr("dapo.trainer.setup.apply_lora", no_adapters)
    assert dapo_main(["eval", str(checkpoint), "--save-dir", str(tmp_path / "eval"), "eval.k=2"]) == 0
    out = capsys.readouterr().out
    assert "eval/avg@2" in out and "LoRA" not in out  # the merged policy, no adapters added


def test_adapters_on_a_bfloat16_base_train_in_float32(tiny_model_dir, reward_file, tmp_path, recwarn):
    """model.dtype=bfloat16 with LoRA: the frozen base is bf16, the adapters and their AdamW state
    float32 (PEFT's get_peft_model's choice), so a small lr's step moves A, whose entries a bf16
    ulp (|a| x 2^-8) would mostly round it away on."""
    trainer = Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *LORA, "model.dtype=bfloat16",
                                  "trainer.lr=1e-5", "trainer.total_steps=1"))
    try:
        adapters = {p.dtype for name, p in trainer.model.named_parameters() if ".lora_" in name}
        base = {p.dtype for name, p in trainer.model.named_parameters() if ".lora_" not in name}
        assert (adapters, base) == ({torch.float32}, {torch.bfloat16})
        before = {name: p.detach().clone() for name, p in trainer.model.named_parameters() if ".lora_A." in name}
        trainer.train()
        moved = torch.cat([(p.detach() != before[name]).flatten() for name, p in trainer.model.named_parameters()
                           if name in before])
        assert moved.double().mean() > 0.9
    finally:
        trainer.close()
    assert not [w for w in recwarn if "trains bfloat16 weights" in str(w.message)]


# (PEFT's own loading asks transformers for a deprecated attribute)
@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
def test_a_gpt2_trains_adapters_on_its_conv1d_layers_and_exports_the_merged_policy(tiny_model_dir, reward_file, tmp_path):
    """GPT-2's linear layers are Conv1D (weights stored (in, out)): LoRA on it was refused. Now its
    adapters train (with the KL penalty's adapters-off reference), the export is a GPT-2 computing
    the trained policy, and adapter/ is PEFT's."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=4, n_positions=1024,
                                      bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id))
    model_dir = tmp_path / "gpt2"
    gpt2.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    trainer = Trainer(tiny_config(model_dir, tmp_path / "run", reward_file, *LORA, "trainer.total_steps=2",
                                  "algorithm.kl_coef=0.01"))
    try:
        trainable = {name for name, p in trainer.model.named_parameters() if p.requires_grad}
        assert trainable and all(".lora_A." in name or ".lora_B." in name for name in trainable)
        assert sum(name.endswith("c_attn.lora_A.default.weight") for name in trainable) == 2
        trainer.train()
        policy_logits = _logits(trainer.model)
    finally:
        trainer.close()
    metrics = read_metrics(tmp_path / "run")
    kl = [m["actor/kl_ref"] for m in metrics if "actor/kl_ref" in m]
    assert len(kl) == 2 and all(value > 0 for value in kl)  # to the base model (the policy's own would be 0)
    checkpoint = tmp_path / "run" / "checkpoints" / "step-000002"
    assert torch.allclose(_logits(AutoModelForCausalLM.from_pretrained(checkpoint)), policy_logits, atol=1e-5)
    assert not torch.allclose(_logits(gpt2), policy_logits, atol=1e-3), "the adapters did not train"
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), checkpoint / "adapter")
    assert torch.allclose(_logits(adapted), policy_logits, atol=1e-5)


def test_a_full_fine_tune_resumes_itself_on_its_base_model_moved_and_not_on_other_weights(tiny_model_dir, reward_file,
                                                                                          tmp_path):
    """A requeued job that copies the model to its node's local disk first names another model.path
    each time: the automatic resume compares the weights there (each checkpoint's base_weights.json)
    and goes on; other weights at another path are still refused (another run's output_dir?)."""
    base = shutil.copytree(tiny_model_dir, tmp_path / "job-1")
    Trainer(tiny_config(base, tmp_path / "run", reward_file, "eval.every_steps=0", "trainer.total_steps=1")).train()
    assert (tmp_path / "run" / "checkpoints" / "step-000001" / "base_weights.json").is_file()
    staged = shutil.copytree(base, tmp_path / "job-2")
    with pytest.warns(UserWarning, match=r"model.path '.*job-2' holds the base weights this run started from "
                                         r"\(at '.*job-1' then\): resuming step-000001"):
        Trainer(tiny_config(staged, tmp_path / "run", reward_file, "eval.every_steps=0", "trainer.total_steps=2")).train()
    assert [row["step"] for row in read_metrics(tmp_path / "run") if "time/step" in row] == [1, 2]
    other = shutil.copytree(staged, tmp_path / "job-3")
    _other_weights(other)
    with pytest.raises(UserError, match=r"cannot resume from .*step-000002: model.path '.*job-2' \(checkpoint\) != "
                                        r"'.*job-3' \(this run\)"):
        Trainer(tiny_config(other, tmp_path / "run", reward_file, "eval.every_steps=0", "trainer.total_steps=3")).train()
