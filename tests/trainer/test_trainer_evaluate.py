"""Held-out evaluation: avg@k / pass@k / maj@k by hand, per data_source, progress in chunks, and
every sample kept."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from dapo.builtin import build_tokenizer
from dapo.config.schema import RewardConfig
from dapo.data.records import Problem
from dapo.rewards import RewardScorer
from dapo.rewards.types import RewardResult
from dapo.rewards.verifier import shorten
from dapo.rollout import NativeEngine
from dapo.rollout.base import Completion, GenerationResult, SamplingParams
from dapo.trainer import evaluate as evaluate_module
from dapo.trainer.evaluate import evaluate, score_at_k, unique_problems


def test_score_at_k_by_hand():
    def r(acc: bool, pred: str) -> RewardResult:
        return RewardResult(score=1.0 if acc else -1.0, acc=acc, pred=shorten(pred), answer=pred)

    results = [r(True, "5"), r(False, "4"), r(False, "4"),  # 1/3 right, majority "4" wrong
               r(True, "7"), r(True, "7"), r(False, "")]   # 2/3 right, majority "7" right
    metrics = score_at_k(results, 3)
    assert metrics["eval/avg@3"] == pytest.approx((1 / 3 + 2 / 3) / 2)
    assert metrics["eval/pass@3"] == 1.0 and metrics["eval/maj@3"] == 0.5
    # 6 of 12 right is 0.5 as logged (summing each problem's fraction made it 0.49999999999999994)
    counts = [0, 2, 3, 1]
    halves = [r(j < right, "1") for right in counts for j in range(3)]
    assert score_at_k(halves, 3)["eval/avg@3"] == 0.5


def test_maj_at_k_votes_for_answers_not_for_their_spelling():
    def r(acc: bool, pred: str) -> RewardResult:
        return RewardResult(score=1.0 if acc else -1.0, acc=acc, pred=shorten(pred), answer=pred)

    # three correct answers written three ways outvote two identical wrong ones
    spelled = [r(True, "34"), r(True, "x = 34"), r(True, "34.0"), r(False, "35"), r(False, "35")]
    assert score_at_k(spelled, 5)["eval/maj@5"] == 1.0
    # wrong answers that state the same integer are one answer too: 3 votes for 35 beat 2 for 34
    wrong = [r(True, "34"), r(True, "34"), r(False, "35"), r(False, "n = 35"), r(False, "035")]
    assert score_at_k(wrong, 5)["eval/maj@5"] == 0.0
    # and wrong fractions in LaTeX spellings: 3 votes for 1/3 beat 2 (correct) for 1/2
    fractions = [r(True, "\\frac{1}{2}"), r(True, "0.5"), r(False, "\\frac{1}{3}"), r(False, "1/3"),
                 r(False, "$\\dfrac{1}{3}$")]
    assert score_at_k(fractions, 5)["eval/maj@5"] == 0.0
    # ... braced or not: 3 + 3 votes for 1/2 beat 4 (correct) for 1/3
    braces = [r(True, "\\frac{1}{3}")] * 4 + [r(False, "\\frac{1}{2}")] * 3 + [r(False, "\\frac12")] * 3
    assert score_at_k(braces, 10)["eval/maj@10"] == 0.0
    # a tie goes to the answer seen first
    assert score_at_k([r(False, "35"), r(True, "34")], 2)["eval/maj@2"] == 0.0
    assert score_at_k([r(True, "34"), r(False, "35")], 2)["eval/maj@2"] == 1.0
    # no answer extracted: wrong; and with a reward that extracts none (no verifier), no maj@k, not 0
    assert score_at_k([r(False, ""), r(False, "")], 2)["eval/maj@2"] == 0.0
    # a sample judged correct without an extracted answer (a user reward function) votes correct
    assert score_at_k([r(True, ""), r(True, ""), r(False, "35")], 3)["eval/maj@3"] == 1.0
    metrics = score_at_k([r(True, ""), r(True, "")], 2, majority_vote=False)
    assert metrics["eval/avg@2"] == 1.0 and "eval/maj@2" not in metrics
    # long answers vote in full, not as the head...tail the logs show: three different wrong
    # expressions that look alike when shortened do not outvote two correct answers
    lookalikes = [r(False, "x" * 60 + middle + "y" * 60) for middle in "abc"]
    assert len({result.pred for result in lookalikes}) == 1
    assert score_at_k([r(True, "34"), r(True, "34"), *lookalikes], 5)["eval/maj@5"] == 1.0


def test_a_sample_whose_scoring_failed_votes_with_the_same_answer_judged_correct():
    """(its answer voted apart from itself: 3 + 2 votes for 540 lost to 4 for 12). A timed-out
    scorer leaves acc unmeasured and the sample wrong in avg@k; in maj@k it is still an answer."""
    def r(acc: bool, answer: str, unmeasured_by: str | None = None) -> RewardResult:
        return RewardResult(score=1.0 if acc else -1.0, acc=acc, pred=answer, answer=answer,
                            timed_out=unmeasured_by is not None, unmeasured_by=unmeasured_by)

    timed_out = [r(False, "540", "math_verify")] * 2
    group = [r(True, "540")] * 3 + timed_out + [r(False, "12")] * 4
    assert score_at_k(group, 9) == pytest.approx({"eval/avg@9": 3 / 9, "eval/pass@9": 1.0, "eval/maj@9": 1.0})
    # only the same answer: failed samples of another answer vote for it; measured ones keep their verdict
    assert score_at_k([r(True, "540")] * 3 + [r(False, "7", "math_verify")] * 2 + [r(False, "12")] * 4,
                      9)["eval/maj@9"] == 0.0
    assert score_at_k([r(True, "540")] * 3 + [r(False, "540")] * 2 + [r(False, "12")] * 4, 9)["eval/maj@9"] == 0.0
    # and nothing joins a correct sample that extracted no answer
    assert score_at_k([r(True, "")] * 3 + [r(False, "", "math_verify")] * 2 + [r(False, "12")] * 4,
                      9)["eval/maj@9"] == 0.0


def test_maj_at_k_is_recomputed_from_the_saved_samples_where_a_scoring_failed(monkeypatch):
    """A failed scoring's sample pools with a correct sample of the same answer; one judged wrong
    does not. Their saved records were the same, so the saved generations could not give maj@k:
    they now name the scorer that failed (unmeasured_by)."""
    from types import SimpleNamespace

    from dapo.trainer.scoring import ScoredGeneration

    right, wrong = RewardResult(1.0, True, "34", "34"), RewardResult(-1.0, False, "35", "35")
    failed = RewardResult(-1.0, False, "34", "34", timed_out=True, unmeasured_by="math_verify")
    judged = RewardResult(-1.0, False, "34", "34")
    results = [right, failed, wrong, wrong, right, judged, wrong, wrong]

    class Engine:
        def generate(self, prompt_token_ids, params):
            return GenerationResult([Completion(i, [1], [0.0], "stop") for i in range(len(prompt_token_ids))
                                     for _ in range(params.n)], 0.0, 0)

    monkeypatch.setattr(evaluate_module, "score_completions",
                        lambda *args, **kwargs: ScoredGeneration(["Answer: x"] * len(results), results))
    scorer = SimpleNamespace(extracts_answers=True, votes_exactly=False, cfg=RewardConfig(), labels=[],
                             first_failure={"math_verify": "timed out"})
    problems = [Problem("u1", "q1", "34"), Problem("u2", "q2", "34")]
    result = evaluate(Engine(), build_tokenizer(), scorer, [[1], [1]], problems, SamplingParams(n=4, seed=None))
    assert result.metrics["eval/maj@4"] == 0.5
    assert [s["unmeasured_by"] for s in result.samples] == [None, "math_verify"] + [None] * 6
    majority = 0
    for i in range(2):
        group = result.samples[4 * i: 4 * i + 4]
        pooled = {s["vote"] for s in group if s["acc"]}
        votes = Counter("correct" if s["acc"] or (s["unmeasured_by"] and s["vote"] in pooled) else s["vote"]
                        for s in group if s["acc"] or s["vote"] is not None)
        majority += votes.most_common(1)[0][0] == "correct"
    assert result.metrics["eval/maj@4"] == majority / 2


class ScriptedEngine:
    """Answers problem i correctly in its first ``right[i]`` samples; records each call."""

    def __init__(self, tokenizer, problems: list[Problem], right: list[int]) -> None:
        self.tokenizer, self.problems, self.right, self.calls = tokenizer, problems, right, []

    def generate(self, prompt_token_ids: list[list[int]], params: SamplingParams) -> GenerationResult:
        self.calls.append((len(prompt_token_ids), params.seed))
        offset = sum(n for n, _ in self.calls[:-1])
        completions = []
        for i in range(len(prompt_token_ids)):
            problem = offset + i
            for j in range(params.n):
                answer = self.problems[problem].ground_truth if j < self.right[problem] else "-1"
                ids = self.tokenizer(f"Answer: {answer}", add_special_tokens=False)["input_ids"]
                completions.append(Completion(i, ids, [0.0] * len(ids), "stop"))
        return GenerationResult(completions, 0.0, 0)


def test_per_source_metrics_progress_chunks_and_samples(monkeypatch):
    monkeypatch.setattr(evaluate_module, "MIN_SEQUENCES_PER_CHUNK", 8)  # 4 problems (k=2) per chunk
    tokenizer = build_tokenizer()
    problems = [Problem(uid=str(i), prompt=f"{i} + 1 =", ground_truth=str(i + 1),
                        data_source="aime" if i < 6 else "amc") for i in range(10)]
    right = [2, 1, 0, 2, 2, 1, 0, 0, 1, 2]
    engine = ScriptedEngine(tokenizer, problems, right)
    progress: list[tuple[int, int]] = []
    with RewardScorer(RewardConfig(num_workers=1)) as scorer:
        result = evaluate(engine, tokenizer, scorer, [[1]] * 10, problems, SamplingParams(n=2, seed=100),
                          on_progress=lambda done, total: progress.append((done, total)))
    assert engine.calls == [(4, 100), (4, 101), (2, 102)]  # one seed per chunk
    assert progress == [(0, 10), (4, 10), (8, 10), (10, 10)]
    m = result.metrics
    assert m["eval/avg@2"] == pytest.approx(sum(right) / 20)
    assert m["eval/aime/avg@2"] == pytest.approx(sum(right[:6]) / 12)
    assert m["eval/amc/pass@2"] == pytest.approx(2 / 4)
    # how many problems each figure covers (eval.max_problems keeps the first ones in file order)
    assert (m["eval/num_problems"], m["eval/aime/num_problems"], m["eval/amc/num_problems"]) == (10, 6, 4)
    # the mean reward (verifier +1 / -1 here), overall and per source: a graded reward's figure
    assert m["eval/score_mean"] == pytest.approx((2 * sum(right) - 20) / 20)
    assert m["eval/aime/score_mean"] == pytest.approx((2 * sum(right[:6]) - 12) / 12)
    assert len(result.samples) == 20 and result.samples[0]["response"] == "Answer: 1" and result.samples[0]["acc"]
    assert [s["acc"] for s in result.samples[2:4]] == [True, False]  # problem 1: one of two right
    assert [s["prompt"] for s in result.samples[2:4]] == ["1 + 1 ="] * 2  # what was asked, with every sample
    # maj@k from the saved samples alone: each one's vote (its answer in full; correct ones pool)
    assert [s["vote"] for s in result.samples[2:4]] == ["2", "-1"]
    majority = 0
    for i in range(10):
        group = result.samples[2 * i: 2 * i + 2]
        votes = Counter("correct" if s["acc"] else s["vote"] for s in group if s["acc"] or s["vote"] is not None)
        majority += bool(votes) and votes.most_common(1)[0][0] == "correct"
    assert m["eval/maj@2"] == pytest.approx(majority / 10)
    # the mean response length is over the 20 responses, not the 10 problems
    lengths = [len(tokenizer(s["response"], add_special_tokens=False)["input_ids"]) for s in result.samples]
    assert m["eval/response_length_mean"] == pytest.approx(sum(lengths) / 20)


def test_a_data_source_with_a_slash_is_a_metric_checkpoint_keep_best_ranks_by():
    """verl's preprocessed GSM8K and MATH name their data_source openai/gsm8k and lighteval/MATH:
    their per-source metrics are ones checkpoint.keep_best takes (it refused them before)."""
    from dapo.config.run import BEST_METRIC

    tokenizer = build_tokenizer()
    problems = [Problem(uid=str(i), prompt=f"{i} + 1 =", ground_truth=str(i + 1),
                        data_source="openai/gsm8k" if i < 2 else "lighteval/MATH") for i in range(4)]
    with RewardScorer(RewardConfig(num_workers=1)) as scorer:
        result = evaluate(ScriptedEngine(tokenizer, problems, [2, 0, 1, 1]), tokenizer, scorer, [[1]] * 4,
                          problems, SamplingParams(n=2, seed=0))
    m = result.metrics
    assert m["eval/openai/gsm8k/avg@2"] == pytest.approx(2 / 4) and m["eval/lighteval/MATH/avg@2"] == pytest.approx(2 / 4)
    ranked = {key for key in m if BEST_METRIC.match(key)}
    assert {"eval/openai/gsm8k/avg@2", "eval/lighteval/MATH/pass@2", "eval/openai/gsm8k/score_mean"} <= ranked
    assert not {key for key in ranked if key.endswith(("num_problems", "truncation_rate", "length_mean"))}


def test_eval_logs_the_mean_reward_and_what_user_functions_returned():
    """A graded reward (reward.verifier_weight=0, a judge's 0-1 score) showed only avg@k's verdicts
    on the held-out set: no mean score and none of the function's metrics, which training logs."""
    from dapo.trainer.evaluate import score_metrics
    from dapo.trainer.metric_docs import METRICS, documented_name

    results = [RewardResult(score=0.25, acc=False, extra={"judge/score": 0.25, "judge/confidence": 0.5}),
               RewardResult(score=0.75, acc=True, extra={"judge/score": 0.75}),
               RewardResult(score=-1.0, acc=False, error=True, failed=["judge"])]
    metrics = score_metrics(results)
    assert metrics == pytest.approx({"eval/score_mean": 0.0, "eval/reward/judge/score": 0.5,
                                     "eval/reward/judge/confidence": 0.5})
    assert all(documented_name(key) in METRICS for key in metrics)


def test_a_problem_two_benchmarks_share_is_evaluated_in_each():
    """Copies within one eval file are one problem; the same problem in two data sources is one
    in each, so each source's eval/<source>/avg@k covers its whole file."""
    from dapo.trainer.evaluate import unique_problems

    def p(source: str, uid: str) -> Problem:
        return Problem(uid=uid, prompt=uid, ground_truth="1", data_source=source)

    problems = [p("aime", "P1"), p("aime", "P1"), p("aime", "P2"), p("math500", "P2"), p("math500", "P3")]
    assert [(q.data_source, q.uid) for q in unique_problems(problems)] == [
        ("aime", "P1"), ("aime", "P2"), ("math500", "P2"), ("math500", "P3")]


@pytest.mark.parametrize("fault", ["one missing", "one extra", "interleaved"])
def test_an_engine_that_breaks_prompt_major_order_is_refused(fault):
    """Groups (training) and @k metrics (evaluation) take completions by position: an engine, a
    user's too, that drops, adds or interleaves samples would pair responses with the wrong
    problem and group, so scoring refuses it, on both paths."""
    from dapo.trainer.scoring import score_completions

    tokenizer = build_tokenizer()
    problems = [Problem(uid=str(i), prompt=f"{i} + 1 =", ground_truth=str(i + 1)) for i in range(3)]

    class Faulty(ScriptedEngine):
        def generate(self, prompt_token_ids, params):
            completions = super().generate(prompt_token_ids, params).completions
            if fault == "one missing":
                completions = completions[:-1]
            elif fault == "one extra":
                completions = [*completions, completions[-1]]
            else:  # prompt 0, 1, 2, 0, 1, 2: right count, wrong order
                completions = sorted(completions, key=lambda c: completions.index(c) % params.n)
            return GenerationResult(completions, 0.0, 0)

    engine = Faulty(tokenizer, problems, [1, 1, 1])
    with RewardScorer(RewardConfig(num_workers=1)) as scorer:
        generation = engine.generate([[1]] * 3, SamplingParams(n=2))
        with pytest.raises(RuntimeError, match=r"for 3 prompts x n=2, or not prompt-major"):
            score_completions(tokenizer, scorer, problems, generation, 2)
        engine.calls.clear()
        with pytest.raises(RuntimeError, match="not prompt-major"):
            evaluate(engine, tokenizer, scorer, [[1]] * 3, problems, SamplingParams(n=2, seed=0))


def test_math_dapos_maj_at_k_counts_the_answers_it_judges_apart_apart():
    """reward.verifier=math_dapo judges answers as strings (``34.`` is wrong for 34): its wrong
    ``34.`` and ``34.0`` are two answers, as the reference's maj@k counts them, not one of four
    votes that outvotes the three correct ``34``."""

    class Texts:
        def generate(self, prompt_token_ids, params):
            ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
            return GenerationResult([Completion(0, i, [0.0] * len(i), "stop") for i in ids], 0.0, 0)

    tokenizer = build_tokenizer()
    texts = ["Answer: 34"] * 3 + ["Answer: 34."] * 2 + ["Answer: 34.0"] * 2
    problems = [Problem(uid="0", prompt="17 * 2 =", ground_truth="34")]
    with RewardScorer(RewardConfig(num_workers=1, verifier="math_dapo")) as scorer:
        result = evaluate(Texts(), tokenizer, scorer, [[1]], problems, SamplingParams(n=7, seed=0))
    metrics = result.metrics
    assert metrics["eval/avg@7"] == pytest.approx(3 / 7) and metrics["eval/maj@7"] == 1.0
    # the saved votes keep them apart as maj@k did: maj@k is recounted from generations.jsonl
    wrong = [sample["vote"] for sample in result.samples if not sample["acc"]]
    assert len(wrong) == 4 and wrong[0] == wrong[1] != wrong[2] == wrong[3]
    # the same results read by value (dapo-rl's verifier's rule): the four wrong ones are one answer
    def r(acc: bool, answer: str) -> RewardResult:
        return RewardResult(score=1.0 if acc else -1.0, acc=acc, pred=answer, answer=answer)

    results = [r(True, "34")] * 3 + [r(False, "34.")] * 2 + [r(False, "34.0")] * 2
    assert score_at_k(results, 7)["eval/maj@7"] == 0.0 and score_at_k(results, 7, exact_votes=True)["eval/maj@7"] == 1.0


def test_math_dapos_maj_at_k_counts_missing_answers_as_the_references_invalid_vote():
    """The reference's math_dapo gives a response without an ``Answer:`` line the answer
    ``[INVALID]``, and its maj@k counts it: four such responses outvote three correct ones. Read by
    value (dapo-rl's verifier), a response without an answer does not vote."""
    def r(acc: bool, answer: str) -> RewardResult:
        return RewardResult(score=1.0 if acc else -1.0, acc=acc, pred=answer, answer=answer)

    results = [r(True, "34")] * 3 + [r(False, "")] * 4
    assert score_at_k(results, 7, exact_votes=True)["eval/maj@7"] == 0.0
    assert score_at_k(results, 7)["eval/maj@7"] == 1.0
    # two unanswered, two wrong "35": the three correct ones lead either way
    results = [r(True, "34")] * 3 + [r(False, "")] * 2 + [r(False, "35")] * 2
    assert score_at_k(results, 7, exact_votes=True)["eval/maj@7"] == 1.0
    # every response unanswered: a problem with votes, all for [INVALID], is wrong
    assert score_at_k([r(False, "")] * 7, 7, exact_votes=True)["eval/maj@7"] == 0.0


def test_math_dapos_maj_at_k_counts_an_answer_line_read_as_empty_apart_from_a_missing_one():
    """The reference's maj@k votes for "" (an ``Answer:`` line that normalises to nothing, such
    as ``Answer: $$``) apart from ``[INVALID]`` (no line): two of each do not outvote three correct."""

    class Texts:
        def generate(self, prompt_token_ids, params):
            ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
            return GenerationResult([Completion(0, i, [0.0] * len(i), "stop") for i in ids], 0.0, 0)

    tokenizer = build_tokenizer()
    texts = ["Answer: 34"] * 3 + ["34, I think"] * 2 + ["Answer: $$"] * 2
    assert [tokenizer.decode(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts] == texts
    problems = [Problem(uid="0", prompt="17 * 2 =", ground_truth="34")]
    with RewardScorer(RewardConfig(num_workers=1, verifier="math_dapo")) as scorer:
        metrics = evaluate(Texts(), tokenizer, scorer, [[1]], problems, SamplingParams(n=7, seed=0)).metrics
    assert metrics["eval/avg@7"] == pytest.approx(3 / 7) and metrics["eval/maj@7"] == 1.0
    # "" is an answer that votes: four such lines outvote the three correct answers
    texts[3:5] = ["Answer: $$"] * 2
    with RewardScorer(RewardConfig(num_workers=1, verifier="math_dapo")) as scorer:
        metrics = evaluate(Texts(), tokenizer, scorer, [[1]], problems, SamplingParams(n=7, seed=0)).metrics
    assert metrics["eval/maj@7"] == 0.0


def test_a_problem_s_samples_do_not_depend_on_the_other_problems_evaluated(tiny_model_dir, monkeypatch):
    """Each problem samples with a seed of its (data_source, uid): evaluated among six problems in
    chunks of two, or as the last three of a shorter set (eval.max_problems, another eval file),
    it is given the same samples. A seed per chunk gave them other samples at every change of the
    set, and a problem moved to another data_source other ones still."""
    monkeypatch.setattr(evaluate_module, "MIN_SEQUENCES_PER_CHUNK", 4)  # 2 problems (k=2) per chunk
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    engine = NativeEngine(model, tokenizer.pad_token_id)
    problems = [Problem(uid=str(i), prompt=f"{i} + 1 =", ground_truth=str(i + 1)) for i in range(6)]
    prompts = [tokenizer(problem.prompt)["input_ids"] for problem in problems]
    params = SamplingParams(n=2, max_new_tokens=8, seed=100)
    with RewardScorer(RewardConfig(num_workers=1)) as scorer:
        whole = evaluate(engine, tokenizer, scorer, prompts, problems, params).samples
        last = evaluate(engine, tokenizer, scorer, prompts[3:], problems[3:], params).samples
        elsewhere = [dataclasses.replace(problem, data_source="amc") for problem in problems[3:]]
        moved = evaluate(engine, tokenizer, scorer, prompts[3:], elsewhere, params).samples
    assert [s["response"] for s in last] == [s["response"] for s in whole[6:]]
    assert [s["response"] for s in moved] != [s["response"] for s in last]


def test_eval_max_problems_keeps_the_first_n_distinct_problems_in_file_order():
    problems = [Problem(uid=f"P{i % 5}", prompt="q", ground_truth="1") for i in range(10)]  # each twice
    assert [p.uid for p in unique_problems(problems, 2)] == ["P0", "P1"]
    assert [p.uid for p in unique_problems(problems)] == ["P0", "P1", "P2", "P3", "P4"]
