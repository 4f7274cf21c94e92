"""What the tests of dapo-rl's Triton kernels share: running a check in Triton's interpreter on
the CPU (TRITON_INTERPRET=1, set before Triton compiles anything, so in a fresh process), and
checking that kernels which fail to launch leave torch's path with one warning."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import warnings
from collections.abc import Callable

import pytest
import torch

needs_triton = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")

# what a machine without a C compiler raises at Triton's first launch (not at import)
NO_COMPILER = RuntimeError("Failed to find C compiler. Please specify via CC environment variable.")


def run_in_interpreter(script: str, timeout: float) -> str:
    """``script``'s standard output, run by a fresh Python in Triton's interpreter; a failure
    fails the test with the end of its standard error."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def assert_warns_once_and_declines(launches: Callable[[torch.device], bool]) -> None:
    """``launches`` (a cached per-device launch check whose kernels raise NO_COMPILER) answers
    False with a warning naming the error, and the second time the same answer, silently."""
    launches.cache_clear()
    try:
        with pytest.warns(UserWarning, match=r"failed to launch on cpu \(RuntimeError: Failed to find C compiler"):
            assert not launches(torch.device("cpu"))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert not launches(torch.device("cpu"))  # said once: the answer is kept
    finally:
        launches.cache_clear()
