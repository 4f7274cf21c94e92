"""What this machine's CPU computes fast: whether its bf16 matmuls beat float32, and which
settings of a run would compute in bf16 on it.

Torch multiplies bf16 matrices on the CPU through oneDNN where oneDNN supports bf16 there: x86
with AVX-512 (Skylake-SP and later), Arm with its BF16 extension. Only bf16 dot-product
instructions make that faster than float32: on x86, AVX512-BF16 or AMX (AMD Zen 4, Intel Cooper
Lake, Sapphire Rapids and later). Without them oneDNN converts to float32 and back; without
oneDNN's bf16 at all (an x86 CPU with AVX2 alone, most Intel laptops; an Arm CPU without BF16)
torch falls back to a generic bf16 GEMM. Measured on this project's AMD EPYC (AVX512-BF16) with
oneDNN held below it (``ONEDNN_MAX_CPU_ISA``), a 512x256x768 matmul and a step of the embedded
default (bf16 decode and autocast, the bf16 decode kernels off, as such a CPU has none; ad-hoc
runs of ``dapo train trainer.total_steps=4`` or ``5``, median of the steps after the first):

- held to AVX512_CORE (AVX-512 without BF16): 171 GFLOP/s in bf16 against 208 in float32; a step
  1.91 s against 1.59 s;
- held to AVX2: 36 GFLOP/s against 216; a step 25.7 s against 1.6 s.
"""

from __future__ import annotations

import functools
import os
import platform
import warnings

from dapo.config import DAPOConfig

# what bf16 cost there, as the messages that switch or warn say it (measured as the docstring says)
BF16_FALLBACK_SEEN = ("a step of the embedded default, 1.6 s in float32, took 1.9 s in bf16 on AVX-512 without BF16 "
                      "and 25.7 s on AVX2 alone")


@functools.cache
def cpu_computes_bf16_natively() -> bool:
    """Whether this CPU multiplies bf16 matrices faster than float32: oneDNN runs bf16 here, and
    on x86 with bf16 dot-product instructions (AVX512-BF16 or AMX)."""
    import torch

    if not (torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()):
        return False
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return True  # (oneDNN's bf16 on Arm is its BF16 extension's)
    return any(getattr(torch.cpu, probe, lambda: False)() for probe in ("_is_avx512_bf16_supported",
                                                                        "_is_amx_tile_supported"))


def runs_on_this_cpu(cfg: DAPOConfig) -> bool:
    """Whether the run computes on this machine's CPU: trainer.device cpu, or auto without CUDA,
    and not on the policy ranks of a Ray cluster elsewhere."""
    if cfg.resources.world_size > 1 and cfg.resources.ray_address is not None:
        return False
    if cfg.trainer.device == "auto":
        import torch

        return not torch.cuda.is_available()
    return cfg.trainer.device == "cpu"


def cpu_bf16_settings(cfg: DAPOConfig) -> dict[str, str]:
    """The settings that compute in bf16 on the CPU, each with its float32 value (the vLLM
    engine's CPU backend has its own kernels)."""
    t, r = cfg.trainer, cfg.rollout
    return {setting: float32 for setting, float32, bf16 in (
        (f"trainer.autocast={t.autocast}", "trainer.autocast=none", t.autocast == "bf16"),
        (f"trainer.param_dtype={t.param_dtype}", "trainer.param_dtype=none", t.param_dtype == "bf16"),
        (f"model.dtype={cfg.model.dtype}", "model.dtype=float32", cfg.model.dtype == "bfloat16"),
        (f"rollout.native_dtype={r.native_dtype}", "rollout.native_dtype=float32",
         r.engine == "native" and r.native_dtype == "bfloat16"),
    ) if bf16}


def warn_about_cpu_bf16(cfg: DAPOConfig) -> None:
    """bf16 on a CPU without bf16 dot-product instructions: slower than float32, where bf16 was
    asked for to go faster."""
    if not (settings := cpu_bf16_settings(cfg)) or not runs_on_this_cpu(cfg) or cpu_computes_bf16_natively():
        return
    warnings.warn(f"{', '.join(settings)}: bf16 compute, but this CPU has no bf16 dot-product instructions "
                  "(AVX512-BF16, AMX, Arm BF16), so its bf16 matmuls are slower than float32 ones, several times "
                  f"so without AVX-512 ({BF16_FALLBACK_SEEN}); float32 is faster here: {' '.join(settings.values())}",
                  stacklevel=1)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: a container's or a SLURM job's share of a
    node, not the node's every core)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity API (macOS)
        return os.cpu_count() or 1
