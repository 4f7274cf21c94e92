"""The DAPO reference run's scorer (verl's ``math_dapo``), for ``reward.verifier=math_dapo``.

The paper's run rewarded a response by exact string match, not by mathematical equivalence:

1. only the response's last 300 characters are read (:data:`TAIL_CHARS`);
2. the answer is the text after the last ``Answer:`` (any case, spaces around the colon), to the
   end of its line; without one the answer is ``[INVALID]``;
3. answer and ground truth are normalised as Minerva normalises final answers (Lewkowycz et al.
   2022, appendix D.1; :func:`minerva_normalize`);
4. the response is correct when the two normalised strings are equal: ``34.``, ``**Answer:** 34``,
   ``\\frac{68}{2}`` for 34, or an ``Answer:`` line more than 300 characters from the end, are wrong.

dapo-rl's own verifier (``reward.verifier=dapo-rl``, :mod:`dapo.rewards.verifier`) reads these as
their value; this one reproduces the reference run's reward and its avg@32 as the paper reports
them. Pure string work, decided in the trainer process: no math-verify call, no worker.
"""

from __future__ import annotations

import functools
import re

TAIL_CHARS = 300  # the reference scorer's window: "the longest answer in MATH-500 has 159 characters"
ANSWER_LINE = re.compile(r"(?i)Answer\s*:\s*([^\n]+)")
NO_ANSWER = "[INVALID]"

# Minerva's normalisation, in its order: replacements first, then words and LaTeX dropped
_REPLACED = (("an ", ""), ("a ", ""), (".$", "$"), ("\\$", ""), ("\\ ", ""), (" ", ""), ("mbox", "text"),
             (",\\text{and}", ","), ("\\text{and}", ","), ("\\text{m}", "\\text{}"))
_DROPPED = ("square", "ways", "integers", "dollars", "mph", "inches", "hours", "km", "units", "\\ldots", "sue",
            "points", "feet", "minutes", "digits", "cents", "degrees", "cm", "gm", "pounds", "meters", "meals",
            "edges", "students", "childrentickets", "multiples", "\\text{s}", "\\text{.}", "\\text{\ns}",
            "\\text{}^2", "\\text{}^3", "\\text{\n}", "\\text{}", "\\mathrm{th}", "^\\circ", "^{\\circ}", "\\;",
            ",\\!", "{,}", '"', "\\dots")
# then, in order: the first $...$ segment kept alone (:func:`_first_dollar_segment`), \text{},
# \textbf{}, \overline{} unwrapped up to their first "}" and \boxed{} up to its line's last
# (:func:`_unwrap`), \fracab and \sqrta given their braces
_UNWRAPPED = (("\\text{", False), ("\\textbf{", False), ("\\overline{", False), ("\\boxed{", True))
_BRACED = ((re.compile(r"(frac)([^{])(.)"), r"frac{\2}{\3}"),
           (re.compile(r"(sqrt)([^{])"), r"sqrt{\2}"))


def _unwrap(text: str, opening: str, to_last_brace: bool) -> str:
    """Every ``opening`` (``\\text{``) with a ``}`` after it on its line replaced by what lies
    between them, the first such ``}`` (``to_last_brace``: the line's last): what Minerva's
    ``re.sub(r"(\\text\\{)(.*?)(\\})", r"\\2", text)`` (``(.*)`` for ``\\boxed{``) returns, in one
    pass. The regex tries every opening again up to its line's end when no ``}`` follows it there:
    time that grows with the square of a line of unclosed openings (32 s for 20,000 ``\\text{`` here)."""
    pieces, start, line_end = [], 0, -1
    while (found := text.find(opening, start)) >= 0:
        inside = found + len(opening)
        if line_end < inside:  # a new line: where it ends, found once per line
            line_end = text.find("\n", inside)
            line_end = len(text) if line_end < 0 else line_end
        closing = (text.rfind if to_last_brace else text.find)("}", inside, line_end)
        if closing < 0:  # no "}" after this opening on its line, so none after any later one there
            pieces.append(text[start:line_end])
            start = line_end
            continue
        pieces += [text[start:found], text[inside:closing]]
        start = closing + 1
    pieces.append(text[start:])
    return "".join(pieces)


def _first_dollar_segment(text: str) -> str:
    """Each line with two ``$`` replaced by its first ``$...$`` segment (``x is $34$ cm`` ->
    ``$34$``): what Minerva's ``re.sub(r"(.*?)(\\$)(.*?)(\\$)(.*)", "$\\3$", text)`` returns (``.``
    stops at a newline), in one pass. The regex tries again from every position of a line without
    two ``$``: time that grows with the square of a line (0.5 s for a ground truth of 8,000
    characters here, a minute for 100,000), in the trainer process."""
    lines = text.split("\n")
    for index, line in enumerate(lines):
        opening = line.find("$")
        closing = line.find("$", opening + 1) if opening >= 0 else -1
        if closing >= 0:
            lines[index] = "$" + line[opening + 1 : closing] + "$"
    return "\n".join(lines)


@functools.lru_cache(maxsize=4096)  # a ground truth is normalised once for its group's G responses
def minerva_normalize(answer: str) -> str:
    """Minerva's normalised form of a final answer: the right-hand side of its last ``=``, spaces,
    articles, units and dollar signs dropped, LaTeX wrappers unwrapped, a digit string's
    thousands commas removed (``x = 1,234 \\text{ cm}`` -> ``1234``)."""
    answer = answer.split("=")[-1]
    for before, after in _REPLACED:
        answer = answer.replace(before, after)
    for dropped in _DROPPED:
        answer = answer.replace(dropped, "")
    answer = _first_dollar_segment(answer)
    for opening, to_last_brace in _UNWRAPPED:
        answer = _unwrap(answer, opening, to_last_brace)
    for pattern, replacement in _BRACED:
        answer = pattern.sub(replacement, answer)
    answer = answer.replace("$", "")
    if answer.replace(",", "").isdigit():
        answer = answer.replace(",", "")
    return answer.strip()


def math_dapo_verdict(response: str, ground_truth: str) -> tuple[bool, str, str, bool]:
    """(correct, normalised answer, normalised ground truth, whether an ``Answer:`` line was
    found) of ``response`` against ``ground_truth``, as the DAPO reference run scored it (this
    module's steps 1-4). The answer is "" when the response's tail has no ``Answer:`` (the
    reference compares ``[INVALID]``, and its maj@k counts it as one more answer:
    ``score_at_k(..., exact_votes=True)`` does the same) and also when the line's answer
    normalises to "" (``Answer: $$``), which the reference's maj@k counts apart from ``[INVALID]``."""
    found = ANSWER_LINE.findall(response[-TAIL_CHARS:])
    answer = minerva_normalize(found[-1] if found else NO_ANSWER)
    gold = minerva_normalize(ground_truth)
    return answer == gold, answer if found else "", gold, bool(found)
