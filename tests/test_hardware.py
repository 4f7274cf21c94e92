"""Whether this CPU's bf16 matmuls are native follows what oneDNN can run here: a CPU held to
AVX2 (most Intel laptops) runs torch's generic bf16 GEMM, several times slower than float32."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = "from dapo.hardware import cpu_computes_bf16_natively as f; print(f())"


def _flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return set(next((line for line in text.splitlines() if line.startswith("flags")), "").partition(":")[2].split())


def _probe(**env: str) -> str:
    done = subprocess.run([sys.executable, "-c", PROBE], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=300, check=True)
    return done.stdout.strip()


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="oneDNN's x86 ISA cap")
def test_a_cpu_held_to_avx2_has_no_native_bf16_matmuls():
    assert _probe(ONEDNN_MAX_CPU_ISA="AVX2") == "False"
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= _flags():  # oneDNN's bf16 needs avx512_core at least
        assert _probe() == "True"
