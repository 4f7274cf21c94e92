"""Throughput of the policy update (forward, backward, optimizer) and its share of the matmul peak.

    flock /tmp/dapo-cpu.lock python benchmarks/bench_update.py [--models builtin 75m] \
        [--precisions bf16 bf16-weights fp32] [--layouts padded packed shared_prompt native native_torch_ops] [--updates 4]
    python benchmarks/bench_update.py --device cuda --models 0.5b 75m --matmul-size 8192   # a GPU

For each model shape, layout and precision, one DAPO update (``PolicyWorker.update``:
token-budget micro-batches, decoupled-clip token-level loss, AdamW) runs on a synthetic mini-batch
(16 groups x G=8 for the built-in shape, 2 x 4 of 128-256 + 512-1024 tokens for "long", the
built-in model at reasoning-RL lengths, 4 x 4 longer ones for the "75m" one: 93M parameters, 69M
of them outside its 32k-token embedding; 8 x 8 of 64-256 + 256-1024 tokens for "0.5b", Qwen2.5-0.5B's
shape, a GPU's size), ``--updates`` times
after one warm-up; the best counts. The precisions of a layout take turns, update by update, so a
slow spell of the machine slows them alike. Weights are random (speed does not depend on them).
The peak is a matmul micro-benchmark in the same run and precision (square ``torch.mm`` of
``--matmul-size``, best of several), so MFU compares the update with what this machine's matmul
reaches, not with a datasheet (measured before and after every layout; the best counts).

Model FLOPs per trained token (PaLM's convention, causal attention counted as full):
    6 * N_matmul + 12 * layers * hidden * T
with N_matmul the parameters of the transformer's matmuls (not the embedding lookup) plus the
output layer for response tokens only (the update computes logits only there), and T the
sequence's length. bf16 rows train under bf16 autocast over float32 weights (the default
config); bf16-weights rows on bf16 copies of float32 weights (``trainer.param_dtype=bf16``);
fp32 rows in float32. ``padded`` rows use length-sorted padded micro-batches (the
default), ``packed`` rows padding-free ones (``trainer.packing=true``), ``shared_prompt`` rows
forward each group's prompt once (``trainer.shared_prompt=true``) through Hugging Face's forward
(``trainer.forward=hf``), ``native`` rows the same layout through dapo-rl's own forward
(``trainer.forward=native``, the embedded default's on CPU: no padding outside attention; its RMSNorm,
SwiGLU, RoPE and attention as fused C kernels on an x86 CPU with AVX-512, the header says whether they ran;
on CUDA its RMSNorm, SwiGLU and RoPE as fused Triton kernels), ``native_torch_ops`` rows that forward on
torch's ops (``trainer.native_cpu_kernels=false``, ``trainer.native_gpu_kernels=false``). Tokens/s
counts the real prompt+response tokens of the samples trained in every layout (the same work);
model FLOPs count what the layout computes: a ``shared_prompt`` or ``native`` row each group's
prompt once and no padding (a lower bound for ``shared_prompt``, whose layers also compute the
padding, and wherever a group split across micro-batches has its prompt forwarded once in each).
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, Qwen2Config, Qwen2ForCausalLM

from dapo.config import AlgorithmConfig, TrainerConfig
from dapo.rollout import cpu_kernels
from dapo.trainer.batch import Sample, count_loss_tokens
from dapo.trainer.fused_cpu_ops import fused_cpu_ops
from dapo.trainer.policy import PolicyWorker

# native: the shared-prompt layout, dapo-rl's forward (with its fused CPU kernels where they run);
# native_torch_ops: the same forward on torch's ops (trainer.native_cpu_kernels=false, native_gpu_kernels=false)
LAYOUTS = ("padded", "packed", "shared_prompt", "native", "native_torch_ops")
SHARED_PROMPT = ("shared_prompt", "native", "native_torch_ops")


@dataclass
class Shape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    prompt_tokens: tuple[int, int]  # min, max prompt length of the synthetic samples
    response_tokens: tuple[int, int]
    micro_batch_tokens: int  # every layout's micro-batch budget (trainer.micro_batch_tokens)
    groups: int  # the synthetic mini-batch: groups x group_size responses
    group_size: int


SHAPES = {
    # the built-in base model, with the embedded default's lengths and micro-batch budget
    "builtin": Shape(256, 4, 4, 2, 768, 260, (10, 20), (20, 64), 4096, 16, 8),
    # the built-in base model at reasoning-RL lengths (responses of 512-1024 tokens): attention's
    # share of the update grows with the length, and so does what its layout keeps for backward
    "long": Shape(256, 4, 4, 2, 768, 260, (128, 256), (512, 1024), 8192, 2, 4),
    # a ~75M-parameter Qwen2 (Qwen2.5's 151k vocabulary would be most of it; a 32k one is not),
    # with a smaller mini-batch: about 4k tokens, some seconds per update on 2 cores
    "75m": Shape(768, 10, 12, 4, 2304, 32000, (32, 96), (64, 192), 4096, 4, 4),
    # Qwen2.5-0.5B (494M parameters, 151,936-token vocabulary) at reasoning-RL lengths: for a GPU
    "0.5b": Shape(896, 24, 14, 2, 4864, 151936, (64, 256), (256, 1024), 16384, 8, 8),
}
CPU = torch.device("cpu")
# the matmul peak (by its dtype's name) each precision is measured against
PEAK = {"bf16": "bf16", "bf16-weights": "bf16", "fp32": "fp32"}
PEAK_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def build_model(shape: Shape, device: torch.device = CPU) -> Qwen2ForCausalLM:
    """Random weights, initialised on ``device`` (a GPU initialises 0.5B parameters in moments)."""
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=shape.vocab, hidden_size=shape.hidden, num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads, num_key_value_heads=shape.kv_heads,
        intermediate_size=shape.intermediate, max_position_embeddings=4096, tie_word_embeddings=True,
        attn_implementation="eager" if shape.hidden <= 256 else "sdpa",
    )
    with device:
        return Qwen2ForCausalLM(config)


def synthetic_mini_batch(shape: Shape, seed: int = 0) -> list[Sample]:
    rng = random.Random(seed)
    samples = []
    for group in range(shape.groups):
        prompt = [rng.randrange(4, shape.vocab) for _ in range(rng.randint(*shape.prompt_tokens))]
        for _ in range(shape.group_size):
            length = rng.randint(*shape.response_tokens)
            response = [rng.randrange(4, shape.vocab) for _ in range(length)]
            logprobs = [-rng.uniform(0.1, 3.0) for _ in range(length)]
            samples.append(Sample(group_id=group, uid=str(group), prompt_ids=prompt, response_ids=response,
                                  rollout_logprobs=logprobs, truncated=False, advantage=rng.gauss(0, 1),
                                  old_logprobs=logprobs))
    return samples


def model_flops(model: PreTrainedModel, samples: list[Sample], shared_prompt: bool = False) -> float:
    """Training FLOPs of one update on ``samples`` (see the module docstring; bench_gpu.py counts
    the same way, so their MFUs compare). ``shared_prompt``: each group's prompt (its matmuls and
    its attention to itself) once, the responses' queries over prompt and response keys."""
    layers, hidden = model.config.num_hidden_layers, model.config.hidden_size
    embedding = model.get_input_embeddings().weight.numel()
    transformer_matmuls = sum(p.numel() for name, p in model.named_parameters() if p.dim() == 2) - embedding
    flops = 0.0
    prompts_seen: set[int] = set()
    for s in samples:
        if shared_prompt:
            p, r = len(s.prompt_ids), len(s.response_ids)
            flops += 6 * transformer_matmuls * r + 12 * layers * hidden * r * (p + r)
            if s.group_id not in prompts_seen:
                prompts_seen.add(s.group_id)
                flops += 6 * transformer_matmuls * p + 12 * layers * hidden * p**2
        else:
            flops += 6 * transformer_matmuls * s.num_tokens + 12 * layers * hidden * s.num_tokens ** 2
        flops += 6 * embedding * len(s.response_ids)  # the (tied) output layer, response positions only
    return flops


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously; the CPU does not)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_peak(dtype: torch.dtype, size: int, device: torch.device = CPU) -> float:
    """Best FLOP/s of a square matmul in ``dtype`` on ``device``, now (best of 10 rounds: the
    peak is what the machine can do, so interference only ever lowers a round)."""
    a = torch.randn(size, size, dtype=dtype, device=device)
    b = torch.randn(size, size, dtype=dtype, device=device)
    torch.mm(a, b)
    best = 0.0
    for _ in range(10):
        sync(device)
        started = time.perf_counter()
        for _ in range(4):
            torch.mm(a, b)
        sync(device)
        best = max(best, 4 * 2 * size**3 / (time.perf_counter() - started))
    return best


def build_worker(shape: Shape, precision: str, layout: str, device: torch.device,
                 fused_logprobs: bool = True) -> PolicyWorker:
    trainer = TrainerConfig(fused_logprobs=fused_logprobs, autocast="bf16" if precision == "bf16" else "none", lr=1e-6, warmup_steps=0,
                            param_dtype="bf16" if precision == "bf16-weights" else "none",
                            micro_batch_tokens=shape.micro_batch_tokens,
                            device=str(device), packing=layout == "packed", shared_prompt=layout in SHARED_PROMPT,
                            forward="native" if layout.startswith("native") else "hf",
                            native_cpu_kernels=layout != "native_torch_ops",
                            native_gpu_kernels=layout != "native_torch_ops")
    return PolicyWorker(build_model(shape, device), AlgorithmConfig(), trainer, pad_token_id=0, temperature=1.0,
                        total_steps=10, norm_const=float(shape.response_tokens[1]))


def profile_update(worker: PolicyWorker, samples: list[Sample], device: torch.device, title: str) -> None:
    """Print where one more update's time goes: torch.profiler's operators by their own time on
    ``device`` (CUDA kernels on a GPU, the CPU's operators on a CPU), the 20 largest."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    num_tokens, num_seqs = count_loss_tokens(samples)
    with profile(activities=activities) as profiler:
        worker.update(samples, num_tokens, num_seqs)
        sync(device)
    sort_by = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(f"[bench_update] profile of one update, {title}, by {sort_by}:")
    print(profiler.key_averages().table(sort_by=sort_by, row_limit=20, max_name_column_width=60), flush=True)


def bench(name: str, precisions: list[str], layout: str, updates: int, device: torch.device,
          profile: bool = False, fused_logprobs: bool = True) -> list[dict]:
    """One row per precision: each precision's worker updates in turn, ``updates`` rounds, so
    that a slow spell of the machine hits every precision alike (best of the rounds counts).
    ``profile``: then one more update per precision under torch.profiler (not timed)."""
    shape = SHAPES[name]
    samples = synthetic_mini_batch(shape)
    num_tokens, num_seqs = count_loss_tokens(samples)
    workers = {precision: build_worker(shape, precision, layout, device, fused_logprobs) for precision in precisions}
    for worker in workers.values():
        worker.update(samples, num_tokens, num_seqs)  # warm-up
    seconds: dict[str, list[float]] = {precision: [] for precision in precisions}
    for round_index in range(updates):
        # each round starts with another precision: none always follows the same one
        turn = list(workers.items())
        turn = turn[round_index % len(turn):] + turn[:round_index % len(turn)]
        for precision, worker in turn:
            sync(device)
            started = time.perf_counter()
            worker.update(samples, num_tokens, num_seqs)
            sync(device)
            seconds[precision].append(time.perf_counter() - started)
    if profile:
        for precision, worker in workers.items():
            profile_update(worker, samples, device, f"{name} {precision} {layout}")
    rows = []
    for precision, worker in workers.items():
        update_s = min(seconds[precision])  # the best, as for the peak: interference only ever slows a round
        rows.append({
            "model": name, "params_m": sum(p.numel() for p in worker.model.parameters()) / 1e6,
            "precision": precision, "layout": layout,
            "tokens": sum(s.num_tokens for s in samples), "update_s": update_s,
            "tokens_per_s": sum(s.num_tokens for s in samples) / update_s,
            "achieved_flops": model_flops(worker.model, samples, layout in SHARED_PROMPT) / update_s,
        })
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--precisions", nargs="+", default=list(PEAK), choices=list(PEAK))
    parser.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=list(LAYOUTS))
    parser.add_argument("--updates", type=int, default=4, help="timed updates per row (the best counts)")
    parser.add_argument("--matmul-size", type=int, default=2048)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N")
    parser.add_argument("--fused-logprobs", choices=("on", "off"), default="on",
                        help="trainer.fused_logprobs (the GPU's fused log-prob kernels; no effect on a CPU)")
    parser.add_argument("--profile", action="store_true",
                        help="after each row's timing, print torch.profiler's 20 costliest operators of one more update")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    args.precisions = list(dict.fromkeys(args.precisions))  # each once
    peaks = {PEAK[precision]: 0.0 for precision in args.precisions}
    rows = []
    for name in args.models:
        for layout in args.layouts:
            # the peaks are re-measured around every layout and the best counts: a machine shared
            # with other work (a VM's neighbours, a turbo clock) only ever lowers a measurement
            for peak in peaks:
                peaks[peak] = max(peaks[peak], matmul_peak(PEAK_DTYPES[peak], args.matmul_size, device))
            layout_rows = bench(name, args.precisions, layout, args.updates, device, args.profile,
                                args.fused_logprobs == "on")
            for peak in peaks:
                peaks[peak] = max(peaks[peak], matmul_peak(PEAK_DTYPES[peak], args.matmul_size, device))
            print(f"[bench_update] {name} {layout}: " + ", ".join(
                f"{r['precision']} {r['update_s']:.2f} s" for r in layout_rows), flush=True)
            rows += layout_rows
    rows.sort(key=lambda r: (args.models.index(r["model"]), args.precisions.index(r["precision"]),
                             args.layouts.index(r["layout"])))
    where = (f"{torch.cuda.get_device_name(device)}, trainer.fused_logprobs={args.fused_logprobs == 'on'}"
             if device.type == "cuda" else f"{torch.get_num_threads()} threads")
    if device.type == "cpu":
        reason = cpu_kernels.unavailable_reason(decode=False) or "their self-test failed"
        where += "; fused CPU training kernels " + (
            "on (native rows but bf16-weights: those have no float32 residual stream)" if fused_cpu_ops(torch.zeros(1))
            else f"off: {reason}")
    print(f"torch {torch.__version__}, {where}; matmul peak ({args.matmul_size}^2, best "
          "of all measurements): " + ", ".join(f"{name} {peak / 1e12:.3f} TFLOP/s" for name, peak in peaks.items()))
    print("| model | params (M) | precision | layout | tokens/update | update s | tokens/s | model TFLOP/s "
          "| matmul peak TFLOP/s | MFU |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        peak = peaks[PEAK[r["precision"]]]
        print(f"| {r['model']} | {r['params_m']:.1f} | {r['precision']} | {r['layout']} | {r['tokens']} "
              f"| {r['update_s']:.2f} | {r['tokens_per_s']:.0f} | {r['achieved_flops'] / 1e12:.3f} "
              f"| {peak / 1e12:.3f} | {r['achieved_flops'] / peak:.0%} |")


if __name__ == "__main__":
    main()
