"""Build a :class:`DAPOConfig` from YAML files and dotted ``key=value`` overrides, and save it."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime
import difflib
import glob
import math
import os
import types
import typing
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from dapo.config.schema import ConfigError, DAPOConfig
from dapo.user_code import is_file_location


def builtin_config_path(name: str) -> Path:
    """Path of a config shipped with the package (``configs/NAME.yaml``)."""
    path = _CONFIGS_DIR / f"{name}.yaml"
    if not path.exists():
        raise ConfigError(f"no shipped config named {name!r}; shipped configs: {shipped_config_names()}")
    return path


def shipped_config_names() -> list[str]:
    return sorted(p.stem for p in _CONFIGS_DIR.glob("*.yaml"))


_CONFIGS_DIR = Path(str(resources.files("dapo") / "configs"))


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"trainer.lr=1e-5"`` -> (["trainer", "lr"], 1e-5); the value is parsed as YAML."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} is not of the form key=value (e.g. trainer.lr=1e-5)")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key:
        raise ConfigError(f"override {text!r} has an empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as error:
        raise ConfigError(f"override {text!r}: the value is not valid YAML ({_yaml_problem(error)})") from None
    if _ends_in_comment(raw):
        raise ConfigError(f"override {text!r}: YAML reads ' #' as the start of a comment and would drop what "
                          f"follows it; quote the value: {key}={yaml_text(raw)}")
    return key.split("."), value


def _ends_in_comment(raw: str) -> bool:
    """Whether YAML drops the end of ``raw`` as a comment (``runs/exp #3`` reads ``runs/exp``): a
    character added at the end then changes nothing, where anywhere else it changes the value."""
    if "#" not in raw:
        return False
    try:
        return yaml.safe_load(raw + "_") == yaml.safe_load(raw)
    except yaml.YAMLError:
        return False


def yaml_text(text: str) -> str:
    """``text`` as a YAML string (single-quoted, no escapes): for ``key=`` + a path in an override,
    which would otherwise be parsed (``run #3`` cut at the comment, ``0.10`` read as a number)."""
    return "'" + text.replace("'", "''") + "'"


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load, refusing a mapping that repeats a key: PyYAML keeps the last copy, so a config
    file with two ``trainer:`` sections silently lost the first one's settings."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults`: its keys may be set again
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} appears twice in one mapping (the first would be lost)",
                    key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _yaml_problem(error: yaml.YAMLError) -> str:
    """A YAML error in one line: 'line L, column C: what is wrong'."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark is not None else problem


def set_dotted(tree: dict[str, Any], path: list[str], value: Any) -> None:
    """Set ``a.b.c=value``; a mapping value merges into the section as a later YAML file would
    (``trainer={lr: 1e-5}`` changes the lr alone, not the rest of trainer)."""
    node = tree
    for part in path[:-1]:
        if node.get(part) is None:  # absent, or a section whose keys are all commented out
            node[part] = {}
        node = node[part]
        if not isinstance(node, dict):
            raise ConfigError(f"override {'.'.join(path)}: {part} is not a section")
    old = node.get(path[-1])
    node[path[-1]] = _merge(old, value) if isinstance(value, dict) and isinstance(old, dict) else value


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if value is None and isinstance(out.get(key), dict):
            continue  # a section whose keys are all commented out changes nothing (it did reset it)
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    """Convert a YAML value to the field's annotated type (ints for floats, nested dataclasses)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if value is None or value in ("None", "none"):  # YAML reads only null as None; Python users write None
            return None
        return _coerce(value, args[0], where)
    if dataclasses.is_dataclass(annotation):
        if value is None:  # a section whose keys are all commented out: its defaults
            value = {}
        if not isinstance(value, dict):
            raise ConfigError(f"{where} must be a mapping, got {value!r}")
        return _build(annotation, value, where)
    if isinstance(value, bool) and annotation in (int, float, str):  # YAML reads true/false/yes/no as bools
        hint = "; YAML reads no/off/false and yes/on/true as booleans: quote the word" if annotation is str else ""
        raise ConfigError(f"{where}={value!r} should be of type {annotation.__name__}{hint}")
    if annotation is str and isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()  # YAML reads an unquoted 2024-06-01 as a date
    if annotation is float and isinstance(value, int):
        return float(value)
    if annotation is float and isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ConfigError(f"{where}={value!r} is not a number") from None
    if annotation is int and isinstance(value, str) and "e" in value.lower():  # YAML 1.1 reads 1e3 as a string
        with contextlib.suppress(ValueError):
            number = float(value)
            value = int(number) if number.is_integer() else value
    if annotation is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if origin is list:
        if value == "" or value is None:  # `data.eval_files=` (as Hydra users write it), or a YAML key
            return []                     # whose items are all commented out: none
        if isinstance(value, (str, dict)) or not hasattr(value, "__iter__"):
            value = [value]
        (item_type,) = typing.get_args(annotation) or (Any,)
        return [_coerce(v, item_type, f"{where}[{i}]") for i, v in enumerate(value)]
    if annotation is float and isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}={value!r}: must be a finite number")
    if annotation in (int, float, str, bool) and not isinstance(value, annotation):
        if annotation is str and isinstance(value, (int, float)):
            return str(value)
        hint = ""
        if annotation is str and isinstance(value, dict) and len(value) == 1 and None in value.values():
            # YAML reads an unquoted `User:` as the mapping {'User': None}
            hint = f"; YAML reads {next(iter(value))}: as a mapping, quote it: \"{next(iter(value))}:\""
        raise ConfigError(f"{where}={value!r} should be of type {annotation.__name__}{hint}")
    return value


def _build(cls: type, values: dict[str, Any], where: str) -> Any:
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    if not_names := [key for key in values if not isinstance(key, str)]:
        raise ConfigError(f"config key(s) {not_names} under {where or 'the top level'} are not names: YAML reads an "
                          "unquoted yes/no/on/off/null or number as a value; quote the key, or fix its spelling")
    unknown = sorted(set(values) - names)
    if unknown:
        prefix = f"{where}." if where else ""
        guesses = [f"{prefix}{guess}" for u in unknown for guess in difflib.get_close_matches(u, names, n=1)]
        raise ConfigError(
            f"unknown config key(s) {[prefix + u for u in unknown]}"
            + (f" (did you mean {', '.join(guesses)}?)" if guesses else "")
            + f"; valid keys under {where or 'the top level'}: {sorted(names)}"
        )
    kwargs = {
        k: _coerce(v, hints[k], f"{where}.{k}" if where else k) for k, v in values.items()
    }
    return cls(**kwargs)


def load_config(
    files: list[str | Path] | None = None, overrides: list[str] | None = None
) -> DAPOConfig:
    """Merge YAML files (later wins) and dotted overrides into a validated :class:`DAPOConfig`."""
    tree: dict[str, Any] = {}
    for file in files or []:
        path = Path(file)
        if not path.exists():
            raise ConfigError(f"config file {path} does not exist")
        try:
            loaded = yaml.load(path.read_text(), Loader=_UniqueKeyLoader) or {}  # (a SafeLoader)
        except yaml.YAMLError as error:
            raise ConfigError(f"config file {path} is not valid YAML: {_yaml_problem(error)}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"config file {path} is not a YAML text file (a data file goes in "
                              f"data.train_files=[{path}] or data.eval_files=[{path}])") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must hold a mapping at the top level")
        tree = _merge(tree, loaded)
    for text in overrides or []:
        path_parts, value = parse_override(text)
        set_dotted(tree, path_parts, value)
    return _build(DAPOConfig, tree, "")


def config_to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


def with_absolute_paths(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` (:func:`config_to_dict`'s form) with its local paths absolute: output_dir, the
    model and tokenizer, data files (globs too), reward-function and plugin files. A run's saved
    config then names the same files from any directory (``dapo eval CHECKPOINT``), and so does
    a policy rank on another node. What names no local file (``builtin:...``, a module, a Hub
    id) is kept as it is."""
    config = copy.deepcopy(config)
    model, data, reward = config["model"], config["data"], config["reward"]
    config["output_dir"] = os.path.abspath(config["output_dir"])
    model["path"], model["tokenizer_path"] = (absolute_local_path(model[key]) for key in ("path", "tokenizer_path"))
    for key in ("train_files", "eval_files"):
        data[key] = [absolute_local_path(entry) for entry in data[key]]
    for spec in reward["functions"]:
        location, colon, name = spec["path"].rpartition(":")
        if is_file_location(location):
            spec["path"] = f"{absolute_local_path(location)}{colon}{name}"
    # a module name stays one, though a package of that name lies in the working directory
    config["algorithm"]["plugins"] = [absolute_local_path(entry) if is_file_location(entry) else entry
                                      for entry in config["algorithm"]["plugins"]]
    return config


def absolute_local_path(path: str | None) -> str | None:
    """A path (or a glob) that names local files, made absolute; anything else unchanged."""
    if path is None or not (os.path.exists(path) or glob.glob(path)):
        return path
    return os.path.abspath(path)


def config_from_dict(values: dict[str, Any]) -> DAPOConfig:
    """Rebuild and re-validate a config from :func:`config_to_dict`'s output (in another process:
    validation imports algorithm.plugins there too)."""
    return _build(DAPOConfig, values, "")


def save_config(config: DAPOConfig, path: str | Path) -> None:
    """Write the fully resolved config as YAML (every field, defaults included)."""
    Path(path).write_text(yaml.safe_dump(config_to_dict(config), sort_keys=False))
