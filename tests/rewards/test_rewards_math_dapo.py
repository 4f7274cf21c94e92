"""reward.verifier=math_dapo: the DAPO reference run's scorer (verl's math_dapo), exact string
match of Minerva-normalised answers, cases worked out by hand from its rules."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dapo.config import ConfigError, builtin_config_path, load_config
from dapo.config.schema import RewardConfig
from dapo.rewards import RewardScorer
from dapo.rewards.math_dapo import (
    _first_dollar_segment,
    _unwrap,
    math_dapo_verdict,
    minerva_normalize,
)
from dapo.rewards.types import RewardResult
from dapo.trainer.eval_warnings import unread_answers_note

R = "Let me work it out.\n"


@pytest.mark.parametrize(("response", "ground_truth", "correct", "answer"), [
    (R + "Answer: 34", "34", True, "34"),
    (R + "answer : $34$", "34", True, "34"),                      # any case, spaces, $ dropped
    (R + "Answer: x = 1,234 \\text{ cm}", "1234", True, "1234"),   # last '=' side, unit, thousands comma
    (R + "Answer: 34^\\circ", "34", True, "34"),
    (R + "Answer: \\boxed{34}", "34", True, "34"),
    (R + "Answer: \\frac12", "\\frac{1}{2}", True, "\\frac{1}{2}"),  # shorthand braced
    (R + "Answer: 34 degrees", "34", True, "34"),
    (R + "Answer: 34.", "34", False, "34."),                        # the reference scores these wrong:
    (R + "**Answer:** 34", "34", False, "**34"),
    (R + "Answer: 34.0", "34", False, "34.0"),
    (R + "Answer: \\frac{68}{2}", "34", False, "\\frac{68}{2}"),
    (R + "Answer: 0.5", "\\frac{1}{2}", False, "0.5"),
    (R + "Answer: 34\n" + "Checking once more. " * 20, "34", False, ""),  # the Answer line left the last 300 characters
    (R + "Answer: 35\nAnswer: 34", "34", True, "34"),                # the last one counts
    (R + "Answer: 34\nAlternatively, 35.", "34", True, "34"),        # what follows its line is not read
    (R + "\\boxed{34}", "34", False, ""),                            # no Answer line: no answer
    (R + "The final answer is 34. Answer:", "34", False, ""),        # an empty Answer line reads nothing
])
def test_the_reference_scorer_matches_strings_after_minervas_normalisation(response, ground_truth, correct, answer):
    assert math_dapo_verdict(response, ground_truth)[:3] == (correct, answer, minerva_normalize(ground_truth))


@pytest.mark.parametrize(("response", "found"), [
    ("Answer: 34", True),
    ("Answer: $$", True),                  # a line whose answer normalises to "": found, answer ""
    ("Answer: square units", True),
    ("\\boxed{34}", False),               # no line: the reference's [INVALID]
    ("The final answer is 34. Answer:", False),
])
def test_the_verdict_says_whether_an_answer_line_was_found(response, found):
    """maj@k with exact votes needs it: "" from a found line votes apart from [INVALID]."""
    _, answer, _, line_found = math_dapo_verdict(R + response, "34")
    assert line_found == found and (answer == "") == (response != "Answer: 34")


def test_minerva_normalisation_drops_what_the_reference_drops():
    assert minerva_normalize("banana split") == "banansplit"  # "a " removed inside words too, as the reference does
    assert minerva_normalize("$\\sqrt3$") == "\\sqrt{3}"
    assert minerva_normalize("\\textbf{7} students") == "7"
    assert minerva_normalize(" 5{,}000 ") == "5000"


def test_the_scorer_gives_plus_and_minus_one_and_no_vote_without_an_answer():
    cfg = RewardConfig(verifier="math_dapo", num_workers=1)
    with RewardScorer(cfg) as scorer:
        results = scorer.score([R + "Answer: 34", R + "Answer: 34.", R + "\\boxed{34}"], ["34"] * 3)
    assert [(r.score, r.acc, r.answer) for r in results] == [(1.0, True, "34"), (-1.0, False, "34."), (-1.0, False, "")]


@pytest.mark.parametrize(("response", "ground_truth", "correct"), [
    ("Answer: 34\n" + "x" * 289, "34", True),  # the Answer line's first character is the 300th from the end
    ("Answer: 34\n" + "x" * 290, "34", False),  # ... and then the 301st: its line is cut to "nswer: 34"
    ("Answer: (1,2)", "(12)", False),  # a comma is removed from a number (1,234), not from a pair
    ("Answer: 34\r\nok", "34", True),  # a CRLF line's carriage return is not part of the answer
    ("Answer: \\boxed{\\frac{1}{2}}", "\\frac{1}{2}", True),  # a box's braces matched greedily: its whole content
])
def test_the_reference_scorers_boundaries(response: str, ground_truth: str, correct: bool):
    """Each boundary of the reference scorer, as a third mutation audit found them untested."""
    assert math_dapo_verdict(response, ground_truth)[0] is correct


def test_an_empty_answer_line_votes_apart_from_no_answer_line():
    """maj@k: no Answer: line votes [INVALID], an empty one (Answer: $$) its empty answer."""
    with RewardScorer(RewardConfig(verifier="math_dapo", num_workers=1)) as scorer:
        results = scorer.score([R + "no answer here", R + "Answer: $$"], ["34"] * 2)
    assert [r.empty_answer_line for r in results] == [False, True]


def test_the_reference_config_uses_it_and_extractor_settings_are_refused_with_it():
    assert load_config([builtin_config_path("dapo_qwen2.5_32b")]).reward.verifier == "math_dapo"
    assert load_config([builtin_config_path("dapo_recipe")]).reward.verifier == "dapo-rl"
    with pytest.raises(ConfigError, match="reward.extractor=boxed is dapo-rl's verifier's"):
        RewardConfig(verifier="math_dapo", extractor="boxed")
    with pytest.raises(ConfigError, match="reward.verifier"):
        RewardConfig(verifier="verl")


def test_boxed_answers_it_cannot_read_are_said_with_the_verifier_that_reads_them():
    cfg = RewardConfig(verifier="math_dapo")
    texts = [R + "\\boxed{34}"] * 4
    note = unread_answers_note(cfg, ["aime_2024"] * 4, texts, [RewardResult(score=-1.0, acc=False)] * 4, "training")
    assert note is not None and "reward.verifier=math_dapo reads only the \"Answer:\" line" in note
    assert "set reward.verifier=dapo-rl reward.extractor=boxed" in note


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="$a\n\r\\ {}=", max_size=16))
def test_the_first_dollar_segment_rule_is_minervas_regex_in_one_pass(text):
    """Minerva's rule, as the reference writes it: a regex whose time grows with the square of a line
    without two ``$`` (0.5 s for an 8,000-character ground truth, in the trainer process)."""
    assert _first_dollar_segment(text) == re.sub(r"(.*?)(\$)(.*?)(\$)(.*)", r"$\3$", text)


# Minerva's unwrapping rules as the reference writes them (lazy to the first "}", \boxed{ greedy)
MINERVA_UNWRAP = {("\\text{", False): r"(\\text\{)(.*?)(\})", ("\\textbf{", False): r"(\\textbf\{)(.*?)(\})",
                  ("\\overline{", False): r"(\\overline\{)(.*?)(\})", ("\\boxed{", True): r"(\\boxed\{)(.*)(\})"}


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(["\\text{", "\\textbf{", "\\overline{", "\\boxed{", "\\text", "{", "}", "\n",
                                 "\r", "a", "\\", " "]), max_size=14).map("".join))
def test_the_unwrapping_rules_are_minervas_regexes_in_one_pass(text):
    """``\\text{``, ``\\textbf{``, ``\\overline{`` and ``\\boxed{`` as the reference's regexes unwrap
    them, which try every unclosed opening again to its line's end (32 s for 20,000 ``\\text{``)."""
    for (opening, to_last_brace), pattern in MINERVA_UNWRAP.items():
        assert _unwrap(text, opening, to_last_brace) == re.sub(pattern, r"\2", text), opening


def test_a_ground_truth_of_unclosed_openings_normalises_in_linear_time():
    """8,000 unclosed openings took the reference's regexes 5-8 s each here (32 s at 20,000)."""
    started = time.perf_counter()
    for opening in ("\\text{", "\\textbf{", "\\overline{", "\\boxed{"):
        assert minerva_normalize(opening * 8_000 + "}") == opening * 7_999
        assert minerva_normalize(opening * 8_000) == opening * 8_000
    assert time.perf_counter() - started < 3  # milliseconds in one pass
    # closed ones on one long line: the line's end was searched for again from each (13 s here)
    started = time.perf_counter()
    assert minerva_normalize("\\text{a}" * 400_000) == "a" * 400_000
    assert time.perf_counter() - started < 4  # 0.6 s here
