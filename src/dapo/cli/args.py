"""What the CLI's positional arguments are (a CONFIG file, a shipped config's name, a key=value
override) and the config they resolve to, with the notes a mistaken combination gets."""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path
from typing import Any

from dapo.config import ConfigError, DAPOConfig, builtin_config_path, load_config
from dapo.config.loading import HYDRA_PREFIXES, parse_override, set_dotted, shipped_config_names
from dapo.context_checks import is_builtin
from dapo.hardware import (
    BF16_FALLBACK_SEEN,
    cpu_bf16_settings,
    cpu_computes_bf16_natively,
    runs_on_this_cpu,
)


def split_config_args(args: list[str], command: str = "train") -> tuple[list[str], list[str]]:
    """Separate YAML files / shipped config names from key=value overrides."""
    files, overrides = [], []
    for index, arg in enumerate(args):
        kind = config_arg_kind(arg)
        if kind == "override":
            overrides.append(arg)
        elif kind == "file":
            files.append(arg)
        elif kind == "shipped":
            files.append(str(builtin_config_path(arg)))
        else:
            raise ConfigError(_not_a_config_arg(args, index, command))
    return files, overrides


def _not_a_config_arg(args: list[str], index: int, command: str = "train") -> str:
    """Why ``args[index]`` is neither a CONFIG nor an override, as the likely mistake: an override
    the shell split at a space, one without its ``=``, a checkpoint given as a config, a misspelled
    shipped config."""
    arg, previous = args[index], args[index - 1] if index else ""
    following = args[index + 1] if index + 1 < len(args) else ""
    why = f"{arg!r} is not a config file, a shipped config ({', '.join(shipped_config_names())}) or key=value"
    if previous.count("[") > previous.count("]") or previous.count("{") > previous.count("}"):
        return f"{why}: the shell split {previous!r} at a space; quote it: '{previous} {arg}'"
    if previous.endswith("=") or arg.startswith("=") or following.startswith("="):
        return f"{why}: write key=value without spaces around '='"
    if Path(arg).is_dir() and command == "eval":
        return f"{why}: dapo eval evaluates one model: run it once for each"
    if Path(arg).is_dir():
        return f"{why}: to start from a checkpoint directory, give checkpoint.resume={arg}"
    if close := difflib.get_close_matches(arg, shipped_config_names(), n=1, cutoff=0.75):
        return f"{why}: did you mean the shipped config {close[0]!r}?"
    if arg[:1] in ("+", "~"):  # Hydra's ~key (delete a field), or +key without its value
        return f"{why}: Hydra's + / ++ / ~ prefixes are not read here: {HYDRA_PREFIXES}"
    if "." in arg and not Path(arg).exists():
        return f"{why}: an override needs '=' (e.g. {arg}=VALUE)"
    return why


def config_arg_kind(arg: str) -> str:
    """How the CLI reads an argument: "override" (key=value), "file" (a YAML file) or "shipped" (a
    shipped config's name); "" for anything else (a field's key, for --explain). A YAML file that
    exists is a file even with '=' in its path (a run directory named lr=1e-5, as Hydra names them)."""
    if arg.endswith((".yaml", ".yml")) and Path(arg).is_file():
        return "file"
    if "=" in arg:
        return "override"
    if arg.endswith((".yaml", ".yml")) or Path(arg).is_file():
        return "file"
    return "shipped" if arg in shipped_config_names() else ""


def is_config_arg(arg: str) -> bool:
    """Whether ``arg`` is a CONFIG or a key=value override, as :func:`split_config_args` reads
    them, rather than a field's key."""
    return config_arg_kind(arg) != ""


# The shipped configs a run starts from when no CONFIG is given, by whose model it trains: the
# embedded default's laptop settings suit only the built-in model; any other model starts from the
# paper's recipe for one device (README "Train your own model").
DEMO_CONFIG, RECIPE_CONFIG = "default", "dapo_recipe"
SAVED_CONFIG = "dapo_config.yaml"  # a checkpoint's copy of its run's resolved config


def model_path_override(overrides: list[str]) -> str | None:
    """The model.path the overrides set, if any (``model.path=X`` or ``model={path: X}``; the last wins)."""
    tree: dict[str, Any] = {}
    for text in overrides:
        path, value = parse_override(text)
        try:
            set_dotted(tree, path, value)
        except ConfigError:  # (an item of a list set before: said, as load_config says it, where the config loads)
            continue
    model = tree.get("model")
    path = model.get("path") if isinstance(model, dict) else None
    return None if path is None else str(path)


def is_builtin_model(path: str | None) -> bool:
    """Whether an override's model.path (None: none given, the embedded default's) is the built-in model."""
    return path is None or is_builtin(path)


def float32_on_this_cpu(cfg: DAPOConfig, files: list[str], overrides: list[str], command: str) -> list[str]:
    """The overrides that put the embedded default (``cfg``, loaded from ``files`` and the user's
    ``overrides``) in float32 where it runs on this CPU and its bf16 matmuls are slower
    (:mod:`dapo.hardware`), saying so where that changes what it computes; none elsewhere. They
    go before the user's, which win."""
    if not cpu_bf16_settings(cfg) or not runs_on_this_cpu(cfg) or cpu_computes_bf16_natively():
        return []
    float32 = ["trainer.autocast=none", "rollout.native_dtype=model"]
    if cpu_bf16_settings(load_config(files, float32 + overrides)) != cpu_bf16_settings(cfg):
        print(f"dapo {command}: this CPU has no bf16 dot-product instructions (AVX512-BF16, AMX, Arm BF16), where bf16 "
              f"is slower than float32 ({BF16_FALLBACK_SEEN}), so the embedded default decodes and trains in float32 "
              f"({' '.join(float32)}; trainer.autocast=bf16 rollout.native_dtype=bfloat16 keep bf16)", file=sys.stderr)
    return float32


def resolve(args: list[str], command: str = "train") -> DAPOConfig:
    """Load CONFIG files + overrides. With no CONFIG: the embedded default for the built-in model,
    the paper's recipe (dapo_recipe) for any other model.path, saying so on stderr."""
    files, overrides = split_config_args(args, command)
    model_path = model_path_override(overrides)
    if not files:
        name = DEMO_CONFIG if is_builtin_model(model_path) else RECIPE_CONFIG
        if name != DEMO_CONFIG:
            print(f"dapo {command}: model.path={model_path} is not the built-in model, so the settings start from "
                  f"the shipped config {name!r} (the paper's DAPO recipe for one device; `dapo config "
                  f"{name}` shows it), not from the embedded demo's", file=sys.stderr)
        files = [str(builtin_config_path(name))]
    elif str(builtin_config_path(DEMO_CONFIG)) in map(str, files) and not is_builtin_model(model_path):
        print(f"dapo {command}: note: config {DEMO_CONFIG!r} holds the built-in demo's laptop settings (no prompt "
              f"template, lr 1.5e-4 cosine, bf16 decode, eval top_p 1.0); for your model start from {RECIPE_CONFIG!r}",
              file=sys.stderr)
    cfg = load_config(files, overrides)
    if list(map(str, files)) == [str(builtin_config_path(DEMO_CONFIG))] and (
            float32 := float32_on_this_cpu(cfg, files, overrides, command)):
        cfg = load_config(files, float32 + overrides)
    # (model.path set by an override or in a config file; `dapo eval` names a checkpoint, maybe of
    # a built-in model's run, whose held-out set is then the right one)
    if command in ("train", "config") and not is_builtin_model(cfg.model.path):
        for split in ("train", "eval"):
            if "builtin:arithmetic" in getattr(cfg.data, f"{split}_files"):
                print(f"dapo {command}: note: data.{split}_files holds the built-in arithmetic task (bare sums, no "
                      f"template: the built-in model's task, not {cfg.model.path}'s); give data.{split}_files="
                      "[FILE,...] for your data", file=sys.stderr)
    elif command in ("train", "config") and "builtin:arithmetic" in cfg.data.eval_files and \
            "builtin:arithmetic" not in cfg.data.train_files:
        print(f"dapo {command}: note: data.train_files={cfg.data.train_files} but data.eval_files holds the built-in "
              "arithmetic task (the embedded default's): the held-out evaluation is of that task, not of your data; "
              "give data.eval_files=[FILE,...] for yours, or data.eval_files=[] for none", file=sys.stderr)
    return cfg


def positive_int(text: str) -> int:
    """argparse's type of a count (``--seeds 3``), said as such when it is not one."""
    try:
        value = int(text)
    except ValueError:
        value = 0  # (argparse would name the function: "invalid positive_int value")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def named_folder(text: str) -> str:
    """argparse's type of a path option (``--save-dir DIR``): an empty one (an unset shell variable)
    is refused rather than read as the default or the working directory."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: name a path")
    return text
