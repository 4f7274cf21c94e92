"""Stop tokens and stop strings: named chat templates, the anchor token, special-token stop strings (from a mutation audit:
each test kills a mutant the suite let through)."""

from __future__ import annotations

from tests.trainer.test_trainer_setup import QWEN_CHAT_TEMPLATE, chat_tokenizer

from dapo.builtin import build_tokenizer
from dapo.rollout.stopping import cut_at_stop_string, model_stop_token_ids


def test_named_chat_templates_give_their_end_of_turn_tokens():
    """(S4) a tokenizer_config.json of named templates ({"default": ..., "tool_use": ...}): the
    end-of-turn token they write is a stop token as with one template."""
    tokenizer = chat_tokenizer()
    tokenizer.chat_template = {"default": QWEN_CHAT_TEMPLATE, "tool_use": "{{ messages }}"}
    im_end = tokenizer.get_vocab()["<|im_end|>"]
    assert model_stop_token_ids(tokenizer, None) == [tokenizer.eos_token_id, im_end]

def test_the_anchor_token_is_not_part_of_the_text_a_stop_string_is_matched_in():
    """(S9) the token decoded in front of each window ("a") is cut off: a response "b..." does not
    complete the stop string "ab"."""
    tokenizer = build_tokenizer()
    ids = tokenizer.encode("b c d", add_special_tokens=False)
    assert cut_at_stop_string(ids, ["ab"], tokenizer) is None
    assert cut_at_stop_string(tokenizer.encode("x ab c", add_special_tokens=False), ["ab"], tokenizer) == 4

def test_a_stop_string_that_is_a_special_token_is_found():
    """(S13) special tokens are decoded as written: "<|im_end|>" as a stop string matches the token."""
    tokenizer = chat_tokenizer()
    ids = tokenizer.encode("42<|im_end|>more", add_special_tokens=False)
    im_end = tokenizer.get_vocab()["<|im_end|>"]
    assert ids[2] == im_end and len(ids) == 7
    assert cut_at_stop_string(ids, ["<|im_end|>"], tokenizer) == 3

def test_tokens_that_decode_to_nothing_do_not_push_a_stop_string_out_of_the_window():
    class Tokenizer:
        def decode(self, token_ids, skip_special_tokens=False, clean_up_tokenization_spaces=True):
            return "".join(["a", "b", ""][i] for i in token_ids)

    assert cut_at_stop_string([0, 2, 2, 1], ["ab"], Tokenizer()) == 4


def test_a_stop_string_that_a_token_completes_with_more_text_after_it_stops_there():
    """"<|im_end" is completed by the <|im_end|> token, which carries "|>" after it: the text ends
    with the token's text, not the stop string. Matched only at the text's end, the response ran on
    to max_new_tokens and was shaped as overlong."""
    tokenizer = chat_tokenizer()
    ids = tokenizer.encode("42<|im_end|>more", add_special_tokens=False)
    assert cut_at_stop_string(ids, ["<|im_end"], tokenizer) == 3
