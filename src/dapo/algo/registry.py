"""Named registries of the algorithm's pluggable parts, resolved by config name.

``algorithm.advantage``, ``algorithm.policy_loss`` and ``algorithm.loss_agg_mode`` name entries of
:data:`~dapo.algo.advantages.ADVANTAGE_ESTIMATORS`, :data:`~dapo.algo.policy_loss.POLICY_LOSSES`
and :data:`~dapo.algo.aggregation.LOSS_AGG_MODES`; config validation asks these registries, so a
user's entry, registered by a plugin file listed in ``algorithm.plugins``, is selectable by name
(docs/extending.md).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from dapo.errors import UserError

T = TypeVar("T")


class PluginError(UserError, ValueError):
    """A registered estimator, loss or aggregation mode that broke its contract (a result of the
    wrong type or shape, a signature the trainer cannot call): the message names it and its file."""


def defined_at(obj: Any) -> str:
    """``file:line`` of a registered function (its module's file, or name, when it has no source)."""
    try:
        return f"{inspect.getsourcefile(obj)}:{inspect.getsourcelines(obj)[1]}"
    except (TypeError, OSError):
        module = getattr(obj, "__module__", None)
        return getattr(sys.modules.get(module or ""), "__file__", None) or module or "unknown file"


def passed_arguments(caller: Callable[..., Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What ``caller`` passes a registry's entry, (positional argument names, keyword argument
    names), read off its signature after the entry's name: each registry has one function that
    calls its entries (:func:`~dapo.algo.advantages.compute_advantages`,
    :func:`~dapo.algo.policy_loss.call_policy_loss`,
    :func:`~dapo.algo.aggregation.call_loss_aggregation`), so that signature is the one list, which
    the config's check of a plugin's signature and docs/extending.md's table (its tests compare) read."""
    parameters = list(inspect.signature(caller).parameters.values())[1:]
    return (tuple(p.name for p in parameters if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD),
            tuple(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY))


def describe(obj: Any) -> str:
    """``name (file:line)`` of a registered function, for messages that point at its definition."""
    return f"{getattr(obj, '__qualname__', None) or type(obj).__name__} ({defined_at(obj)})"


class Registry(dict[str, T], Generic[T]):
    """A name -> implementation map that refuses duplicates and names its entries in errors."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@REGISTRY.register("name")`` adds the decorated object under ``name``."""
        if not isinstance(name, str) or not name:
            # @register_advantage without ("name") would bind the function's name to the decorator
            # and register nothing: the config's name would then be "unknown" with the plugin listed
            got = describe(name) if callable(name) else repr(name)
            raise TypeError(f"{self.kind} registration needs a non-empty name, as in @register(\"my_name\") "
                            f"(with the parentheses and the name): got {got}")

        def decorator(obj: T) -> T:
            if name in self:
                raise ValueError(f"{self.kind} {name!r} is already registered{self._by(self[name], obj)}")
            self[name] = obj
            return obj

        return decorator

    def _by(self, existing: Any, new: Any) -> str:
        """Where the entry a duplicate collides with was defined; when both come from one file, why
        it ran twice (imported under two module names: listed in algorithm.plugins as a file and
        also imported as a module, by ``import`` in another plugin or as a module name)."""
        said = f" by {describe(existing)}"
        try:
            same_file = inspect.getsourcefile(existing) == inspect.getsourcefile(new)  # type: ignore[arg-type]
        except TypeError:
            same_file = False
        modules = getattr(existing, "__module__", None), getattr(new, "__module__", None)
        if same_file and modules[0] != modules[1]:
            said += (f": the same file ran twice, as modules {modules[0]!r} and {modules[1]!r}; import it one way only "
                     "(list it once in algorithm.plugins, by the module name that other files import it by)")
        return said

    def lookup(self, name: str) -> T:
        """The entry called ``name``, or ValueError listing the registered names."""
        if name not in self:
            raise ValueError(f"unknown {self.kind} {name!r}; registered: {sorted(self)}")
        return self[name]
