"""trainer.keep_freed_memory: large tensors reuse freed memory instead of page-faulting in afresh."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from dapo.trainer import Trainer, loop
from tests.trainer.conftest import tiny_config

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


@pytest.mark.parametrize(("overrides", "told"), [((), 1), (("trainer.keep_freed_memory=false",), 0)])
def test_the_trainer_keeps_freed_memory_unless_switched_off(monkeypatch, tiny_model_dir, reward_file, tmp_path,
                                                            overrides, told) -> None:
    calls = []
    monkeypatch.setattr(loop, "keep_freed_memory", lambda: calls.append(True) or True)
    Trainer(tiny_config(tiny_model_dir, tmp_path / "run", reward_file, *overrides)).close()
    assert len(calls) == told
