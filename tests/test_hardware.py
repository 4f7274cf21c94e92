"""Whether this CPU multiplies bf16 faster than float32 follows what oneDNN can run here and the
CPU's bf16 dot-product instructions: held to AVX2 (most Intel laptops), torch runs a generic bf16
GEMM, 16x slower per step of the embedded default; AVX-512 without BF16 converts to float32."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest
import torch

from dapo import hardware
from dapo.rollout.cpu_kernels import _cpu_flags

PROBE = "from dapo.hardware import cpu_computes_bf16_natively as f; print(f())"
X86 = platform.machine().lower() in ("x86_64", "amd64")


def _probe(**env: str) -> str:
    done = subprocess.run([sys.executable, "-c", PROBE], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=300, check=True)
    return done.stdout.strip()


@pytest.mark.skipif(not X86, reason="oneDNN's x86 ISA cap")
def test_a_cpu_held_to_avx2_has_no_native_bf16_matmuls():
    assert _probe(ONEDNN_MAX_CPU_ISA="AVX2") == "False"
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16"} <= _cpu_flags():
        assert _probe() == "True"


@pytest.mark.skipif(not X86 or not torch.ops.mkldnn._is_mkldnn_bf16_supported(), reason="oneDNN's bf16 on x86")
def test_avx512_without_bf16_dot_products_is_not_native(monkeypatch):
    """Skylake-SP to Ice Lake: oneDNN runs bf16 by converting to float32, slower than float32."""
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    hardware.cpu_computes_bf16_natively.cache_clear()
    try:
        assert not hardware.cpu_computes_bf16_natively()
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)  # Sapphire Rapids' AMX
        hardware.cpu_computes_bf16_natively.cache_clear()
        assert hardware.cpu_computes_bf16_natively()
    finally:
        hardware.cpu_computes_bf16_natively.cache_clear()
