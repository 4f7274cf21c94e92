"""Importing a user's Python code: reward functions and algorithm plugins.

A location is a file (``path/to/file.py``, or anything with a path separator) or a module path
(``package.module``, looked up on sys.path plus the working directory, appended). Each file is
imported once per process, so listing it twice (or loading a config twice) does not run its
registrations twice: under its own name (``rewards`` for ``rewards.py``) when that name imports
it, as a module path naming it would, else under one derived from its absolute path (another
``rewards`` comes first on sys.path). Its directory is appended to sys.path first, so that it
imports a module beside it (``from helpers import x``) from any working directory, as Python lets
a script do.

A module found only through the working directory (``my_rewards:fn`` with ``my_rewards.py``
there) would not be found by a process started elsewhere (``dapo eval CHECKPOINT``, a Ray rank):
:func:`working_directory_origin` names the directory, which a run's saved config records in its
``python_path`` and :func:`use_python_path` puts back on sys.path.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType


def is_file_location(location: str) -> bool:
    return location.endswith(".py") or os.sep in location or "/" in location


def use_python_path(directories: list[str]) -> None:
    """Append each of ``directories`` (``~`` expanded, relative ones read from the working
    directory) to sys.path, unless it is there already: after everything else, so that none
    shadows an installed package or the standard library. A missing directory is appended too:
    the import system skips it, as it skips one on PYTHONPATH."""
    for directory in directories:
        path = os.path.abspath(os.path.expanduser(directory))
        if path not in sys.path:
            sys.path.append(path)


def import_user_code(location: str, what: str, error: type[Exception] = ImportError) -> ModuleType:
    """Import ``location``; on failure raise ``error`` with a message that starts with ``what``."""
    if not is_file_location(location):
        if os.getcwd() not in sys.path:  # "my_rewards:fn" should find my_rewards.py in the run dir
            sys.path.append(os.getcwd())
        try:
            return importlib.import_module(location)
        except (Exception, SystemExit) as exc:  # sys.exit() at import too: said, not the process's exit
            hint, top = "", location.partition(".")[0]
            if isinstance(exc, ModuleNotFoundError) and exc.name == top:
                hint = (f" (looked for on sys.path and in the working directory {os.getcwd()}; for a module in "
                        "another directory, add that directory to the config's python_path)")
            elif isinstance(exc, ModuleNotFoundError) and exc.name == location and (found := _shadowing_package(location)):
                # the package part found elsewhere first (a standard-library package: test, email, json)
                hint = (f" (the package {top} was imported from {found}, not from the working directory's {top}/, "
                        f"which it shadows: name the file instead, '{Path(*location.split('.')).with_suffix('.py')}')")
            raise error(f"{what}: importing module {location} raised {type(exc).__name__}: {exc}{hint}") from exc
    path = os.path.abspath(os.path.expanduser(location))
    if not os.path.isfile(path):
        raise error(f"{what}: file {path} does not exist")
    use_python_path([os.path.dirname(path)])  # its sibling modules, from any working directory
    module_name = _own_module_name(path) or "dapo_user_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    if module_name in sys.modules:
        return sys.modules[module_name]
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise error(f"{what}: cannot import {path}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module  # before exec: a failed import is removed again below
    try:
        module_spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        del sys.modules[module_name]
        raise error(f"{what}: importing {path} raised {type(exc).__name__}: {exc}") from exc
    return module


def _own_module_name(path: str) -> str | None:
    """The file's own module name (``rewards`` for ``dir/rewards.py``) when importing that name
    gives this very file (its directory is on sys.path and nothing before it holds the name), so
    that a process its code starts with multiprocessing's spawn or forkserver, which imports a
    function by its module's name, finds it; None otherwise (the file then gets a name of its own)."""
    name = Path(path).stem
    if not name.isidentifier():
        return None
    if (loaded := sys.modules.get(name)) is not None:
        origin = getattr(loaded, "__file__", None)
    else:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
        origin = spec.origin if spec is not None else None
    return name if origin and os.path.isfile(origin) and os.path.samefile(origin, path) else None


def _shadowing_package(location: str) -> str | None:
    """Where the package of dotted module path ``location`` was imported from, when the working
    directory holds the module's file under a folder of that name the import did not take; None
    when it did (the module is missing from the working directory's package itself)."""
    top = location.partition(".")[0]
    package = sys.modules.get(top)
    if package is None or not Path(*location.split(".")).with_suffix(".py").is_file():
        return None
    places = [os.path.dirname(package.__file__)] if getattr(package, "__file__", None) else list(getattr(package, "__path__", []))
    if any(Path(place).resolve() == Path(top).resolve() for place in places):  # the working directory's own
        return None
    return getattr(package, "__file__", None) or ", ".join(places) or "the interpreter (a built-in module)"


def shadowing_note(location: str, module: ModuleType, name: str = "") -> str:
    """Where module path ``location`` was imported from, when the working directory holds a file of
    that name the import did not take (the working directory is looked in last: a module of the
    standard library or an installed one, ``test``, ``code``, comes first); "" otherwise. With
    ``name`` (a reward function's), the ``file.py:name`` form that imports the file."""
    imported = getattr(module, "__file__", None)
    own = Path(*location.split(".")).with_suffix(".py")
    if is_file_location(location) or not own.is_file() or (imported and Path(imported).resolve() == own.resolve()):
        return ""
    return (f"; {location} was imported from {imported or 'the interpreter (a built-in module)'}, not from the working "
            f"directory's {own}, which it shadows: name the file instead, '{own}{':' + name if name else ''}'")


def working_directory_origin(location: str) -> str | None:
    """The directory (absolute) that module path ``location``'s top-level package is imported
    from when only the working directory finds it: the working directory itself (where
    :func:`import_user_code` looks last), or a sys.path entry that depends on it (``''``, a
    relative one). None when the import system finds it otherwise (an installed or standard
    module, a built-in one, a sys.path entry such as PYTHONPATH's or python_path's), or not at all."""
    top = location.partition(".")[0]
    cwd = os.getcwd()
    real_cwd = os.path.realpath(cwd)
    entries = [entry for entry in sys.path if isinstance(entry, str)]

    def depends_on_cwd(entry: str) -> bool:
        return not os.path.isabs(entry) or os.path.realpath(entry) == real_cwd

    if _finds(top, [entry for entry in entries if not depends_on_cwd(entry)]):
        return None
    for entry in [*(entry for entry in entries if depends_on_cwd(entry)), cwd]:
        directory = os.path.abspath(entry)
        if importlib.machinery.PathFinder.find_spec(top, [directory]) is not None:
            return directory
    return None


def _finds(top: str, path: list[str]) -> bool:
    """Whether the import system finds the top-level module ``top`` with ``path`` as sys.path
    (its other finders, the built-in modules' and an editable install's, asked as they are)."""
    return _find_spec(top, path) is not None


def _find_spec(top: str, path: list[str]) -> importlib.machinery.ModuleSpec | None:
    """The spec the import system finds for top-level module ``top`` with ``path`` as sys.path, without importing it."""
    for finder in sys.meta_path:
        try:
            if finder is importlib.machinery.PathFinder:
                spec = importlib.machinery.PathFinder.find_spec(top, path)
            else:
                spec = finder.find_spec(top, None)
        except Exception:  # (a finder without find_spec, or one that fails on a name not its own)
            spec = None
        if spec is not None:
            return spec
    return None


def source_digest(location: str) -> str | None:
    """A digest (sha256, 16 hex digits) of ``location``'s source: the file, or the file a module
    path imports from (its own file only, not what it imports), found as :func:`import_user_code`
    finds it (the working directory last) but without importing it. None when there is none to read
    (a module not found, a built-in one)."""
    path = os.path.abspath(os.path.expanduser(location)) if is_file_location(location) else _module_file(location)
    try:
        with open(path or "", "rb") as source:
            return hashlib.sha256(source.read()).hexdigest()[:16]
    except OSError:
        return None


def _module_file(location: str) -> str | None:
    """The file module path ``location`` is imported from, found without importing it (nor its
    packages: their code may fail, or be slow, in a process that never calls it)."""
    if (module := sys.modules.get(location)) is not None:
        return getattr(module, "__file__", None)
    top, *parts = location.split(".")
    spec = _find_spec(top, [entry for entry in sys.path if isinstance(entry, str)] + [os.getcwd()])
    for part in parts:  # a package's modules: in its directories
        search = list(spec.submodule_search_locations or []) if spec is not None else []
        try:
            spec = importlib.machinery.PathFinder.find_spec(part, search) if search else None
        except Exception:
            spec = None
    return spec.origin if spec is not None and spec.has_location else None


def source_digests(locations: list[str]) -> dict[str, str | None]:
    """:func:`source_digest` of each of ``locations``."""
    return {location: source_digest(location) for location in locations}


def edited_sources(saved: dict[str, str | None], now: dict[str, str | None]) -> list[str]:
    """The locations whose source digest differs between ``saved`` and ``now`` (one missing, or
    with no digest, on either side: not known to differ)."""
    return [location for location, digest in now.items()
            if None not in (digest, saved.get(location)) and digest != saved[location]]
