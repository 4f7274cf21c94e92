"""Named registries of the algorithm's pluggable parts, resolved by config name.

``algorithm.advantage``, ``algorithm.policy_loss`` and ``algorithm.loss_agg_mode`` name entries of
:data:`~dapo.algo.advantages.ADVANTAGE_ESTIMATORS`, :data:`~dapo.algo.policy_loss.POLICY_LOSSES`
and :data:`~dapo.algo.aggregation.LOSS_AGG_MODES`; config validation asks these registries, so a
user's entry, registered by a plugin file listed in ``algorithm.plugins``, is selectable by name
(docs/extending.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(dict[str, T], Generic[T]):
    """A name -> implementation map that refuses duplicates and names its entries in errors."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@REGISTRY.register("name")`` adds the decorated object under ``name``."""

        def decorator(obj: T) -> T:
            if name in self:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self[name] = obj
            return obj

        return decorator

    def lookup(self, name: str) -> T:
        """The entry called ``name``, or ValueError listing the registered names."""
        if name not in self:
            raise ValueError(f"unknown {self.kind} {name!r}; registered: {sorted(self)}")
        return self[name]
