"""Answer equivalence: an exact integer path, and math-verify for general LaTeX answers.

Integers (every DAPO-Math-17K / AIME answer) are compared exactly as digit strings after
cosmetic normalisation: thousands separators in groups of three (``1,234``, ``1 234``,
``1{,}234``), a leading ``+``, a zero fraction (``34.0``), Unicode decimal digits mapped to ASCII
(``٣٤``, full-width ``３４``), a variable prefix (``x = 34``), and trailing units, degree, percent
or currency signs. No tolerance and no percentage scaling: ``0.34`` is not ``34``. A non-integer
plain number (``34.5``, scientific notation such as ``3.4e1`` or ``1e999999``) against an integer
ground truth is wrong without parsing. These checks are linear-time string operations that never
call ``int()`` (which refuses more than 4300 digits), so they are safe on any input. Two plain
numbers are compared by exact decimal value (``12.5`` and ``12.50``; the same decorations dropped,
so ``12.5\\%`` is ``12.5``), and two word answers as words, ignoring case and spacing (``\\text{East}``
and ``east``; math-verify would read ``ACB`` as a product equal to ``ABC``).

List and set answers (a ground truth ``1, 2``, ``\\{1,2\\}``, ``3 and 5``): :func:`answer_items`
splits an answer at its top-level separators (``,`` ``;`` ``and`` ``or``, outside brackets;
an answer that is one integer, such as ``1,000``, is never split). Two lists of integers are
compared as sets here; any other list goes to math-verify joined as ``a, b, c`` (a set there).

Everything else (fractions, roots, pi, intervals, tuples, expressions) is decided by
the ``math-verify`` library in :func:`math_equal`, which the scorer only calls inside a worker
process with a hard deadline, on answers no longer than :data:`MAX_MATH_CHARS`.
"""

from __future__ import annotations

import contextlib
import logging
import re
import unicodedata
from decimal import Decimal, InvalidOperation

MAX_MATH_CHARS = 1000  # longer answers are not parsed at all (and count as wrong)

_SPACES = ("\\,", "\\;", "\\:", "\\ ", "~", "\u00a0", "\u2009", "\u202f", "\u2007")
_SUFFIXES = ("^{\\circ}", "^\\circ", "\\circ", "°", "\\degree", "\\%", "%", "\\$")
_UNIT_WRAPPERS = ("\\text{", "\\textrm{", "\\mbox{", "\\mathrm{", "\\textnormal{")
_VARIABLE_PREFIX = re.compile(r"[A-Za-z](?:_\{?[A-Za-z0-9]{1,8}\}?)? {0,4}= {0,4}")
_GLUED_COMMA = re.compile(r",\\!\s{0,3}")  # 11,\! 111 is one number
_BRACED_COMMA = re.compile(r" ?\{ ?, ?\} ?")  # 14{,}916 and 14 {, }916
_TEXT_CONNECTIVE = re.compile(r"\\(?:text|textrm|mbox|textnormal)\{ {0,3}(and|or) {0,3}\}")
_TEXT_WRAPPED = re.compile(r"\\(?:text|textrm|textbf|textit|mbox|mathrm|textnormal)\{([^{}]{0,200})\}")
_WORDS = re.compile(r"[A-Za-z]{2,40}(?:[ '-]{1,3}[A-Za-z]{1,40}){0,8}")
_UNIT_WORD = re.compile(r"[A-Za-z]{1,20}(?:\^\{?[0-9]\}?|/[A-Za-z]{1,20})?")  # cm, cm^2, m/s
# A remark after a number: "7 (mod 10)", "34 (since n is even)", "34 (n = 3)", "34 (for n \geq 2)",
# "60 (seconds/minute)"; not arithmetic, which makes a product: "2(n+1)", "4 (2 + \sqrt{2})",
# "34 (\times 10^3)", "2 (n-1)".
_TRAILING_REMARK = re.compile(r"(?<=[0-9]) {0,3}\(([^()]{0,400})\)$")
# The same remark as a LaTeX command: "34 \pmod{1000}", "34 \pmod 1000", "34 \mod{1000}".
_TRAILING_PMOD = re.compile(r"(?<=[0-9]) {0,3}\\p?mod(?![A-Za-z]) {0,3}"
                            r"(?:\{ {0,3}[0-9A-Za-z]{1,20} {0,3}\}|[0-9A-Za-z]{1,20})$")
_ARITHMETIC = re.compile(r"[+*^]|\\(?:times|sqrt|d?frac|tfrac|cdot|div|pm|mp|pi)(?![A-Za-z])"
                         r"|[0-9] {0,3}[-/] {0,3}[0-9]|(?<![A-Za-z])[A-Za-z] {0,3}[-/] {0,3}(?:[0-9]|[A-Za-z](?![A-Za-z]))")
# Words that change a number's value, so never dropped as units.
SCALE_WORDS = frozenset(("hundred", "hundreds", "thousand", "thousands", "million", "millions", "billion",
                         "billions", "trillion", "trillions", "dozen", "dozens", "squared", "cubed"))
# Nor words that make the number part of an expression ("2 pi", "7 and a half", "2 times n",
# "540 is not correct"), nor one letter ("2 i", "3 x") unless it is an SI unit symbol.
_NOT_UNITS = SCALE_WORDS | frozenset((
    "pi", "half", "halves", "third", "thirds", "quarter", "quarters", "fourth", "fourths", "fifth", "fifths",
    "sixth", "sixths", "seventh", "sevenths", "eighth", "eighths", "ninth", "ninths", "tenth", "tenths",
    "hundredth", "hundredths", "thousandth", "thousandths", "millionth", "millionths",
    "times", "over", "minus", "plus", "and", "or", "is", "not", "of", "divided", "root", "roots", "sqrt", "factorial",
))
_UNIT_LETTERS = frozenset("mgshlLKVWJNACFTS")  # metre, gram, second, hour, litre, kelvin, volt, watt,
# joule, newton, ampere, Celsius and Fahrenheit (after a degree sign), tesla, siemens
# A number, then one word (bare or in \text{...}, \mathrm{...}) and the end: "34 thousand", "2 \text{ pi}".
# No two quantifiers compete for the same whitespace (that backtracked quadratically): linear.
_ENDS_IN_WORD = re.compile(r"[0-9][\s}{$]*(?:\\[a-z]+\{\s*)?([A-Za-z]+)\s*(?:\}\s*)?(?:\$\s*)?$")
_PLAIN_INTEGER = re.compile(r"[+-]?[0-9]+(?:\.0*)?")
_GROUPED_INTEGER = re.compile(r"[+-]?[0-9]{1,3}(?:[, ][0-9]{3})+(?:\.0*)?")
# Unambiguous (no two quantifiers compete for the same characters): linear even on 10^5 digits.
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def to_ascii_digits(text: str) -> str:
    """Map every Unicode decimal digit (Arabic-Indic, full-width, ...) to its ASCII digit."""
    if text.isascii():
        return text
    out = []
    for char in text:
        digit = unicodedata.decimal(char, None)
        out.append(str(digit) if digit is not None else char)
    return "".join(out).replace("\u2212", "-").replace("\uff0b", "+").replace("\uff0c", ",")


def _strip_number_decorations(answer: str) -> str:
    """Remove what can surround a number without changing it: prefixes, units, signs."""
    answer = _GLUED_COMMA.sub(",", to_ascii_digits(answer))
    for space in _SPACES:
        answer = answer.replace(space, " ")
    answer = _BRACED_COMMA.sub(",", answer).strip()
    prefix = _VARIABLE_PREFIX.match(answer)
    if prefix:
        answer = answer[prefix.end() :]
    for _ in range(3):  # e.g. "34^\circ \text{ F}", "34 degrees Celsius": two passes
        before = answer.strip()
        answer = _strip_unit_suffix(before)
        for suffix in _SUFFIXES:
            if answer.endswith(suffix):
                answer = answer[: -len(suffix)].rstrip()
        if answer == before:
            break
    return answer.strip()


def _strip_unit_suffix(answer: str) -> str:
    """Drop one trailing unit: ``\\text{ cm}`` (no digits inside), a plain word (``cm``), a unit
    with a power or per (``cm^2``, ``m/s``), or a remark after a number, in parentheses (``7 (mod
    10)``) or as ``7 \\pmod{10}``. Not a unit: a scale word (``34 thousand`` is not ``34``), a word of
    an expression (``2 pi``, ``2 times n``) or a lone letter other than an SI symbol (``2 i``,
    ``$2\\mathrm{e}$``)."""
    if answer.endswith("}"):
        start = max(answer.rfind(wrapper) for wrapper in _UNIT_WRAPPERS)
        inner = answer[start:].split("{", 1)[-1].rstrip("}").strip()
        if start > 0 and not any(c.isdigit() for c in answer[start:]) and _is_unit(inner):
            return answer[:start]
    pmod = _TRAILING_PMOD.search(answer)
    if pmod:
        return answer[: pmod.start()]
    remark = _TRAILING_REMARK.search(answer)
    if remark and _is_remark(remark.group(1), spaced=answer[remark.start()] == " "):
        return answer[: remark.start()]
    space = answer.rfind(" ")
    word = answer[space + 1 :]
    if space > 0 and word.isascii() and _UNIT_WORD.fullmatch(word) and _is_unit(word):
        return answer[:space]
    return answer


# A remark that opens with an alternative and a number offers another answer: "(or 35)", "(and
# $35$)", "(but 35 if n is odd)"; "(for both n = 3 and 4)" and "(n = 3 and m = 4)" state conditions.
_ANOTHER_ANSWER = re.compile(
    r"\s*(?:or|and|otherwise|else|alternatively|either|but|though|although|also|possibly|perhaps|maybe|probably"
    r"|likely)[\s$({]{1,8}[+-]?[0-9]", re.IGNORECASE)
# ... and one that opens with a product multiplies it: "(x 1000)", "(times 10)", "(\times 10^3)".
_MULTIPLIES_IT = re.compile(r"\s*(?:x|times|multiplied by|\\times|\\cdot|\*)[\s$({]{0,8}[+-]?[0-9]", re.IGNORECASE)
_OPENS_WITH_A_NUMBER = re.compile(r"\s{0,3}[$]?\s{0,3}[+-]?[0-9]")
# ... or that ends in a value after a colon: "(n odd: 35)", "(if n = 2: 35)", "(units: 10^3)".
_ENDS_WITH_A_VALUE = re.compile(r":\s{0,3}\$?\s{0,3}[+-]?[0-9][0-9.,^{} ]{0,40}\$?\s{0,3}$")
# A remark that opens with a scale word changes the number: "(in thousands)", "(millions)"; "(one
# thousand)" spells it out.
_OPENING_WORD = re.compile(r"\s*(?:in\s+)?([A-Za-z]+)")


def _remark_changes_the_number(remark: str) -> bool:
    """A remark after an answer that opens with a second one (``or 35``, ``and 35``, ``possibly 35``,
    ``but 35 if n is odd``, ``35 if n is odd``, ``n odd: 35``), with a product (``x 1000``,
    ``times 10``) or with a word that scales it (``in thousands``)."""
    return (_ANOTHER_ANSWER.match(remark) is not None or _OPENS_WITH_A_NUMBER.match(remark) is not None
            or _MULTIPLIES_IT.match(remark) is not None or _ENDS_WITH_A_VALUE.search(remark) is not None
            or starts_with_scale_word(remark))


def starts_with_scale_word(remark: str) -> bool:
    """``in thousands``, ``millions of dollars``: a remark after a number that scales it."""
    opening = _OPENING_WORD.match(remark)
    return opening is not None and opening.group(1).lower() in SCALE_WORDS


def _is_remark(inside: str, spaced: bool) -> bool:
    """Whether ``(inside)`` after a number is a remark on it: words (two letters in a row, or one
    letter after a space: "(n = 3)"), no arithmetic, no second answer ("(or 35)") and no scale
    word ("(in thousands)" changes the number)."""
    words = re.search(r"[A-Za-z]{2}", inside) or (spaced and re.search(r"[A-Za-z]", inside))
    return bool(words) and _ARITHMETIC.search(inside) is None and not _remark_changes_the_number(inside)


def _changes_the_number(answer: str) -> bool:
    """``34 (in thousands)``, ``34 (and 35)``: a parenthesis after a number whose words change it
    or add another answer (math-verify would read both as 34), in \\text{} too (``34\\text{ (or 35)}``)."""
    remark = _TRAILING_REMARK.search(answer) or _TRAILING_REMARK.search(_TEXT_WRAPPED.sub(r"\1", answer).rstrip())
    return remark is not None and _remark_changes_the_number(remark.group(1))


def ends_in_a_word_that_is_not_a_unit(answer: str) -> bool:
    """``34 thousand``, ``2 \\text{ pi}``, ``$2\\mathrm{i}$``: a number, then a word that changes it."""
    match = _ENDS_IN_WORD.search(answer)
    return match is not None and not _is_unit(match.group(1))


def _is_unit(word: str) -> bool:
    name = re.split(r"[\^/]", word, maxsplit=1)[0]  # cm^2, m/s: the unit's name
    return name.lower() not in _NOT_UNITS and (len(name) != 1 or name in _UNIT_LETTERS)


def canonical_integer(answer: str) -> str | None:
    """The integer ``answer`` states, as a canonical digit string ("-34", "0"), else None."""
    text = _strip_number_decorations(answer)
    if not (_PLAIN_INTEGER.fullmatch(text) or _GROUPED_INTEGER.fullmatch(text)):
        return None
    negative = text.startswith("-")
    digits = text.lstrip("+-").split(".", 1)[0].replace(",", "").replace(" ", "")
    digits = digits.lstrip("0") or "0"
    return "-" + digits if negative and digits != "0" else digits


# LaTeX that does not change an answer's value, dropped from maj@k's vote keys (\left, not \leftarrow)
_SIZING = re.compile(r"\\(?:left|right|displaystyle)(?![A-Za-z])")
_COSMETIC = ("\\!", "\\$", "$", *_SPACES)  # an escaped dollar (currency) before the math delimiter
_SIMPLE_FRACTION = re.compile(r"(-?)\\frac\{(-?[0-9]{1,50})\}\{([0-9]{1,50})\}|(-?[0-9]{1,50})/([0-9]{1,50})")


def vote_key(answer: str) -> str:
    """The form maj@k counts ``answer``'s vote under: answers of the same key vote together. An
    integer is its digits (``x = 34``, ``34.0``); otherwise the text without whitespace, LaTeX
    spacing, sizing or math delimiters, ``\\dfrac``/``\\tfrac`` as ``\\frac``, a final period,
    and ``a/b`` as ``\\frac{a}{b}`` (``1/3``, ``\\dfrac{1}{3}`` and ``\\frac{1}{3}`` vote together).
    String operations only, linear time: other equal values (``0.5`` and ``\\frac{1}{2}``) still
    vote apart."""
    if (integer := canonical_integer(answer)) is not None:
        return integer
    answer = _SIZING.sub("", answer)
    for cosmetic in _COSMETIC:
        answer = answer.replace(cosmetic, "")
    answer = _compact(answer).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").rstrip(".")
    fraction = _SIMPLE_FRACTION.fullmatch(answer)
    if fraction is None:
        return answer
    sign, numerator, denominator, slash_numerator, slash_denominator = fraction.groups()
    if slash_numerator is not None:
        sign, numerator, denominator = "", slash_numerator, slash_denominator
    negative = (sign == "-") != numerator.startswith("-")
    return f"{'-' if negative else ''}\\frac{{{numerator.lstrip('-')}}}{{{denominator}}}"


def is_plain_number(answer: str) -> bool:
    """True for a decimal or scientific literal (``34.5``, ``3.4e1``): decidable without parsing."""
    return _plain_number(answer) is not None


def _plain_number(answer: str) -> str | None:
    """The decimal or scientific literal ``answer`` states without its decorations, or None."""
    text = _strip_number_decorations(answer)
    return text if _PLAIN_NUMBER.fullmatch(text) else None


def _compact(answer: str) -> str:
    return "".join(answer.split())


def quick_verdict(pred: str, ground_truth: str) -> bool | None:
    """Decide equivalence with string operations alone; None means "ask math-verify".

    Integer ground truth: an integer prediction is compared exactly, a plain non-integer number
    or two values (``34 \\approx 35``) are wrong; only symbolic predictions (``\\frac{68}{2}``)
    go on to math-verify. Any ground truth: identical strings (ignoring whitespace) are right;
    over-long answers are wrong.
    """
    gold_integer = canonical_integer(ground_truth)
    if gold_integer is not None:
        if "\\approx" in pred:  # "x \approx 11" states 11 (as math-verify reads it); "34 \approx 35" two values
            named, _, pred = pred.rpartition("\\approx")
            if any(char.isdigit() for char in named):
                return False
        pred_integer = canonical_integer(pred)
        if pred_integer is not None:
            return pred_integer == gold_integer
        if is_plain_number(pred) or ends_in_a_word_that_is_not_a_unit(pred) or _changes_the_number(pred):
            return False  # 34.5; 34 thousand or 2 \text{ pi} (which math-verify reads as 34 and 2)
    elif _compact(pred) == _compact(ground_truth):
        return True
    if len(pred) > MAX_MATH_CHARS or len(ground_truth) > MAX_MATH_CHARS:
        return False
    pred_number, gold_number = _plain_number(pred), _plain_number(ground_truth)
    if pred_number is not None and gold_number is not None:  # 12.5 and 12.50, 12.5\% and 12.5
        with contextlib.suppress(InvalidOperation):  # an exponent past 10^18 digits: math-verify's
            return Decimal(pred_number) == Decimal(gold_number)
    pred_word, gold_word = _word_answer(pred), _word_answer(ground_truth)
    if pred_word and gold_word:  # math-verify reads "seat" as s*e*a*t, which equals "east"
        return pred_word == gold_word
    return None


def _word_answer(answer: str) -> str | None:
    """A word answer's letters, lower-cased (``\\text{East}``, ``New York``, ``ACB``), or None
    when it is not two or more letters alone (``x``, ``2x``, ``\\pi``)."""
    answer = _TEXT_WRAPPED.sub(r"\1", answer).strip()
    return _compact(answer).lower() if _WORDS.fullmatch(answer) else None


def answer_items(answer: str) -> list[str]:
    """The elements of a list or set answer (``1, 2``, ``\\{1,2\\}``, ``3 and 5``); [answer] if one.

    Splits outside any bracket, after unwrapping one outer ``\\{...\\}`` / ``{...}``: at ``;``
    when there is one (``p=5,q=2; p=7,q=2`` has two elements), else at ``,`` and the words
    ``and`` / ``or``. A tuple or interval (``(1, 2)``, ``[1, 3)``) is one element; an integer
    with thousands separators (``1,000``) is never split. Linear time.
    """
    answer = _GLUED_COMMA.sub(",", answer).replace("\\!", "")
    for space in ("\\quad", "\\qquad", *_SPACES):
        answer = answer.replace(space, " ")
    answer = _unwrap_braces(_TEXT_CONNECTIVE.sub(r" \1 ", answer).strip())
    if canonical_integer(answer) is not None:
        return [answer]
    items = _split_top_level(answer, semicolons_only=True)
    if len(items) == 1:
        items = _split_top_level(answer, semicolons_only=False)
    return items if len(items) > 1 else [answer]


def join_items(items: list[str]) -> str:
    """One string for math-verify: ``a, b``, or ``a; b`` when an element has its own commas."""
    nested = any(len(_split_top_level(item, semicolons_only=False)) > 1 for item in items)
    return ("; " if nested else ", ").join(items)


def _split_top_level(text: str, semicolons_only: bool) -> list[str]:
    items, depth, start, i = [], 0, 0, 0
    while i < len(text):
        char = text[i]
        word = None
        if not semicolons_only:
            word = next((w for w in ("and", "or") if _is_word(text, i, w)), None)
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(depth - 1, 0)
        elif depth == 0 and (
            char == ";" or word is not None or (char == "," and not semicolons_only)
        ):
            items.append(text[start:i])
            i += len(word) if word is not None else 1
            start = i
            continue
        i += 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _is_word(text: str, at: int, word: str) -> bool:
    end = at + len(word)
    return (
        text.startswith(word, at)
        and (at == 0 or not (text[at - 1].isalpha() or text[at - 1] == "\\"))
        and (end == len(text) or not text[end].isalpha())
    )


def _unwrap_braces(answer: str) -> str:
    """``\\{1, 2\\}`` / ``\\left\\{1, 2\\right\\}`` / ``{1, 2}`` -> ``1, 2`` (one outer pair only)."""
    for opening, closing in (("\\left\\{", "\\right\\}"), ("\\{", "\\}"), ("{", "}")):
        if answer.startswith(opening) and answer.endswith(closing):
            inner = answer[len(opening) : len(answer) - len(closing)]
            depth = 0
            for char in inner:  # the outer pair must enclose everything: {1}{2} is not a set
                depth += char == "{"
                depth -= char == "}"
                if depth < 0:
                    return answer
            return inner.strip()
    return answer


def quick_list_verdict(pred_items: list[str], gold_items: list[str]) -> bool | None:
    """:func:`quick_verdict` for a list / set ground truth: integer lists compare as sets, or,
    when the gold names every value (``x=3, y=4``), as labelled values: ``y=4, x=3`` is right,
    ``x=4, y=3`` wrong, and an unlabelled ``4, 3`` is read in the gold's order (wrong)."""
    gold = [canonical_integer(item) for item in gold_items]
    if all(item is not None for item in gold):
        pred = [canonical_integer(item) for item in pred_items]
        if all(item is not None for item in pred):
            gold_labels, pred_labels = _labels(gold_items), _labels(pred_items)
            if gold_labels is None:
                return set(pred) == set(gold)  # the gold names no variables
            if pred_labels is None and _labels_any(pred_items):  # the answer names some: each must hold
                gold_values = dict(zip(gold_labels, gold))
                named = [(_label(item), value) for item, value in zip(pred_items, pred)]
                return set(pred) == set(gold) and all(gold_values.get(label) == value
                                                      for label, value in named if label is not None)
            pred_labels = pred_labels or gold_labels  # an unlabelled answer is read in the gold's order
            return len(pred) == len(gold) and set(zip(gold_labels, gold)) == set(zip(pred_labels, pred))
        if any(is_plain_number(item) for item in pred_items):
            return False
    joined_pred, joined_gold = join_items(pred_items), join_items(gold_items)
    if _compact(joined_pred) == _compact(joined_gold):
        return True
    if len(joined_pred) > MAX_MATH_CHARS or len(joined_gold) > MAX_MATH_CHARS:
        return False
    return None


def _labels(items: list[str]) -> list[str] | None:
    """The variable each item names (``x`` of ``x = 3``), or None unless every item names one
    (``a = 4, -8, -10`` is the set of a's values)."""
    labels = [_label(item) for item in items]
    return None if None in labels else labels  # type: ignore[return-value]


def _label(item: str) -> str | None:
    """The variable ``item`` names (``x`` of ``x = 3``; ``x_{1}`` is ``x_1``, ``X`` is ``x``), or None."""
    prefix = _VARIABLE_PREFIX.match(item.strip())
    return re.sub(r"[{} ]", "", prefix.group(0).split("=")[0]).lower() if prefix else None


def _labels_any(items: list[str]) -> bool:
    return any(_label(item) is not None for item in items)


def silence_math_verify_logging() -> None:
    """math-verify logs the strings it failed on; model output must never reach the logs."""
    for name in ("math_verify", "math_verify.parser", "math_verify.grader", "math_verify.utils"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.CRITICAL + 1)
        logger.propagate = False


def math_equal(pred: str, ground_truth: str) -> bool:
    """math-verify's verdict on ``pred`` against ``ground_truth`` (both bare LaTeX answers).

    No time limit here (math-verify's own ``signal.alarm`` timeouts are disabled: they do not
    stop every input and break in threads); callers bound the time by running this in a worker
    process that is killed at its deadline. Parsed objects are never printed: only a bool leaves.
    """
    from math_verify import parse, verify  # heavy (sympy): imported only where it is used

    silence_math_verify_logging()
    if len(pred) > MAX_MATH_CHARS or len(ground_truth) > MAX_MATH_CHARS:
        return False
    gold = parse(f"${ground_truth}$", parsing_timeout=None)  # type: ignore[arg-type]
    target = parse(f"${pred}$", parsing_timeout=None)  # type: ignore[arg-type]
    if not gold or not target:
        return False
    if is_plain_number(pred) and _is_irrational(gold[0]):
        return False
    return bool(verify(gold, target, timeout_seconds=None))


def _is_irrational(parsed: object) -> bool:
    """Whether math-verify's parse is a number known to be irrational (``\\pi``, ``\\sqrt{2}``,
    ``e^2``). A plain decimal answer is rational, so never one of them (``3.141593`` for ``\\pi``),
    though math-verify's 6-digit rounding accepts it (verl's string match does not). The other way
    round, a decimal ground truth is often a rounded exact value: ``\\sqrt{17}`` for
    ``4.123105625617661`` is left to math-verify (the Math-Verify suite counts it right)."""
    return getattr(parsed, "is_number", False) is True and getattr(parsed, "is_rational", None) is False
