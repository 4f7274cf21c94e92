"""dapo-rl's Triton kernels (:mod:`dapo.algo.logprobs_triton`, :mod:`dapo.trainer.layer_kernels_triton`)
are imported on first use on a GPU (Triton takes about a second to import; a CPU build of torch
has none) and tried once per device before a run relies on them: Triton builds its launcher with
the system's C compiler at the first launch, not at import, which a machine without one fails.
Where they do not launch, one warning says so and torch's ops compute the same."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from types import ModuleType

import torch


def import_kernels(module: str) -> ModuleType | None:
    """The kernels' module, or None where Triton does not import."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def kernels_launch(probe: Callable[[], object], kernels: str, device: torch.device, instead: str, flag: str) -> bool:
    """Whether ``probe`` (a launch of the kernels on ``device``) runs; where it raises, a warning
    naming the ``kernels``, what computes ``instead`` and the ``flag`` that skips the attempt. Out
    of memory is raised: it says nothing of whether they launch."""
    try:
        probe()
    except Exception as error:  # whatever the toolchain raises: torch's ops compute the same
        # but a full GPU (torch's OutOfMemoryError, or Triton's "Triton Error [CUDA]: out of memory") is
        # no toolchain's failure: a False cached for the device would leave the kernels off for good
        if isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error).lower():
            raise
        detail = (str(error).strip().splitlines() or [""])[0][:300]
        warnings.warn(f"the {kernels} failed to launch on {device} ({type(error).__name__}: {detail}): {instead} "
                      f"({flag}=false skips the attempt)", stacklevel=3)
        return False
    return True
