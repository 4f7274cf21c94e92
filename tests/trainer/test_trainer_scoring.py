"""shape_rewards as the shipped reference config wires it: DAPO.md's Soft Overlong Punishment with
L_max = rollout.max_response_length = 20480 and L_cache = algorithm.overlong_buffer_len = 4096,
added to the verifier's +1/-1, and Overlong Filtering masking truncated responses out of the loss.
Expected values are hand-computed: R_length(|y|) = ((L_max - L_cache) - |y|) / L_cache in the buffer."""

from __future__ import annotations

import pytest

from dapo.config.loading import builtin_config_path, load_config
from dapo.trainer.batch import Sample
from dapo.trainer.scoring import shape_rewards

# |y| at the buffer's edges: L_max - L_cache (free), +1 (first penalised), L_max - 1, L_max (full -1)
LENGTHS = [16384, 16385, 20479, 20480]
PENALTIES = [0.0, -1 / 4096, -4095 / 4096, -1.0]  # all exact in float64


def samples(score: float) -> list[Sample]:
    return [Sample(0, "u", [1], [5] * n, [0.0] * n, truncated=n == 20480, score=score, acc=score > 0) for n in LENGTHS]


def reference_config(*overrides: str):
    return load_config([builtin_config_path("dapo_qwen2.5_32b")], list(overrides))


def test_reference_config_soft_punishment_at_the_buffer_boundaries() -> None:
    cfg = reference_config()
    for score in (1.0, -1.0):
        batch = samples(score)
        shape_rewards(batch, cfg)
        assert [s.reward for s in batch] == [score + p for p in PENALTIES]
        assert [s.loss_weight for s in batch] == [1.0] * 4  # overlong filtering is off in the reference config


def test_overlong_filtering_masks_only_the_truncated_response() -> None:
    batch = samples(1.0)
    shape_rewards(batch, reference_config("algorithm.overlong_filtering=true"))
    assert [s.loss_weight for s in batch] == [1.0, 1.0, 1.0, 0.0]
    assert [s.reward for s in batch] == [1.0 + p for p in PENALTIES]


def test_the_penalty_factor_scales_the_punishment() -> None:
    batch = samples(1.0)
    shape_rewards(batch, reference_config("algorithm.overlong_penalty_factor=0.5"))
    assert [s.reward for s in batch] == [1.0 + 0.5 * p for p in PENALTIES]


def test_punishment_off_leaves_the_score() -> None:
    batch = samples(-1.0)
    shape_rewards(batch, reference_config("algorithm.overlong_soft_punishment=false"))
    assert [s.reward for s in batch] == [-1.0] * 4


def test_a_reward_function_reads_the_prompt_and_data_source_it_scores(tmp_path) -> None:
    """An LLM judge needs the question; a reward routing by source (verl's compute_score) its
    data_source: neither was in extra. A row's own field of that name wins."""
    from dapo.builtin import build_tokenizer
    from dapo.config.schema import RewardConfig, RewardFunctionSpec
    from dapo.data import Problem
    from dapo.rewards import RewardScorer
    from dapo.rollout.base import Completion, GenerationResult
    from dapo.trainer.scoring import score_completions

    module = tmp_path / "judge.py"
    module.write_text("def judge(response, ground_truth, extra):\n"
                      "    return {'score': 0.0, 'asks_3_4': float('3+4' in str(extra['prompt'])),\n"
                      "            'from_b': float(extra['data_source'] == 'b')}\n")
    problems = [Problem("u1", "What is 3+4?", "7", data_source="a"),
                Problem("u2", [{"role": "user", "content": "What is 1+1?"}], "2", data_source="b"),
                Problem("u3", "What is 3+4?", "7", data_source="a", extra={"prompt": "own", "data_source": "b"})]
    tokenizer = build_tokenizer()
    ids = tokenizer("Answer: 7")["input_ids"]
    generation = GenerationResult([Completion(i, ids, [0.0] * len(ids), "stop") for i in range(3)], 0.0, 3 * len(ids))
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{module}:judge")], num_workers=1)
    with RewardScorer(cfg) as scorer:
        results = score_completions(tokenizer, scorer, problems, generation, 1).results
    assert [r.extra["judge/asks_3_4"] for r in results] == [1.0, 0.0, 0.0]  # the third reads its own "prompt"
    assert [r.extra["judge/from_b"] for r in results] == [0.0, 1.0, 1.0]


def test_a_response_to_a_prompt_that_opens_thinking_is_read_as_thinking(tmp_path) -> None:
    """A reasoning model's chat template ends the prompt in "<think>": a response cut off inside its
    thinking holds no "<think>" of its own, and an answer tried there was read as its final one.
    User functions still get the response as generated."""
    from dapo.builtin import build_tokenizer
    from dapo.config.schema import RewardConfig, RewardFunctionSpec
    from dapo.data import Problem
    from dapo.rewards import RewardScorer
    from dapo.rollout.base import Completion, GenerationResult
    from dapo.trainer.scoring import score_completions

    module = tmp_path / "starts.py"
    module.write_text("def starts(response, ground_truth, extra):\n"
                      "    return {'score': 0.0, 'opens_think': float(response.startswith('<think>'))}\n")
    tokenizer = build_tokenizer()
    responses = ["Let me try 7. Answer: 7", "Let me try 7.\n</think>\nAnswer: 7"]
    problems = [Problem("u1", "What is 3+4?", "7")]
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{module}:starts")], num_workers=1)
    verdicts = {}
    with RewardScorer(cfg) as scorer:
        for prompt in ("What is 3+4?\n<think>\n", "What is 3+4?\n"):
            ids = [tokenizer(text)["input_ids"] for text in responses]
            generation = GenerationResult([Completion(0, i, [0.0] * len(i), "stop") for i in ids], 0.0, 0)
            results = score_completions(tokenizer, scorer, problems, generation, 2, [tokenizer(prompt)["input_ids"]]).results
            verdicts[prompt.endswith("<think>\n")] = [r.acc for r in results]
            assert [r.extra["starts/opens_think"] for r in results] == [0.0, 0.0]
    assert verdicts[True] == [False, True]  # still thinking when it ended: no answer (before: right)
    assert verdicts[False] == [True, True]


def test_a_prefill_that_opens_thinking_has_its_responses_read_as_thinking() -> None:
    """An assistant prefill "<think>\\nOkay, let me see." leaves the response thinking though the
    prompt does not end in "<think>": a response cut off in its thinking was read for its answer."""
    from dapo.builtin import build_tokenizer
    from dapo.config.schema import RewardConfig
    from dapo.data import Problem
    from dapo.rewards import RewardScorer
    from dapo.rollout.base import Completion, GenerationResult
    from dapo.trainer.scoring import prefill_opens_thinking, score_completions

    tokenizer = build_tokenizer()
    user = {"role": "user", "content": "What is 3+4?"}
    ids = [tokenizer(text)["input_ids"] for text in ("Let me try 7. Answer: 7", "So 7.\n</think>\nAnswer: 7")]
    generation = GenerationResult([Completion(0, i, [0.0] * len(i), "stop") for i in ids], 0.0, 0)
    verdicts = {}
    with RewardScorer(RewardConfig(num_workers=1)) as scorer:
        for prefill in ("<think>\nOkay, let me see.", "Okay, let me see."):
            problem = Problem("u1", [user, {"role": "assistant", "content": prefill}], "7")
            prompt_ids = [tokenizer(f"What is 3+4?\n{prefill}")["input_ids"]]
            verdicts[prefill] = [r.acc for r in score_completions(tokenizer, scorer, [problem], generation, 2, prompt_ids).results]
    assert verdicts == {"<think>\nOkay, let me see.": [False, True], "Okay, let me see.": [True, True]}
    assert not prefill_opens_thinking([user, {"role": "assistant", "content": "<think>\nSo 7.\n</think>\n"}])
    assert not prefill_opens_thinking([user]) and not prefill_opens_thinking("<think>")


@pytest.mark.parametrize("marked", ["in_vocabulary", "additional_special_tokens"])
def test_a_think_end_the_tokenizer_marks_special_is_kept_for_the_verifier(marked: str) -> None:
    """A </think> flagged special only in the vocabulary (add_tokens(special_tokens=True)) was dropped
    by the decode: a response to a prompt opening <think> had no end to its thinking, and its right
    answer scored wrong. One among the special tokens turned the thinking check off: an answer tried
    inside the thinking counted. It is kept in the text now, as Qwen3's (not special) always was."""
    from dapo.builtin import build_tokenizer
    from dapo.config.schema import RewardConfig
    from dapo.data import Problem
    from dapo.rewards import RewardScorer
    from dapo.rollout.base import Completion, GenerationResult
    from dapo.trainer.scoring import score_completions

    tokenizer = build_tokenizer()
    if marked == "in_vocabulary":
        tokenizer.add_tokens(["<think>", "</think>"], special_tokens=True)
    else:
        tokenizer.add_special_tokens({"additional_special_tokens": ["<think>", "</think>"]})
    ids = [tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
           for text in ("So 3+4 = 7.\n</think>\nAnswer: 7", "Answer: 7, no: 8\n</think>\nAnswer: 8", "Answer: 7")]
    generation = GenerationResult([Completion(0, i, [0.0] * len(i), "stop") for i in ids], 0.0, 0)
    prompt_ids = [tokenizer("What is 3+4?\n<think>", add_special_tokens=False)["input_ids"]]
    with RewardScorer(RewardConfig(num_workers=1)) as scorer:
        scored = score_completions(tokenizer, scorer, [Problem("u1", "What is 3+4?", "7")], generation, 3, prompt_ids)
    assert scored.texts[0] == "So 3+4 = 7.\n</think>\nAnswer: 7"
    assert [r.acc for r in scored.results] == [True, False, False]  # the third: still thinking, no answer


def test_a_special_think_end_keeps_a_sentencepiece_space_after_it() -> None:
    """A Llama-style (Metaspace) tokenizer writes the space before a word into the word's token
    ("▁Answer:"). Decoding the text on each side of a special </think> alone dropped that space
    ("</think>Answer: 7"); the response now reads as the tokenizer decodes it, other special tokens
    left out."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from dapo.trainer.scoring import decode_responses

    core = Tokenizer(models.BPE(unk_token="<unk>"))
    core.pre_tokenizer, core.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
    core.train_from_iterator(["So 3+4 = 7. Answer: 7, the answer"] * 4,
                             trainers.BpeTrainer(vocab_size=120, special_tokens=["<unk>", "<s>", "</s>"]))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    tokenizer.add_tokens(["<think>", "</think>", "<tool>"], special_tokens=True)
    ids = tokenizer("So 7.</think> Answer: 7<tool>", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    assert decode_responses(tokenizer, [ids, ids[:3]]) == ["So 7.</think> Answer: 7", "So 7.</think>"]
