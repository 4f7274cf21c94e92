"""A reward function's ``"pred"``: the answer it read in the response (verl's ``math_dapo``
returns one). With the verifier off it is the result's answer (what maj@k votes on, what the logs
show as ``pred``); it was dropped as a text value, and such a run had no maj@k at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from dapo.config.schema import RewardConfig, RewardFunctionSpec
from dapo.rewards import RewardScorer
from dapo.rewards.user_functions import normalize_return

FUNCTIONS = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None):  # verl's math_dapo's shape
    pred = solution_str.rpartition("Answer:")[2].strip() if "Answer:" in solution_str else "[INVALID]"
    return {"score": 1.0 if pred == ground_truth else -1.0, "acc": pred == ground_truth, "pred": pred}

def numbered(response, ground_truth, extra):
    return {"score": 0.5, "pred": len(response)}

def no_pred(response, ground_truth, extra):
    return {"score": 1.0, "acc": True}
'''


def _scorer(tmp_path: Path, *names: str, verifier_weight: float = 0.0) -> RewardScorer:
    path = tmp_path / "preds.py"
    path.write_text(FUNCTIONS)
    return RewardScorer(RewardConfig(verifier_weight=verifier_weight, num_workers=1,
                                     functions=[RewardFunctionSpec(path=f"{path}:{name}") for name in names]))


def test_the_pred_of_the_function_correctness_comes_from_is_the_answer(tmp_path: Path) -> None:
    with _scorer(tmp_path, "compute_score", "numbered") as scorer:
        assert not scorer.extracts_answers  # (nothing scored yet: no answer seen)
        results = scorer.score(["so Answer: 34", "Answer: 35", "no answer"], ["34", "34", "34"])
        assert scorer.extracts_answers and scorer.votes_exactly  # maj@k votes on them, as strings
    assert [(r.answer, r.pred, r.acc) for r in results] == [("34", "34", True), ("35", "35", False),
                                                            ("[INVALID]", "[INVALID]", False)]
    assert not any(r.failed for r in results)
    assert not any(key.endswith("/pred") for r in results for key in r.extra)  # no metric of it
    # a later function's pred is not the answer: correctness (and so the vote) is the first's
    with _scorer(tmp_path, "no_pred", "numbered") as scorer:
        results = scorer.score(["Answer: 34"], ["34"])
        assert (results[0].answer, scorer.extracts_answers) == ("", False)


def test_with_the_verifier_on_the_answer_is_the_verifier_s(tmp_path: Path) -> None:
    with _scorer(tmp_path, "compute_score", verifier_weight=1.0) as scorer:
        results = scorer.score(["so \\boxed{34}", "Answer: 35"], ["34", "34"])
        assert not scorer.votes_exactly
    assert [r.extra["compute_score/score"] for r in results] == [-1.0, -1.0]  # it read [INVALID] and 35
    assert [(r.answer, r.acc) for r in results] == [("34", True), ("35", False)]  # the verifier's


@pytest.mark.parametrize(("pred", "answer"), [("34", "34"), (34, "34"), (0.5, "0.5"), (None, None), ("", "")])
def test_a_pred_is_text_or_a_number_as_str_writes_it(pred: object, answer: str | None) -> None:
    assert normalize_return({"score": 1.0, "pred": pred}) == (1.0, None, {}, answer)


@pytest.mark.parametrize("pred", [["34"], True, {"value": 34}])
def test_a_pred_that_is_no_answer_is_a_bad_value_naming_it(pred: object) -> None:
    with pytest.raises(TypeError, match="'pred' is a .*: it is the answer the function read in the response"):
        normalize_return({"score": 1.0, "pred": pred})
