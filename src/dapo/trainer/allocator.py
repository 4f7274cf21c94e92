"""Freed memory kept for reuse in CPU processes (trainer.keep_freed_memory).

glibc's malloc serves a request above its mmap threshold (128 KiB, rising with the blocks freed
to at most 32 MiB) with a fresh mapping from the OS and unmaps it on free, so every page of the
next such tensor faults in again, zero-filled by the kernel. A training step on CPU allocates
such tensors by the hundred (logits and probabilities over a 152k vocabulary, the decode
weights' bf16 copies and oneDNN-packed layouts at every weight change), and on this project's 2-core
VM the faults cost more than the arithmetic (docs/benchmarks.md, Generation speed: ``bench_rollout.py``
with and without ``--glibc-default-allocator``). Two ``mallopt`` settings keep the memory: large
blocks come from the heap (M_MMAP_MAX = 0) and freed heap memory stays mapped unless 2 GiB lie
free at its top (M_TRIM_THRESHOLD). The process's resident memory then stays near its peak, as
PyTorch's CUDA caching allocator keeps GPU memory. The same for any process, from outside:
``MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=2147483647``, or jemalloc/tcmalloc by LD_PRELOAD.
"""

from __future__ import annotations

import ctypes
import platform

import torch

# <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_LARGEST_TRIM_THRESHOLD = 2**31 - 1  # mallopt takes a C int


def keep_freed_memory() -> bool:
    """Tell this process's glibc malloc to keep freed memory for reuse; whether it was told
    (False where the C library is not glibc, e.g. macOS or musl: nothing changes there)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, _LARGEST_TRIM_THRESHOLD))


def apply_process_settings(num_threads: int, keep_freed: bool) -> None:
    """trainer.num_threads (torch's intra-op threads; 0: torch's default, every core) and
    trainer.keep_freed_memory (:func:`keep_freed_memory`) in this process: the trainer's, a policy
    rank's (its threads those Ray reserved for it when num_threads is 0) or ``dapo eval``'s."""
    if num_threads > 0:
        torch.set_num_threads(num_threads)
    if keep_freed:
        keep_freed_memory()
