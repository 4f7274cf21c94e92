"""The built-in tokenizer and base model: exact round trips, caching, determinism."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from dapo.builtin import BaseModelRecipe, build_tokenizer, ensure_base_model, save_tokenizer
from dapo.data.arithmetic import solution_text

TEXT = string.printable + "12+34=\n4+2=6 3+1=4\nAnswer: 46\n\n  spaces  and\ttabs"
TINY = BaseModelRecipe(
    hidden_size=32,
    num_layers=1,
    num_heads=2,
    num_kv_heads=1,
    intermediate_size=64,
    sft_steps=3,
    batch_size=4,
    warmup_steps=1,
    num_problems=64,
)


def test_tokenizer_round_trips_through_auto_tokenizer(tmp_path: Path) -> None:
    tokenizer = build_tokenizer()
    save_tokenizer(tokenizer, tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    ids = loaded.encode(TEXT)
    assert ids == tokenizer.encode(TEXT)
    assert ids[0] == loaded.bos_token_id and len(ids) == len(TEXT) + 1  # one token per character
    assert loaded.decode(ids, skip_special_tokens=True) == TEXT
    assert loaded.decode(loaded.encode("\n", add_special_tokens=False)) == "\n"
    assert (loaded.eos_token, loaded.pad_token, loaded.padding_side) == ("<eos>", "<pad>", "left")


def test_tokenizer_round_trips_next_to_the_built_model(tmp_path: Path) -> None:
    model_dir = ensure_base_model(str(tmp_path), TINY, progress=False)
    loaded = AutoTokenizer.from_pretrained(model_dir)  # a qwen2 config sits next to it
    assert loaded.decode(loaded.encode(TEXT), skip_special_tokens=True) == TEXT


def test_base_model_is_cached_loadable_and_deterministic(tmp_path: Path) -> None:
    first = ensure_base_model(str(tmp_path / "a"), TINY, progress=False)
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert ensure_base_model(str(tmp_path / "a"), TINY, progress=False) == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp  # not rebuilt
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [".lock", first.name]  # no staging left over
    second = ensure_base_model(str(tmp_path / "b"), TINY, progress=False)
    model_a = AutoModelForCausalLM.from_pretrained(first)
    model_b = AutoModelForCausalLM.from_pretrained(second)
    for (name, a), (_, b) in zip(model_a.state_dict().items(), model_b.state_dict().items()):
        assert torch.equal(a, b), name
    fresh = AutoModelForCausalLM.from_config(model_a.config)
    assert not torch.equal(fresh.model.embed_tokens.weight, model_a.model.embed_tokens.weight)


def test_a_different_recipe_gets_its_own_cache_entry(tmp_path: Path) -> None:
    first = ensure_base_model(str(tmp_path), TINY, progress=False)
    other = ensure_base_model(
        str(tmp_path), BaseModelRecipe(**{**TINY.__dict__, "seed": 1}), progress=False
    )
    assert first != other and (other / "config.json").exists()


def test_model_path_names_a_builtin_recipe():
    from dapo.builtin import BUILTIN_RECIPES, recipe_for_model_path

    assert recipe_for_model_path("builtin") == BaseModelRecipe()
    mixed = recipe_for_model_path("builtin:mixed")
    assert mixed.ops == ["+", "-", "*"] and mixed.cache_key() != BaseModelRecipe().cache_key()
    mixed.sft_steps = 1  # a copy: the registry is untouched
    assert BUILTIN_RECIPES["mixed"].sft_steps != 1
    with pytest.raises(ValueError, match="builtin:mixed"):
        recipe_for_model_path("builtin:nope")


def test_the_cache_key_covers_the_tokenizer_and_the_sft_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    # Both are code, not recipe fields: a change to either must not reuse a model trained on the old.
    from dapo.builtin import tokenizer
    from dapo.data import arithmetic

    key = BaseModelRecipe().cache_key()
    assert BaseModelRecipe(direct_share=0.3).cache_key() != key
    for module, name, changed in [
        (arithmetic, "solution_text", lambda problem: "changed " + solution_text(problem)),
        (tokenizer, "build_tokenizer", lambda: _tokenizer_with_another_bos()),
    ]:
        with monkeypatch.context() as patch:
            patch.setattr(module, name, changed)
            _clear_fingerprints()
            assert BaseModelRecipe().cache_key() != key, name
    _clear_fingerprints()
    assert BaseModelRecipe().cache_key() == key


def _clear_fingerprints() -> None:
    from dapo.builtin import recipes

    recipes._build_inputs_fingerprint.cache_clear()
    recipes._sft_problems_digest.cache_clear()


@pytest.mark.parametrize("change", ["operands", "answer", "solution"])
def test_the_cache_key_covers_every_sft_problem_the_generator_gives(monkeypatch: pytest.MonkeyPatch, change: str):
    """The key fingerprinted one problem per operator: a generator change past those (here the
    10,000th of the recipe's 20,000 problems) reused a base model SFT-ed on the old problems."""
    import dataclasses

    from dapo.builtin import recipes
    from dapo.data import arithmetic

    key, fingerprint = BaseModelRecipe().cache_key(), recipes._build_inputs_fingerprint()
    real_make, real_solution = arithmetic.make_arithmetic_problems, arithmetic.solution_text
    later = real_make(20000, "train", 1, 3, ["+"])[9999]

    def make(n: int, *args, **kwargs):
        problems = real_make(n, *args, **kwargs)
        if n > 9999 and change != "solution":
            p = problems[9999]
            problems[9999] = dataclasses.replace(p, extra={**p.extra, "a": p.extra["b"], "b": p.extra["a"]}) \
                if change == "operands" else dataclasses.replace(p, ground_truth=p.ground_truth + "0")
        return problems

    def solution(problem) -> str:
        return real_solution(problem) + (" " if problem.prompt == later.prompt else "")

    with monkeypatch.context() as patch:
        patch.setattr(arithmetic, "make_arithmetic_problems", make)
        patch.setattr(arithmetic, "solution_text", solution if change == "solution" else real_solution)
        _clear_fingerprints()
        assert recipes._build_inputs_fingerprint() == fingerprint  # what the key held before: no change seen
        assert BaseModelRecipe().cache_key() != key
    _clear_fingerprints()
    assert BaseModelRecipe().cache_key() == key


def test_the_default_recipes_key_finds_its_shipped_weights_under_their_file_name() -> None:
    """The key changed (it digests every SFT problem now), the problems and so the weights did
    not: the default run still installs them in seconds instead of a 9-minute build."""
    from dapo.builtin import shipped

    key = BaseModelRecipe().cache_key()
    assert key in shipped.SHIPPED and shipped.shipped_weights(key) is not None
    assert shipped.checksum_ok(key, shipped.shipped_weights(key))


def _tokenizer_with_another_bos():
    tokenizer = build_tokenizer()
    tokenizer.add_special_tokens({"bos_token": "<start>"})
    return tokenizer


def test_balanced_sft_batches_draw_each_digit_count_bucket_equally_often():
    import random
    from collections import Counter

    from dapo.builtin.base_model import _draw_batch, _sft_problems, digit_count_buckets

    problems = _sft_problems(BaseModelRecipe(num_problems=5000))
    buckets = digit_count_buckets(problems)
    sizes = sorted(len(bucket) for bucket in buckets)
    assert len(buckets) == 9 and sizes[0] < 100 < 400 < sizes[-1]  # one-digit sums are scarce
    key = lambda p: (len(str(p.extra["a"])), len(str(p.extra["b"])))  # noqa: E731
    assert all(len({key(problems[i]) for i in bucket}) == 1 for bucket in buckets)
    drawn = Counter(key(problems[i]) for i in _draw_batch(random.Random(0), len(problems), 18000, buckets))
    assert all(abs(count - 2000) < 200 for count in drawn.values())  # 1/9 each, not 90/5000
    # Unbalanced: distinct examples drawn uniformly, as random.sample draws them.
    assert _draw_batch(random.Random(0), 5000, 64, None) == random.Random(0).sample(range(5000), 64)


def test_sft_examples_mix_direct_answers_and_traces_with_untrained_openings():
    from dapo.builtin.base_model import sft_examples

    tokenizer = build_tokenizer()
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    prompt_len = lambda ids: decode(ids).index("=") + 2  # <bos> + prompt up to "="  # noqa: E731

    plain = sft_examples(tokenizer, BaseModelRecipe(num_problems=400))
    assert all(start == prompt_len(ids) for ids, start in plain)  # loss on the whole response
    assert all(decode(ids[start:])[0].isdigit() for ids, start in plain)  # every answer a trace

    mixed = sft_examples(tokenizer, BaseModelRecipe(num_problems=4000, direct_share=0.3, trace_opening_share=0.1))
    direct = [(ids, s) for ids, s in mixed if decode(ids[prompt_len(ids):]).startswith("Answer: ")]
    traces = [(ids, s) for ids, s in mixed if decode(ids[prompt_len(ids):]).startswith("Steps: ")]
    assert len(direct) + len(traces) == 4000 and abs(len(direct) / 4000 - 0.3) < 0.03
    assert all(s == prompt_len(ids) for ids, s in direct)
    opened = sum(s == prompt_len(ids) for ids, s in traces) / len(traces)
    assert abs(opened - 0.1) < 0.02
    assert all(s == prompt_len(ids) + 1 for ids, s in traces if s != prompt_len(ids))


def test_report_breaks_accuracy_down_by_operator_and_strategy():
    from dapo.builtin.report import breakdown
    from dapo.data.records import Problem

    plus = Problem(uid="a", prompt="1+2=", ground_truth="3", extra={"op": "+"})
    times = Problem(uid="b", prompt="2*3=", ground_truth="6", extra={"op": "*"})
    scored = [(plus, "Steps: 1+2=3\nAnswer: 3", True), (plus, "Answer: 4", False),
              (times, "Answer: 6", True), (times, "x", False)]
    assert breakdown(scored) == [
        "  operator *: 50% of responses, 50.0% correct",
        "  operator +: 50% of responses, 50.0% correct",
        "  strategy direct: 50% of responses, 50.0% correct",
        "  strategy other: 25% of responses, 0.0% correct",
        "  strategy trace: 25% of responses, 100.0% correct",
    ]


def test_the_default_base_model_installs_from_its_shipped_weights_in_seconds(tmp_path: Path) -> None:
    import json
    import os
    import stat
    import time

    from dapo.builtin import shipped

    started = time.perf_counter()
    previous = os.umask(0o022)
    try:
        directory = ensure_base_model(str(tmp_path), progress=False)  # the default recipe: no 5-minute build
    finally:
        os.umask(previous)
    assert time.perf_counter() - started < 20
    # a cache others can read (not mkdtemp's 0700, not safetensors' 0600)
    assert {stat.S_IMODE(p.stat().st_mode) for p in directory.iterdir()} == {0o644}
    assert stat.S_IMODE(directory.stat().st_mode) == 0o755
    key = BaseModelRecipe().cache_key()
    assert shipped.sha256_of(directory / "model.safetensors") == shipped.SHIPPED[key]
    assert json.loads((directory / "recipe.json").read_text())["source"].startswith("shipped")
    model = AutoModelForCausalLM.from_pretrained(directory)
    assert model.config.hidden_size == BaseModelRecipe().hidden_size
    assert model.generation_config.eos_token_id == build_tokenizer().eos_token_id
    tokenizer = AutoTokenizer.from_pretrained(directory)
    assert tokenizer.decode(tokenizer(TEXT)["input_ids"], skip_special_tokens=True) == TEXT


def test_the_cache_removes_the_staging_directories_of_builds_killed_a_day_ago(tmp_path: Path) -> None:
    import os
    import time

    abandoned, recent = tmp_path / ".building-killed", tmp_path / ".building-running"
    for staging in (abandoned, recent):
        staging.mkdir()
        (staging / "model.safetensors").write_bytes(b"partial")
    day_and_a_minute_ago = time.time() - 24 * 3600 - 60
    os.utime(abandoned, (day_and_a_minute_ago, day_and_a_minute_ago))
    ensure_base_model(str(tmp_path), progress=False)  # the default recipe: installed from its shipped weights
    assert not abandoned.exists() and recent.exists()  # a build of another process may still be running
    os.utime(recent, (day_and_a_minute_ago, day_and_a_minute_ago))
    ensure_base_model(str(tmp_path), progress=False)  # cached now: the usual case after a killed build's rerun
    assert not recent.exists()


def test_a_damaged_cached_model_is_installed_again(tmp_path: Path) -> None:
    directory = ensure_base_model(str(tmp_path), progress=False)
    weights = directory / "model.safetensors"
    intact = weights.read_bytes()
    weights.write_bytes(intact[: len(intact) // 2])  # a torn write: the size a power loss leaves
    with pytest.warns(UserWarning, match="damaged .*does not match the SHA-256"):
        assert ensure_base_model(str(tmp_path), progress=False) == directory
    assert weights.read_bytes() == intact
    AutoModelForCausalLM.from_pretrained(directory)
    (directory / "recipe.json").unlink()
    with pytest.warns(UserWarning, match="damaged .*recipe.json"):
        ensure_base_model(str(tmp_path), progress=False)
    # without them from_pretrained would build an empty-vocabulary tokenizer, silently
    (directory / "tokenizer.json").unlink()
    (directory / "tokenizer_config.json").unlink()
    with pytest.warns(UserWarning, match="damaged .*missing tokenizer.json, tokenizer_config.json"):
        ensure_base_model(str(tmp_path), progress=False)
    assert AutoTokenizer.from_pretrained(directory)("12+3")["input_ids"]
    # the entry without its config.json (a hand clean-up, a copy cut short): the rename of a new
    # install into its place failed on every run until it was deleted by hand
    (directory / "config.json").unlink()
    with pytest.warns(UserWarning, match="damaged .*missing config.json"):
        assert ensure_base_model(str(tmp_path), progress=False) == directory
    assert (directory / "config.json").is_file()
    # a config or tokenizer file that changed (not only the weights): a model of another shape, or
    # another vocabulary, loaded without a word
    config = (directory / "config.json").read_text()
    (directory / "config.json").write_text(config.replace('"num_hidden_layers": ', '"num_hidden_layers": 1'))
    with pytest.warns(UserWarning, match="damaged .*config.json does not match the SHA-256"):
        ensure_base_model(str(tmp_path), progress=False)
    assert (directory / "config.json").read_text() == config
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", directory.name]  # nothing left aside


def test_an_entry_cached_before_every_files_checksum_was_recorded_is_still_used(tmp_path: Path) -> None:
    import json
    import warnings

    directory = ensure_base_model(str(tmp_path), progress=False)
    record = json.loads((directory / "recipe.json").read_text())
    assert set(record["files_sha256"]) >= {"model.safetensors", "config.json", "tokenizer.json", "generation_config.json"}
    del record["files_sha256"]
    (directory / "recipe.json").write_text(json.dumps(record))
    inode = directory.stat().st_ino
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ensure_base_model(str(tmp_path), progress=False) == directory
    assert directory.stat().st_ino == inode  # not installed again
    weights = directory / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])  # its weights are still checked
    with pytest.warns(UserWarning, match="damaged .*model.safetensors does not match the SHA-256"):
        ensure_base_model(str(tmp_path), progress=False)


def test_a_process_waiting_to_repair_the_cache_uses_the_copy_another_just_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes finding the same damaged entry: the second one's repair discarded the copy
    the first had just installed (deleting a model that process was loading)."""
    import fcntl
    import threading

    from dapo.builtin import base_model

    directory = ensure_base_model(str(tmp_path), progress=False)
    weights = directory / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    waiting = threading.Event()
    monkeypatch.setattr(base_model, "print", lambda *a, **k: waiting.set() if "waiting" in a[0] else None,
                        raising=False)
    returned: list[Path] = []
    with open(tmp_path / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other process, repairing it
        second = threading.Thread(target=lambda: returned.append(ensure_base_model(str(tmp_path))), daemon=True)
        second.start()
        assert waiting.wait(60), "the second process did not wait for the lock"
        base_model._discard(directory)
        base_model._install(BaseModelRecipe(), tmp_path, directory, progress=False)
        repaired = directory.stat().st_ino
        fcntl.flock(lock, fcntl.LOCK_UN)
    second.join(60)
    assert returned == [directory]
    assert directory.stat().st_ino == repaired  # the repaired copy was used, not discarded
    AutoModelForCausalLM.from_pretrained(directory)


def test_damaged_shipped_weights_are_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dapo.builtin import base_model, shipped

    key = BaseModelRecipe().cache_key()
    monkeypatch.setitem(shipped.SHIPPED, key, "0" * 64)  # as if the file had been altered

    def build_instead(*args, **kwargs):
        raise RuntimeError("built")

    monkeypatch.setattr(base_model, "build_base_model", build_instead)
    with pytest.warns(UserWarning, match="does not match its SHA-256"), pytest.raises(RuntimeError, match="built"):
        ensure_base_model(str(tmp_path), progress=False)


def test_a_non_finite_sft_loss_stops_before_the_weights_take_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The base model's supervised warm start has the RL update's guard: a NaN loss (a recipe's
    learning rate or data gone wrong) raises before backward and the optimizer step."""
    from transformers import Qwen2ForCausalLM

    from dapo.builtin import base_model

    recipe = BaseModelRecipe(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64,
                             sft_steps=3, batch_size=4, num_problems=50, bf16_autocast=False)
    tokenizer = build_tokenizer()
    model = Qwen2ForCausalLM(base_model._model_config(recipe, tokenizer))
    before = [p.detach().clone() for p in model.parameters()]
    monkeypatch.setattr(base_model.F, "cross_entropy",
                        lambda *args, **kwargs: torch.tensor(float("nan"), requires_grad=True))
    with pytest.raises(RuntimeError, match=r"SFT loss is nan at step 1 of 3: stopped before the weights take it"):
        base_model.supervised_finetune(model, tokenizer, recipe, progress=False)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


@pytest.mark.parametrize("argv", [["--samples", "0"], ["--eval-size", "0"]])
def test_the_report_refuses_zero_samples_or_problems_before_building(argv, capsys):
    """(it divided by zero after building and evaluating the model)"""
    from dapo.builtin.report import main as report_main

    with pytest.raises(SystemExit) as stop:
        report_main(argv)
    assert stop.value.code == 2 and "is not at least 1" in capsys.readouterr().err
