"""The end of a test rank started by ``torch.distributed.run`` (the gloo workers under tests/)."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import torch.distributed as dist


def end_rank() -> NoReturn:
    """Wait for every rank, tear the process group down, and end this process without
    interpreter finalization.

    Why not a plain return: gloo's run-loop threads free finished work on their own, and a
    barrier's work holds the collectives before it, whose tensors have Python owners. When the
    interpreter is finalizing by then, taking the GIL ends that thread inside a noexcept
    destructor: ``terminate called without an active exception``, SIGABRT, and the rank fails
    after its work is done (torch 2.13, gdb backtrace ``AsyncBarrierWork::~AsyncBarrierWork`` in
    ``ProcessGroupGloo::runLoop`` against ``Py_FinalizeEx``; about 1 run in 20 on 2 busy cores).
    Every result a rank writes is closed before this is called."""
    dist.barrier()  # no rank tears its connections down while another still uses them
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
