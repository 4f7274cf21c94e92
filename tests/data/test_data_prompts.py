"""Prompt rendering (DAPO template, chat template, plain text) and left truncation."""

from __future__ import annotations

from dapo.builtin import build_tokenizer
from dapo.config import DataConfig
from dapo.data import DAPO_TEMPLATE, Problem, PromptEncoder

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


def test_builtin_problems_pass_through_verbatim() -> None:
    tokenizer = build_tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    encoder = PromptEncoder(tokenizer, DataConfig())
    problem = Problem(uid="u", prompt="12+34=", ground_truth="46", verbatim=True)
    assert encoder.render(problem) == "12+34="


def test_long_prompts_are_left_truncated_and_counted() -> None:
    tokenizer = build_tokenizer()
    encoder = PromptEncoder(tokenizer, DataConfig(template="none", max_prompt_length=5))
    problems = [
        Problem(uid="a", prompt="1234567890", ground_truth="0"),
        Problem(uid="b", prompt="12", ground_truth="0"),
    ]
    encoded = encoder.encode(problems)
    assert encoded.num_truncated == 1
    assert tokenizer.decode(encoded.token_ids[0]) == "67890"  # the end of the prompt is kept
    assert tokenizer.decode(encoded.token_ids[1], skip_special_tokens=True) == "12"
    assert all(len(ids) <= 5 for ids in encoded.token_ids)


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
