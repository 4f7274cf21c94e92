"""Character-level tokenizer of the built-in base model.

One token per byte of the UTF-8 text, so one token per character for ASCII: a ``tokenizers``
BPE model with an empty merge list over the 256 byte-level symbols, plus four special tokens.
Any text encodes (non-ASCII characters take several byte tokens) and decodes back exactly
(up to Unicode NFC normalisation, which leaves ASCII untouched).

Why byte-level and not a plain character vocabulary: for a ``qwen2`` model directory,
``AutoTokenizer`` (transformers 5) ignores the saved ``tokenizer_class`` and builds Qwen's own
tokenizer class from ``tokenizer.json``'s vocabulary, re-creating Qwen's pipeline (NFC, Qwen's
split regex, byte-level mapping) around it. A plain character vocabulary then loses every
character whose byte-level symbol differs from itself -- newline and space first. Building our
tokenizer with exactly that pipeline makes both loading paths produce the same ids.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

PAD_TOKEN = "<pad>"
EOS_TOKEN = "<eos>"
BOS_TOKEN = "<bos>"
UNK_TOKEN = "<unk>"
SPECIAL_TOKENS = [PAD_TOKEN, EOS_TOKEN, BOS_TOKEN, UNK_TOKEN]

# Qwen2's pre-tokenisation regex (transformers' Qwen2Tokenizer); see the module docstring.
QWEN2_SPLIT_REGEX = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def byte_symbols() -> list[str]:
    """The 256 byte-level symbols (GPT-2's printable stand-ins for bytes), in byte order."""
    return sorted(pre_tokenizers.ByteLevel.alphabet(), key=_byte_of_symbol)


def _byte_of_symbol(symbol: str) -> int:
    # GPT-2's map: printable Latin-1 bytes stand for themselves, the rest are shifted to 256+.
    code = ord(symbol)
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    )
    if code in printable:
        return code
    others = [b for b in range(256) if b not in printable]
    return others[code - 256]


def build_tokenizer() -> PreTrainedTokenizerFast:
    """Byte/char-level tokenizer: ids 0-3 are <pad> <eos> <bos> <unk>, then byte b has id 4 + b.

    Encoding with special tokens (the default) puts ``<bos>`` first: a fixed first token gives
    the tiny model an anchor to locate digits by position and speeds its SFT markedly. No EOS is
    added; training and rollout code append ``eos_token_id`` where a sequence ends. Padding is on
    the left, as batched generation needs. Round trip: ``decode(encode(text),
    skip_special_tokens=True) == text``.
    """
    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS + byte_symbols())}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], fuse_unk=False, byte_fallback=False))
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(SPECIAL_TOKENS)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD_TOKEN,
        eos_token=EOS_TOKEN,
        bos_token=BOS_TOKEN,
        unk_token=UNK_TOKEN,
        add_bos_token=True,
        add_eos_token=False,
        padding_side="left",
        clean_up_tokenization_spaces=False,  # would rewrite " ," to "," and break round-trips
        model_max_length=1_000_000,
    )


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, directory: str | Path) -> None:
    """``save_pretrained``, naming the fast tokenizer class for loaders that honour it."""
    tokenizer.save_pretrained(str(directory))
    config_path = Path(directory) / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config["clean_up_tokenization_spaces"] = False
    config_path.write_text(json.dumps(config, indent=2) + "\n")
