"""An extracted final answer, and the presentation stripped from it.

:class:`Extracted` is what :mod:`dapo.rewards.extract` returns: the cleaned answer and how many
candidates the model offered; :func:`clean_answer` strips ``$``, bold, a ``\\text{}`` wrapper and
a trailing period. Plain string scanning, linear in the input length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from dapo.rewards.number_forms import GLUED_COMMA
from dapo.rewards.unicode_math import unicode_math_to_latex

# A sign written just before an answer's box or math belongs to it: glued ("-\\boxed{34}",
# "-$34$"), or after math punctuation ("x = - \\boxed{34}", "$ - \\boxed{34}$"); "\\pm\\boxed{3}". Not a
# dash in prose ("Answer - \\boxed{34}": a space, a word before it), a bullet ("- \\boxed{34}") or "--", nor
# a spaced dash after a colon ("Answer: - \\boxed{34}", which the Answer: line reads as 34 too), nor a
# minus glued to what it subtracts from ("1-\\boxed{3}", "x-\\boxed{3}": the box alone is what it marks).
_MINUS_BEFORE = re.compile(r"(?:(?<![-−0-9A-Za-z)\]}])[-−]\$?|[=(\[{,$]\s{0,3}[-−]\s{0,3}\$?\s{0,3})$")
_PLUS_MINUS_BEFORE = re.compile(r"(?:\\pm|\\mp|±)\s{0,3}\$?\s{0,3}$")
# An answer a sign applies to without parentheses: one term, no sum or list ("34", "\\frac{1}{2}").
_TERM = re.compile(r"[0-9A-Za-z.\\{}^_]{1,200}")
# An en dash where a minus sign goes, before a number or a command: the answer's start, or after "=", a bracket
# or a comma ("–5", "x = –\\frac{1}{2}").
_EN_DASH_SIGN = re.compile(r"(^|[=(\[{,]\s{0,3})\u2013(?=\s{0,3}(?:[0-9]|\\[A-Za-z]))")
# Styling around a value, which keeps its content: "\\boldsymbol{34}", "\\mathbf{1{,}000}", "\\textcolor{red}{34}"
_STYLE_OPENING = re.compile(r"\\(?:boldsymbol|bm|mathbf|textbf|underline|textcolor\{[A-Za-z]{1,20}\})\{")
_COLOR_SWITCH = re.compile(r"\\color\{[A-Za-z]{1,20}\} ?")  # "{\\color{red}34}"
_MAX_STYLES = 4
# Words that offer several candidates ("34 or 35", "either 3 or 4", "34 \\lor 35", "34 \\vee 35").
HEDGE = re.compile(r"(?<![a-z\\])(?:or|either)(?![a-z])|\\(?:lor|vee)(?![a-z])", re.IGNORECASE)


@dataclass(frozen=True)
class Extracted:
    """A final-answer candidate: its cleaned text and how many answers the model offered.

    ``items``: the separate answers when several were stated (chained boxes, or several
    ``$...$`` segments on the answer line); empty for a single answer. ``qualified``: text around
    the stated answer offers another one, continues its math or bounds it (``\\boxed{34, 5} (or
    35)``, ``\\boxed{34, 5}^2``, ``$34, 5$ or 35``, ``not 34``): wrong for a list ground truth too,
    where several candidates are the list's items and do not make a hedge.
    """

    text: str
    candidates: int = 1
    items: tuple[str, ...] = ()
    qualified: bool = False

    @property
    def hedged(self) -> bool:
        """True when the final answer offers several candidates ("34 or 35"): scored wrong."""
        return self.candidates > 1 or HEDGE.search(self.text) is not None

    def in_latex(self) -> Extracted:
        """This answer with its Unicode mathematics as LaTeX (``34²`` -> ``34^{2}``)."""
        return replace(self, text=unicode_math_to_latex(self.text),
                       items=tuple(unicode_math_to_latex(item) for item in self.items))


def _without_styles(answer: str) -> str:
    """``answer`` without the styling it is shown in: ``\\boldsymbol{34}``, ``\\bm{\\frac{3}{4}}``,
    ``\\underline{34}``, ``\\textcolor{red}{34}`` keep their content, ``\\color{red}`` goes. At most
    a few wrappers, each scanned once: linear."""
    for _ in range(_MAX_STYLES):
        opened = _STYLE_OPENING.search(answer)
        if opened is None:
            break
        end = _closing_brace(answer, opened.end())
        if end is None:
            break  # unbalanced: left as written
        answer = answer[: opened.start()] + answer[opened.end() : end] + answer[end + 1 :]
    return _COLOR_SWITCH.sub("", answer)


def _closing_brace(text: str, opened: int) -> int | None:
    """Where the brace opened just before ``text[opened]`` closes, or None (unbalanced)."""
    depth = 1
    for end in range(opened, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            return end
    return None


# "respectively" closing an answer: "3 and 4, respectively", "3, 4 \\text{ respectively}"
_RESPECTIVELY = re.compile(r"[\s,]{0,4}(?:\\text\{[\s,]{0,4})?respectively\.?\s{0,3}\}?\.?$", re.IGNORECASE)


def dollar_parts(line: str) -> list[str]:
    """``line`` split at its ``$`` delimiters (an escaped ``\\$`` is a dollar sign, dropped): the odd parts
    are math."""
    return line.replace("\\$", "").split("$")


def math_segments(line: str) -> list[str]:
    """Contents of the ``$...$`` segments of a line (an escaped ``\\$`` is a dollar sign)."""
    parts = dollar_parts(line)
    return [parts[i] for i in range(1, len(parts) - 1, 2)]


def outside_math(text: str) -> str:
    """``text`` without its ``$...$`` math (an unclosed last segment is math)."""
    return "".join(dollar_parts(text)[0::2])


def clean_answer(answer: str) -> str:
    """Strip presentation around an answer: ``$``, bold and other styling, ``\\text{}`` wrapper,
    a closing "respectively", trailing period; an en dash written as a minus sign (``–5``, ``x = –5``:
    not a range ``3–5``) becomes one."""
    answer = answer.replace("\\$", "").replace("$", "").replace("**", "").strip()
    answer = _EN_DASH_SIGN.sub(r"\1-", answer)
    answer = GLUED_COMMA.sub(",", answer)  # 11,\! 111 is one number; "11, 111" is a list
    answer = _without_styles(answer.replace("\\displaystyle", "").replace("\\!", "")).strip()
    answer = _RESPECTIVELY.sub("", answer)  # "3 and 4, respectively": the values, in the order asked
    while answer.endswith((".", "。", "\\.", ",")) and not answer.endswith("..."):
        answer = answer[:-1].rstrip()
    # the whole answer in one \text{...} (\text{1{,}358}; not \text{a} and \text{b})
    if answer.startswith("\\text{") and _closing_brace(answer, len("\\text{")) == len(answer) - 1:
        answer = answer[6:-1].strip()
    return answer


def sign_before(before: str) -> str:
    """The sign written just before an answer (``-``, ``\\pm``), or "" (see ``_MINUS_BEFORE``)."""
    before = before[-40:]  # only its end matters; bounded, so the regexes stay linear
    if _PLUS_MINUS_BEFORE.search(before):
        return "\\pm"
    return "-" if _MINUS_BEFORE.search(before) else ""


def signed(answer: str, sign: str) -> str:
    """``answer`` with the sign written before it: ``-34``, ``34`` for ``-`` before ``-34``,
    ``-(x+1)``, ``\\pm 3``."""
    if not sign:
        return answer
    if sign == "-" and answer.startswith("-") and _TERM.fullmatch(answer[1:]):
        return answer[1:]
    term = answer if _TERM.fullmatch(answer) else f"({answer})"
    return f"-{term}" if sign == "-" else f"{sign} {term}"


def bound_response(response: str, max_chars: int) -> str:
    """Keep the tail: the final answer is at the end, and parsing cost must stay bounded."""
    return response if len(response) <= max_chars else response[-max_chars:]
