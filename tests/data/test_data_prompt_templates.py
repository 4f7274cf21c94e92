"""data.template's instructions for text prompts beyond DAPO's: "boxed" (Qwen2.5-Math's) and "r1"
(DeepSeek-R1-Zero's <think>/<answer> format), with and without a chat template; chat lists stay as written."""

from __future__ import annotations

import pytest

from dapo.builtin import build_tokenizer
from dapo.config import DataConfig
from dapo.config.loading import load_config
from dapo.data import Problem, PromptEncoder
from dapo.data.prompts import BOXED_TEMPLATE, R1_INSTRUCTION, R1_TEMPLATE
from dapo.rewards import verify

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
QUESTION = "What is 6*7?"


def _encoder(template: str, chat: bool) -> PromptEncoder:
    tokenizer = build_tokenizer()
    if chat:
        tokenizer.chat_template = CHAT_TEMPLATE
    return PromptEncoder(tokenizer, DataConfig(template=template, use_chat_template=chat))


def test_the_boxed_template_asks_for_a_box_after_the_problem() -> None:
    asks = "What is 6*7?\n\nPlease reason step by step, and put your final answer within \\boxed{}."
    assert BOXED_TEMPLATE.format(problem=QUESTION) == asks
    assert _encoder("boxed", chat=False).render(Problem("u", QUESTION, "42")) == asks
    assert _encoder("boxed", chat=True).render(Problem("u", QUESTION, "42")) == f"<|user|>{asks}\n<|assistant|>"


def test_the_r1_template_is_a_system_message_under_a_chat_template_and_r1_zeros_prompt_without() -> None:
    assert R1_INSTRUCTION.startswith("A conversation between User and Assistant.")
    assert "<answer> answer here </answer>" in R1_INSTRUCTION
    completion = _encoder("r1", chat=False).render(Problem("u", QUESTION, "42"))
    assert completion == R1_TEMPLATE.format(problem=QUESTION) == f"{R1_INSTRUCTION} User: {QUESTION}. Assistant:"
    chat = _encoder("r1", chat=True).render(Problem("u", QUESTION, "42"))
    assert chat == f"<|system|>{R1_INSTRUCTION}\n<|user|>{QUESTION}\n<|assistant|>"
    # ... and the verifier reads the answer the format asks for (reward.extractor auto: "any" for this source)
    assert verify("<think>6*7 = 42</think> <answer>42</answer>", "42", "any") == (True, "42")


@pytest.mark.parametrize("template", ["boxed", "r1"])
@pytest.mark.parametrize("chat", [False, True])
def test_chat_list_and_verbatim_prompts_are_not_wrapped(template: str, chat: bool) -> None:
    encoder = _encoder(template, chat)
    messages = [{"role": "user", "content": QUESTION}]
    assert encoder.render(Problem("u", messages, "42")) == (f"<|user|>{QUESTION}\n<|assistant|>" if chat else QUESTION)
    assert encoder.render(Problem("u", "6*7=", "42", verbatim=True)) == "6*7="
    encoded = encoder.encode([Problem("u", QUESTION, "42")])
    assert encoded.texts == [encoder.render(Problem("u", QUESTION, "42"))]  # the wrapped text is what is tokenised
    assert QUESTION in encoder.tokenizer.decode(encoded.token_ids[0])


def test_data_template_takes_the_new_names_and_refuses_others() -> None:
    assert load_config([], ["data.template=r1"]).data.template == "r1"
    assert load_config([], ["data.template=boxed"]).data.template == "boxed"
    with pytest.raises(ValueError, match="data.template.*'dapo', 'boxed', 'r1', 'none'"):
        DataConfig(template="qwen")


def test_a_prompt_rendered_twice_is_named_with_the_template_that_wraps_it() -> None:
    tokenizer = build_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    rendered = [Problem("u", "<|im_start|>user\nQ", "1")]
    note = PromptEncoder(tokenizer, DataConfig(template="r1", use_chat_template=False)).rendered_text_note(rendered)
    assert note is not None and "DeepSeek-R1-Zero's instruction (data.template=r1)" in note
