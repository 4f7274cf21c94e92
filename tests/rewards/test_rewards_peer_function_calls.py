"""How a reward function is called, read at load (dapo.rewards.peer_functions, dapo.user_code,
dapo.rewards.user_functions): the shapes of verl's and TRL's functions a user brings (fewer of
verl's names, defaults, text fields, plural names, async), a function mixing verl's names with
this project's (refused at load: by keyword, every call would fail), and imports that fail."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import ModuleType

import pytest

from dapo.rewards import RewardFunctionError, load_reward_function
from dapo.rewards.user_functions import split_spec
from dapo.user_code import shadowing_note


def loaded(tmp_path: Path, source: str, name: str = "fn"):
    module = tmp_path / f"rewards_{abs(hash(source))}.py"
    module.write_text(source)
    return load_reward_function(f"{module}:{name}")


def test_verls_name_with_this_projects_extra_is_refused_at_load_not_failed_at_every_call(tmp_path):
    """fn(solution_str, ground_truth, extra): taking solution_str, it is called as verl calls it, by
    keyword, with no extra: every call raised TypeError, and the start-up check blamed the data."""
    with pytest.raises(RewardFunctionError, match=r"a verl reward function \(it takes solution_str\) that requires "
                                                  r"extra: verl passes data_source, solution_str, ground_truth, "
                                                  r"extra_info, by keyword; give it a default"):
        loaded(tmp_path, "def fn(solution_str, ground_truth, extra):\n    return 1.0\n")
    with pytest.raises(RewardFunctionError, match=r"requires ground_truth: verl passes data_sources, solution_strs"):
        loaded(tmp_path, "def fn(solution_strs, ground_truth, **kwargs):\n    return [1.0]\n")
    defaulted = loaded(tmp_path, "def fn(solution_str, ground_truth, extra=None):\n    return float(extra is None)\n")
    assert defaulted("Answer: 1", "1", {"extra_info": {"a": 1}}) == 1.0


def test_a_verl_function_taking_fewer_of_verls_names_is_passed_only_those(tmp_path):
    """verl's math_dapo: compute_score(solution_str, ground_truth), no **kwargs."""
    fn = loaded(tmp_path, "def fn(solution_str, ground_truth):\n    return float(solution_str.endswith(ground_truth))\n")
    assert fn("Answer: 1", "1", {"extra_info": {"x": 1}}) == 1.0


def test_a_verl_dicts_text_is_left_out_but_its_answer_and_a_plural_functions_per_item(tmp_path):
    fn = loaded(tmp_path, "def fn(solution_str, ground_truth, **kw):\n"
                          "    return {'score': 1.0, 'note': 'checked', 'pred': '1', 'len': 9}\n")
    assert fn("Answer: 1", "1", {}) == {"score": 1.0, "pred": "1", "len": 9}
    batched = loaded(tmp_path, "def fn(solution_strs, ground_truths, **kw):\n"
                               "    return [{'score': float(s.endswith(g)), 'note': 'x'} for s, g in zip(solution_strs, "
                               "ground_truths)]\n")
    assert batched(["a 1", "a 2"], ["1", "1"], [{}, {}]) == [{"score": 1.0}, {"score": 0.0}]


def test_an_async_verl_function_s_batch_is_awaited_together(tmp_path):
    fn = loaded(tmp_path, "async def fn(solution_str, ground_truth, **kw):\n    return 0.5\n")
    assert asyncio.run(fn(["a", "b"], ["1", "1"], [{}, {}])) == [0.5, 0.5]


def test_a_trl_column_with_a_default_is_not_required_of_the_data(tmp_path):
    fn = loaded(tmp_path, "def fn(completions, solution=None, **kw):\n    return [1.0] * len(completions)\n")
    assert fn.required_columns == ()
    needs = loaded(tmp_path, "def fn(completions, solution, **kw):\n    return [1.0] * len(completions)\n")
    assert needs.required_columns == ("solution",)


def test_a_spec_without_a_file_or_module_is_refused_as_a_spec():
    for spec in (":fn", "rewards.py:", "rewards.py"):
        with pytest.raises(RewardFunctionError, match=r"expected 'path/to/file.py:function'"):
            split_spec(spec)


def test_a_file_that_exits_at_import_is_said_and_said_again(tmp_path):
    """sys.exit() (argparse's parse_args) at import ended the process with no message; a second
    load of a file whose import failed said its error again, not 'has no attribute' of the half-made module."""
    module = tmp_path / "exits.py"
    module.write_text("import sys\ndef fn(response, ground_truth, extra):\n    return 1.0\nsys.exit(2)\n")
    for _ in range(2):
        with pytest.raises(RewardFunctionError, match=r"importing .*exits.py raised SystemExit: 2"):
            load_reward_function(f"{module}:fn")


def test_a_module_imported_from_the_working_directory_shadows_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_rewards.py").write_text("")
    own = ModuleType("my_rewards")
    own.__file__ = str(tmp_path / "my_rewards.py")
    assert shadowing_note("my_rewards", own, "fn") == ""
    installed = ModuleType("my_rewards")
    installed.__file__ = "/usr/lib/python3/my_rewards.py"
    assert shadowing_note("my_rewards", installed, "fn").startswith(
        "; my_rewards was imported from /usr/lib/python3/my_rewards.py, not from the working directory's my_rewards.py")


def test_a_spec_s_two_colons_or_spaces_are_named():
    with pytest.raises(RewardFunctionError, match=r"expected 'path/to/file.py:function' .*; it has two colons"):
        split_spec("my_rewards.py::good")
    with pytest.raises(RewardFunctionError, match=r"; 'good ' has spaces around it"):
        split_spec("my_rewards.py:good ")


def test_a_trl_function_without_kwargs_is_told_what_makes_it_trls(tmp_path):
    with pytest.raises(RewardFunctionError, match=r"its signature is \(prompts, completions\).* takes \*\*kwargs"):
        loaded(tmp_path, "def fn(prompts, completions):\n    return [1.0] * len(completions)\n")


def test_a_singular_verl_function_returning_a_list_is_not_told_to_set_batch_size(tmp_path):
    """batch_size does not change how verl's singular names are called: the hint was a dead end."""
    import pickle

    from dapo.rewards.worker import run_task

    task = pickle.dumps(("fn", 0, "a b", "1", {}))
    fn = loaded(tmp_path, "def fn(solution_str, ground_truth, **kw):\n    return [1.0]\n")
    kind, why = run_task(task, [fn])
    assert kind == "bad" and "batch_size" not in why
    assert why.endswith("(verl calls a function of its singular names, solution_str, once per response: it returns "
                        "one score; its plural names, solution_strs, make it a batched one)")
