"""What this machine's CPU computes fast: whether its bf16 matmuls run natively, and which
settings of a run would compute in bf16 on it.

Torch multiplies bf16 matrices on the CPU through oneDNN where oneDNN supports bf16 there (x86
with AVX-512, fastest with AVX512-BF16 or AMX; Arm with its BF16 extension). Elsewhere (an x86 laptop or desktop with AVX2 alone, most Intel Core CPUs; an Arm CPU
without BF16) it falls back to a generic bf16 GEMM. On this project's AMD EPYC, with oneDNN held
to AVX2 (``ONEDNN_MAX_CPU_ISA=AVX2``), a 512x256x768 bf16 matmul ran at 36 GFLOP/s against 216 in
float32, and a step of the embedded default (bf16 decode and bf16 autocast) took 25.7 s against
1.6 s in float32 (an ad-hoc run of ``dapo train trainer.total_steps=4``, median of steps 2-4).
"""

from __future__ import annotations

import functools
import warnings

from dapo.config import DAPOConfig

# what the fallback cost, as the messages that switch or warn say it (measured as the docstring says)
BF16_FALLBACK_SEEN = "the embedded default on a CPU held to AVX2: 25.7 s a step against 1.6 s in float32"


@functools.cache
def cpu_computes_bf16_natively() -> bool:
    """Whether torch's bf16 matmuls on this CPU run on oneDNN (not a generic fallback, several
    times slower than float32)."""
    import torch

    return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())


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
    """bf16 on a CPU whose bf16 matmuls are not native: several times slower than float32, where
    bf16 was asked for to go faster."""
    if not (settings := cpu_bf16_settings(cfg)) or not runs_on_this_cpu(cfg) or cpu_computes_bf16_natively():
        return
    warnings.warn(f"{', '.join(settings)}: bf16 compute, but this CPU has no native bf16 matmuls (oneDNN's: "
                  "AVX-512 or Arm BF16), so torch falls back to a generic bf16 GEMM, several times "
                  f"slower than float32 ({BF16_FALLBACK_SEEN}); float32 is faster here: {' '.join(settings.values())}",
                  stacklevel=1)
