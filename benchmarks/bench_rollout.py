"""Generation throughput: the native rollout engine vs ``model.generate``.

    python benchmarks/bench_rollout.py [--model-dir DIR | --random-model [builtin|qwen2.5-0.5b]]
        [--vocab-size V] [--batch-sizes 8 16 64 128]

Both engines sample (temperature 1, no top-k/top-p) exactly ``--max-new-tokens`` tokens per row
(no stop tokens), from the same prompts, on the same model and thread count. Each engine is timed
``--repeats`` times, interleaved so background load hits both alike; the best run counts.
Speedups are relative to ``model.generate`` on the float32 model (as the trainer holds it);
``model.generate bf16`` (a bf16 copy of the model, made once before timing) is shown for an
equal-precision comparison with ``native bf16`` (``rollout.native_dtype=bfloat16``, the embedded
default; on x86 CPUs with AVX512-BF16 it runs the fused decode kernels of dapo.rollout.cpu_kernels,
and the header says whether it does; ``native bf16 torch ops`` is the same engine without them,
``rollout.native_cpu_kernels=false``), whose engine likewise keeps the weights it prepared (cast to bf16, fused, packed) across
calls while they do not change: one engine per row, its first call at each batch size preparing
them (the best run counts). ``native bf16 +prep`` is a new engine at every call, which prepares
them inside the timed call, as a training step's first generation round does. The process keeps
freed memory for reuse, as dapo-rl's trainer does (trainer.keep_freed_memory), for both engines
alike; ``--glibc-default-allocator`` leaves glibc's malloc as it is.
Run it alone on the machine (``flock /tmp/dapo-cpu.lock python benchmarks/bench_rollout.py``).
"""

from __future__ import annotations

import argparse
import copy
import time

import torch
from transformers import (
    AutoModelForCausalLM,
    GenerationConfig,
    PreTrainedModel,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from dapo.builtin import builtin_model_config
from dapo.rollout import NativeEngine, SamplingParams
from dapo.rollout.batching import left_pad, left_pad_mask
from dapo.rollout.cpu_kernels import cpu_decode_kernels, unavailable_reason
from dapo.trainer.allocator import keep_freed_memory

# Random-weight Qwen2 shapes: the built-in model's (its config, from its recipe), and Qwen2.5-0.5B's.
# (Before 2026-12-05 "builtin" had intermediate size 688 and a 100-token vocabulary, not the
# built-in model's 768 and 260.)
SHAPES = {
    "builtin": {},
    "qwen2.5-0.5b": dict(vocab_size=151936, hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, intermediate_size=4864, max_position_embeddings=32768,
                         rms_norm_eps=1e-6, rope_theta=1000000.0),
}


def random_model(shape: str = "builtin", vocab_size: int = 0) -> PreTrainedModel:
    """A randomly initialised Qwen2 of one of SHAPES, with its vocabulary size or ``vocab_size``."""
    torch.manual_seed(0)
    config = builtin_model_config() if shape == "builtin" else Qwen2Config(**SHAPES[shape], tie_word_embeddings=True)
    if vocab_size:
        config.vocab_size = vocab_size
    return Qwen2ForCausalLM(config)


def load_model(args: argparse.Namespace) -> tuple[PreTrainedModel, str]:
    if args.model_dir:
        return AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32), args.model_dir
    if not args.random_model and not args.vocab_size:
        try:
            from dapo.builtin import ensure_base_model

            path = ensure_base_model()
            return AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32), f"built-in ({path})"
        except ImportError:
            pass
    shape = args.random_model or "builtin"
    model = random_model(shape, args.vocab_size)
    return model, f"random Qwen2 of the {shape} shape, vocabulary {model.config.vocab_size}"


def make_prompts(batch_size: int, vocab_size: int, seed: int) -> list[list[int]]:
    """Prompts of 10-20 tokens (ids above the usual special tokens)."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(10, 21, (batch_size,), generator=generator).tolist()
    return [torch.randint(3, vocab_size, (n,), generator=generator).tolist() for n in lengths]


def time_native(engine: NativeEngine, prompts: list[list[int]], max_new_tokens: int) -> float:
    result = engine.generate(prompts, SamplingParams(max_new_tokens=max_new_tokens, seed=0))
    return result.num_generated_tokens / result.seconds


def time_generate(model: PreTrainedModel, prompts: list[list[int]], max_new_tokens: int) -> float:
    input_ids, pad_lengths = left_pad(prompts, 0, torch.device("cpu"))
    attention_mask = left_pad_mask(pad_lengths, input_ids.shape[1])
    config = GenerationConfig(do_sample=True, top_k=0, top_p=1.0, max_new_tokens=max_new_tokens, pad_token_id=0)
    # generate() fills unset fields from the model's own generation_config, whose eos_token_id
    # would end the batch once every row has sampled it: the library defaults instead, no stop
    saved, model.generation_config = model.generation_config, GenerationConfig()
    try:
        start = time.perf_counter()
        with torch.inference_mode():
            sequences = model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=config)
        seconds = time.perf_counter() - start
    finally:
        model.generation_config = saved
    new_tokens = sequences[:, input_ids.shape[1] :]
    assert new_tokens.shape[1] == max_new_tokens, f"generate stopped after {new_tokens.shape[1]} tokens"
    return new_tokens.numel() / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", help="Hugging Face model directory (default: the built-in model)")
    parser.add_argument("--random-model", nargs="?", const="builtin", choices=sorted(SHAPES),
                        help="a random Qwen2 of this shape (default: builtin) instead of the built-in model")
    parser.add_argument("--vocab-size", type=int, default=0,
                        help="the random model's vocabulary size (151936: Qwen2.5's); implies --random-model")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 16, 64, 128])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--glibc-default-allocator", action="store_true",
                        help="leave glibc's malloc as it is (default: keep freed memory, as dapo-rl's trainer does: "
                             "trainer.keep_freed_memory)")
    args = parser.parse_args()
    kept = not args.glibc_default_allocator and keep_freed_memory()
    if args.threads:
        torch.set_num_threads(args.threads)
    model, name = load_model(args)
    model.eval()
    vocab_size = model.get_input_embeddings().num_embeddings
    print(f"model: {name}, {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters")
    print(f"threads: {torch.get_num_threads()}, max_new_tokens: {args.max_new_tokens}, best of {args.repeats}, "
          f"freed memory {'kept' if kept else 'returned (glibc default)'}")
    kernels = cpu_decode_kernels()
    print("native bf16 decode: " + ("the fused CPU kernels (dapo.rollout.cpu_kernels)" if kernels else
                                    f"torch ops (the fused CPU kernels are unavailable: {unavailable_reason()})"))
    native = NativeEngine(model, pad_token_id=0)
    native_bf16 = NativeEngine(model, pad_token_id=0, compute_dtype=torch.bfloat16)
    native_bf16_torch = NativeEngine(model, pad_token_id=0, compute_dtype=torch.bfloat16, cpu_kernels=False)
    time_native(native, make_prompts(4, vocab_size, 0), 4)  # warm-up
    time_native(native_bf16, make_prompts(4, vocab_size, 0), 4)
    time_native(native_bf16_torch, make_prompts(4, vocab_size, 0), 4)
    bf16_model = copy.deepcopy(model).to(torch.bfloat16)
    time_generate(model, make_prompts(4, vocab_size, 0), 4)
    time_generate(bf16_model, make_prompts(4, vocab_size, 0), 4)
    engines = {
        "model.generate": lambda prompts: time_generate(model, prompts, args.max_new_tokens),
        "model.generate bf16": lambda prompts: time_generate(bf16_model, prompts, args.max_new_tokens),
        "native": lambda prompts: time_native(native, prompts, args.max_new_tokens),
        "native bf16": lambda prompts: time_native(native_bf16, prompts, args.max_new_tokens),
        # the same without the fused CPU decode kernels (rollout.native_cpu_kernels=false): torch's ops
        "native bf16 torch ops": lambda prompts: time_native(native_bf16_torch, prompts, args.max_new_tokens),
        # a new engine each call: the weights are cast and packed inside the timed call, as in a
        # training step's first generation round
        "native bf16 +prep": lambda prompts: time_native(
            NativeEngine(model, pad_token_id=0, compute_dtype=torch.bfloat16), prompts, args.max_new_tokens),
    }
    print(f"{'batch':>6} {'engine':>21} {'tokens/s':>10} {'speedup':>8}")
    for batch_size in args.batch_sizes:
        prompts = make_prompts(batch_size, vocab_size, batch_size)
        best = dict.fromkeys(engines, 0.0)
        for _ in range(args.repeats):
            for name, time_engine in engines.items():
                best[name] = max(best[name], time_engine(prompts))
        for name, tokens_per_second in best.items():
            speedup = tokens_per_second / best["model.generate"]
            print(f"{batch_size:>6} {name:>21} {tokens_per_second:>10.0f} {speedup:>8.2f}")


if __name__ == "__main__":
    main()
