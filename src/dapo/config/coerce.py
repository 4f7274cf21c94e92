"""YAML values to the schema's types: the dataclasses built from a loaded tree, field by field.

The YAML reader (:mod:`dapo.config.loading`) leaves numbers and dates as the text written, so that
the field's own type reads it: a text field keeps ``010``, ``0.10``, ``1_000`` or ``1:30`` as
written (YAML 1.1 made them 8, 0.1, 1000 and 90, and ``model.path=010`` named a directory "8"),
and a number field reads ``010`` as ten (YAML 1.1: octal eight), as YAML 1.2 and Python do.

Null is what YAML reads as null: ``null`` / ``Null`` / ``NULL`` / ``~`` or no value (in a file),
as Hydra and verl read it. In a ``str | None`` field the text ``none`` or ``None`` is that text:
``model.tokenizer_path=none`` names a directory "none", as it would under Hydra (before, it
silently meant "unset", so a field could not hold the text). In a number field that may be null
(``algorithm.clip_ratio_c``, ``eval.seed``) ``None`` / ``none`` also means null, as Python
users write it: a number has no other reading of that text, so nothing valid changes meaning.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import decimal
import difflib
import math
import re
import types
import typing
from typing import Any

from dapo.config.checks import ConfigError
from dapo.config.verl_names import verl_guess


def build(cls: type, values: dict[str, Any], where: str) -> Any:
    """``cls`` (a config dataclass) from a mapping, each value converted to its field's type;
    ConfigError for an unknown key (with a "did you mean") or a value of the wrong type."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    if not_names := [key for key in values if not isinstance(key, str)]:
        raise ConfigError(f"config key(s) {not_names} under {where or 'the top level'} are not names: YAML reads an "
                          "unquoted yes/no/on/off/true/false/null as a value; quote the key, or fix its spelling")
    unknown = sorted(set(values) - names)
    everywhere = _unknown_keys(cls, values, "") if not where else []
    if len({key.rpartition(".")[0] for key, _ in everywhere}) > 1 and not any(":" in key for key, _ in everywhere):
        raise ConfigError(f"unknown config keys in several sections{_keys_said(everywhere)}")  # all at once
    if unknown:
        prefix = f"{where}." if where else ""
        # {lr:1e-5}: YAML reads `key:value` without a space after the colon as one key, valued null
        glued = [u for u in unknown if values[u] is None and u.partition(":")[0].strip() in names]
        if glued:
            examples = ", ".join(f"{u.partition(':')[0].strip()}: {u.partition(':')[2].strip()}" for u in glued)
            raise ConfigError(
                f"config key(s) {[prefix + u for u in glued]} hold a value after a colon without a space: YAML reads "
                f"`key:value` as one key; write a space after the colon: {{{examples}}}"
            )
        guessed = [(prefix + u, _guess(prefix + u, values[u], names)) for u in unknown]
        guesses = [guess for _, guess in guessed if guess is not None]
        said = (f"s{_keys_said(guessed)}\n" if len(guessed) > _KEYS_ON_ONE_LINE else
                f"(s) {[key for key, _ in guessed]}" + (f" (did you mean {', '.join(guesses)}?)" if guesses else "") + "; ")
        raise ConfigError(f"unknown config key{said}valid keys under {where or 'the top level'}: {sorted(names)}")
    kwargs = {
        k: coerce(v, hints[k], f"{where}.{k}" if where else k) for k, v in values.items()
    }
    return cls(**kwargs)


# more unknown keys than this are listed one per line (a TRL or verl config's file, read whole)
_KEYS_ON_ONE_LINE = 3


def _keys_said(guessed: list[tuple[str, str | None]]) -> str:
    """Unknown keys, each with its guess: on one line for a few, else one per line (a peer's
    config, its every field answered with this project's name), saying whose names they are."""
    if len(guessed) <= _KEYS_ON_ONE_LINE:
        return ": " + ", ".join(key + (f" (did you mean {guess}?)" if guess else "") for key, guess in guessed)
    peers = [peer for peer in ("TRL's", "verl's") if any(guess and f"({peer} " in guess for _, guess in guessed)]
    whose = f", {' and '.join(peers)} names among them, each answered with this project's" if peers else ""
    return f" ({len(guessed)}{whose}):\n" + "\n".join(
        f"  {key}: {f'did you mean {guess}?' if guess else 'no setting of a name like it'}" for key, guess in guessed)


def _unknown_keys(cls: type, values: dict[str, Any], where: str) -> list[tuple[str, str | None]]:
    """Every unknown key of ``values`` (a mapping for the config dataclass ``cls``) and of its
    sections given as mappings, dotted, each with its nearest valid key (or None)."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    prefix = f"{where}." if where else ""
    found: list[tuple[str, str | None]] = []
    for key, value in values.items():
        if not isinstance(key, str):
            continue  # (build's own error)
        if key not in names:
            found.append((prefix + key, _guess(prefix + key, value, names)))
        elif isinstance(value, dict) and dataclasses.is_dataclass(hints[key]):
            found += _unknown_keys(hints[key], value, prefix + key)
    return found


def _guess(key: str, value: Any, names: set[str]) -> str | None:
    """The valid key an unknown dotted ``key`` (valued ``value``) likely meant: verl's name for one
    of this project's settings (:data:`dapo.config.verl_names.VERL_NAMES`), else the nearest
    spelling among its section's ``names``."""
    if (verl := verl_guess(key, value)) is not None:
        return verl
    prefix, _, name = key.rpartition(".")
    close = difflib.get_close_matches(name, names, n=1)
    if close:
        return f"{prefix}.{close[0]}" if prefix else close[0]
    # the name of a setting in another section (trainer.output_dir for output_dir, as TRL's
    # TrainingArguments hold it; data.seed for trainer.seed)
    from dapo.config.explain import field_docs  # (the schema builds on this module)

    elsewhere = [path for path in field_docs() if path.rpartition(".")[2] == name and path != key]
    return " or ".join(elsewhere) or None


def _list_item_error(where: str, path: list[str]) -> ConfigError:
    return ConfigError(f"{where} is a list, whose items are not set one by one ({'.'.join(path)}): give the whole "
                       f"list, {where}=[...]")


def field_type(root: type, path: list[str]) -> Any:
    """The annotated type of the dotted field ``path`` under ``root``; None where a part names no
    field (the unknown key is reported, with a guess, when the config is built). ConfigError when
    a part before the last names a value, not a section (``trainer.lr.x=1``)."""
    kind: Any = root
    for depth, part in enumerate(path):
        if typing.get_origin(kind) is dict:  # a mapping of free keys (data.chat_template_kwargs.enable_thinking)
            return Any
        if not dataclasses.is_dataclass(kind):
            where = ".".join(path[:depth])
            if typing.get_origin(kind) is list:  # Hydra's reward.functions.0.weight=...: no item is set alone
                raise _list_item_error(where, path)
            raise ConfigError(f"{where} is a value, not a section: it has no key {part!r}")
        hints = typing.get_type_hints(kind)
        indexed = re.fullmatch(r"(\w+)\[\d+\]", part)  # reward.functions[0].weight=..., as errors name an item
        if indexed and typing.get_origin(hints.get(indexed.group(1))) is list:
            raise _list_item_error(".".join([*path[:depth], indexed.group(1)]), path)
        kind = hints.get(part)
        if kind is None:
            return None
    return kind


def coerce(value: Any, annotation: Any, where: str) -> Any:
    """Convert a YAML value to the field's annotated type (numbers from their text, nested dataclasses)."""
    origin = typing.get_origin(annotation)
    if isinstance(value, PlainNumber):  # (a str subclass the dumper and other processes need not know)
        value = str(value)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if value is None:  # YAML's null: null, Null, NULL, ~ or nothing
            return None
        if value in ("None", "none") and args[0] is not str:
            return None  # a number can be written no other way: the text can only mean unset
        return coerce(value, args[0], where)  # a text field keeps "none" / "None" as the text (see above)
    if dataclasses.is_dataclass(annotation):
        if value is None:  # a section whose keys are all commented out: its defaults
            value = {}
        if not isinstance(value, dict):
            key, colon, rest = value.partition(":") if isinstance(value, str) else ("", "", "")
            glued = colon and key.strip() in {f.name for f in dataclasses.fields(annotation)}
            hint = (f"; YAML reads `{key.strip()}:{rest.strip()}` without a space after the colon as text, not a key and its "
                    f"value: write `{key.strip()}: {rest.strip()}`") if glued else ""
            if not glued and colon and "path" in {f.name for f in dataclasses.fields(annotation)}:
                hint = f" (a bare spec; write it as {{path: {value}}}, with weight etc. beside it)"  # reward.functions
            raise ConfigError(f"{where} must be a mapping, got {shown(value)}{hint}")
        return build(annotation, value, where)
    if isinstance(value, bool) and annotation in (int, float, str):  # YAML reads true/false/yes/no as bools
        hint = "; YAML reads no/off/false and yes/on/true as booleans: quote the word" if annotation is str else ""
        raise ConfigError(f"{where}={value!r} should be of type {annotation.__name__}{hint}")
    if annotation is str and isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()  # (a tree read by yaml.safe_load, not by dapo.config.loading)
    if annotation is float and isinstance(value, int):
        return float(value)
    if annotation is float and isinstance(value, str):
        value = _real(value, where)
    if annotation is int and isinstance(value, str):
        value = _integer(value, where)
    if annotation is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if origin is dict:
        if value == "" or value is None:  # `data.chat_template_kwargs=`, or a key whose items are commented out
            return {}
        if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
            raise ConfigError(f"{where} must be a mapping of names to values, got {shown(value)}")
        return _free_value(value)
    if origin is list:
        if value == "" or value is None:  # `data.eval_files=` (as Hydra users write it), or a YAML key
            return []                     # whose items are all commented out: none
        if isinstance(value, (str, dict)) or not hasattr(value, "__iter__"):
            value = [value]
        (item_type,) = typing.get_args(annotation) or (Any,)
        return [coerce(v, item_type, f"{where}[{i}]") for i, v in enumerate(value)]
    if annotation is float and isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}={value!r}: must be a finite number")
    if annotation in (int, float, str, bool) and not isinstance(value, annotation):
        if annotation is str and isinstance(value, (int, float)):
            return str(value)
        hint = ""
        if annotation is str and isinstance(value, dict) and len(value) == 1 and None in value.values():
            # YAML reads an unquoted `User:` as the mapping {'User': None}
            hint = f"; YAML reads {next(iter(value))}: as a mapping, quote it: \"{next(iter(value))}:\""
        raise ConfigError(f"{where}={shown(value)} should be of type {annotation.__name__}{hint}")
    return value


# YAML 1.2's numbers, which the config's YAML reader leaves as the text written for a field's type
# to read: a mapping of free keys (data.chat_template_kwargs) has none, and reads them so
_YAML_INT = re.compile(r"[-+]?[0-9]+")
_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def reads_as_number(text: str) -> bool:
    """Whether YAML 1.2 reads ``text``, written unquoted, as a number."""
    return bool(_YAML_INT.fullmatch(text) or _YAML_FLOAT.fullmatch(text))


class PlainNumber(str):
    """A number as the config's YAML reader leaves it: its text, written unquoted (``512``, not
    ``"512"``). A field of a type reads the text; a mapping of free keys makes it a number, and
    keeps quoted text as text."""


def shown(value: Any) -> str:
    """``value`` as an error shows it: as written, a number unquoted (the reader keeps its text,
    :class:`PlainNumber`: ``[1]`` is not ``['1']``), text quoted."""
    if isinstance(value, PlainNumber):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(shown(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{shown(key)}: {shown(item)}" for key, item in value.items()) + "}"
    return repr(value)


def _free_value(value: Any) -> Any:
    """A value of a mapping of free keys, its numbers (in lists and mappings too) numbers, not text
    (a template comparing ``thinking_budget >= 0`` failed on "512"); text quoted, or set from
    Python, stays text (a template comparing ``version == '3'``)."""
    if isinstance(value, PlainNumber):
        return int(value) if _YAML_INT.fullmatch(value) else float(value)
    if isinstance(value, list):
        return [_free_value(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _free_value(item) for key, item in value.items()}
    return value


def _integer(text: str, where: str) -> int:
    """An int field's text: decimal (``010`` is ten), ``0x10`` / ``0o10`` / ``0b10``, ``1_000``, or
    a whole number in float notation (``1e3``, ``3.0``). Not ``1:30``: YAML 1.1's base 60."""
    for base in (10, 0):  # (base 0 reads the prefixes and refuses a leading zero)
        with contextlib.suppress(ValueError):
            return int(text, base)
    with contextlib.suppress(decimal.InvalidOperation):  # exact, where float(1e30) is not 10**30
        number = decimal.Decimal(text)
        # (at most 100 digits: int() of 1e999999999 would build a billion-digit number)
        if number.is_finite() and number.adjusted() < 100 and number == number.to_integral_value():
            return int(number)
    raise ConfigError(f"{where}={text!r} should be of type int (a whole number)")


def _real(text: str, where: str) -> float:
    """A float field's text: Python's float syntax (``.5``, ``1e-6``, ``010`` is ten), YAML's
    ``.inf`` / ``.nan`` (refused later as not finite), or an int with a base prefix (``0x10``)."""
    if special := re.fullmatch(r"([-+]?)\.(inf|nan)", text, re.IGNORECASE):
        text = special[1] + special[2]
    with contextlib.suppress(ValueError):
        return float(text)
    with contextlib.suppress(ValueError, OverflowError):
        return float(int(text, 0))
    raise ConfigError(f"{where}={text!r} is not a number")
