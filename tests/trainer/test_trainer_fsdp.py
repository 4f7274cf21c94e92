"""FSDP2 data parallelism keeps DAPO's token-level loss exact: the gradients of a 2-rank step
(gloo, CPU) equal those of a 1-rank step on the same mini-batch, within 1e-6 relative in float32.
Compared on GRADIENTS, not on parameters after AdamW, which would hide a factor-of-2 error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel

from dapo.config import AlgorithmConfig, TrainerConfig
from dapo.trainer.batch import count_loss_tokens, split_across_ranks
from dapo.trainer.policy import PolicyWorker
from dapo.trainer.surplus import sample_state
from tests.trainer.fsdp_grad_worker import layout_settings
from tests.trainer.test_trainer_policy import make_samples
from tests.trainer.test_trainer_shared_prompt import make_group_samples

WORKER = Path(__file__).with_name("fsdp_grad_worker.py")
ROOT = Path(__file__).resolve().parents[2]


def reference_gradients(model_dir: Path, samples, micro_batch_tokens: int, layout: str = "padded",
                        param_dtype: str = "none"):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    trainer = TrainerConfig(prompts_per_step=3, mini_batch_prompts=3, micro_batch_tokens=micro_batch_tokens,
                            lr=1e-2, warmup_steps=0, grad_clip=1e9, param_dtype=param_dtype,
                            **layout_settings(layout))
    worker = PolicyWorker(model, AlgorithmConfig(), trainer, pad_token_id=0, temperature=1.0, total_steps=1,
                          norm_const=16.0)
    worker.accumulate_gradients(samples)
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    return grads, worker.clip_gradients()


# Several micro-batches, a different number on each rank: the rank with fewer runs an empty one
# (PolicyWorker._empty_loss), which must make the same model calls as a real one in its layout.
MICRO_BATCH_TOKENS = {"padded": 44, "packed": 56, "shared_prompt": 60, "native": 60, "native-checkpointed": 60,
                     "native-kept": 60}


# shared_prompt: FSDP2 all-gathers for two forward calls (prompts, then continuations) before one
# backward; samples in groups that share their prompt. native: that layout in one call of dapo-rl's
# forward, each layer through its FSDP2 unit's hooks (gathered once, reduce-scattered in backward;
# native-checkpointed: recomputed in backward; native-kept: trainer.fsdp_reshard_after_forward=false, each
# layer gathered once a micro-batch, and a no-grad pass's resharded after it). packed: each rank's rows hold other
# sequences (per-sequence attention, trainer.packed_attention). bf16: trainer.param_dtype=bf16,
# FSDP2's MixedPrecisionPolicy against one process's bf16 copies (dapo.trainer.mixed_precision).
# Three run in the default suite (6-7 s each); the others in the slow one (-m slow, which CI runs too).
@pytest.mark.parametrize(("layout", "param_dtype"),
                         [("padded", "none"), ("native", "none"), ("shared_prompt", "bf16"), ("native-kept", "none"),
                          *(pytest.param(layout, dtype, marks=pytest.mark.slow) for layout, dtype in (
                              ("packed", "none"), ("shared_prompt", "none"), ("native-checkpointed", "none"),
                              ("padded", "bf16"), ("native", "bf16")))])
def test_two_rank_fsdp_gradients_equal_one_rank_gradients(tiny_model_dir, tmp_path, layout, param_dtype):
    assert_two_ranks_gradients_equal_one_ranks(tiny_model_dir, tmp_path, layout, param_dtype)


# two torchrun ranks (8 s), as the gpt2 one below; the default suite keeps the layouts' tests above
@pytest.mark.slow
def test_two_rank_fsdp_gradients_of_a_mixture_of_experts_equal_one_rank_gradients(tiny_model_dir, tmp_path):
    """A Qwen3-MoE (DAPO runs on Qwen3-30B-A3B): each rank routes its own tokens, so an expert may
    get tokens on one rank and none on the other; FSDP2 reduce-scatters every expert's gradient (the
    experts are one fused parameter in transformers 5) and the sum is one process's."""
    from tests.rollout.conftest import tiny_qwen3_moe

    vocab_size = AutoModelForCausalLM.from_pretrained(tiny_model_dir).config.vocab_size
    moe_dir = tmp_path / "moe"
    tiny_qwen3_moe(vocab_size=vocab_size).save_pretrained(moe_dir)
    assert_two_ranks_gradients_equal_one_ranks(moe_dir, tmp_path, "padded", "none")


@pytest.mark.slow
def test_two_rank_fsdp_gradients_of_a_gpt2_equal_one_rank_gradients(tiny_model_dir, tmp_path):
    """A model whose blocks are not ``*DecoderLayer`` (GPT-2's ``GPT2Block``, found through its
    ``_no_split_modules``): each block is an FSDP2 unit, learned absolute positions in the root one."""
    vocab_size = AutoModelForCausalLM.from_pretrained(tiny_model_dir).config.vocab_size
    torch.manual_seed(0)
    # no dropout: this check loads the model itself, not through the trainer's disable_dropout
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=vocab_size, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    gpt2_dir = tmp_path / "gpt2"
    gpt2.save_pretrained(gpt2_dir)
    assert_two_ranks_gradients_equal_one_ranks(gpt2_dir, tmp_path, "padded", "none")


def assert_two_ranks_gradients_equal_one_ranks(model_dir: Path, tmp_path: Path, layout: str, param_dtype: str) -> None:
    shared_prompt = layout_settings(layout)["shared_prompt"]
    samples = (make_group_samples if shared_prompt else make_samples)(torch.Generator().manual_seed(4))
    for index, sample in enumerate(samples):  # off-policy ratios, so clipping paths are exercised
        sample.old_logprobs = [-4.0 - 0.1 * (index % 3)] * len(sample.response_ids)
    samples[3].loss_weight = 0.0  # a response masked out by overlong filtering
    budget = MICRO_BATCH_TOKENS[layout]
    torch.save([sample_state(s) for s in samples], tmp_path / "samples.pt")
    out = tmp_path / "grads.pt"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(WORKER), str(model_dir), str(tmp_path / "samples.pt"), str(out), str(budget), layout, param_dtype]
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    if result.returncode != 0 and "terminate called" in result.stderr:
        # Once in CI a rank aborted inside gloo (std::terminate, no Python error) on a loaded
        # machine; never reproduced here in 30 runs, under load too. Launch once more, and say so.
        print("fsdp_grad_worker: a rank aborted in gloo; relaunching once\n" + result.stderr[-2000:])
        result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    two_rank = torch.load(out, weights_only=True)

    one_rank, one_rank_norm = reference_gradients(model_dir, samples, budget, layout, param_dtype)
    # float32: the ranks split groups, so a shared prompt's gradient is summed over other subsets
    # of its responses than in one process (Qwen2's RMSNorm rounds each sum to float32). bf16: each
    # rank's micro-batches are others than one process's, and each one's gradient is rounded to bf16
    # (with the shared prompt, after a bf16 sum over the responses of each prompt: 1.2% here)
    tol = 3e-2 if param_dtype == "bf16" else 1e-5 if shared_prompt else 1e-6
    assert two_rank["loss_tokens"] == count_loss_tokens(samples)[0]  # every loss token, once
    assert min(two_rank["micro_batches"]) >= 1 and len(set(two_rank["micro_batches"])) == 2  # an empty one ran
    shares = split_across_ranks(samples, 2)
    assert sorted(id(s) for share in shares for s in share) == sorted(id(s) for s in samples)
    for name, reference in one_rank.items():
        scale = reference.abs().max().item()
        assert scale > 0, name
        error = (two_rank["summed"][name] - reference).abs().max().item()
        assert error <= tol * scale, f"{name}: max |2-rank - 1-rank| = {error:.3g} vs max |grad| {scale:.3g}"
        # FSDP's default averaging would halve every gradient: this check sees a factor of 2
        torch.testing.assert_close(two_rank["averaged"][name], reference / 2, rtol=1e-5, atol=tol * scale)
    assert abs(two_rank["grad_norm"] - one_rank_norm) <= tol * one_rank_norm


def test_ranks_get_token_balanced_shares():
    samples = make_samples(torch.Generator().manual_seed(5))
    shares = split_across_ranks(samples, 3)
    loads = [sum(s.num_tokens for s in share) for share in shares]
    assert sum(loads) == sum(s.num_tokens for s in samples)
    assert max(loads) - min(loads) <= max(s.num_tokens for s in samples)
    assert split_across_ranks(samples[:1], 2)[1] == []  # more ranks than samples: some get none


def test_the_process_group_reduces_cpu_tensors_on_every_device():
    """same_count and all_ranks_true all-reduce CPU tensors whatever the ranks' device: on CUDA the
    group must give CPU tensors a backend too (NCCL alone has none: every GPU run failed there)."""
    from dapo.trainer.fsdp import process_group_backend

    # (a CPU build of torch cannot create an NCCL group, so the CUDA spec is checked as written)
    assert process_group_backend("cpu") == "gloo"
    assert process_group_backend("cuda") == "cpu:gloo,cuda:nccl"


def test_ranks_built_on_the_meta_device_take_the_dtypes_rank0_loaded(tmp_path):
    """from_pretrained keeps DeepSeek-V3's expert-routing bias in float32 in a bf16 model;
    from_config on the meta device does not: the broadcast of rank 0's weights then failed (gloo)."""
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    config = DeepseekV3Config(vocab_size=64, hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
                              num_hidden_layers=2, first_k_dense_replace=1, num_attention_heads=2,
                              num_key_value_heads=2, n_routed_experts=4, num_experts_per_tok=2, n_group=1,
                              topk_group=1, q_lora_rank=16, kv_lora_rank=16, qk_nope_head_dim=8,
                              qk_rope_head_dim=8, v_head_dim=8, head_dim=8)
    model = DeepseekV3ForCausalLM(config)
    bias = "model.layers.1.mlp.gate.e_score_correction_bias"
    with torch.no_grad():
        dict(model.named_buffers())[bias].uniform_(-1, 1)  # values a bf16 copy would round
    model.save_pretrained(tmp_path / "model")
    out = tmp_path / "tensors.pt"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(WORKER.with_name("fsdp_dtype_worker.py")), str(tmp_path / "model"), str(out)]
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    rank0, rank1 = torch.load(out, weights_only=False)
    assert rank0[bias][0] == torch.float32 and rank0["model.embed_tokens.weight"][0] == torch.bfloat16
    assert rank0.keys() == rank1.keys()
    for name, (dtype, value) in rank0.items():
        assert rank1[name][0] == dtype, name
        assert torch.equal(rank1[name][1], value), name


class _LinearAndBuffer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)
        self.register_buffer("routing_bias", torch.zeros(3))


def _match_dtypes_on_rank(rank: int, init_file: str) -> None:
    import torch.distributed as dist

    from dapo.trainer.fsdp import match_rank0_dtypes

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        model = _LinearAndBuffer()
        if rank == 1:  # as an older transformers' from_config on the meta device built it: all bf16
            model.linear.weight.data = model.linear.weight.data.to(torch.bfloat16)
            model.routing_bias = model.routing_bias.to(torch.bfloat16)
        match_rank0_dtypes(model)
        assert model.linear.weight.dtype == model.routing_bias.dtype == torch.float32
    finally:
        dist.destroy_process_group()


def test_a_rank_takes_rank_0s_dtype_for_every_parameter_and_buffer(tmp_path):
    """The DeepSeek test above no longer reaches the cast (transformers 5's from_config keeps the
    routing bias in float32 too): a parameter and a buffer in another dtype than rank 0's, cast."""
    import torch.multiprocessing as mp

    mp.spawn(_match_dtypes_on_rank, args=(str(tmp_path / "init"),), nprocs=2, join=True)
