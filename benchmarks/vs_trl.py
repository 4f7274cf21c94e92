"""dapo-rl vs TRL's GRPOTrainer, side by side at equal wall time, on CPU.

Both systems start from the built-in base model (char-level Qwen2, ~3.2M parameters) and train on
the built-in arithmetic task with the same settings: G = 8 responses per prompt, 16 prompts (groups)
per step, one optimizer update per step, at most 64 new tokens, temperature 1 / top-p 1, the same
learning rate (constant, no warm-up), Clip-Higher eps_low = 0.2 / eps_high = 0.28, no KL, token-level
loss, the same verifier (+1 / -1) plus the soft overlong punishment, gradient checkpointing off.
The one intended difference: dapo-rl keeps Dynamic Sampling on (TRL has none). Its first round
generates 16 groups, as TRL's step does; a step short of 16 groups with mixed outcomes generates
another round of 16, keeps up to 8 accepted groups beyond its batch for the next step (one step
stale) and drops the rest. The table reports groups generated, trained and dropped per step, and
tokens/s two ways: every completion token generated (the rollout engine's throughput) and the
completion tokens of the trained batches (equal work: 16 groups x G per update in both systems).
TRL attends with sdpa while generating and eager in the update, the faster kernel of each phase
here; dapo-rl trains with its default config's forward (its own, with the fused CPU training
kernels where they run: attention, RMSNorm, SwiGLU and RoPE in float32 arithmetic on bf16 values
under bf16, so it rounds less than TRL's eager bf16 attention; the report's header says whether
they ran) and decodes with its own kernels.

Both systems run at EQUAL precision, once per precision asked for (``--precision both``, the default):
  fp32: float32 weights, float32 generation and training (dapo-rl ``rollout.native_dtype=model
        trainer.autocast=none``; TRL ``bf16=False``);
  bf16: float32 master weights, generation and training under bfloat16 (dapo-rl
        ``rollout.native_dtype=bfloat16 trainer.autocast=bf16``, its default config; TRL's own
        one-flag ``bf16=True``, autocast over both).

Each training run and each evaluation runs in its own subprocess (no shared state, and a clean
peak-memory reading). Both training processes keep freed memory for reuse (dapo-rl's
``trainer.keep_freed_memory``, its default; set in TRL's process too). Every system trains for
the same wall-clock budget, then all final models are
scored by the same sampled held-out evaluation (dapo-rl's ``evaluate_model``: same problems, same
k samples each at temperature 1 / top-p 1, same seed, same verifier).

    flock /tmp/dapo-cpu.lock python benchmarks/vs_trl.py [--seconds 120] [--eval-k 4] \
        [--precision both|fp32|bf16] [--repeats 1] [--output runs/vs_trl/results.md] [--smoke]

Metrics: seconds per step (median over steps), split into generation + reward scoring (dapo-rl's
time/generate + time/reward, every round; TRL's ``_generate_and_score_completions``) and the rest,
which is the update; completion tokens/s = every completion token generated / wall time of all
steps (so it counts generation, scoring and the update); trained tokens/s = the completion tokens of
the trained batches / the same time; peak memory = the training process's RSS high-water mark
(VmHWM, ``peak_memory.py``) plus that of each reward worker process (dapo-rl's; TRL scores in-process); held-out
avg@k before and after.

The floor: under each precision's ratios, the seconds a dapo-rl step would take if the matmuls of its
response tokens (2W FLOPs per generated token, 6W per trained one, W its matmul weights) ran at this
machine's matmul peak (measured before and after that precision's runs) and nothing else took time;
the completion tokens/s ratio over TRL that floor would reach; and the share of the peak, across the
whole step, that a 3x ratio needs. The header names the CPU and its bf16 matmul instructions: the
bf16 peak differs far more between CPUs than the fp32 one (1.01 and 0.42 TFLOP/s on two machines
this project ran on, 0.24 and 0.20 in fp32), so ratios move between machines.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from peak_memory import peak_rss_kib  # beside this script: on sys.path when it runs
from vs_trl_report import render_table, summarize

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SMOKE_SECONDS = 10.0
PRECISIONS = {"both": ("fp32", "bf16"), "fp32": ("fp32",), "bf16": ("bf16",)}
SMOKE_EVAL_PROBLEMS = 40


@dataclass
class BenchSettings:
    seconds: float = 120.0  # wall-clock training budget per system
    eval_k: int = 4  # samples per held-out problem
    eval_problems: int = 0  # held-out problems evaluated (0: the whole eval split)
    prompts_per_step: int = 16
    group_size: int = 8  # G
    max_response_length: int = 64
    overlong_buffer: int = 16  # L_cache of the soft overlong punishment (dapo-rl's default config)
    lr: float = 1.5e-4
    clip_low: float = 0.2
    clip_high: float = 0.28
    seed: int = 0
    precision: str = "bf16"  # "fp32" or "bf16", the same for both systems (see the module docstring)
    # dapo-rl only (Dynamic Sampling): prompts per generation round (TRL's per step) and the round
    # limit per step.
    gen_prompts_per_round: int = 16
    max_gen_rounds: int = 4


# ------------------------------------------------------------------------------- dapo-rl side
def dapo_config(settings: BenchSettings, model_dir: str, output_dir: str) -> Any:
    from dapo.config import builtin_config_path, load_config

    s = settings
    overrides = [
        f"output_dir={output_dir}",
        f"model.path={model_dir}",
        f"rollout.n={s.group_size}",
        f"rollout.max_response_length={s.max_response_length}",
        f"algorithm.clip_ratio_low={s.clip_low}",
        f"algorithm.clip_ratio_high={s.clip_high}",
        "algorithm.kl_coef=0.0",
        "algorithm.dynamic_sampling=true",
        f"algorithm.max_gen_rounds={s.max_gen_rounds}",
        f"algorithm.overlong_buffer_len={s.overlong_buffer}",
        "algorithm.overlong_soft_punishment=true",
        "trainer.total_steps=1000000",  # the wall-clock budget stops training, not the step count
        f"trainer.prompts_per_step={s.prompts_per_step}",
        f"trainer.mini_batch_prompts={s.prompts_per_step}",  # one optimizer update per step, like TRL
        f"trainer.gen_prompts_per_round={s.gen_prompts_per_round}",
        f"trainer.lr={s.lr}",
        "trainer.warmup_steps=0",
        "trainer.lr_schedule=constant",
        "trainer.weight_decay=0.0",
        "trainer.grad_clip=1.0",
        f"trainer.seed={s.seed}",
        "trainer.device=cpu",
        "model.gradient_checkpointing=false",
        f"rollout.native_dtype={'bfloat16' if s.precision == 'bf16' else 'model'}",
        f"trainer.autocast={'bf16' if s.precision == 'bf16' else 'none'}",
        "reward.extractor=answer",
        f"eval.k={s.eval_k}",
        "eval.temperature=1.0",
        "eval.top_p=1.0",
        f"eval.max_problems={s.eval_problems}",
        "eval.every_steps=0",
        "checkpoint.every_steps=0",
        "checkpoint.resume=never",
        "logging.progress=false",
        "logging.tensorboard=false",
    ]
    return load_config([builtin_config_path("default")], overrides=overrides)


def train_dapo(settings: BenchSettings, model_dir: str, work_dir: str) -> dict[str, Any]:
    """Run dapo-rl step by step until the budget is spent; save the final policy to ``<work_dir>/final``."""
    from dapo.trainer import Trainer

    trainer = Trainer(dapo_config(settings, model_dir, str(Path(work_dir) / "run")))
    step_metrics: list[dict[str, float]] = []
    generate_seconds: list[float] = []
    started = last_step_end = time.perf_counter()
    while time.perf_counter() - started < settings.seconds:
        metrics = trainer.step_once().metrics
        # everything but the update (and an old-log-prob pass, none here): prompts, generation,
        # scoring, filtering, advantages, as TRL's timed _generate_and_score_completions
        generate_seconds.append(metrics["time/step"] - metrics.get("time/update", 0.0)
                                - metrics.get("time/old_logprob", 0.0))
        trainer.state.log(trainer.step, metrics)
        # end to end, logging included, as TRL's steps are timed (trl_side.WallClockBudget)
        metrics["time/step"], last_step_end = time.perf_counter() - last_step_end, time.perf_counter()
        step_metrics.append(metrics)
    train_seconds = time.perf_counter() - started
    worker_peak_mib = sum(peak_rss_kib(pid) / 1024 for pid in trainer.scorer.worker_pids)
    trainer.close()
    final_dir = Path(work_dir) / "final"
    trainer.model.save_pretrained(final_dir)
    trainer.tokenizer.save_pretrained(final_dir)
    groups = [m.get("sampling/groups_generated", float(settings.prompts_per_step)) for m in step_metrics]
    # Every generated response, all rounds: groups x G x mean length over generated responses.
    tokens = sum(g * settings.group_size * m.get("rollout/response_length_mean", 0.0) for g, m in zip(groups, step_metrics))
    accs = [m["rollout/acc"] for m in step_metrics if "rollout/acc" in m]
    return {
        "steps": len(step_metrics),
        "step_seconds": [m["time/step"] for m in step_metrics],
        # generation and reward scoring, every round (TRL's side times the same phase)
        "generate_seconds": generate_seconds,
        "train_seconds": train_seconds,
        "completion_tokens": tokens,
        "trained_tokens": sum(m.get("actor/response_tokens", 0.0) for m in step_metrics),
        "worker_peak_rss_mib": worker_peak_mib,
        "groups_generated_per_step": sum(groups) / max(len(groups), 1),
        "groups_dropped_per_step": statistics.fmean(m.get("sampling/groups_discarded", 0.0) for m in step_metrics)
        if step_metrics else 0.0,
        # generated groups without signal (constant outcomes): dropped, never trained on
        "groups_filtered_per_step": statistics.fmean(
            m.get("sampling/filtered_ratio", 0.0) * m.get("sampling/groups_generated", 0.0) for m in step_metrics)
        if step_metrics else 0.0,
        "mixed_groups_per_step": statistics.fmean(m.get("sampling/groups_trained", 0.0) for m in step_metrics)
        if step_metrics else 0.0,
        "train_acc_first": accs[0] if accs else None,
        "train_acc_last": accs[-1] if accs else None,
        "final_model_dir": str(final_dir),
        "matmul_weights_per_token": matmul_weights_per_token(trainer.model),
    }


def matmul_weights_per_token(model: Any) -> int:
    """Weights a token's matmuls multiply by: every 2-D weight but the embedding lookup's, plus the
    output layer (the embedding matrix again where the two are tied)."""
    embedding = model.get_input_embeddings().weight
    matmuls = sum(p.numel() for p in model.parameters() if p.dim() == 2 and p is not embedding)
    return matmuls + model.get_output_embeddings().weight.numel() * model.config.tie_word_embeddings


def evaluate_dir(settings: BenchSettings, model_dir: str, work_dir: str) -> dict[str, Any]:
    """Held-out sampled accuracy of a saved model, by dapo-rl's evaluation (same for every model)."""
    from dapo.config import DataConfig
    from dapo.data import load_problems
    from dapo.trainer import evaluate_model

    # every model is scored by the same evaluation, whatever precision it trained in
    cfg = dapo_config(replace(settings, precision="bf16"), model_dir, str(Path(work_dir) / "eval_run"))
    result: dict[str, Any] = evaluate_model(cfg, progress=False).metrics
    held_out = load_problems(["builtin:arithmetic"], DataConfig(template="none"), split="eval").problems
    distinct = len({p.uid for p in held_out})
    result["problems"] = min(distinct, settings.eval_problems) if settings.eval_problems else distinct
    return result


# ------------------------------------------------------------------------------ subprocesses
def run_worker(role: str, settings: BenchSettings, model_dir: str, work_dir: str) -> None:
    """Body of one subprocess: do ``role``, then write its result and peak RSS to result.json."""
    Path(work_dir).mkdir(parents=True, exist_ok=True)
    if role == "trl":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from trl_side import train_trl

        result = train_trl(asdict(settings), model_dir, work_dir)
    elif role == "dapo":
        result = train_dapo(settings, model_dir, work_dir)
    elif role == "eval":
        result = evaluate_dir(settings, model_dir, work_dir)
    else:
        raise ValueError(f"unknown worker role {role!r}: expected trl, dapo or eval")
    result["peak_rss_mib"] = peak_rss_kib() / 1024 + result.get("worker_peak_rss_mib", 0.0)
    (Path(work_dir) / "result.json").write_text(json.dumps(result, indent=1))


def run_part(role: str, settings: BenchSettings, model_dir: str, work_dir: Path) -> dict[str, Any]:
    """Run one worker in a fresh Python process and return its result."""
    shutil.rmtree(work_dir, ignore_errors=True)
    command = [sys.executable, __file__, "--worker", role, "--settings", json.dumps(asdict(settings)),
               "--model-dir", model_dir, "--work-dir", str(work_dir)]
    print(f"[vs_trl] {role}: {model_dir} -> {work_dir}", flush=True)
    started = time.perf_counter()
    subprocess.run(command, check=True)
    print(f"[vs_trl] {role} done in {time.perf_counter() - started:.0f} s", flush=True)
    return json.loads((work_dir / "result.json").read_text())


def matmul_peak(precision: str) -> float:
    """This machine's matmul peak now, FLOP/s: bench_update.py's square 2048 x 2048 ``torch.mm``,
    best of ten rounds, in float32 or bfloat16, with the benchmark's thread count."""
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_update import matmul_peak as square_matmul_peak

    return square_matmul_peak(torch.bfloat16 if precision == "bf16" else torch.float32, 2048)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="training wall-clock budget per system")
    parser.add_argument("--eval-k", type=int, default=4, help="samples per held-out problem")
    parser.add_argument("--eval-problems", type=int, default=0, help="held-out problems (0: all)")
    parser.add_argument("--lr", type=float, default=BenchSettings.lr,
                        help="learning rate of both systems, constant (the default config's peak; a wall-clock "
                             "budget has no last step for a schedule to decay to)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base-model", default="builtin",
                        help="starting model directory for both systems (default: the built-in base model)")
    parser.add_argument("--precision", choices=sorted(PRECISIONS), default="both",
                        help="run both systems in fp32, in bf16, or both (default); always the same for both systems")
    parser.add_argument("--output", default="runs/vs_trl/results.md", help="markdown table written here")
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs of each system per precision, in alternating order (the ratios' median and range)")
    parser.add_argument("--smoke", action="store_true",
                        help=f"quick check: {SMOKE_SECONDS:.0f} s each, {SMOKE_EVAL_PROBLEMS} held-out problems")
    parser.add_argument("--worker", choices=["trl", "dapo", "eval"], help=argparse.SUPPRESS)
    parser.add_argument("--settings", help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    parser.add_argument("--work-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.eval_k < 1 or args.eval_problems < 0 or args.repeats < 1:
        parser.error("--seconds must be > 0, --eval-k >= 1, --eval-problems >= 0, --repeats >= 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        run_worker(args.worker, BenchSettings(**json.loads(args.settings)), args.model_dir, args.work_dir)
        return
    settings = BenchSettings(seconds=args.seconds, eval_k=args.eval_k, eval_problems=args.eval_problems,
                             lr=args.lr, seed=args.seed)
    if args.smoke:
        settings.seconds, settings.eval_problems = SMOKE_SECONDS, settings.eval_problems or SMOKE_EVAL_PROBLEMS
    if args.base_model == "builtin":
        from dapo.builtin import ensure_base_model

        base_dir = str(ensure_base_model("~/.cache/dapo-rl"))
    elif Path(args.base_model).is_dir():
        base_dir = str(Path(args.base_model).resolve())
    else:
        raise SystemExit(f"--base-model {args.base_model!r} is not a model directory")
    work = Path(args.output).parent / "work"
    before = run_part("eval", settings, base_dir, work / "eval_base")
    rows, peaks = {}, {}
    for precision in PRECISIONS[args.precision]:
        peaks[precision] = matmul_peak(precision)
        run = replace(settings, precision=precision)
        for repeat in range(args.repeats):
            # Each system in a fresh process, the order alternating between repeats (a machine that
            # slows down over time would favour the first); then both final models scored alike.
            tag = f"{precision}_{repeat + 1}"
            results = {}
            for role in ("trl", "dapo") if repeat % 2 == 0 else ("dapo", "trl"):
                results[role] = run_part(role, run, base_dir, work / f"{role}_{tag}")
            trl, dapo = results["trl"], results["dapo"]
            trl_eval = run_part("eval", run, trl["final_model_dir"], work / f"eval_trl_{tag}")
            dapo_eval = run_part("eval", run, dapo["final_model_dir"], work / f"eval_dapo_{tag}")
            suffix = f" #{repeat + 1}" if args.repeats > 1 else ""
            rows[f"TRL {trl['version']} GRPOTrainer ({precision}){suffix}"] = summarize(trl, trl_eval, settings.eval_k)
            rows[f"dapo-rl ({precision}){suffix}"] = summarize(dapo, dapo_eval, settings.eval_k)
        peaks[precision] = max(peaks[precision], matmul_peak(precision))  # before and after: the best counts
    table = render_table(rows, before, settings, int(before["problems"]), peaks)
    print(table)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(table)
    (Path(args.output).with_suffix(".json")).write_text(json.dumps({"settings": asdict(settings), "before": before,
                                                                    "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
