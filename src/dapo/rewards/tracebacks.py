"""A reward function's traceback as its author reads it: without this package's frames around the call."""

from __future__ import annotations

from dapo.warning_format import is_dapo_source


def without_own_frames(traceback_text: str) -> str:
    """A function's traceback without dapo-rl's frames around the call (the scoring worker's, the
    verl/TRL adapters': ``File ".../dapo/..."`` and their source lines): the user's code and the error."""
    kept, skipping = [], False
    for line in traceback_text.splitlines():
        if line.startswith('  File "'):
            skipping = is_dapo_source(line[len('  File "'):].split('"', 1)[0])
        elif not line.startswith("    "):
            skipping = False
        if not skipping:
            kept.append(line)
    return "\n".join(kept)
