"""A policy with LoRA adapters: the native engine decodes its merged weights on the fast path, sees
the adapters' updates, and hands vLLM (and any weight copy) the merged weights by base names."""

from __future__ import annotations

import pytest
import torch
from conftest import PAD_ID, tiny_llama, tiny_qwen2
from rollout_helpers import teacher_forced_logprobs

from dapo.errors import UserError
from dapo.lora import apply_lora, merged_weights
from dapo.rollout import NativeEngine, SamplingParams, llama_support
from dapo.rollout.base import copy_weights, named_weights

PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15], [3]]


def _adapted(model: torch.nn.Module, targets: list[str] | None = None) -> torch.nn.Module:
    """``model`` with rank-4 adapters whose B is random (at B = 0 they would change nothing)."""
    apply_lora(model, rank=4, alpha=8.0, target_modules=targets or ["all-linear"])
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.2)
    return model.eval()


@pytest.mark.parametrize(("make", "targets"), [
    (tiny_qwen2, None), (tiny_llama, None),
    (tiny_llama, ["q_proj", "lm_head"]),  # an untied output layer adapted: the fast path's head merged too
])
def test_the_fast_path_decodes_the_adapted_model(make, targets: list[str] | None) -> None:
    model = _adapted(make(), targets)
    assert llama_support.unsupported_reason(model, 64) is None
    engine = NativeEngine(model, PAD_ID)
    result = engine.generate(PROMPTS, SamplingParams(n=2, max_new_tokens=10, seed=0))
    assert engine.last_path == "llama"
    for completion in result.completions:  # the adapted model's log-probs, not the base model's
        reference = teacher_forced_logprobs(model, PROMPTS[completion.prompt_index], completion, 1.0)
        assert (reference - torch.tensor(completion.logprobs, dtype=torch.float64)).abs().max() < 1e-4


def test_a_training_forward_refuses_adapters_it_would_not_train() -> None:
    model = _adapted(tiny_qwen2())
    reason = llama_support.architecture_reason(model)
    assert reason is not None and "would not train" in reason


def test_adapter_updates_are_decoded_without_a_sync() -> None:
    model = _adapted(tiny_qwen2())
    engine = NativeEngine(model, PAD_ID)
    params = SamplingParams(n=1, max_new_tokens=8, seed=0)
    before = engine.generate(PROMPTS, params)
    with torch.no_grad():  # an optimizer step moves the adapters only
        for name, param in model.named_parameters():
            if "lora_" in name:
                param.add_(torch.randn_like(param))
    after = engine.generate(PROMPTS, params)
    for completion in after.completions:
        reference = teacher_forced_logprobs(model, PROMPTS[completion.prompt_index], completion, 1.0)
        assert (reference - torch.tensor(completion.logprobs, dtype=torch.float64)).abs().max() < 1e-4
    assert [c.logprobs for c in before.completions] != [c.logprobs for c in after.completions]


def test_merged_weights_are_the_base_models_names_and_compute_the_adapted_model() -> None:
    model = _adapted(tiny_llama(), ["q_proj", "v_proj", "down_proj"])
    plain = tiny_llama(seed=1)
    assert set(dict(named_weights(model))) == set(plain.state_dict())
    copy_weights(plain, model)  # what a separate engine (vLLM) receives
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        assert torch.allclose(plain(ids).logits, model(ids).logits, atol=1e-5)
    # a layer without adapters passes as it is
    weights = dict(merged_weights(model))
    assert torch.equal(weights["model.layers.0.self_attn.k_proj.weight"], model.model.layers[0].self_attn.k_proj.weight)
    # W + (alpha / r) B A, by hand
    layer = model.model.layers[1].self_attn.q_proj
    expected = layer.base_layer.weight + 2.0 * layer.lora_B["default"].weight @ layer.lora_A["default"].weight
    assert torch.allclose(weights["model.layers.1.self_attn.q_proj.weight"], expected, atol=1e-6)


def test_a_bf16_merge_is_the_exact_sum_rounded_once() -> None:
    """A bf16 model's merged weights (its export, every engine's weights) are W + (alpha / r) B A
    rounded once to bf16: the delta rounded to bf16 before the sum left ~6% of them one unit in the
    last place off the trained model's. Float64 stays float64."""
    from dapo.lora import merged_weight

    generator = torch.Generator().manual_seed(0)
    weight = (torch.randn(256, 256, generator=generator) * 0.05).bfloat16()
    lora_a = (torch.randn(8, 256, generator=generator) * 0.05).bfloat16()
    lora_b = (torch.randn(256, 8, generator=generator) * 0.01).bfloat16()
    exact = weight.double() + 2.0 * (lora_b.double() @ lora_a.double())
    merged = merged_weight(weight, lora_a, lora_b, 2.0)
    once = ((lora_b.float() @ lora_a.float()) * 2.0 + weight.float()).bfloat16()  # the float32 sum, rounded once
    twice = weight + ((lora_b.float() @ lora_a.float()) * 2.0).bfloat16()  # the delta rounded, then the sum
    assert merged.dtype == torch.bfloat16 and torch.equal(merged, once)
    # against the float64 sum: off only where float32 itself lands on a bf16 tie (the old ~6%, in any BLAS order)
    off = lambda merge: (merge != exact.bfloat16()).double().mean().item()  # noqa: E731
    assert off(merged) < 0.005 < 0.03 < off(twice)
    wide = merged_weight(weight.double(), lora_a.double(), lora_b.double(), 2.0)
    assert wide.dtype == torch.float64 and torch.allclose(wide, exact, rtol=0, atol=1e-15)


def test_dora_adapters_are_refused_by_the_fast_path_and_the_merge() -> None:
    from peft import LoraConfig, inject_adapter_in_model

    model = tiny_qwen2()
    inject_adapter_in_model(LoraConfig(r=4, target_modules=["q_proj"], use_dora=True), model)
    assert "other than LoRA's" in llama_support.unsupported_reason(model, 64)
    with pytest.raises(ValueError, match="cannot be merged"):
        dict(merged_weights(model))


def test_targets_that_name_no_layer_are_a_one_line_error_listing_the_layers() -> None:
    with pytest.raises(UserError, match=r"names no linear layer .*down_proj, gate_proj, k_proj, o_proj, q_proj"):
        apply_lora(tiny_qwen2(), rank=4, alpha=8.0, target_modules=["qproj"])


def test_a_misspelt_target_among_matching_ones_is_an_error_not_frozen_layers() -> None:
    """PEFT stops only when no target matches: dwn_proj beside six real names adapted 12 of the
    14 projections of two layers and left the down projections frozen, silently."""
    every = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj"]
    with pytest.raises(UserError, match=r"\[.*'dwn_proj'\]: dwn_proj names no layer of the model \(its linear layers: "
                                        r"down_proj, gate_proj, k_proj, o_proj, q_proj, up_proj, v_proj"):
        apply_lora(tiny_llama(), rank=4, alpha=8.0, target_modules=[*every, "dwn_proj"])
    model = tiny_llama()  # a longer path matches by its last parts, as in PEFT
    apply_lora(model, rank=4, alpha=8.0, target_modules=[*every, "mlp.down_proj"])
    assert sum(name.endswith("down_proj.lora_A.default.weight") for name, _ in model.named_parameters()) == 2


def test_a_gpt2s_conv1d_layers_take_adapters_merged_transposed_and_switched_off_for_the_reference(tmp_path) -> None:
    """GPT-2's linear layers are Conv1D, their weights stored (in, out): adapters on them were refused
    (the merge would have added B A untransposed). Merged, the weights under the base model's names
    are a GPT-2 that computes the adapted model (vLLM's copy, the checkpoint's export, which
    from_pretrained loads), as PEFT's own merge does; adapters off, the base model."""
    import warnings

    from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel

    from dapo.lora import adapters_off, merged_linear

    config = GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=32, n_positions=16, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    base = GPT2LMHeadModel(config).eval()
    model = GPT2LMHeadModel(config).eval()
    model.load_state_dict(base.state_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # (PEFT's fan_in_fan_out notice is ours to keep quiet)
        _adapted(model)
    assert sum(name.endswith("lora_A.default.weight") for name, _ in model.named_parameters()) == 8  # c_attn, c_proj, c_fc, c_proj
    ids = torch.tensor([[5, 6, 7, 8, 9, 3]])
    with torch.no_grad():
        adapted = model(ids).logits
        assert (adapted - base(ids).logits).abs().max() > 1e-3  # the adapters change the model
        weights = dict(merged_weights(model))
        assert set(weights) == set(base.state_dict())
        plain = GPT2LMHeadModel(config).eval()
        plain.load_state_dict(weights)
        assert torch.allclose(plain(ids).logits, adapted, atol=1e-5)
        plain.save_pretrained(tmp_path)
        assert torch.allclose(AutoModelForCausalLM.from_pretrained(tmp_path)(ids).logits, adapted, atol=1e-5)
        with adapters_off(model):
            assert torch.allclose(model(ids).logits, base(ids).logits, atol=1e-6)
        layer = model.transformer.h[0].attn.c_attn  # by hand: W + ((alpha / r) B A)^T, W (in, out)
        expected = layer.base_layer.weight + 2.0 * (layer.lora_B["default"].weight @ layer.lora_A["default"].weight).T
        assert torch.allclose(weights["transformer.h.0.attn.c_attn.weight"], expected, atol=1e-6)
        assert torch.allclose(merged_linear(layer).weight, expected.T, atol=1e-6)  # as nn.Linear holds it: (out, in)


def test_adapters_on_layers_other_than_linear_ones_are_refused() -> None:
    """An embedding may be named: the merge raised at the first checkpoint (or weight sync), and the
    KL reference kept its adapters on."""
    with pytest.raises(UserError, match=r"model.embed_tokens \(Embedding\); dapo-rl adapts linear layers only "
                                        r"\(this model's: down_proj, gate_proj, k_proj, o_proj, q_proj, up_proj, v_proj\)"):
        apply_lora(tiny_llama(), rank=4, alpha=8.0, target_modules=["q_proj", "embed_tokens"])


def test_all_linear_on_a_mixture_of_experts_is_refused_in_one_message(recwarn) -> None:
    """Mixtral's experts are one fused 3-D parameter, no linear layer: the refusal names them, and
    PEFT's warnings about patterns it made for them itself (none is the user's) are not shown."""
    from transformers import MixtralConfig, MixtralForCausalLM
    model = MixtralForCausalLM(MixtralConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                             num_attention_heads=4, num_key_value_heads=2, num_local_experts=2))
    with pytest.raises(UserError, match=r"not linear: model.layers.0.mlp.experts .*this model's: k_proj, o_proj, q_proj, "
                                        r"v_proj\)"):
        apply_lora(model, rank=4, alpha=8.0, target_modules=["all-linear"])
    assert not [str(w.message) for w in recwarn.list if issubclass(w.category, RuntimeWarning)]


@pytest.mark.filterwarnings("ignore:Model has `tie_word_embeddings=True`:UserWarning")  # PEFT's, before our refusal
def test_adapting_an_output_layer_tied_to_the_embeddings_is_refused() -> None:
    # merged, its W + BA would be one matrix with the input embeddings: they would change too
    with pytest.raises(UserError, match="ties to its input embeddings: leave it out of the targets"):
        apply_lora(tiny_qwen2(), rank=4, alpha=8.0, target_modules=["q_proj", "lm_head"])
    apply_lora(tiny_llama(), rank=4, alpha=8.0, target_modules=["q_proj", "lm_head"])  # untied: its own matrix


def test_a_base_model_given_by_a_relative_path_is_saved_as_its_absolute_one(tmp_path, monkeypatch) -> None:
    """AutoPeftModelForCausalLM loads an adapter directory's base model from adapter_config.json:
    a relative model.path (./base) there would load only from the training's working directory."""
    import json

    from peft import AutoPeftModelForCausalLM

    from dapo.lora import save_adapter

    tiny_qwen2().save_pretrained(tmp_path / "base")
    monkeypatch.chdir(tmp_path)
    model = _adapted(tiny_qwen2())
    save_adapter(model, tmp_path / "adapter", base_model_path="base")
    save_adapter(model, tmp_path / "hub_adapter", base_model_path="Qwen/Qwen2.5-0.5B")  # a hub name stays one
    assert json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())["base_model_name_or_path"] == (
        str((tmp_path / "base").resolve()))
    assert json.loads((tmp_path / "hub_adapter" / "adapter_config.json").read_text())["base_model_name_or_path"] == (
        "Qwen/Qwen2.5-0.5B")
    monkeypatch.chdir(tmp_path / "adapter")
    loaded = AutoPeftModelForCausalLM.from_pretrained(tmp_path / "adapter").eval()
    ids = torch.tensor([PROMPTS[1]])
    with torch.no_grad():
        assert torch.allclose(loaded(ids).logits, model(ids).logits, atol=1e-5)


def test_saving_adapters_of_a_hub_named_base_model_makes_no_network_lookup(tmp_path, monkeypatch) -> None:
    """PEFT's default looks the base model's config.json up on the Hub at every save (to decide
    whether to save embeddings): a run-time network call, and a failed one offline."""
    import peft.utils.save_and_load as peft_save
    from safetensors.torch import load_file

    from dapo.lora import save_adapter

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("save_adapter looked the base model up on the Hub")

    monkeypatch.setattr(peft_save, "check_file_exists_on_hf_hub", no_network)
    model = _adapted(tiny_qwen2())
    save_adapter(model, tmp_path / "adapter", base_model_path="Qwen/Qwen2.5-0.5B")
    saved = load_file(tmp_path / "adapter" / "adapter_model.safetensors")
    assert saved and all(".lora_" in name for name in saved)


def test_adapters_of_a_base_model_of_another_width_are_a_resume_error(tmp_path) -> None:
    """Same rank, alpha and layers, another hidden size: torch's size-mismatch RuntimeError came
    out as a traceback, not the resume's error naming the checkpoint."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from dapo.lora import ADAPTER_DIR, save_adapter
    from dapo.trainer.policy_weights import AdapterMismatchError, load_policy_weights

    wider = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=48))
    apply_lora(wider, rank=4, alpha=8.0, target_modules=["q_proj"])
    save_adapter(wider, tmp_path / ADAPTER_DIR, base_model_path=str(tmp_path))
    narrower = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                            intermediate_size=48))
    apply_lora(narrower, rank=4, alpha=8.0, target_modules=["q_proj"])
    with pytest.raises(AdapterMismatchError, match=rf"cannot resume {tmp_path}: its adapters do not fit this model.path's layers .* size mismatch for model.layers.0"):
        load_policy_weights(narrower, tmp_path)


def test_adapters_of_another_alpha_or_a_stream_short_of_a_b_are_refused(tmp_path):
    """Adapters saved with alpha 8 loaded into a run with alpha 16 doubled their scaling unsaid
    (load_adapter compared the rank alone); a weight stream missing a layer's B dropped that
    layer's merged weight from an export or an engine's sync."""
    from dapo.lora import load_adapter, merge_adapters, save_adapter

    saved = tiny_qwen2()
    apply_lora(saved, rank=4, alpha=8.0, target_modules=["q_proj"])
    save_adapter(saved, tmp_path, "base")
    other = tiny_qwen2()
    apply_lora(other, rank=4, alpha=16.0, target_modules=["q_proj"])
    with pytest.raises(ValueError, match="alpha 8.0"):
        load_adapter(other, tmp_path)
    short = [(name, value) for name, value in saved.state_dict().items() if ".lora_B." not in name]
    with pytest.raises(ValueError, match="without their weight or adapters"):
        list(merge_adapters(short, saved))


def test_adapters_given_gathered_are_the_ones_saved_and_a_file_short_of_a_b_is_refused(tmp_path):
    """A sharded policy saves the adapters its ranks gathered (``state``), not the model's own
    (shards of them); a file that lost one layer's B (hand-edited, damaged) resumed with that
    layer's fresh B = 0: an inexact resume, unsaid."""
    from safetensors.torch import load_file, save_file

    from dapo.lora import ADAPTER_FILE, adapter_names, load_adapter, save_adapter

    model = tiny_qwen2()
    apply_lora(model, rank=4, alpha=8.0, target_modules=["q_proj", "v_proj"])
    names = adapter_names(model)
    gathered = {name: torch.full_like(tensor, 3.0) for name, tensor in model.state_dict().items() if name in names}
    save_adapter(model, tmp_path, "base", state=gathered)
    saved = load_file(str(tmp_path / ADAPTER_FILE))
    assert len(saved) == len(gathered) > 0 and all(bool((tensor == 3.0).all()) for tensor in saved.values())
    fresh = tiny_qwen2()
    apply_lora(fresh, rank=4, alpha=8.0, target_modules=["q_proj", "v_proj"])
    load_adapter(fresh, tmp_path)
    assert all(bool((param == 3.0).all()) for name, param in fresh.named_parameters() if ".lora_" in name)
    dropped = next(name for name in saved if ".lora_B." in name)
    save_file({name: tensor for name, tensor in saved.items() if name != dropped}, str(tmp_path / ADAPTER_FILE),
              metadata={"format": "pt"})
    with pytest.raises(ValueError, match="do not match the model: missing"):
        load_adapter(fresh, tmp_path)
