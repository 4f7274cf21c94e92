"""Field documentation read from the schema itself: ``dapo config --explain KEY``.

Every field is documented once, by the comment above it in its section's dataclass (in the
modules :mod:`dapo.config.schema` imports them from); this module reads those comments back (a
field directly under another with no comment of its own shares that comment, as ``temperature``
/ ``top_p`` do), so the help a user sees is the schema's text.
"""

from __future__ import annotations

import difflib
import inspect
import re
import typing
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

from dapo.config.schema import DAPOConfig
from dapo.config.verl_names import verl_guess

_COMMENT = re.compile(r"^    # ?(.*)$")
_FIELD = re.compile(r"^    (\w+): ")


def class_field_docs(cls: type) -> dict[str, str]:
    """Field name -> the comment above it in ``cls``'s source."""
    docs: dict[str, str] = {}
    comment: list[str] = []
    last_doc = ""
    for line in inspect.getsource(cls).splitlines():
        if match := _COMMENT.match(line):
            comment.append(match.group(1))
        elif match := _FIELD.match(line):
            last_doc = " ".join(comment) if comment else last_doc
            docs[match.group(1)] = last_doc
            comment = []
        else:
            comment, last_doc = [], ""
    return docs


def field_docs(root: type = DAPOConfig) -> dict[str, tuple[str, Any]]:
    """Dotted key -> (documentation, type) for every field of the config tree."""
    out: dict[str, tuple[str, Any]] = {}
    hints = typing.get_type_hints(root)
    docs = class_field_docs(root)
    for f in fields(root):
        kind = hints[f.name]
        if is_dataclass(kind):
            out.update({f"{f.name}.{key}": value for key, value in field_docs(kind).items()})
        else:
            out[f.name] = (docs.get(f.name, ""), kind)
    return out


def explain(config: DAPOConfig, prefix: str = "") -> str:
    """The documentation, type and value in ``config`` of every field whose key is ``prefix`` or
    lies under it ("" for all); ValueError naming the sections when nothing matches."""
    every_field = field_docs()  # (read from the sources: once a call)
    entries = {k: v for k, v in every_field.items() if not prefix or k == prefix or k.startswith(prefix + ".")}
    if not entries and (item_docs := _explain_item_field(prefix) or _explain_mapping_key(config, prefix)):
        return item_docs
    if not entries and (ours := verl_guess(prefix, None)) is not None:  # verl's or TRL's name for one
        named = [key for key in dict.fromkeys(re.findall(r"[a-z_]+(?:\.[a-z_]+)?", ours)) if key in every_field]
        return "\n".join([f"{prefix} is not a config field here; this project's name for it: {ours}",
                          *(explain(config, key) for key in named)])
    if not entries:
        keys = list(every_field)
        # its last part alone, in every section that has it (top_p -> rollout.top_p, eval.top_p), then a misspelling
        named = [k for k in keys if k.rsplit(".", 1)[-1] == prefix]
        guesses = list(dict.fromkeys(named + difflib.get_close_matches(prefix, keys, n=3)))[: max(3, len(named))]
        sections = sorted({key.split(".")[0] for key in keys})
        hint = f" (did you mean {', '.join(guesses)}?)" if guesses else ""
        raise ValueError(f"no config field {prefix!r}{hint}; sections: {sections}")
    blocks = []
    for key, (doc, kind) in entries.items():
        value: Any = config
        for part in key.split("."):
            value = getattr(value, part)
        blocks.append(f"{key} ({_type_name(kind)}) = {value!r}\n    {doc}")
        blocks += _item_fields(key, kind) + _registered(key)
    return "\n".join(blocks)


# The fields a registry of dapo.algo resolves (docs/extending.md), by the registry's name there
_REGISTRIES = {"algorithm.advantage": "ADVANTAGE_ESTIMATORS", "algorithm.policy_loss": "POLICY_LOSSES",
               "algorithm.loss_agg_mode": "LOSS_AGG_MODES"}


def _registered(key: str) -> list[str]:
    """For a field a registry resolves, a line naming each of its entries now, a plugin's with the
    file:line it is defined at (the plugins of the config explained are imported: its algorithm.plugins)."""
    if key not in _REGISTRIES:
        return []
    from dapo import algo  # (torch: only for these fields)
    from dapo.algo.registry import defined_at

    registry = getattr(algo, _REGISTRIES[key])
    names = [name if (getattr(entry, "__module__", None) or "").startswith("dapo.") else f"{name} ({defined_at(entry)})"
             for name, entry in registry.items()]
    return [f"    registered now: {', '.join(names)} (a plugin's once its file or module is in algorithm.plugins, "
            "as in `dapo config --explain " + key + " algorithm.plugins=[my_algo.py]`)"]


def _explain_item_field(prefix: str) -> str | None:
    """``reward.functions[].weight`` (as the list's explanation names it) or ``reward.functions[]``:
    the documentation of that field, or of all fields, of the list's items; None for another key."""
    list_key, brackets, item_field = prefix.partition("[]")
    doc_kind = field_docs().get(list_key) if brackets else None
    if doc_kind is None:
        return None
    wanted = f"{list_key}[]{item_field} " if item_field else f"{list_key}[]."
    lines = [line.strip() for line in _item_fields(list_key, doc_kind[1]) if line.lstrip().startswith(wanted)]
    return "\n".join(line.replace("\n      ", "\n    ") for line in lines) or None  # as a field's own


def _explain_mapping_key(config: DAPOConfig, prefix: str) -> str | None:
    """``data.chat_template_kwargs.enable_thinking``: a key inside a mapping field, which the
    schema documents as a whole; the mapping's documentation and that key's value (unset when
    the mapping lacks it); None when ``prefix`` lies under no mapping field."""
    for key, (doc, kind) in field_docs().items():
        if typing.get_origin(kind) is dict and prefix.startswith(key + "."):
            mapping: Any = config
            for part in key.split("."):
                mapping = getattr(mapping, part)
            inner = prefix[len(key) + 1:]
            value = repr(mapping[inner]) if inner in mapping else "unset"
            return f"{prefix} = {value}: a key of {key} ({_type_name(kind)})\n    {doc}"
    return None


def _type_name(kind: Any) -> str:
    """``float``, ``list[RewardFunctionSpec]``, ``str | None``: as a user would write it."""
    if typing.get_origin(kind) in (list, dict):
        return f"{typing.get_origin(kind).__name__}[{', '.join(_type_name(arg) for arg in typing.get_args(kind))}]"
    return getattr(kind, "__name__", None) or str(kind).replace("typing.", "")


def _item_fields(key: str, kind: Any) -> list[str]:
    """The fields of a list's items when they are a dataclass (``reward.functions``: each item is
    a mapping of them), with their defaults and documentation."""
    item = typing.get_args(kind)[0] if typing.get_origin(kind) is list else None
    if not is_dataclass(item):
        return []
    hints, docs = typing.get_type_hints(item), class_field_docs(item)

    def default(f: Any) -> Any:
        return f.default_factory() if f.default is MISSING else f.default

    return [f"  {key}[].{f.name} ({_type_name(hints[f.name])}), default {default(f)!r}\n      {docs.get(f.name, '')}"
            for f in fields(item)]
