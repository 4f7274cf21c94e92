"""trainer.keep_freed_memory: large tensors reuse freed memory instead of page-faulting in afresh."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from dapo.config import load_config

# Allocate a 64 MiB tensor, write it and free it, a few times (as training steps do); count the
# page faults of the last time.
_FAULTS_OF_A_REPEATED_TENSOR = """
import resource, sys, torch
from dapo.trainer.allocator import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
for _ in range(4):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.empty(16 * 2**20).fill_(1.0)  # freed at once
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(faults)
"""


def _faults(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", _FAULTS_OF_A_REPEATED_TENSOR, mode],
                          capture_output=True, text=True, timeout=120, check=True)
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_a_freed_large_tensor_is_reused_without_page_faults() -> None:
    default, kept = _faults("default"), _faults("keep")
    # glibc's default unmaps the 64 MiB block and maps a fresh one: a fault per page (16384 at 4
    # KiB; fewer with transparent huge pages), where the kept block is written in place
    assert kept < 200
    assert default > 4 * kept


def test_keep_freed_memory_is_on_by_default_and_can_be_switched_off() -> None:
    assert load_config([], overrides=[]).trainer.keep_freed_memory is True
    assert load_config([], overrides=["trainer.keep_freed_memory=false"]).trainer.keep_freed_memory is False
