"""dapo.user_code: a reward file imports the modules beside it from any working directory, and
which module names only the working directory finds (what a run's saved config records in
python_path)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from dapo.config import ConfigError, load_config
from dapo.rewards.pool import WorkerPool
from dapo.rewards.user_functions import RewardFunctionError, load_reward_function
from dapo.user_code import (
    edited_sources,
    import_user_code,
    source_digest,
    source_digests,
    use_python_path,
    working_directory_origin,
)

REWARD_WITH_A_HELPER = ("from uc_helpers import bonus\n\n"
                        "def score(response, ground_truth, extra):\n    return bonus()\n")


@pytest.fixture
def restored_imports(monkeypatch: pytest.MonkeyPatch):
    """sys.path as it was, and the test's modules forgotten, after."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    modules = set(sys.modules)
    yield
    for name in set(sys.modules) - modules:
        if name.startswith(("uc_", "dapo_user_")):
            del sys.modules[name]


@pytest.fixture
def reward_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A rewards.py that imports uc_helpers.py beside it; the working directory another one."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "rewards.py").write_text(REWARD_WITH_A_HELPER)
    (code / "uc_helpers.py").write_text("def bonus():\n    return 0.75\n")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    return code


def test_a_reward_file_imports_a_module_beside_it_from_another_directory(reward_dir: Path, restored_imports: None):
    assert load_reward_function(f"{reward_dir / 'rewards.py'}:score")("response", "truth", {}) == 0.75
    assert sys.path[-1] == str(reward_dir)  # appended: it shadows no installed module


def test_a_reward_worker_imports_the_module_beside_a_reward_file(reward_dir: Path, restored_imports: None):
    """A worker imports the file itself (the trainer has not): its directory goes on its own sys.path."""
    pool = WorkerPool(1, [f"{reward_dir / 'rewards.py'}:score"], timeout_s=30.0, startup_timeout_s=60.0)
    try:
        [(kind, (score, *_))] = pool.run([("fn", 0, "response", "1", {})])
        assert (kind, score) == ("ok", 0.75)
    finally:
        pool.close()


def test_only_a_module_that_only_the_working_directory_holds_has_an_origin(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restored_imports: None):
    (tmp_path / "uc_local.py").write_text("")
    (tmp_path / "uc_pkg").mkdir()
    (tmp_path / "uc_pkg" / "__init__.py").write_text("")
    (tmp_path / "os.py").write_text("")  # the standard library's still wins
    listed = tmp_path / "listed"
    listed.mkdir()
    (listed / "uc_listed.py").write_text("")
    monkeypatch.syspath_prepend(str(listed))
    monkeypatch.chdir(tmp_path)
    assert working_directory_origin("uc_local") == str(tmp_path)
    assert working_directory_origin("uc_pkg.sub") == str(tmp_path)  # the directory of its top-level package
    for found_anywhere in ("os", "math", "sys", "yaml", "dapo.rewards", "uc_listed", "uc_nowhere"):
        assert working_directory_origin(found_anywhere) is None, found_anywhere
    monkeypatch.syspath_prepend("")  # as `python -c` has it: the working directory, by another name
    assert working_directory_origin("uc_local") == str(tmp_path)


def test_python_path_is_appended_once_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               restored_imports: None):
    monkeypatch.chdir(tmp_path)
    before = list(sys.path)
    use_python_path(["code", str(tmp_path / "code"), "~"])
    assert sys.path == [*before, str(tmp_path / "code"), os.path.expanduser("~")]


def test_a_module_found_nowhere_says_where_it_was_looked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             restored_imports: None):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RewardFunctionError, match=f"in the working directory {tmp_path}; .* python_path"):
        import_user_code("uc_nowhere", "reward function 'uc_nowhere:f'", RewardFunctionError)


def test_a_source_digest_follows_a_files_and_a_modules_own_file(tmp_path: Path, restored_imports: None):
    (tmp_path / "uc_pkg").mkdir()
    (tmp_path / "uc_pkg" / "__init__.py").write_text("")
    module_file, plain_file = tmp_path / "uc_pkg" / "mod.py", tmp_path / "plain.py"
    module_file.write_text("X = 1\n")
    plain_file.write_text("Y = 1\n")
    use_python_path([str(tmp_path)])
    before = source_digests(["uc_pkg.mod", str(plain_file)])
    assert None not in before.values() and source_digests(["uc_pkg.mod", str(plain_file)]) == before
    module_file.write_text("X = 2\n")
    plain_file.write_text("Y = 2\n")
    after = source_digests(["uc_pkg.mod", str(plain_file)])
    assert all(after[location] != before[location] for location in before)
    assert source_digest("no_such_module_anywhere") is None and source_digest(str(tmp_path / "gone.py")) is None


def test_a_module_the_standard_library_shadows_is_named_with_the_file_form(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restored_imports: None):
    """code.py in the working directory, named code:fn (a reward) or code (a plugin): the standard
    library's code module came first (the working directory is looked in last), and the errors
    said only "no attribute 'fn'" and "is not one of [...]"."""
    (tmp_path / "code.py").write_text("def fn(response, ground_truth, extra):\n    return 1.0\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if entry not in ("", str(tmp_path))])
    shadowed = r"code was imported from .*code.py, not from the working directory's code.py, which it shadows"
    with pytest.raises(RewardFunctionError, match=shadowed + r": name the file instead, 'code.py:fn'"):
        load_reward_function("code:fn")
    assert load_reward_function("code.py:fn")("x", "y", {}) == 1.0
    with pytest.raises(ConfigError, match=r"algorithm.advantage='mine' is not one of .*" + shadowed
                       + r": name the file instead, 'code.py'"):
        load_config([], ["algorithm.plugins=[code]", "algorithm.advantage=mine"])


def test_a_package_the_standard_library_shadows_is_named_with_the_file_form(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restored_imports: None):
    """json/myrew.py in the working directory, named json.myrew:fn: the standard library's json
    package came first, and the error said only "No module named 'json.myrew'"."""
    (tmp_path / "json").mkdir()
    (tmp_path / "json" / "myrew.py").write_text("def fn(response, ground_truth, extra):\n    return 1.0\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RewardFunctionError, match=r"No module named 'json.myrew' \(the package json was imported "
                       r"from .*json.__init__.py, not from the working directory's json/, which it shadows: name "
                       r"the file instead, 'json/myrew.py'\)"):
        load_reward_function("json.myrew:fn")
    assert load_reward_function("json/myrew.py:fn")("x", "y", {}) == 1.0
    # the working directory's own package, whose module imports what is not installed: no shadowing
    (tmp_path / "uc_mine").mkdir()
    (tmp_path / "uc_mine" / "__init__.py").write_text("")
    (tmp_path / "uc_mine" / "rew.py").write_text("import uc_missing_dependency\n")
    with pytest.raises(RewardFunctionError, match="No module named 'uc_missing_dependency'") as refused:
        load_reward_function("uc_mine.rew:fn")
    assert "shadows" not in str(refused.value)


def test_a_module_path_is_digested_where_its_import_finds_it_and_not_imported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restored_imports: None):
    """my_rewards:fn, found in the working directory (looked in last, as import_user_code does),
    which the `dapo` command's sys.path lacks: it had no digest, so an edit went unsaid."""
    (tmp_path / "uc_rewards.py").write_text("A = 1\n")
    (tmp_path / "uc_pkg").mkdir()
    (tmp_path / "uc_pkg" / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (tmp_path / "uc_pkg" / "mod.py").write_text("B = 1\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if entry not in ("", str(tmp_path))])
    before = source_digests(["uc_rewards", "uc_pkg.mod"])
    assert None not in before.values() and "uc_pkg" not in sys.modules  # found, its package not run
    (tmp_path / "uc_rewards.py").write_text("A = 2\n")
    assert edited_sources(before, source_digests(["uc_rewards", "uc_pkg.mod"])) == ["uc_rewards"]


def test_a_module_an_editable_install_finds_is_digested(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """`pip install -e .` of a flat layout finds its modules through a finder of sys.meta_path,
    not sys.path: a digest looked for on sys.path alone was None, and an edit went unsaid."""
    import importlib.abc
    import importlib.util

    source = tmp_path / "elsewhere" / "uc_editable.py"
    source.parent.mkdir()
    source.write_text("C = 1\n")

    class EditableFinder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            return importlib.util.spec_from_file_location(name, source) if name == "uc_editable" else None

    monkeypatch.setattr(sys, "meta_path", [EditableFinder(), *sys.meta_path])
    before = source_digest("uc_editable")
    source.write_text("C = 2\n")
    assert before is not None and source_digest("uc_editable") not in (None, before)
    assert "uc_editable" not in sys.modules
