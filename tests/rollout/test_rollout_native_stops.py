"""The native engine ends a response where it should: stop tokens, stop strings (many-byte,
as generated, at the response's start) and the length limit."""

from __future__ import annotations

import pytest
import torch
from conftest import PAD_ID, VOCAB_SIZE
from rollout_helpers import LetterTokenizer
from test_rollout_native import PROMPTS

from dapo.rollout import NativeEngine, SamplingParams


def test_stop_tokens_end_responses_and_are_kept(qwen2: torch.nn.Module) -> None:
    stop_ids = list(range(0, VOCAB_SIZE, 10))  # a tenth of the vocabulary
    params = SamplingParams(n=8, temperature=1.5, max_new_tokens=10, stop_token_ids=stop_ids, seed=0)
    result = NativeEngine(qwen2, PAD_ID).generate(PROMPTS, params)
    reasons = {c.finish_reason for c in result.completions}
    assert reasons == {"stop", "length"}, "test needs both outcomes"
    for completion in result.completions:
        assert len(completion.logprobs) == len(completion.token_ids)
        assert not set(completion.token_ids[:-1]) & set(stop_ids), "generation ran past a stop token"
        if completion.finish_reason == "stop":
            assert completion.token_ids[-1] in stop_ids
        else:  # (a stop token as the last allowed one is a stop: the response is complete)
            assert len(completion.token_ids) == params.max_new_tokens and completion.token_ids[-1] not in stop_ids
    assert result.num_generated_tokens == sum(len(c.token_ids) for c in result.completions)


@pytest.mark.parametrize("max_new_tokens", [5, 1])  # 1: the stop token is also the last one allowed
def test_certain_stop_token_gives_one_token_responses(qwen2: torch.nn.Module, max_new_tokens: int) -> None:
    params = SamplingParams(n=2, max_new_tokens=max_new_tokens, stop_token_ids=list(range(VOCAB_SIZE)))
    for completion in NativeEngine(qwen2, PAD_ID).generate(PROMPTS, params).completions:
        assert len(completion.token_ids) == 1 and completion.finish_reason == "stop"


def test_length_truncation_is_flagged(qwen2: torch.nn.Module) -> None:
    result = NativeEngine(qwen2, PAD_ID).generate(PROMPTS, SamplingParams(n=2, max_new_tokens=7, seed=0))
    assert all(len(c.token_ids) == 7 and c.finish_reason == "length" for c in result.completions)
    assert result.num_generated_tokens == 7 * 2 * len(PROMPTS)


def test_stop_strings_cut_after_the_completing_token(qwen2: torch.nn.Module) -> None:
    tokenizer = LetterTokenizer()
    params = SamplingParams(n=6, temperature=1.5, max_new_tokens=12, stop_strings=["ab"], seed=0)
    result = NativeEngine(qwen2, PAD_ID, tokenizer).generate(PROMPTS, params)
    assert {c.finish_reason for c in result.completions} == {"stop", "length"}, "test needs both outcomes"
    for completion in result.completions:
        text = tokenizer.decode(completion.token_ids)
        if completion.finish_reason == "stop":
            assert text.endswith("ab") and "ab" not in text[:-1]
        else:
            assert "ab" not in text


@pytest.mark.parametrize("stop", ["Answer:", "最终答案是：", "🎉🎉🎉"])
def test_a_stop_string_of_many_byte_tokens_is_found(stop: str) -> None:
    """A byte-level tokenizer spends up to four tokens on a character: the matcher's window must
    still hold the whole stop string (18 tokens for the 6 characters of 最终答案是：)."""
    from dapo.builtin import build_tokenizer
    from dapo.rollout.stopping import cut_at_stop_string

    tokenizer = build_tokenizer()  # the built-in model's: one token per byte outside ASCII
    ids = tokenizer.encode(f"some reasoning {stop} and more after it", add_special_tokens=False)
    cut = cut_at_stop_string(ids, [stop], tokenizer)
    assert cut is not None and tokenizer.decode(ids[:cut]) == f"some reasoning {stop}"


def test_a_stop_string_is_matched_in_the_text_as_generated_not_cleaned_up() -> None:
    """WordPiece-style decoding "cleans up" " ." to "." unless told not to; vLLM matches the text
    as generated, so a stop string " ." must be found here too."""
    from dapo.rollout.stopping import cut_at_stop_string

    class CleaningTokenizer:  # ids 0, 1, 2 -> "a", " ", "."
        def decode(self, token_ids, skip_special_tokens=False, clean_up_tokenization_spaces=True):
            text = "".join("a ."[i] for i in token_ids)
            return text.replace(" .", ".") if clean_up_tokenization_spaces else text

    assert cut_at_stop_string([0, 1, 2, 0], [" ."], CleaningTokenizer()) == 3


def test_a_stop_string_with_a_leading_space_is_found_at_the_responses_start() -> None:
    """A SentencePiece decoder (Llama 2, Mistral) drops the leading space of the first token it
    decodes: " Answer:" as a response's first tokens read "Answer:" alone and was missed, where
    vLLM, decoding after the prompt, stops."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from dapo.rollout.stopping import cut_at_stop_string

    vocab = {"<unk>": 0, "▁Answer": 1, ":": 2, "▁42": 3, "▁a": 4}
    spm = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    spm.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    spm.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=spm)
    assert tokenizer.decode([1, 2, 3]) == "Answer: 42"  # the space the decoder drops
    assert cut_at_stop_string([1, 2, 3], [" Answer:"], tokenizer) == 2
    assert cut_at_stop_string([4, 1, 2, 3], [" Answer:"], tokenizer) == 3
    assert cut_at_stop_string([1, 2, 3], [" 42."], tokenizer) is None


def test_stop_strings_without_tokenizer_is_a_clear_error(qwen2: torch.nn.Module) -> None:
    with pytest.raises(ValueError, match="tokenizer"):
        NativeEngine(qwen2, PAD_ID).generate(PROMPTS, SamplingParams(stop_strings=["x"]))
