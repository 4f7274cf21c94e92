"""The error every config section raises and the two checks their ``__post_init__`` make.

Its own module so that each section module (``model_data``, ``generation``, ``training``, ``run``)
and the top-level :class:`~dapo.config.schema.DAPOConfig` share one :class:`ConfigError`, which
the CLI prints as one line naming the field and the reason.
"""

from __future__ import annotations

from typing import Any

from dapo.errors import UserError


class ConfigError(UserError, ValueError):
    """A configuration value is invalid; the message names the field and the reason."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def one_of(name: str, value: Any, allowed: tuple[Any, ...]) -> None:
    check(value in allowed, f"{name}={value!r} is not one of {list(allowed)}")
