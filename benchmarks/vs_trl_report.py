"""The report of ``vs_trl.py``: each run's row (:func:`summarize`) and the markdown table with the
dapo-rl / TRL ratios per precision and the floor the machine's matmul peak sets (:func:`render_table`).
Pure formatting of the runs' results; ``vs_trl.py`` runs them."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vs_trl import BenchSettings

def summarize(train: dict[str, Any], accuracy: dict[str, float], k: int) -> dict[str, Any]:
    step_seconds = train["step_seconds"]
    return {
        "steps": train["steps"],
        "train_seconds": train["train_seconds"],
        "median_step_s": statistics.median(step_seconds) if step_seconds else float("nan"),
        # per step: generation + scoring, and the rest (the update, mostly); medians
        "median_generate_s": statistics.median(train["generate_seconds"]) if step_seconds else float("nan"),
        "median_update_s": statistics.median(s - g for s, g in zip(step_seconds, train["generate_seconds"]))
        if step_seconds else float("nan"),
        "steps_per_s": train["steps"] / max(sum(step_seconds), 1e-9),
        "tokens_per_s": train["completion_tokens"] / max(sum(step_seconds), 1e-9),
        "trained_tokens_per_s": train["trained_tokens"] / max(sum(step_seconds), 1e-9),
        # the rollout side alone: tokens per second of the generate+score phase
        "generating_tokens_per_s": train["completion_tokens"] / max(sum(train["generate_seconds"]), 1e-9),
        "groups_generated": train["groups_generated_per_step"],
        "groups_filtered": train.get("groups_filtered_per_step", 0.0),
        "groups_dropped": train["groups_dropped_per_step"],
        "groups_mixed": train["mixed_groups_per_step"],
        "peak_rss_mib": train["peak_rss_mib"],
        "acc_after": accuracy.get(f"eval/avg@{k}", float("nan")),
        "pass_after": accuracy.get(f"eval/pass@{k}", float("nan")),
        "matmul_flops_per_step": _response_matmul_flops(train) / max(train["steps"], 1),
        "matmul_weights_m": train.get("matmul_weights_per_token", 0) / 1e6,
    }


def _response_matmul_flops(train: dict[str, Any]) -> float:
    """The matmul FLOPs of a dapo-rl run's response tokens: 2W for each generated token (its
    forward), 6W for each trained one (forward and backward), W = matmul_weights_per_token. Prompts,
    attention, elementwise ops and the optimizer are left out, so the time it takes at the matmul peak
    is a lower bound on the step's (TRL's rows: none recorded)."""
    weights = train.get("matmul_weights_per_token", 0)
    return 2 * weights * train["completion_tokens"] + 6 * weights * train["trained_tokens"]


# trained tokens/s first: the equal-work ratio (16 groups x G trained per update in both systems);
# completion tokens/s also counts the groups Dynamic Sampling generates and discards (TRL has none)
RATIOS = (("trained_tokens_per_s", "trained tokens/s (equal work)"),
          ("tokens_per_s", "completion tokens/s (every token generated, dapo-rl's discarded groups too: not equal work)"),
          ("steps_per_s", "steps/s"), ("generating_tokens_per_s", "tokens/s while generating"))


def render_table(rows: dict[str, dict[str, Any]], before: dict[str, float], settings: BenchSettings,
                 eval_problems: int, peaks: dict[str, float] | None = None) -> str:
    """The table, then per precision the dapo-rl / TRL ratios (median and range over repeats) and,
    given this machine's matmul ``peaks`` (FLOP/s by precision), what they bound (:func:`_floor_line`)."""
    peaks = peaks or {}
    k = settings.eval_k
    acc_before = before.get(f"eval/avg@{k}", float("nan"))
    lines = [
        f"## dapo-rl vs TRL GRPOTrainer: {settings.seconds:.0f} s of training each, CPU, at equal precision",
        "",
        f"Built-in base model and arithmetic task; G={settings.group_size}, {settings.prompts_per_step} "
        f"prompts/step, 1 update/step, max {settings.max_response_length} new tokens, lr {settings.lr:g} constant, "
        f"clip {settings.clip_low}/{settings.clip_high}, no KL, token-level loss, soft overlong punishment "
        f"(buffer {settings.overlong_buffer}), gradient checkpointing off, {_cpu()}, torch threads {_threads()}. "
        f"Held-out: avg@{k} over {eval_problems} problems, temperature 1, top-p 1, same seed and the same "
        "(bf16) evaluation for every model. fp32 rows: float32 generation and training in both systems; bf16 "
        "rows: bfloat16 generation and training over float32 master weights in both (TRL's `bf16=True`).",
        "",
        f"| system | steps | train s | steps/s | s/step (median) | generate+score s | update s | completion tok/s "
        f"| trained tok/s | tok/s while generating | groups generated/step | filtered (no signal)/step "
        f"| surplus dropped/step | mixed groups trained/step | process RSS MiB | held-out avg@{k} | pass@{k} |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        f"| base model (before) | - | - | - | - | - | - | - | - | - | - | - | - | - | - | {acc_before:.1%} "
        f"| {before.get(f'eval/pass@{k}', float('nan')):.1%} |",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['steps']} | {r['train_seconds']:.0f} | {r['steps_per_s']:.2f} | {r['median_step_s']:.2f} | "
            f"{r['median_generate_s']:.2f} | {r['median_update_s']:.2f} | {r['tokens_per_s']:.0f} | "
            f"{r['trained_tokens_per_s']:.0f} | {r['generating_tokens_per_s']:.0f} | {r['groups_generated']:.1f} | "
            f"{r['groups_filtered']:.1f} | {r['groups_dropped']:.1f} | {r['groups_mixed']:.1f} | "
            f"{r['peak_rss_mib']:.0f} | {r['acc_after']:.1%} | {r['pass_after']:.1%} |"
        )
    lines.append("")
    for precision in ("fp32", "bf16"):
        pairs = _pairs(rows, precision)
        if not pairs:
            continue
        ratios = [f"{_spread([d[key] / max(t[key], 1e-9) for t, d in pairs])} {label}" for key, label in RATIOS]
        accuracy = "; ".join(f"dapo-rl {d['acc_after']:.1%} vs TRL {t['acc_after']:.1%}" for t, d in pairs)
        lines.append(f"{precision}, dapo-rl / TRL ({len(pairs)} run(s) each{', median [range]' if len(pairs) > 1 else ''}): "
                     f"{'; '.join(ratios)}. Held-out avg@{k} after equal wall time: {accuracy} (base {acc_before:.1%}).")
        if precision in peaks:
            lines.append(_floor_line(pairs, precision, peaks[precision]))
    lines += [
        "",
        "Columns: steps/s is steps / training seconds; generate+score (per-step median) is everything but the update: "
        "prompts, generation, scoring, filtering and advantages (TRL: its timed _generate_and_score_completions); "
        "update is the rest of the step (forward, backward, optimizer step, logging), the same work in both "
        "systems: 16 groups x G responses and the same loss (dapo-rl forwards each group's prompt once, "
        "trainer.shared_prompt of its default config; TRL once per response).",
        "completion tok/s counts every token generated, including dapo-rl's groups without signal, which Dynamic "
        "Sampling filters out (filtered/step) and replaces by another round, and the surplus it drops; trained "
        "tok/s counts the completions of the trained batches, the equal-work figure; tokens/s while generating is "
        "completion tokens / generate+score seconds, the rollout side alone. TRL trains on every group, its "
        "groups without signal too (mixed = 16 x (1 - frac_reward_zero_std)).",
        "TRL's bf16 generation runs its forward under accelerate's autocast over the float32 weights (recast each "
        "decode step, float32 residual stream), as TRL ships it; dapo-rl decodes a bf16 copy of the weights. "
        "Process RSS is the peak of the training process (and dapo-rl's reward workers), libraries included: "
        "the model and AdamW state are about 55 MB of it.",
        "Accuracy also differs by algorithm, not only by steps: dapo-rl takes pi_old from its rollout log-probs "
        "(its bf16 engine in the bf16 rows), adds dual-clip (c = 10) and trains on surplus groups one step stale; "
        "TRL takes pi_old from the update's own forward (ratio 1).",
        "",
    ]
    return "\n".join(lines)


def _floor_line(pairs: list[tuple[dict[str, Any], dict[str, Any]]], precision: str, peak: float) -> str:
    """What the machine's matmul peak allows: dapo-rl's response-token matmuls at the peak (a lower
    bound on its step time: :func:`_response_matmul_flops`), the completion tokens/s ratio that floor
    would reach over TRL's measured rate, and the share of the peak a 3x ratio needs across the step."""
    floors, measured, bounds, needed = [], [], [], []
    for trl, dapo in pairs:
        floor = dapo["matmul_flops_per_step"] / peak  # seconds a step at the peak
        tokens_per_step = dapo["tokens_per_s"] / max(dapo["steps_per_s"], 1e-9)
        floors.append(floor)
        measured.append(floor * dapo["steps_per_s"])  # the share of the peak the measured steps ran at
        bounds.append(tokens_per_step / floor / max(trl["tokens_per_s"], 1e-9))
        needed.append(floor / (tokens_per_step / (3 * trl["tokens_per_s"])))
    return (f"{precision} at this machine's {precision} matmul peak ({peak / 1e12:.3f} TFLOP/s): the matmuls of "
            f"dapo-rl's response tokens alone (2W FLOPs per generated token, 6W per trained one, W = "
            f"{pairs[0][1].get('matmul_weights_m', 0):.2f}M matmul weights) take {_spread(floors, '.2f', '')} s a step, "
            f"{_spread(measured, '.0%', '')} of its measured steps' time; at that floor, with nothing else to compute, "
            f"it would generate {_spread(bounds)} TRL's completion tokens/s; 3x needs "
            f"{_spread(needed, '.0%', '')} of the peak across the whole step.")


def _pairs(rows: dict[str, dict[str, Any]], precision: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(TRL row, dapo-rl row) of each repeat at ``precision``, in repeat order."""
    trl = [row for name, row in rows.items() if name.startswith("TRL") and f"({precision})" in name]
    dapo = [row for name, row in rows.items() if name.startswith("dapo-rl") and f"({precision})" in name]
    return list(zip(trl, dapo))


def _spread(values: list[float], spec: str = ".2f", unit: str = "x") -> str:
    """The median of ``values`` in format ``spec`` and ``unit``, and their range when several."""
    median = f"{format(statistics.median(values), spec)}{unit}"
    return median if len(values) == 1 else f"{median} [{format(min(values), spec)}-{format(max(values), spec)}]"


def _cpu() -> str:
    """The CPU's model name and the matmul instructions that set its bf16 peak (AMX, AVX-512 BF16)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "CPU unknown"
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "CPU")
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    units = [unit for flag, unit in (("amx_bf16", "AMX"), ("avx512_bf16", "AVX-512 BF16")) if flag in flags]
    from dapo.rollout.cpu_kernels import cpu_decode_kernels, cpu_kernel_library

    decode = "on" if cpu_decode_kernels() else "off"
    # (float32 arithmetic on bf16 values under bf16: they round less than TRL's eager attention)
    training = "on" if cpu_kernel_library() is not None else "off"
    return (f"{name} ({', '.join(units) or 'no bf16 matmul instructions'}; dapo-rl's fused bf16 decode kernels "
            f"{decode}, its fused training kernels {training}: attention, RMSNorm, SwiGLU and RoPE in float32 "
            "arithmetic, bf16 values read exactly)")


def _threads() -> int:
    import torch

    return torch.get_num_threads()
