"""Build a :class:`DAPOConfig` from YAML files and dotted ``key=value`` overrides, and save it."""

from __future__ import annotations

import copy
import dataclasses
import glob
import os
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from dapo.config.coerce import PlainNumber, build, coerce, field_type, reads_as_number
from dapo.config.schema import ConfigError, DAPOConfig
from dapo.config.verl_names import verl_guess
from dapo.durable import write_atomically
from dapo.user_code import is_file_location, use_python_path, working_directory_origin


def builtin_config_path(name: str) -> Path:
    """Path of a config shipped with the package (``configs/NAME.yaml``)."""
    path = _CONFIGS_DIR / f"{name}.yaml"
    if not path.exists():
        raise ConfigError(f"no shipped config named {name!r}; shipped configs: {shipped_config_names()}")
    return path


def shipped_config_names() -> list[str]:
    return sorted(p.stem for p in _CONFIGS_DIR.glob("*.yaml"))


_CONFIGS_DIR = Path(str(resources.files("dapo") / "configs"))


# What dapo-rl reads where Hydra takes +key=value (add a field), ++key=value (force) and ~key (delete).
HYDRA_PREFIXES = ("every field this project has holds its default already, so set one as key=value, and leave "
                  "its override out to keep the default")


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"trainer.lr=1e-5"`` -> (["trainer", "lr"], 1e-5); the value is parsed as YAML."""
    if text.lstrip()[:1] in ("+", "~"):  # Hydra's +key=value (add), ++key=value (force), ~key (delete)
        key = text.partition("=")[0].strip().lstrip("+~")
        # a verl key written as verl's scripts do (+reward_model.reward_kwargs...): this project's name for it
        guess = None if _names_a_field(key) else verl_guess(key, None)
        raise ConfigError(f"override {text!r}: Hydra's + / ++ / ~ prefixes are not read here: {HYDRA_PREFIXES} "
                          + (f"(this project's name for {key}: {guess})" if guess else f"({key}=value)"))
    if "=" not in text:
        raise ConfigError(f"override {text!r} is not of the form key=value (e.g. trainer.lr=1e-5)")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key:
        raise ConfigError(f"override {text!r} has an empty key")
    try:
        value = yaml.load(raw, Loader=_ConfigLoader) if raw.strip() else ""
    except yaml.YAMLError as error:
        raise ConfigError(f"override {text!r}: the value is not valid YAML ({_yaml_problem(error)})"
                          f"{_indicator_hint(key, raw)}") from None
    if _ends_in_comment(raw):
        raise ConfigError(f"override {text!r}: YAML reads ' #' as the start of a comment and would drop what "
                          f"follows it; quote the value (in a shell, the whole override too): "
                          f"\"{key}={yaml_text(raw)}\"")
    return key.split("."), value


def _names_a_field(key: str) -> bool:
    """Whether dotted ``key`` is a field of this project's config (or a key of one of its mappings)."""
    try:
        return field_type(DAPOConfig, key.split(".")) is not None
    except ConfigError:
        return False


_YAML_INDICATORS = tuple("*&!%@`|>")  # characters YAML does not read as the start of plain text


def _indicator_hint(key: str, raw: str) -> str:
    """For a value (or a list item) that starts with a YAML indicator (a glob ``*.parquet``, an
    ``@org/model``), how to quote it, shell quotes included; "" for other YAML errors."""
    value = raw.strip()
    items = [item.strip() for item in value[1:-1].split(",")] if value[:1] + value[-1:] == "[]" else None
    syntax = [item[0] for item in (items if items is not None else [value]) if item.startswith(_YAML_INDICATORS)]
    if not syntax:
        return ""
    if items is not None:  # (an item the user quoted stays as it is)
        quoted = "[" + ", ".join(item if item[:1] in ("'", '"') else yaml_text(item) for item in items) + "]"
    else:
        quoted = yaml_text(value)
    return (f"; YAML reads {syntax[0]!r} at the start of {'a value' if items is None else 'an item'} as syntax: "
            f"quote it (in a shell, the whole override too): \"{key}={quoted}\"")


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


# YAML 1.1 types the plain scalars a config field reads by its own type (dapo.config.coerce)
_TYPED_BY_THE_FIELD = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:timestamp"}


class _ConfigLoader(yaml.SafeLoader):
    """safe_load of config files and override values, with two differences. Numbers and dates
    stay the text written, for the field's type to read (:func:`dapo.config.coerce.coerce`): YAML
    1.1 reads ``010`` as octal 8, ``1:30`` as 90 and ``0.10`` as 0.1, so ``model.path=010`` named
    a directory "8" and ``trainer.seed=010`` was 8. And a mapping that repeats a key is refused:
    PyYAML keeps the last copy, so a config file with two ``trainer:`` sections silently lost the
    first one's settings."""

    yaml_implicit_resolvers = {
        first: [(tag, pattern) for tag, pattern in resolvers if tag not in _TYPED_BY_THE_FIELD]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

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

    def construct_yaml_str(self, node: yaml.ScalarNode) -> str:
        """Text, or a number's text written unquoted (a :class:`~dapo.config.coerce.PlainNumber`):
        a mapping of free keys reads ``512`` as a number and ``'512'`` as text."""
        text = self.construct_scalar(node)
        return PlainNumber(text) if node.style is None and reads_as_number(text) else text


_ConfigLoader.add_constructor("tag:yaml.org,2002:str", _ConfigLoader.construct_yaml_str)


class _ConfigDumper(yaml.SafeDumper):
    """safe_dump whose text that YAML 1.2 would read as a number is quoted (``'1e3'``; PyYAML's 1.1
    quotes ``'3'`` but not ``1e3``): read back by :class:`_ConfigLoader`, it is text again."""

    def represent_str(self, data: str) -> yaml.ScalarNode:
        return self.represent_scalar("tag:yaml.org,2002:str", data, style="'" if reads_as_number(data) else None)


_ConfigDumper.add_representer(str, _ConfigDumper.represent_str)


def config_yaml(values: dict[str, Any]) -> str:
    """A config's mapping (:func:`config_to_dict`) as the YAML that reads back as the same config."""
    return yaml.dump(values, Dumper=_ConfigDumper, sort_keys=False)


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


def load_config(
    files: list[str | Path] | None = None, overrides: list[str] | None = None
) -> DAPOConfig:
    """Merge YAML files (later wins) and dotted overrides into a validated :class:`DAPOConfig`."""
    tree: dict[str, Any] = {}
    for file in files or []:
        path = Path(file)
        if path.is_dir():  # (read_text's "Is a directory" said nothing more)
            raise ConfigError(f"config file {path} is a directory: a CONFIG is a YAML file or a shipped config's name")
        if not path.exists():
            shipped = f"; the shipped config {path.stem!r} is named without a path or .yaml: {path.stem}" if (
                path.stem in shipped_config_names()) else ""
            raise ConfigError(f"config file {path} does not exist{shipped}")
        try:
            loaded = yaml.load(path.read_text(), Loader=_ConfigLoader) or {}  # (a SafeLoader)
        except yaml.YAMLError as error:
            raise ConfigError(f"config file {path} is not valid YAML: {_yaml_problem(error)}") from None
        except UnicodeDecodeError as error:
            if path.suffix in (".yaml", ".yml"):  # a config saved in another encoding (Latin-1, UTF-16)
                raise ConfigError(f"config file {path} is not UTF-8 text (byte {error.object[error.start]:#04x} at "
                                  f"offset {error.start}): save it as UTF-8") from None
            raise ConfigError(f"config file {path} is not a YAML text file (a data file goes in "
                              f"data.train_files=[{path}] or data.eval_files=[{path}])") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must hold a mapping at the top level")
        tree = _merge(tree, loaded)
    for text in overrides or []:
        path_parts, value = parse_override(text)
        _check_override_target(text, path_parts, value)
        set_dotted(tree, path_parts, value)
    return _build_config(tree)


def _build_config(tree: dict[str, Any]) -> DAPOConfig:
    """The validated config of a merged tree, its python_path put on sys.path first: building the
    algorithm section imports algorithm.plugins, which may be found only there."""
    if "python_path" in tree:
        use_python_path([entry for entry in coerce(tree["python_path"], list[str], "python_path") if entry.strip()])
    return build(DAPOConfig, tree, "")


def _check_override_target(text: str, path: list[str], value: Any) -> None:
    """Refuse an override that names a whole section with anything but a mapping: ``trainer=null``
    (or ``trainer=~``, ``trainer=``) silently reset every trainer setting the config files made,
    where Hydra and verl users expect an error (a YAML file's empty ``trainer:`` still changes
    nothing: there it is a section whose keys are all commented out)."""
    try:
        kind = field_type(DAPOConfig, path)
    except ConfigError as error:
        raise ConfigError(f"override {text!r}: {error}") from None
    if dataclasses.is_dataclass(kind) and not isinstance(value, dict):
        key = ".".join(path)
        example = next(f for f in dataclasses.fields(kind) if isinstance(f.default, (str, int, float)))
        raise ConfigError(f"override {text!r}: {key} is a section, not one value (it cannot be null or reset): set "
                          f"its fields, {key}.FIELD=value (e.g. {key}.{example.name}={example.default}), or several "
                          f"as {key}={{FIELD: value, ...}}")


def config_to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


def absolute_function_path(path: str) -> str:
    """A reward function's ``path/to/file.py:function`` with the file's path absolute; a module's
    ``package.module:function`` as it is."""
    location, colon, name = path.rpartition(":")
    return f"{absolute_local_path(location)}{colon}{name}" if is_file_location(location) else path


def with_absolute_paths(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` (:func:`config_to_dict`'s form) with its local paths absolute: output_dir, the
    model, its tokenizer and cache directory, data files (globs too), reward-function and plugin files, the checkpoint
    to resume (unless auto or never; also one that is gone by now: it names where it was, which a
    rerun finds in the run's own checkpoints' ``started_from``), python_path's directories. A run's
    saved config then names the same files from any directory (``dapo eval CHECKPOINT``), and so
    does a policy rank on another node. What names no local file (a module, a Hub id) is kept as
    it is, and so is ``builtin`` / ``builtin:<name>``, a keyword though a folder of that name lies
    in the working directory; a reward function or plugin module that only the working directory
    holds (``my_rewards:fn``, my_rewards.py there) has that directory added to python_path."""
    config = copy.deepcopy(config)
    model, data, reward = config["model"], config["data"], config["reward"]
    config["output_dir"] = os.path.abspath(config["output_dir"])
    checkpoint = config["checkpoint"]
    if checkpoint["resume"] not in ("auto", "never"):  # (a directory named auto stays the keyword)
        checkpoint["resume"] = os.path.abspath(os.path.expanduser(checkpoint["resume"]))
    model["path"], model["tokenizer_path"] = (absolute_local_path(model[key]) for key in ("path", "tokenizer_path"))
    if model["cache_dir"] is not None:  # a directory the run creates: absolute whether or not it exists yet
        model["cache_dir"] = os.path.abspath(os.path.expanduser(model["cache_dir"]))
    for key in ("train_files", "eval_files"):
        data[key] = [absolute_local_path(entry) for entry in data[key]]
    for spec in reward["functions"]:
        spec["path"] = absolute_function_path(spec["path"])
    # a module name stays one, though a package of that name lies in the working directory
    config["algorithm"]["plugins"] = [absolute_local_path(entry) if is_file_location(entry) else entry
                                      for entry in config["algorithm"]["plugins"]]
    python_path = [os.path.abspath(os.path.expanduser(entry)) for entry in config["python_path"]]
    for location in user_code_locations(config):
        if not is_file_location(location) and (directory := working_directory_origin(location)) is not None:
            python_path += [directory] if directory not in python_path else []
    config["python_path"] = python_path
    return config


def user_code_locations(config: dict[str, Any]) -> list[str]:
    """The files and modules of a run's own code in ``config`` (:func:`config_to_dict`'s form): its
    reward functions' (without ``:function``), then its ``algorithm.plugins``."""
    return reward_function_locations(config["reward"]["functions"]) + config["algorithm"]["plugins"]


def reward_function_locations(functions: list[dict[str, Any]]) -> list[str]:
    """The files or modules of ``reward.functions``' entries: their ``path`` without ``:function``."""
    return [spec["path"].rpartition(":")[0] for spec in functions]


def absolute_local_path(path: str | None) -> str | None:
    """A path (or a glob) that names local files, made absolute (a leading ~ expanded, as the
    readers of these fields do: a run given model.path=~/m then /home/me/m is one run, not a
    changed model.path); anything else unchanged, the built-in keyword too."""
    if path is None or path.partition(":")[0] == "builtin":
        return path
    expanded = os.path.expanduser(path)
    return os.path.abspath(expanded) if os.path.exists(expanded) or glob.glob(expanded) else path


def config_from_dict(values: dict[str, Any]) -> DAPOConfig:
    """Rebuild and re-validate a config from :func:`config_to_dict`'s output (in another process:
    validation imports algorithm.plugins there too, after python_path is on sys.path)."""
    return _build_config(values)


def save_config(config: DAPOConfig, path: str | Path) -> None:
    """Write the fully resolved config as YAML (every field, defaults included), atomically."""
    write_atomically(Path(path), config_yaml(config_to_dict(config)))
