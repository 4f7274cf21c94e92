"""gpt-oss's harmony responses read as <think>analysis</think>final (dapo.rollout.harmony), so that
the verifier reads the final channel's answer and none from a response cut off in its analysis."""

from __future__ import annotations

from dapo.builtin import build_tokenizer
from dapo.rollout.harmony import HarmonyTokens, harmony_text

HARMONY = ["<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>"]


def harmony_tokenizer():
    tokenizer = build_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": HARMONY})
    return tokenizer


def ids_of(tokenizer, pieces: list[str]) -> list[int]:
    vocab = tokenizer.get_vocab()
    return [i for piece in pieces
            for i in ([vocab[piece]] if piece in vocab else tokenizer(piece, add_special_tokens=False)["input_ids"])]


def test_a_harmony_response_reads_as_its_thinking_then_its_final_answer() -> None:
    """Decoded without special tokens it read "analysis7? no, 8assistantfinal8": the thinking ran
    into the answer; cut off in its analysis, the answer it only tried counted."""
    tokenizer = harmony_tokenizer()
    tokens = HarmonyTokens.of(tokenizer.get_vocab())
    assert tokens is not None and HarmonyTokens.of(build_tokenizer().get_vocab()) is None
    whole = ids_of(tokenizer, ["<|channel|>", "analysis", "<|message|>", "Answer: 7? no", "<|end|>", "<|start|>",
                               "assistant", "<|channel|>", "final", "<|message|>", "Answer: 8", "<|return|>"])
    assert tokenizer.decode(whole, skip_special_tokens=True) == "analysisAnswer: 7? noassistantfinalAnswer: 8"
    assert harmony_text(tokenizer, whole, tokens) == "<think>Answer: 7? no</think>Answer: 8"
    cut = ids_of(tokenizer, ["<|channel|>", "analysis", "<|message|>", "Answer: 7"])
    assert harmony_text(tokenizer, cut, tokens) == "<think>Answer: 7"  # never reached its final channel
    direct = ids_of(tokenizer, ["<|channel|>", "final", "<|message|>", "Answer: 8", "<|return|>"])
    assert harmony_text(tokenizer, direct, tokens) == "<think></think>Answer: 8"
    tool = ids_of(tokenizer, ["<|channel|>", "analysis", "<|message|>", "hm", "<|end|>", "<|start|>", "assistant",
                              "<|channel|>", "commentary to=functions.calc", "<|message|>", "{}", "<|call|>"])
    assert harmony_text(tokenizer, tool, tokens) == "<think>hm\n\n{}"  # a tool call: no final answer yet
    assert harmony_text(tokenizer, ids_of(tokenizer, ["Answer: 8"]), tokens) is None  # not the format: as decoded


def test_a_harmony_models_right_final_answer_scores_and_one_tried_in_its_analysis_does_not() -> None:
    from dapo.config.schema import RewardConfig
    from dapo.data import Problem
    from dapo.rewards import RewardScorer
    from dapo.rollout.base import Completion, GenerationResult
    from dapo.trainer.scoring import score_completions

    tokenizer = harmony_tokenizer()
    responses = [["<|channel|>", "analysis", "<|message|>", "Answer: 7? no", "<|end|>", "<|start|>", "assistant",
                  "<|channel|>", "final", "<|message|>", "Answer: 8", "<|return|>"],
                 ["<|channel|>", "analysis", "<|message|>", "Answer: 8"]]
    ids = [ids_of(tokenizer, pieces) for pieces in responses]
    generation = GenerationResult([Completion(0, i, [0.0] * len(i), "stop") for i in ids], 0.0, 0)
    prompt_ids = [ids_of(tokenizer, ["<|start|>", "user", "<|message|>", "What is 3+5?", "<|end|>", "<|start|>", "assistant"])]
    with RewardScorer(RewardConfig(num_workers=1)) as scorer:
        scored = score_completions(tokenizer, scorer, [Problem("u1", "What is 3+5?", "8")], generation, 2, prompt_ids)
    assert [r.acc for r in scored.results] == [True, False]
    assert scored.texts[0] == "<think>Answer: 7? no</think>Answer: 8"
