"""Importing a user's Python code: reward functions and algorithm plugins.

A location is a file (``path/to/file.py``, or anything with a path separator) or a module path
(``package.module``, looked up on sys.path plus the working directory). Each file is imported
once per process, under a name derived from its absolute path, so listing it twice (or loading a
config twice) does not run its registrations twice.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from types import ModuleType


def is_file_location(location: str) -> bool:
    return location.endswith(".py") or os.sep in location or "/" in location


def import_user_code(location: str, what: str, error: type[Exception] = ImportError) -> ModuleType:
    """Import ``location``; on failure raise ``error`` with a message that starts with ``what``."""
    if not is_file_location(location):
        if os.getcwd() not in sys.path:  # "my_rewards:fn" should find my_rewards.py in the run dir
            sys.path.append(os.getcwd())
        try:
            return importlib.import_module(location)
        except Exception as exc:
            raise error(f"{what}: importing module {location} raised {type(exc).__name__}: {exc}") from exc
    path = os.path.abspath(os.path.expanduser(location))
    if not os.path.isfile(path):
        raise error(f"{what}: file {path} does not exist")
    module_name = "dapo_user_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    if module_name in sys.modules:
        return sys.modules[module_name]
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise error(f"{what}: cannot import {path}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module  # before exec: a failed import is removed again below
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise error(f"{what}: importing {path} raised {type(exc).__name__}: {exc}") from exc
    return module
