"""A reward function's traceback as its author reads it: without this package's frames around the call."""

from __future__ import annotations

from pathlib import Path

_OWN_CODE = str(Path(__file__).parent)  # dapo/rewards: the worker's and the peer adapters' frames


def without_own_frames(traceback_text: str) -> str:
    """A function's traceback without the frames of this package's worker and adapters around
    the call (``File ".../dapo/rewards/..."`` and their source lines): the user's code and the error."""
    kept, skipping = [], False
    for line in traceback_text.splitlines():
        if line.startswith('  File "'):
            skipping = line[len('  File "'):].startswith(_OWN_CODE)
        elif not line.startswith("    "):
            skipping = False
        if not skipping:
            kept.append(line)
    return "\n".join(kept)
