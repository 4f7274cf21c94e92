"""Prompt rendering (DAPO template, chat template, plain text) and prompts over the length limit."""

from __future__ import annotations

import pytest

from dapo.builtin import build_tokenizer
from dapo.config import DataConfig
from dapo.data import DAPO_TEMPLATE, DataError, LoadedProblems, Problem, PromptEncoder
from dapo.data.loaders import prompt_uid

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def test_raw_text_gets_dapo_template_and_plain_text_without_chat_template() -> None:
    encoder = PromptEncoder(build_tokenizer(), DataConfig())
    text = encoder.render(Problem(uid="u", prompt="What is 6*7?", ground_truth="42"))
    assert text == DAPO_TEMPLATE.format(problem="What is 6*7?")
    assert text.startswith("Solve the following math problem step by step.")
    assert text.endswith('Remember to put your answer on its own line after "Answer:".')
    chat = Problem(
        uid="u",
        prompt=[{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}],
        ground_truth="1",
    )
    assert encoder.render(chat) == "S\n\nQ"


def test_chat_template_is_used_when_the_tokenizer_has_one() -> None:
    tokenizer = build_tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    encoder = PromptEncoder(tokenizer, DataConfig(template="none"))
    chat = Problem(uid="u", prompt=[{"role": "user", "content": "Q"}], ground_truth="1")
    assert encoder.render(chat) == "<|user|>Q\n<|assistant|>"
    assert (
        encoder.render(Problem(uid="u", prompt="raw", ground_truth="1"))
        == "<|user|>raw\n<|assistant|>"
    )
    plain = PromptEncoder(tokenizer, DataConfig(use_chat_template=False))
    assert plain.render(chat) == "Q"


def test_the_chat_templates_extra_variables_are_passed_to_it() -> None:
    """Qwen3's template closes an empty thinking block when enable_thinking is false (TRL's
    chat_template_kwargs, verl's data.apply_chat_template_kwargs): there was no way to pass it."""
    from dapo.config.loading import load_config

    tokenizer = build_tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE + "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}"
    chat = Problem(uid="u", prompt=[{"role": "user", "content": "Q"}], ground_truth="1")
    assert PromptEncoder(tokenizer, DataConfig()).render(chat) == "<|user|>Q\n<|assistant|>"
    cfg = load_config([], ["data.chat_template_kwargs.enable_thinking=false"]).data
    assert cfg.chat_template_kwargs == {"enable_thinking": False}
    assert PromptEncoder(tokenizer, cfg).render(chat) == "<|user|>Q\n<|assistant|><think></think>"


def test_a_chat_ending_in_an_assistant_prefill_is_continued_not_followed_by_a_new_turn() -> None:
    """A chat ending in an assistant message rendered it as a closed turn and opened a second
    assistant turn after it; the response continues it (continue_final_message, as in TRL)."""
    tokenizer = build_tokenizer()
    tokenizer.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    encoder = PromptEncoder(tokenizer, DataConfig(template="none"))
    prefilled = Problem(uid="u", prompt=[{"role": "user", "content": "Q"}, {"role": "assistant", "content": "Let me see."}],
                        ground_truth="1")
    assert encoder.render(prefilled) == "<|user|>Q<|end|>\n<|assistant|>Let me see."
    assert encoder.render(Problem(uid="u", prompt=prefilled.prompt[:1], ground_truth="1")) == "<|user|>Q<|end|>\n<|assistant|>"
    assert PromptEncoder(tokenizer, DataConfig(use_chat_template=False)).render(prefilled) == "Q\n\nLet me see."


def test_builtin_problems_pass_through_verbatim() -> None:
    tokenizer = build_tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    encoder = PromptEncoder(tokenizer, DataConfig())
    problem = Problem(uid="u", prompt="12+34=", ground_truth="46", verbatim=True)
    assert encoder.render(problem) == "12+34="


def _loaded(problems: list[Problem]) -> LoadedProblems:
    return LoadedProblems(problems, len(problems), 0, 0, ["test.jsonl"])


@pytest.mark.parametrize("length_batch", [4096, 3, 1])
def test_prompts_over_the_limit_are_left_out_whole_not_cut(length_batch: int, monkeypatch) -> None:
    """Cut from the left, a chat-templated prompt lost its BOS and header (and with the DAPO
    template, the question, keeping the closing instruction); now it is left out, counted. The
    lengths are counted a few problems at a time (length_batch): the same problems go."""
    monkeypatch.setattr("dapo.data.prompts._LENGTH_BATCH", length_batch)
    tokenizer = build_tokenizer()
    tokenizer.chat_template = "{{ bos_token }}" + CHAT_TEMPLATE
    short = Problem(uid="s", prompt="What is 6*7?", ground_truth="42")
    long = Problem(uid="l", prompt="What is " + "1+" * 300 + "1?", ground_truth="301")
    encoder = PromptEncoder(tokenizer, DataConfig(max_prompt_length=400))
    other_long = Problem(uid="l2", prompt="What is " + "2+" * 300 + "1?", ground_truth="601")
    loaded = _loaded([long, short, long, other_long])
    loaded.warnings = [f"skipped: row {i}" for i in range(6)]  # more row warnings than describe() shows
    encoder.drop_overlong(loaded, "train")
    # counted in problems, as data/<split>_problems is: the two copies of `long` are one (were 2)
    assert [p.uid for p in loaded.problems] == ["s"] and loaded.num_overlong_dropped == 2
    assert loaded.counts("train")["data/train_overlong_dropped"] == 2.0
    assert "2 problems over data.max_prompt_length dropped" in loaded.describe("train")
    # the summary is shown above the row warnings, not hidden among the ones past the first five
    assert "the prompt of problem l" in loaded.warnings[0] and "the prompt of problem l" in loaded.describe("train")
    encoded = encoder.encode(loaded.problems)
    assert encoded.token_ids[0][0] == tokenizer.bos_token_id and len(encoded.token_ids[0]) <= 400
    with pytest.raises(DataError, match=r"problem l .* more than data.max_prompt_length=400"):
        encoder.encode([short, long])  # problems that were not loaded through drop_overlong
    strict = PromptEncoder(tokenizer, DataConfig(max_prompt_length=400, overlong_prompts="error"))
    with pytest.raises(DataError, match=r"eval data: 1 prompts are longer .* problem l "):
        strict.drop_overlong(_loaded([short, long]), "eval")
    with pytest.raises(DataError, match=r"no train prompt fits data.max_prompt_length=5 tokens \(the shortest"):
        PromptEncoder(tokenizer, DataConfig(max_prompt_length=5)).drop_overlong(_loaded([short, long]), "train")


def test_a_prompt_holding_an_id_past_the_model_s_vocabulary_is_named_as_the_data_loads() -> None:
    """A tokenizer with more ids than the model's embedding (another model's, or tokens added to it
    without resizing the model) failed at the first step's generation, with a traceback."""
    tokenizer = build_tokenizer()
    problem = Problem(uid="u", prompt="What is 6*7?", ground_truth="42", where="train.jsonl line 3")
    largest = max(PromptEncoder(tokenizer, DataConfig()).encode([problem]).token_ids[0])
    fits = PromptEncoder(tokenizer, DataConfig(), vocab_size=largest + 1)
    fits.drop_overlong(_loaded([problem]), "train")
    assert fits.encode([problem]).token_ids[0]
    short = PromptEncoder(tokenizer, DataConfig(), vocab_size=largest)
    refused = rf"the prompt of problem u at train.jsonl line 3 .* holds token id {largest} .* outside the model's vocabulary"
    with pytest.raises(DataError, match=refused):
        short.drop_overlong(_loaded([problem]), "train")
    with pytest.raises(DataError, match=refused):
        short.encode([problem])


def test_the_copies_of_a_prompt_are_tokenised_once_to_count_their_length(monkeypatch) -> None:
    """DAPO-Math-17K kept with its copies (data.dedup_train=false) is 1.8M rows of 18k prompts:
    tokenising every row took 100x the work."""
    tokenised: list[Problem] = []
    tokenize = PromptEncoder._tokenize
    monkeypatch.setattr(PromptEncoder, "_tokenize", lambda self, problems: tokenised.extend(problems) or tokenize(self, problems))
    short, long = "What is 6*7?", "What is " + "1+" * 300 + "1?"
    rows = [(long, "301"), (short, "42"), (long, "301"), (short, "42"), (short, "42"), (long, "301")]
    loaded = _loaded([Problem(uid=prompt_uid(prompt), prompt=prompt, ground_truth=answer) for prompt, answer in rows])
    PromptEncoder(build_tokenizer(), DataConfig(max_prompt_length=400)).drop_overlong(loaded, "train")
    assert [p.ground_truth for p in loaded.problems] == ["42"] * 3 and loaded.num_overlong_dropped == 1
    assert [p.prompt for p in tokenised] == [long, short]  # one tokenisation per distinct prompt


def test_a_verbatim_prompt_keeps_the_tokenizers_bos_when_other_prompts_use_a_chat_template() -> None:
    # the built-in task's prompts skip the chat template: they lost Llama-3's BOS whenever the
    # tokenizer had one, while a chat-templated prompt carries its own special tokens
    tokenizer = build_tokenizer()
    bos = tokenizer.bos_token_id
    plain = PromptEncoder(tokenizer, DataConfig()).encode([Problem("u", "12+34=", "46", verbatim=True)])
    tokenizer.chat_template = "{{ bos_token }}" + CHAT_TEMPLATE
    encoder = PromptEncoder(tokenizer, DataConfig(template="none"))
    verbatim, chat = encoder.encode([Problem("u", "12+34=", "46", verbatim=True),
                                     Problem("v", [{"role": "user", "content": "Q"}], "1")]).token_ids
    assert verbatim == plain.token_ids[0] and verbatim[0] == bos
    assert chat[0] == bos and chat.count(bos) == 1  # from the template, not added a second time


def test_a_flattened_dapo_prompt_is_not_wrapped_in_the_instruction_twice() -> None:
    encoder = PromptEncoder(build_tokenizer(), DataConfig())
    already = DAPO_TEMPLATE.format(problem="What is 1+1?")
    assert encoder.render(Problem(uid="u", prompt=already, ground_truth="2")) == already
    assert encoder.render(Problem(uid="u", prompt="  \n" + already, ground_truth="2")).count("Solve the following") == 1


def test_an_overlong_prompt_is_named_by_its_file_and_row(tmp_path) -> None:
    """data.overlong_prompts=error named the problem's hash alone: the row to fix was not said."""
    import json

    from dapo.data import load_problems

    path = tmp_path / "data.jsonl"
    rows = [{"prompt": "What is 1+1?", "answer": "2"}, {"prompt": "What is " + "1+" * 300 + "1?", "answer": "301"}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    cfg = DataConfig(max_prompt_length=100, overlong_prompts="error", answer_key="answer", template="none")
    loaded = load_problems([str(path)], cfg, "train")
    with pytest.raises(DataError, match=rf"the prompt of problem \w+ at {path} line 2 \(data: 'What is 1\+1\+"):
        PromptEncoder(build_tokenizer(), cfg).drop_overlong(loaded, "train")


def test_a_chat_template_the_tokenizer_lacks_is_said_not_silently_skipped() -> None:
    """A base model's tokenizer has no chat template: data.use_chat_template=true (the DAPO recipe's)
    fell back to plain text prompts without a word."""
    chat = Problem(uid="c", prompt=[{"role": "user", "content": "What is 6*7?"}], ground_truth="42")
    verbatim = Problem(uid="v", prompt="12+34=", ground_truth="46", verbatim=True)
    plain = PromptEncoder(build_tokenizer(), DataConfig(use_chat_template=True))
    assert "the tokenizer has no chat template" in plain.plain_text_note([verbatim, chat])
    assert plain.render(chat) == "What is 6*7?"  # what the note says happens
    assert plain.plain_text_note([verbatim]) is None  # the built-in task never uses one
    assert PromptEncoder(build_tokenizer(), DataConfig(use_chat_template=False)).plain_text_note([chat]) is None
    templated = build_tokenizer()
    templated.chat_template = CHAT_TEMPLATE
    assert PromptEncoder(templated, DataConfig(use_chat_template=True)).plain_text_note([chat]) is None


def test_a_prompt_the_chat_template_refuses_is_named_by_its_file_and_row(tmp_path) -> None:
    """A template that refuses a role (Gemma's and Mistral's raise on a system message) stopped
    the load with jinja's bare TemplateError: no word of which row."""
    import json

    from dapo.data import load_problems

    path = tmp_path / "data.jsonl"
    rows = [{"prompt": [{"role": "user", "content": "What is 1+1?"}], "answer": "2"},
            {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}], "answer": "4"}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    cfg = DataConfig(answer_key="answer", use_chat_template=True)
    tokenizer = build_tokenizer()
    tokenizer.chat_template = ("{% for m in messages %}{% if m['role'] == 'system' %}"
                               "{{ raise_exception('System role not supported') }}{% endif %}{{ m['content'] }}{% endfor %}")
    loaded = load_problems([str(path)], cfg, "train")
    with pytest.raises(DataError, match=rf"chat template refused the prompt of problem \w+ at {path} line 2 "
                                        r"\(data: '2\+2\?'\) \(roles: system, user\): TemplateError: System role not supported"):
        PromptEncoder(tokenizer, cfg).drop_overlong(loaded, "train")


def test_an_unknown_chat_role_is_warned_about_with_its_row(tmp_path) -> None:
    """A role typo ("usr") or ShareGPT's "human" went through the template as written, unsaid."""
    import json

    from dapo.data import load_problems

    path = tmp_path / "data.jsonl"
    rows = [{"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+1?"}], "answer": "2"},
            {"prompt": [{"role": "usr", "content": "2+2?"}], "answer": "4"},
            {"prompt": [{"role": "human", "content": "3+3?"}], "answer": "6"}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    cfg = DataConfig(answer_key="answer", use_chat_template=True)
    templated = build_tokenizer()
    templated.chat_template = CHAT_TEMPLATE
    problems = load_problems([str(path)], cfg, "train").problems
    note = PromptEncoder(templated, cfg).unknown_roles_note(problems)
    assert note is not None and "the role(s) 'usr', 'human'" in note and f"the first 'usr' at {path} line 2" in note
    assert PromptEncoder(templated, cfg).unknown_roles_note(problems[:1]) is None  # system and user are known
    # without a chat template the roles are not rendered (messages joined as text): nothing to say
    assert PromptEncoder(build_tokenizer(), cfg).unknown_roles_note(problems) is None


def test_plain_text_prompts_get_one_bos_and_no_closing_eos() -> None:
    """Plain text that begins with the BOS (kept from a rendered prompt) got a second one added;
    a tokenizer saved with add_eos_token=true ended every prompt with EOS, the text over before
    its answer."""
    tokenizer = build_tokenizer()
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    encoder = PromptEncoder(tokenizer, DataConfig(template="none", use_chat_template=False))
    plain, with_bos, with_eos = encoder.encode([Problem("u", "2+2?", "4"), Problem("v", "<bos>2+2?", "4"),
                                                Problem("w", "2+2?<eos>", "4")]).token_ids
    assert plain[0] == bos and plain.count(bos) == 1 and with_bos == plain
    assert with_eos == [*plain, eos]  # an EOS the text itself holds stays
    tokenizer.add_eos_token = True
    assert tokenizer("2+2?")["input_ids"][-1] == eos  # (what the tokenizer adds)
    assert encoder.encode([Problem("u", "2+2?", "4"), Problem("v", "1", "1", verbatim=True)]).token_ids == [
        plain, [bos, *tokenizer("1", add_special_tokens=False)["input_ids"]]]


def test_a_text_prompt_already_rendered_with_a_chat_template_is_warned_about(tmp_path) -> None:
    """A text column of prompts rendered by a chat template ("<|im_start|>user ...") went
    through the chat template again, unsaid: a template inside a template."""
    import json

    from dapo.data import load_problems

    tokenizer = build_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tokenizer.chat_template = CHAT_TEMPLATE
    path = tmp_path / "data.jsonl"
    rows = [{"prompt": "What is 1+1?", "answer": "2"},
            {"prompt": "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n", "answer": "4"}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    problems = load_problems([str(path)], DataConfig(answer_key="answer"), "train").problems
    note = PromptEncoder(tokenizer, DataConfig()).rendered_text_note(problems)
    assert note is not None and "special token '<|im_start|>'" in note and "the chat template renders" in note
    assert f"(the first at {path} line 2)" in note
    assert "the DAPO instruction" in PromptEncoder(tokenizer, DataConfig(use_chat_template=False)).rendered_text_note(
        problems)
    assert PromptEncoder(tokenizer, DataConfig()).rendered_text_note(problems[:1]) is None
    as_they_are = PromptEncoder(tokenizer, DataConfig(template="none", use_chat_template=False))
    assert as_they_are.rendered_text_note(problems) is None
    assert as_they_are.render(problems[1]) == rows[1]["prompt"]


def test_a_prompt_of_exactly_max_prompt_length_tokens_is_kept_and_encoded() -> None:
    tokenizer = build_tokenizer()
    problem = Problem("u", "2+2?", "4")
    length = len(PromptEncoder(tokenizer, DataConfig(template="none", use_chat_template=False)).encode([problem]).token_ids[0])
    encoder = PromptEncoder(tokenizer, DataConfig(template="none", use_chat_template=False, max_prompt_length=length))
    assert len(encoder.encode([problem]).token_ids[0]) == length
    loaded = _loaded([problem])
    encoder.drop_overlong(loaded, "train")
    assert loaded.problems == [problem]


def test_a_prompts_own_bos_is_kept_once_when_the_tokenizer_adds_none() -> None:
    tokenizer = build_tokenizer()
    tokenizer.add_bos_token = False
    encoder = PromptEncoder(tokenizer, DataConfig(template="none", use_chat_template=False))
    ids = encoder.encode([Problem("v", "<bos>2+2?", "4")]).token_ids[0]
    assert ids[0] == tokenizer.bos_token_id and ids.count(tokenizer.bos_token_id) == 1


def test_the_built_in_model_is_warned_about_the_dapo_template_only_where_it_wraps_text_prompts() -> None:
    """The built-in models read bare prompts: the DAPO template around a text prompt is instructions
    they never read. A chat-list prompt (DAPO-Math-17K's column) is rendered as it is: a run on them
    was warned of a failure that did not come."""
    chat = Problem("c", [{"role": "user", "content": "891+64="}], "955")
    text, verbatim = Problem("t", "891+64=", "955"), Problem("v", "891+64=", "955", verbatim=True)
    encoder = PromptEncoder(build_tokenizer(), DataConfig())
    note = encoder.builtin_template_note([chat, text], "builtin")
    assert note is not None and "model.path=builtin was trained on bare prompts" in note
    assert "data.template=dapo wraps each text prompt" in note
    assert encoder.builtin_template_note([chat, verbatim], "builtin") is None
    assert encoder.builtin_template_note([text], "/models/Qwen2.5-7B") is None
    assert PromptEncoder(build_tokenizer(), DataConfig(template="none")).builtin_template_note([text], "builtin") is None


def test_the_problem_text_of_a_lone_assistant_message_is_its_content() -> None:
    """A chat of one assistant message (a prefill alone) raised IndexError while a note about it was built."""
    from dapo.data.prompts import problem_text

    assert problem_text([{"role": "assistant", "content": "<think>"}]) == "<think>"


def test_tool_developer_and_ipython_roles_are_known_and_verbatim_prompts_are_not_rendered_twice() -> None:
    """Neither note warns where nothing is wrong: the roles that chat templates render, and a
    completion prompt (used as it is) holding special tokens."""
    templated = build_tokenizer()
    templated.chat_template = CHAT_TEMPLATE
    cfg = DataConfig(use_chat_template=True)
    chat = [{"role": role, "content": "x"} for role in ("developer", "user", "assistant", "tool", "ipython")]
    assert PromptEncoder(templated, cfg).unknown_roles_note([Problem("u", chat, "1")]) is None
    tokenizer = build_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    encoder = PromptEncoder(tokenizer, DataConfig(use_chat_template=False))
    assert encoder.rendered_text_note([Problem("u", "<|im_start|>x", "1", verbatim=True)]) is None
    assert encoder.rendered_text_note([Problem("u", "<|im_start|>x", "1")]) is not None
