"""The error every config section raises and the three checks their ``__post_init__`` make.

Its own module so that each section module (``model_data``, ``generation``, ``training``, ``run``)
and the top-level :class:`~dapo.config.schema.DAPOConfig` share one :class:`ConfigError`, which
the CLI prints as one line naming the field and the reason.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from dapo.errors import UserError


class ConfigError(UserError, ValueError):
    """A configuration value is invalid; the message names the field and the reason."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def one_of(name: str, value: Any, allowed: tuple[Any, ...]) -> None:
    check(value in allowed, f"{name}={value!r} is not one of {list(allowed)}")


def finite_numbers(section: Any, name: str) -> None:
    """Every float field of the dataclass ``section`` (config section ``name``) finite: a YAML or
    ``key=value`` value is refused as it is read (:mod:`dapo.config.coerce`), and one given in
    Python is here (``overlong_penalty_factor=inf`` made every short response's reward 0 x inf, NaN)."""
    for field in dataclasses.fields(section):
        value = getattr(section, field.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{name}.{field.name}={value!r}: must be a finite number")
