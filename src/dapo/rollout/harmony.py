"""gpt-oss's harmony responses as text a verifier can read.

A harmony response is a sequence of messages, each a header and a body::

    <|channel|>analysis<|message|>THINKING<|end|><|start|>assistant<|channel|>final<|message|>ANSWER<|return|>

Decoded without special tokens, as a reward reads a response, that is
``analysisTHINKINGassistantfinalANSWER``: the thinking runs into the answer, and one cut off while thinking reads
an answer it only tried. :func:`harmony_text` writes it in the ``<think>`` convention of other
reasoning models instead, ``<think>THINKING</think>ANSWER``, whose answer the verifier reads after
the thinking (and none from a response that never reached its final channel).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# the final channel's name; every other channel (analysis, commentary) is thinking or tool calls
FINAL_CHANNEL = "final"


@dataclass(frozen=True)
class HarmonyTokens:
    """The ids of the tokens that delimit harmony messages."""

    channel: int
    message: int
    ends: frozenset[int]  # <|end|>, <|return|>, <|call|>: a message's end
    start: int | None  # <|start|>, before the next message's role

    @classmethod
    def of(cls, vocab: dict[str, int]) -> HarmonyTokens | None:
        """The harmony tokens of a tokenizer's ``vocab``, or None for one that has none (not gpt-oss's)."""
        if not all(token in vocab for token in ("<|channel|>", "<|message|>", "<|end|>")):
            return None
        ends = frozenset(vocab[token] for token in ("<|end|>", "<|return|>", "<|call|>") if token in vocab)
        return cls(vocab["<|channel|>"], vocab["<|message|>"], ends, vocab.get("<|start|>"))


def harmony_text(tokenizer: Any, token_ids: list[int], tokens: HarmonyTokens) -> str | None:
    """A harmony response's text as ``<think>THINKING</think>ANSWER``: the bodies of its messages
    on other channels than the final one (joined by blank lines) inside ``<think>``, then the final
    channel's; a response that never reached the final channel stays inside ``<think>``. None for
    a response without a harmony message (one that does not write the format: as it is decoded)."""
    if tokens.message not in token_ids:
        return None
    thinking: list[str] = []
    final: list[str] = []
    header: list[int] = []
    body: list[int] | None = None  # None: in a header, before its <|message|>
    for token in [*token_ids, None]:  # (None: the end, where a message cut off still counts)
        if body is None and token == tokens.message:
            body = []
        elif body is not None and (token is None or token in tokens.ends):
            text = tokenizer.decode(body, skip_special_tokens=True)
            (final if _channel(tokenizer, header, tokens) == FINAL_CHANNEL else thinking).append(text)
            header, body = [], None
        elif body is not None:
            body.append(token)
        elif token is not None and token != tokens.start:
            header.append(token)
    opened = "<think>" + "\n\n".join(thinking)
    return f"{opened}</think>{''.join(final)}" if final else opened


def _channel(tokenizer: Any, header: list[int], tokens: HarmonyTokens) -> str:
    """The channel a message's header names (``assistant<|channel|>final`` -> ``final``); "" for none."""
    if tokens.channel not in header:
        return ""
    after = header[len(header) - header[::-1].index(tokens.channel):]
    words = tokenizer.decode(after, skip_special_tokens=True).split()
    return words[0] if words else ""
