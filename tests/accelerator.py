"""The device the accelerator tests (``test_*_accelerator.py``) run on.

``DAPO_TEST_DEVICE`` names it (default ``cuda``); where it is absent those tests are skipped, so
the default suite passes on CPU-only machines. ``DAPO_TEST_DEVICE=cpu`` runs the same checks on
the CPU (a check of the tests themselves); ``mps`` and ``xpu`` work where torch has them.

    python -m pytest tests -k accelerator              # on a machine with a CUDA GPU
"""

from __future__ import annotations

import os

import pytest
import torch

DEVICE = torch.device(os.environ.get("DAPO_TEST_DEVICE", "cuda"))


def _available(device: torch.device) -> bool:
    if device.type == "cpu":
        return True
    backend = getattr(torch, device.type, None)
    return backend is not None and backend.is_available()


needs_accelerator = pytest.mark.skipif(not _available(DEVICE), reason=f"needs {DEVICE} (set DAPO_TEST_DEVICE)")
