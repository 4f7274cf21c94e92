"""How responses end: the model's stop tokens, and stop-string detection on token streams.

A response ends at the token that completes the first occurrence of any stop string in its
decoded text; that token is kept. Decoding is incremental: at each step only a window of the
newest tokens is decoded, wide enough to hold the longest stop string, so the cost per step does
not grow with the response length.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# End-of-turn tokens of common chat templates: a chat-formatted prompt makes a model end its turn
# with one, which may differ from the tokenizer's EOS (Qwen2.5 base: EOS <|endoftext|>, turns end
# with <|im_end|>).
END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|end_of_turn|>")
# gpt-oss's harmony format (its template writes <|channel|>): <|end|> closes every message, the
# thinking ("analysis") one too, and the turn ends at <|return|> (or <|call|>, a tool call)
HARMONY_MARK = "<|channel|>"
HARMONY_TURN_ENDS = ("<|return|>", "<|call|>")


def model_stop_token_ids(tokenizer: Any, generation_eos: int | Iterable[int] | None = None) -> list[int]:
    """Every token id that ends a response as the model means it, in a fixed order:
    ``generation_config.eos_token_id`` (an int or a list, as Qwen2.5-Instruct's), the tokenizer's
    EOS, and each end-of-turn token that the tokenizer's chat template writes (a harmony template's:
    <|return|> and <|call|>, not the <|end|> that closes its thinking message)."""
    ids: list[int] = []

    def add(values: int | Iterable[int] | None) -> None:
        for value in [values] if values is None or isinstance(values, int) else values:
            if value is not None and int(value) not in ids:
                ids.append(int(value))

    add(generation_eos)
    add(getattr(tokenizer, "eos_token_id", None))
    template = getattr(tokenizer, "chat_template", None) or ""
    if isinstance(template, dict):  # named templates
        template = "\n".join(template.values())
    vocab = tokenizer.get_vocab() if template else {}
    harmony = HARMONY_MARK in template
    for token in HARMONY_TURN_ENDS if harmony else END_OF_TURN_TOKENS:
        if (harmony or token in template) and token in vocab:
            add(vocab[token])
    return ids


# Tokens decoded beyond the longest stop string's length in UTF-8 bytes (a token carries at least
# one byte, a character up to four: byte-level tokenizers split non-ASCII text into single bytes):
# covers tokens that decode to nothing on their own (partial UTF-8 bytes, special tokens).
_WINDOW_SLACK_TOKENS = 8


class StopStringMatcher:
    """Tracks the generated tokens of many rows and reports which rows just hit a stop string."""

    def __init__(self, stop_strings: list[str], tokenizer: Any | None) -> None:
        if stop_strings and tokenizer is None:
            raise ValueError(
                f"stop_strings={stop_strings!r} need a tokenizer to decode responses: "
                "pass tokenizer= to the engine"
            )
        self.stop_strings = list(stop_strings)
        self.tokenizer = tokenizer
        self.window = max((len(s.encode()) for s in stop_strings), default=0) + _WINDOW_SLACK_TOKENS
        self.histories: dict[int, list[int]] = {}
        # A token decoded in front of each window, its text then cut off: a SentencePiece decoder
        # (Llama 2, Mistral) drops the leading space of the text's first token, so " Answer:" as the
        # response's first token would not match (vLLM decodes after the prompt, where it does).
        encode = getattr(tokenizer, "encode", None)
        self.anchor: list[int] = list(encode("a", add_special_tokens=False)[:1]) if stop_strings and encode else []
        self.anchor_text = self._decode(self.anchor) if self.anchor else ""

    def _decode(self, tokens: list[int]) -> str:
        # as vLLM matches: the text as generated, not "cleaned up" (Llama 3's decode turns " ." into ".")
        return self.tokenizer.decode(tokens, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def _window_text(self, history: list[int]) -> str:
        """The text of the newest ``window`` tokens, as it reads after the tokens before them."""
        text = self._decode(self.anchor + history[-self.window :])
        if self.anchor and text.startswith(self.anchor_text):
            return text[len(self.anchor_text):]
        return self._decode(history[-self.window :])

    def __bool__(self) -> bool:
        return bool(self.stop_strings)

    def push(self, row_ids: list[int], tokens: list[int]) -> list[bool]:
        """Append one token to each row; True where that token completes a stop string.

        A match lying wholly inside the window before the newest token was already reported at
        an earlier step, so any match found now ends in the newest token.
        """
        hits = []
        for row, token in zip(row_ids, tokens):
            history = self.histories.setdefault(row, [])
            history.append(token)
            text = self._window_text(history)
            hits.append(any(stop in text for stop in self.stop_strings))
        return hits


def cut_at_stop_string(token_ids: list[int], stop_strings: list[str], tokenizer: Any) -> int | None:
    """Length of the shortest prefix of ``token_ids`` whose text contains a stop string, or None."""
    matcher = StopStringMatcher(stop_strings, tokenizer)
    for position, token in enumerate(token_ids):
        if matcher.push([0], [token])[0]:
            return position + 1
    return None
