"""`dapo plan` of models whose blocks are not Hugging Face's ``*DecoderLayer`` modules."""

from __future__ import annotations

from dapo.cli.plan import plan
from dapo.config import builtin_config_path, load_config


def test_plan_of_a_model_whose_layers_are_not_called_decoder_layers(tmp_path):
    """GPT-2's blocks are GPT2Block: dapo plan failed on max() of no layers (and sharding refused
    the model, late, on the ranks); its _no_split_modules names them."""
    from transformers import GPT2Config, GPT2LMHeadModel, MambaConfig, MambaForCausalLM

    from dapo.builtin import build_tokenizer
    from dapo.trainer.fsdp import decoder_layers

    tokenizer = build_tokenizer()
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=4, n_positions=256))
    assert [type(layer).__name__ for layer in decoder_layers(model)] == ["GPT2Block", "GPT2Block"]
    # the outermost only: Mamba's _no_split_modules names its block and the mixer inside it too
    mamba = MambaForCausalLM(MambaConfig(vocab_size=64, hidden_size=16, state_size=4, num_hidden_layers=2))
    assert [type(layer).__name__ for layer in decoder_layers(mamba)] == ["MambaBlock", "MambaBlock"]
    model.save_pretrained(tmp_path / "gpt2")
    tokenizer.save_pretrained(tmp_path / "gpt2")
    cfg = load_config([builtin_config_path("default")], [f"model.path={tmp_path / 'gpt2'}", "data.max_prompt_length=64",
                                                        "rollout.max_response_length=64", "algorithm.overlong_buffer_len=8"])
    text = plan(cfg)
    params = sum(p.numel() for p in model.parameters())
    assert f"({params:,} parameters, 2 layers, hidden 32" in text
    assert "activation bytes measured on two of its layers" in text
