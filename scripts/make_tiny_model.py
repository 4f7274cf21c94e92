"""A stand-in for your own model and data, built locally in seconds (README "Train your own model").

    python scripts/make_tiny_model.py DIR

writes
  DIR/model/          a tiny random Qwen2 (Hugging Face format, safetensors) with a byte-level BPE
                      tokenizer trained here and a Qwen-style chat template (<|im_start|> ... <|im_end|>)
  DIR/train.parquet   problems in the DAPO-Math-17K schema: data_source, prompt (a chat list),
                      ability, reward_model {ground_truth, style}, extra_info {index}; every prompt
                      three times, as the published file repeats its prompts
  DIR/test.parquet    held-out problems of two data sources, for a per-source breakdown
  DIR/rewards.py      a user reward function (``brevity``), to add to the verifier's reward

The model is untrained, so it answers at random: the point is to run the whole pipeline on files
shaped like yours, then swap in your real model and data.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

QWEN2_SPLIT_REGEX = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
REWARDS = '''
def brevity(response: str, ground_truth: str, extra: dict) -> dict:
    """Shorter responses score higher, in [-1, 0]: a shaping reward on top of the verifier's."""
    return {"score": -min(len(response), 200) / 200, "chars": float(len(response))}
'''
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def problems(count: int, seed: int) -> list[tuple[str, str]]:
    """``count`` distinct two-number sums."""
    pairs = random.Random(seed).sample([(a, b) for a in range(1, 100) for b in range(1, 100)], count)
    return [(f"What is {a} + {b}?", str(a + b)) for a, b in pairs]


def train_tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    """Byte-level BPE with Qwen2's pre-tokenisation, so AutoTokenizer loads it the same way."""
    backend = Tokenizer(models.BPE())
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE, padding_side="left", clean_up_tokenization_spaces=False,
    )


def dapo_rows(items: list[tuple[str, str]], source: str, copies: int = 1) -> pa.Table:
    rows = [
        {
            "data_source": source,
            "prompt": [{"role": "user", "content": question}],
            "ability": "MATH",
            "reward_model": {"ground_truth": answer, "style": "rule-lighteval/MATH_v2"},
            "extra_info": {"index": str(index)},
        }
        for index, (question, answer) in enumerate(items)
        for _ in range(copies)
    ]
    return pa.Table.from_pylist(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    out = Path(parser.parse_args(argv).out_dir)
    train, held_out = problems(200, seed=0), problems(16, seed=1)
    tokenizer = train_tokenizer([q + " " + a for q, a in train] + ["Solve the problem step by step. Answer: $Answer"])
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048, tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    model_dir = out / "model"
    Qwen2ForCausalLM(config).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    pq.write_table(dapo_rows(train, "math_dapo", copies=3), out / "train.parquet")
    pq.write_table(pa.concat_tables([dapo_rows(held_out[:8], "aime"), dapo_rows(held_out[8:], "amc")]),
                   out / "test.parquet")
    (out / "rewards.py").write_text(REWARDS)
    print(f"wrote {model_dir}, {out / 'train.parquet'}, {out / 'test.parquet'} and {out / 'rewards.py'}")


if __name__ == "__main__":
    main()
