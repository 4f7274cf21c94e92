"""How dapo-rl's own warnings read on a terminal: ``dapo COMMAND: warning: ...``, one line (they speak
to the user, not of a source line), where a library's keep Python's format, which names where they
came from. The CLI installs it; the policy ranks, in their own processes, install it for the command
the driver runs (:func:`dapo.trainer.ray_rank.rank_warnings`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PACKAGE_DIR = str(Path(__file__).resolve().parent)


def is_dapo_source(filename: str) -> bool:
    """Whether a warning raised at ``filename`` is dapo-rl's own."""
    return str(Path(filename).resolve()).startswith(PACKAGE_DIR)


def said_again(count: int) -> bool:
    """Whether the ``count``-th occurrence of something said in full the first time is said again,
    in one line: the 10th, 100th, 1000th, ... (a condition met every step is not said every step)."""
    return count > 1 and count == 10 ** (len(str(count)) - 1)


def warning_format(command: str, default: Any) -> Any:
    """A ``warnings.formatwarning`` that writes dapo-rl's warnings as ``dapo COMMAND: warning: ...``
    and hands others to ``default``; it keeps ``command`` as ``dapo_command`` (the ranks read it)."""

    def format_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                       line: str | None = None) -> str:
        if is_dapo_source(filename):
            return f"dapo {command}: warning: {message}\n"
        return default(message, category, filename, lineno, line)

    format_warning.dapo_command = command  # type: ignore[attr-defined]
    return format_warning
