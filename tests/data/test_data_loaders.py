"""Loading parquet / JSONL / datasets directories into problems; duplicates; bad data (how a
file's rows are read, and where a bad one is: test_data_readers.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dapo.config import DataConfig
from dapo.data import DataError, load_problems
from dapo.data.loaders import prompt_uid

AIME = "/work/shared/data/aime-2024.parquet"


def _dapo_row(problem: str, answer: str, index: int) -> dict:
    return {
        "data_source": "math_dapo",
        "prompt": [{"role": "user", "content": f"Solve: {problem}"}],
        "ability": "MATH",
        "reward_model": {"ground_truth": answer, "style": "rule"},
        "extra_info": {"index": index},
    }


def _write_jsonl(path: Path, rows: list[object]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


@pytest.mark.skipif(not Path(AIME).exists(), reason="AIME-2024 file not available")
def test_aime_loads_as_30_problems_with_32_copies_each() -> None:
    loaded = load_problems([AIME], DataConfig(), "eval")
    assert loaded.num_rows == 960 and len(loaded.problems) == 960
    copies: dict[str, list] = {}
    for problem in loaded.problems:
        copies.setdefault(problem.uid, []).append(problem)
    assert len(copies) == 30 and all(len(group) == 32 for group in copies.values())
    # Known answers from the file: the |z|=4 problem is 540, the Aya walk problem is 204.
    by_text = {
        group[0].extra["extra_info"]["raw_problem"][:20]: group[0].ground_truth
        for group in copies.values()
    }
    assert by_text["Find the largest pos"] == "540"
    assert by_text["Every morning Aya go"] == "204"
    assert all(p.data_source == "math_dapo" and isinstance(p.prompt, list) for p in loaded.problems)


def test_dapo_shaped_parquet_with_repeats_deduplicates_for_training(tmp_path: Path) -> None:
    rows = [_dapo_row(f"problem {i}", str(i), i) for i in range(5) for _ in range(7)]
    path = str(tmp_path / "dapo-math-17k.parquet")
    pq.write_table(pa.Table.from_pylist(rows), path)
    train = load_problems([path], DataConfig(), "train")
    assert [p.ground_truth for p in train.problems] == ["0", "1", "2", "3", "4"]
    assert train.num_rows == 35 and train.num_duplicates_dropped == 30
    kept = load_problems([path], DataConfig(dedup_train=False), "train")
    assert len(kept.problems) == 35 and kept.num_duplicates_dropped == 0
    assert kept.counts("train")["data/train_problems"] == 5.0  # copies kept, still 5 problems
    # a copy holds its first copy's prompt (1.8M rows of 18k prompts in memory, with the real file)
    assert kept.problems[0].prompt is kept.problems[1].prompt and kept.problems[0].prompt is not kept.problems[7].prompt
    assert [p.uid for p in kept.problems[:7]] == [prompt_uid(kept.problems[0].prompt)] * 7


def test_a_prompt_under_two_data_sources_is_one_training_problem_and_two_held_out_ones(tmp_path: Path) -> None:
    """Training de-duplicates by prompt; data/train_problems counted (data source, prompt) pairs, so
    with data.dedup_train=false it said 2 problems of what de-duplication calls one."""
    path = _write_jsonl(tmp_path / "two.jsonl", [{"prompt": "1+1?", "answer": "2", "source": source}
                                                 for source in ("a", "b")])
    cfg = DataConfig(prompt_key="prompt", answer_key="answer", data_source_key="source")
    for dedup, rows in ((True, 1), (False, 2)):
        train = load_problems([path], replace(cfg, dedup_train=dedup), "train")
        assert len(train.problems) == rows and train.counts("train")["data/train_problems"] == 1.0
        assert train.describe("train").startswith("train data: 1 problems from")
    held_out = load_problems([path], cfg, "eval")  # avg@k of each source scores it
    assert held_out.counts("eval")["data/eval_problems"] == 2.0


def test_jsonl_with_custom_keys_loads(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "qa.jsonl",
        [{"question": "1+1?", "answer": 2}, {"question": "2+2?", "answer": "4"}],
    )
    cfg = DataConfig(prompt_key="question", answer_key="answer", data_source_key="source")
    loaded = load_problems([path], cfg, "train")
    assert [(p.prompt, p.ground_truth) for p in loaded.problems] == [("1+1?", "2"), ("2+2?", "4")]
    assert loaded.problems[0].data_source == "qa"  # falls back to the file's name


def test_a_flattened_tables_dotted_column_is_read_by_its_name(tmp_path: Path) -> None:
    # pandas' json_normalize / to_parquet writes DAPO-Math's nested answer as one column named
    # "reward_model.ground_truth", which the dotted path lookup could not reach
    path = _write_jsonl(tmp_path / "flat.jsonl", [{"prompt": "1+1?", "reward_model.ground_truth": "2"}])
    loaded = load_problems([path], DataConfig(), "train")
    assert [p.ground_truth for p in loaded.problems] == ["2"]


def test_datasets_directory_loads(tmp_path: Path) -> None:
    import datasets

    datasets.Dataset.from_list([{"question": "3*3?", "answer": "9"}]).save_to_disk(
        str(tmp_path / "ds")
    )
    cfg = DataConfig(prompt_key="question", answer_key="answer")
    loaded = load_problems([str(tmp_path / "ds")], cfg, "eval")
    assert [(p.prompt, p.ground_truth) for p in loaded.problems] == [("3*3?", "9")]
    # saved with a format set (numpy, pandas, arrow): read as the plain rows it holds
    for fmt in ("numpy", "pandas", "arrow"):
        formatted = datasets.Dataset.from_list([{"question": "3*3?", "answer": "9"}]).with_format(fmt)
        formatted.save_to_disk(str(tmp_path / fmt))
        loaded = load_problems([str(tmp_path / fmt)], cfg, "eval")
        assert [(p.prompt, p.ground_truth) for p in loaded.problems] == [("3*3?", "9")], fmt


def test_a_chat_list_stored_as_json_text_loads_as_messages_and_bracketed_text_stays_text(tmp_path: Path) -> None:
    # a CSV export or a string column holds the chat list's JSON: the model would read the JSON
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "3*3?"}]
    texts = ["[1, 2] + [3]: how many elements?", '[{"a": 1}] has how many keys?']
    rows = [{"prompt": json.dumps(messages), "answer": "9"}, *({"prompt": t, "answer": "3"} for t in texts),
            {"prompt": json.dumps(messages, indent=2), "answer": "9"}]  # "[\n  {": was read as text
    path = _write_jsonl(tmp_path / "rows.jsonl", rows)
    loaded = load_problems([path], DataConfig(answer_key="answer", template="none"), "eval")
    assert [p.prompt for p in loaded.problems] == [messages, *texts, messages]


def test_a_chat_list_as_json_text_with_messages_not_read_is_refused_as_the_list_itself_is(tmp_path: Path) -> None:
    """OpenAI content parts, or a null content, in a chat list stored as its JSON text: the row
    loaded, the model to read the list's JSON as the question; the same list in JSONL is refused."""
    parts = [{"role": "user", "content": [{"type": "text", "text": "2+2?"}]}]
    null = [{"role": "system", "content": None}, {"role": "user", "content": "2+2?"}]
    for name, messages in (("parts", parts), ("null", null)):
        for form, prompt in (("text", json.dumps(messages)), ("list", messages)):
            path = _write_jsonl(tmp_path / f"{name}_{form}.jsonl", [{"prompt": "1+1?", "answer": "2"},
                                                                     {"prompt": prompt, "answer": "4"}])
            with pytest.raises(DataError, match=rf"{name}_{form}.jsonl line 2: wrong type at 'prompt': chat messages "
                                                r"must be \{'role': str, 'content': str\}"):
                load_problems([path], DataConfig(answer_key="answer"), "train")
    with pytest.raises(DataError, match="content parts are not read: give each message's text as its content"):
        load_problems([str(tmp_path / "parts_text.jsonl")], DataConfig(answer_key="answer"), "train")


def test_a_null_struct_on_the_answers_path_is_said_to_be_null(tmp_path: Path) -> None:
    """A row whose whole reward_model is null was said to lack the key, "row has keys [...,
    'reward_model']": the key it lists as there."""
    rows = [_dapo_row("1+1", "2", 0), {**_dapo_row("2+2", "4", 1), "reward_model": None}]
    path = _write_jsonl(tmp_path / "dapo.jsonl", rows)
    with pytest.raises(DataError, match=r"dapo.jsonl line 2: missing ground truth at 'reward_model.ground_truth' "
                                        r"\('reward_model' is null\); fix or drop this row, or set data.lenient=true "
                                        r"to skip such rows$"):
        load_problems([path], DataConfig(), "train")


def test_an_integer_past_pythons_digit_limit_is_read_as_its_digits(tmp_path: Path) -> None:
    """json.loads raises a plain ValueError past 4300 digits: the file stopped there, the error
    naming the line before; the answer is its digits."""
    digits = "1" * 5000
    path = tmp_path / "big.jsonl"
    path.write_text('{"prompt": "q", "answer": 1}\n{"prompt": "r", "answer": ' + digits + "}\n")
    loaded = load_problems([str(path)], DataConfig(answer_key="answer"), "train")
    assert [p.ground_truth for p in loaded.problems] == ["1", digits]
    array = tmp_path / "big.json"
    array.write_text('[{"prompt": "q", "answer": ' + digits + "}]")
    assert load_problems([str(array)], DataConfig(answer_key="answer"), "train").problems[0].ground_truth == digits


def test_a_datasets_chat_column_of_sequence_features_loads_as_messages(tmp_path: Path) -> None:
    # Sequence({"role", "content"}) comes back as a dict of lists, not a list of messages
    import datasets

    features = datasets.Features({"prompt": datasets.Sequence({"role": datasets.Value("string"),
                                                               "content": datasets.Value("string")}),
                                  "answer": datasets.Value("string")})
    rows = {"prompt": [{"role": ["system", "user"], "content": ["S", "3*3?"]}], "answer": ["9"]}
    datasets.Dataset.from_dict(rows, features=features).save_to_disk(str(tmp_path / "ds"))
    loaded = load_problems([str(tmp_path / "ds")], DataConfig(answer_key="answer"), "train")
    assert loaded.problems[0].prompt == [{"role": "system", "content": "S"}, {"role": "user", "content": "3*3?"}]


def test_a_data_path_under_home_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    _write_jsonl(tmp_path / "qa.jsonl", [{"prompt": "1+1?", "answer": "2"}])
    loaded = load_problems(["~/qa.jsonl"], DataConfig(answer_key="answer"), "train")
    assert [p.ground_truth for p in loaded.problems] == ["2"]


@pytest.mark.parametrize(("answer", "stored"), [
    (1e-05, "0.00001"), (540.0, "540"), (2.5, "2.5"), (-0.0, "0"),
    (1e23, "1" + "0" * 23), (6.02e23, "602" + "0" * 21),  # were the doubles' binary digits: 99999999999999991611392
])
def test_float_ground_truths_read_as_an_answer_states_them(tmp_path: Path, answer: float, stored: str) -> None:
    path = _write_jsonl(tmp_path / "qa.jsonl", [{"prompt": "q", "answer": answer}])
    assert load_problems([path], DataConfig(answer_key="answer"), "train").problems[0].ground_truth == stored


def test_a_json_number_with_more_digits_than_a_double_holds_is_read_as_written(tmp_path: Path) -> None:
    """JSON's floats went through Python's float: 3.14159265358979323846 read 3.141592653589793, and
    a response stating the file's answer scored wrong. Numbers a double holds read as before."""
    literals = ["3.14159265358979323846", "12345678901234567890.5", "0.33333333333333333333", "2.50", "1.5e-3", "1E+2",
                "0.30000001192092896"]  # (a float32 column written by json.dumps: its double, read as 0.3 as in parquet)
    lines = [f'{{"prompt": "q{i}", "answer": {literal}}}' for i, literal in enumerate(literals)]
    (tmp_path / "qa.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "qa.json").write_text("[" + ", ".join(lines) + "]")
    expected = ["3.14159265358979323846", "12345678901234567890.5", "0.33333333333333333333", "2.5", "0.0015", "100",
                "0.3"]
    for name in ("qa.jsonl", "qa.json"):
        problems = load_problems([str(tmp_path / name)], DataConfig(answer_key="answer"), "train").problems
        assert [p.ground_truth for p in problems] == expected


def test_a_float32_parquet_answer_reads_as_written(tmp_path: Path) -> None:
    path = str(tmp_path / "f32.parquet")
    table = pa.table({"prompt": ["q", "r"], "answer": pa.array([0.3, 2.0**40], type=pa.float32())})
    pq.write_table(table, path)
    problems = load_problems([path], DataConfig(answer_key="answer"), "train").problems
    # a whole one is its exact value, not float32's shortest digits (1099511600000)
    assert [p.ground_truth for p in problems] == ["0.3", "1099511627776"]


def test_rows_that_would_fail_later_are_refused_naming_file_and_row(tmp_path: Path) -> None:
    """A NaN answer, or a lone UTF-16 surrogate (a JSON escape cut in half) that would stop
    training hours later when the tokenizer met it."""
    nan = tmp_path / "nan.jsonl"
    nan.write_text('{"prompt": "q", "answer": 1}\n{"prompt": "q2", "answer": NaN}\n')
    with pytest.raises(DataError, match=r"nan.jsonl line 2: ground truth .* is nan"):
        load_problems([str(nan)], DataConfig(answer_key="answer"), "train")
    cut = tmp_path / "cut.jsonl"
    cut.write_text('{"prompt": "ok", "answer": "1"}\n{"prompt": "x \\ud835", "answer": "2"}\n')
    with pytest.raises(DataError, match=r"cut.jsonl line 2: invalid text at 'prompt'"):
        load_problems([str(cut)], DataConfig(answer_key="answer"), "train")
    # a chat prompt that ends with the answer: the policy would read it, then answer after it
    solved = _write_jsonl(tmp_path / "solved.jsonl", [
        {"prompt": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"},
                    {"role": "user", "content": "3+3?"}], "answer": "6"},  # a few-shot prompt: fine
        {"prompt": [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2"}], "answer": "2"}])
    with pytest.raises(DataError, match=r"solved.jsonl line 2: the prompt at 'prompt' ends with an assistant message"
                                        r".* or set data.assistant_prefill=true where it is a prefill"):
        load_problems([solved], DataConfig(answer_key="answer"), "train")
    # unless it is a prefill the response continues (TRL's reading), said so; in a table too
    prefilled = load_problems([solved], DataConfig(answer_key="answer", assistant_prefill=True), "train").problems
    assert prefilled[1].prompt[-1] == {"role": "assistant", "content": "2"}
    table = tmp_path / "solved.parquet"
    pq.write_table(pa.Table.from_pylist([json.loads(line) for line in Path(solved).read_text().splitlines()]), table)
    with pytest.raises(DataError, match=r"solved.parquet row 1 \(0-based\): the prompt at 'prompt' ends with an assistant message"):
        load_problems([str(table)], DataConfig(answer_key="answer"), "train")
    assert len(load_problems([str(table)], DataConfig(answer_key="answer", assistant_prefill=True), "train").problems) == 2


def test_a_nested_prompt_key_leaves_its_struct_to_reward_functions(tmp_path: Path) -> None:
    row = {**_dapo_row("p", "1", 0), "extra_info": {"index": 0, "raw_problem": "What is 1?"}}
    path = _write_jsonl(tmp_path / "dapo.jsonl", [row])
    [problem] = load_problems([path], DataConfig(prompt_key="extra_info.raw_problem"), "train").problems
    assert problem.prompt == "What is 1?" and problem.extra["extra_info"]["index"] == 0


def test_a_column_named_template_is_data_not_a_setting(tmp_path: Path) -> None:
    from dapo.builtin import build_tokenizer
    from dapo.data.prompts import DAPO_TEMPLATE, PromptEncoder

    path = _write_jsonl(tmp_path / "qa.jsonl", [{"prompt": "What is 2+2?", "answer": "4", "template": "none"}])
    [problem] = load_problems([path], DataConfig(answer_key="answer"), "train").problems
    rendered = PromptEncoder(build_tokenizer(), DataConfig()).render(problem)
    assert rendered.startswith(DAPO_TEMPLATE.split("{problem}")[0])


def test_builtin_task_train_and_eval_are_disjoint_and_sized() -> None:
    cfg = DataConfig(builtin_train_size=300, builtin_eval_size=50)
    train = load_problems(["builtin:arithmetic"], cfg, "train")
    held_out = load_problems(["builtin:arithmetic"], cfg, "eval")
    assert len(train.problems) == 300 and len(held_out.problems) == 50
    assert not {p.prompt for p in train.problems} & {p.prompt for p in held_out.problems}


GOOD = {"question": "What is 2+2?", "answer": "4"}
MALFORMED = {
    "missing answer": ({"question": "What is 1+1?"}, "missing ground truth"),
    "empty prompt": ({"question": "   ", "answer": "1"}, "empty prompt"),
    "wrong type": ({"question": "Q?", "answer": ["4"]}, "wrong type"),
    "prompt wrong type": ({"question": 17, "answer": "4"}, "wrong type"),
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_row_names_file_and_row_or_is_skipped_when_lenient(
    tmp_path: Path, kind: str
) -> None:
    bad_row, reason = MALFORMED[kind]
    path = _write_jsonl(tmp_path / "data.jsonl", [GOOD, GOOD, bad_row, GOOD])
    cfg = DataConfig(prompt_key="question", answer_key="answer")
    with pytest.raises(DataError, match=rf"data\.jsonl line 3: .*{reason}"):
        load_problems([path], cfg, "eval")
    lenient = load_problems(
        [path], DataConfig(prompt_key="question", answer_key="answer", lenient=True), "eval"
    )
    assert len(lenient.problems) == 3 and lenient.num_malformed_skipped == 1
    assert lenient.warnings[0].startswith(f"skipped: {path} line 3: ")


def test_nonexistent_and_unreadable_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"missing\.parquet: file not found"):
        load_problems([str(tmp_path / "missing.parquet")], DataConfig(), "train")
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"this is not parquet")
    with pytest.raises(DataError, match=r"corrupt\.parquet: unreadable file \("):
        load_problems([str(corrupt)], DataConfig(), "train")
    good = _write_jsonl(tmp_path / "good.jsonl", [GOOD])
    cfg = DataConfig(prompt_key="question", answer_key="answer", lenient=True)
    # not a malformed row to skip: all of its rows (before, skipped and counted as one row)
    with pytest.raises(DataError, match=r"corrupt\.parquet: unreadable file \(.*\); data\.lenient skips malformed rows, "
                                        r"not a file that cannot be read$"):
        load_problems([str(corrupt), good], cfg, "train")


def test_missing_key_message_lists_the_row_keys(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "other.jsonl", [GOOD])
    with pytest.raises(
        DataError,
        match=r"other\.jsonl line 1: missing prompt at 'prompt' \(row has keys \['answer', 'question'\]; set "
              r"data\.prompt_key\)$",  # the first row: the configured key is likely wrong
    ):
        load_problems([path], DataConfig(), "train")


def test_eval_copies_with_another_answer_are_counted_and_named(tmp_path: Path) -> None:
    """Evaluation scores each (data_source, uid) once, by its first copy: a later copy labelled
    otherwise was merged without a word. Copies of one prompt in two benchmarks are two problems."""
    path = _write_jsonl(tmp_path / "qa.jsonl", [
        {"question": "q", "answer": 1, "data_source": "a"}, {"question": "q", "answer": 2, "data_source": "a"},
        {"question": "q", "answer": 3, "data_source": "b"}, {"question": "q", "answer": 1, "data_source": "a"}])
    loaded = load_problems([path], DataConfig(prompt_key="question", answer_key="answer"), "eval")
    assert len(loaded.problems) == 4 and loaded.num_conflicting_duplicates == 1
    assert any("another answer ('2'; first: '1'); only the first copy is evaluated" in w for w in loaded.warnings)
    assert any(w.startswith(f"{path} line 2: a copy of the problem 'q'") for w in loaded.warnings)  # where it is
    assert loaded.counts("eval")["data/eval_conflicting_duplicates"] == 1.0
    # without de-duplication every training copy is trained on, each rewarding its own answer:
    # the contradiction is counted and named too (by prompt: training ignores data_source)
    kept = load_problems([path], DataConfig(prompt_key="question", answer_key="answer", dedup_train=False), "train")
    assert len(kept.problems) == 4 and kept.num_conflicting_duplicates == 2
    assert any("('2'; first: '1'); both are trained on (data.dedup_train=false)" in w for w in kept.warnings)


def test_a_dropped_duplicate_with_another_answer_is_counted_and_named(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "qa.jsonl", [{"question": "1+1?", "answer": 2}, {"question": "1+1?", "answer": 3},
                                                {"question": "1+1?", "answer": 2}])
    loaded = load_problems([path], DataConfig(prompt_key="question", answer_key="answer"), "train")
    assert [p.ground_truth for p in loaded.problems] == ["2"]
    assert loaded.num_duplicates_dropped == 2 and loaded.num_conflicting_duplicates == 1
    assert any("another answer ('3'; first: '2'); only the first copy is trained on" in w for w in loaded.warnings)
    assert "1 copy of a prompt had another answer" in loaded.describe("train")
    # a DAPO-Math chat prompt is named by its problem, not by the instruction every prompt shares
    from dapo.data.prompts import DAPO_TEMPLATE

    chat = [{"role": "user", "content": DAPO_TEMPLATE.format(problem="Find the largest n.")}]
    rows = [{**_dapo_row("x", "540", 0), "prompt": chat}, {**_dapo_row("x", "541", 1), "prompt": chat}]
    loaded = load_problems([_write_jsonl(tmp_path / "dapo.jsonl", rows)], DataConfig(), "train")
    assert any("problem 'Find the largest n.' (uid " in warning for warning in loaded.warnings)


def test_a_data_file_without_rows_says_so(tmp_path: Path) -> None:
    """An empty parquet (a filter that kept nothing) ended the message at 'problems in [...]: '."""
    path = tmp_path / "empty.parquet"
    pq.write_table(pa.Table.from_pylist([_dapo_row("1+1", "2", 0)]).slice(0, 0), path)
    with pytest.raises(DataError, match=r"no usable train problems in \[.*empty.parquet'\]: it holds no rows$"):
        load_problems([str(path)], DataConfig(), "train")


def test_skipped_rows_past_the_shown_ones_are_said_to_be_there(tmp_path: Path) -> None:
    """data.lenient: 8 malformed rows skipped, 5 named and nothing said of the other 3 (nor of those
    past the first 20 kept); the terminal now says how many more there are."""
    rows = [{"prompt": "1+1?", "answer": "2"}] + [{"prompt": f"{i}+{i}?"} for i in range(8)]  # no answer: malformed
    described = load_problems([_write_jsonl(tmp_path / "bad.jsonl", rows)],
                              DataConfig(prompt_key="prompt", answer_key="answer", lenient=True), "train")
    lines = described.describe("train").splitlines()
    assert described.num_malformed_skipped == 8 and sum(line.startswith("  skipped:") for line in lines) == 5
    assert lines[-1] == "  ... and 3 more like these (the counts above include them)"
    many = [{"prompt": "1+1?", "answer": "2"}] + [{"prompt": f"{i}+{i}?"} for i in range(30)]
    loaded = load_problems([_write_jsonl(tmp_path / "many.jsonl", many)],
                           DataConfig(prompt_key="prompt", answer_key="answer", lenient=True), "train")
    assert len(loaded.warnings) == 20 and loaded.describe("train").endswith("... and 25 more like these (the counts "
                                                                            "above include them)")


@pytest.mark.parametrize("split", ["train", "eval"])
def test_a_lenient_load_stops_at_a_file_none_of_whose_rows_is_usable(tmp_path: Path, split: str) -> None:
    """data.lenient with a file of another schema: its every row was skipped as malformed and the
    run went on without the file, still listed among the sources (32 AIME rows dropped unsaid)."""
    good = _write_jsonl(tmp_path / "good.jsonl", [{"prompt": "1+1?", "answer": "2"}, {"prompt": "x", "answer": None}])
    other = tmp_path / "other.csv"
    other.write_text("question,answer\n2+2?,4\n3+3?,6\n")
    cfg = DataConfig(prompt_key="prompt", answer_key="answer", lenient=True)
    with pytest.raises(DataError, match=rf"none of the 2 rows of {other} is usable \(first: .*line 2.*prompt.*\): "
                                        r"data.lenient skips a file's malformed rows, not all of them"):
        load_problems([str(good), str(other)], cfg, split)
    loaded = load_problems([str(good)], cfg, split)  # a few bad rows of a file: still skipped
    assert len(loaded.problems) == 1 and loaded.num_malformed_skipped == 1
