"""List and set answers: a ground truth ``1, 2``, ``\\{1,2\\}``, ``3 and 5`` has several elements.

:func:`answer_items` splits an answer at its top-level separators (``,`` ``;`` ``and`` ``or``,
outside brackets; an answer that is one number, such as ``1,000`` or ``1,234.5``, is never split).
:func:`quick_list_verdict` compares two lists of integers as sets here (or as labelled values,
``x=3, y=4``); any other list goes to math-verify joined as ``a, b, c`` (a set there).
"""

from __future__ import annotations

import re
from collections import Counter

from dapo.rewards.math_verify_call import MAX_MATH_CHARS
from dapo.rewards.number_forms import (
    GLUED_COMMA,
    SPACES,
    VARIABLE_PREFIX,
    canonical_integer,
    compact,
    ends_in_a_word_that_is_not_a_unit,
    is_grouped_number,
    is_plain_number,
)

_TEXT_CONNECTIVE = re.compile(r"\\(?:text|textrm|mbox|textnormal)\{ {0,3}(and|or) {0,3}\}")


def answer_items(answer: str) -> list[str]:
    """The elements of a list or set answer (``1, 2``, ``\\{1,2\\}``, ``3 and 5``); [answer] if one.

    Splits outside any bracket, after unwrapping one outer ``\\{...\\}`` / ``{...}``: at ``;``
    when there is one (``p=5,q=2; p=7,q=2`` has two elements), else at ``,`` and the words
    ``and`` / ``or``. A tuple or interval (``(1, 2)``, ``[1, 3)``) is one element; a number
    with thousands separators (``1,000``, ``1,234.5``) is never split. Linear time.
    """
    answer = GLUED_COMMA.sub(",", answer).replace("\\!", "")
    for space in ("\\quad", "\\qquad", *SPACES):
        answer = answer.replace(space, " ")
    answer = _unwrap_braces(_TEXT_CONNECTIVE.sub(r" \1 ", answer).strip())
    if is_grouped_number(answer):
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


# A tuple of values, and the variables it names: "(2, 5)", "(x, y) = (2, 5)", "\\left(2, 5\\right)"
_NAMED_TUPLE = re.compile(r"(?:\(\s{0,3}([A-Za-z](?:\s{0,3},\s{0,3}[A-Za-z]){1,8})\s{0,3}\)\s{0,3}=\s{0,3})?"
                          r"(?:\\left)?\(([^()]{0,400}?)(?:\\right)?\)")


def tuple_as_named(pred_items: list[str], gold_items: list[str]) -> list[str]:
    """A tuple answer, ``(2, 5)`` or ``(x, y) = (2, 5)``, for a ground truth that names each value
    (``x=5, y=2``): its values named as it names them, or in the gold's order (``x=2, y=5``: wrong),
    as a list of values when they are not as many (math-verify took a tuple for a set: ``(2, 5)`` was
    right for ``x=5, y=2``). Any other answer is returned as it is."""
    gold_labels = _labels(gold_items)
    parts = _tuple_parts(pred_items[0]) if gold_labels and len(pred_items) == 1 else None
    if parts is None:
        return pred_items
    names, values = parts[0] or gold_labels, parts[1]
    if len(names) != len(values) or len(values) != len(gold_labels):
        return values
    return [f"{name}={value}" for name, value in zip(names, values)]


def named_tuple_as_list(answer: str) -> str:
    """A tuple that names its values, ``(x, y) = (3, 4)``, as the list of them, ``x=3, y=4``, so that a
    ground truth written so is compared name by name (``y=4, x=3`` right, ``y=3, x=4`` wrong: the values
    were read in the order written, paying it); anything else is returned as it is."""
    parts = _tuple_parts(answer)
    if parts is None or parts[0] is None:
        return answer
    names, values = parts
    if len(names) != len(values) or len({name.lower() for name in names}) != len(names):
        return answer
    return join_items([f"{name}={value}" for name, value in zip(names, values)])


def _tuple_parts(answer: str) -> tuple[list[str] | None, list[str]] | None:
    """The names (None when it names none) and the values of a tuple, ``(x, y) = (2, 5)`` or ``(2, 5)``;
    None when ``answer`` is no tuple."""
    named = _NAMED_TUPLE.fullmatch(answer.strip())
    if named is None:
        return None
    names = [name.strip() for name in named.group(1).split(",")] if named.group(1) else None
    return names, _split_top_level(named.group(2), semicolons_only=False)


def quick_list_verdict(pred_items: list[str], gold_items: list[str]) -> bool | None:
    """:func:`quick_verdict` for a list / set ground truth: integer lists compare as sets (as
    multisets when the gold repeats an item and the answer lists several, roots with their
    multiplicity: ``1, 2`` is not ``1, 1, 2``; one value, ``1`` or ``$1$ and $1$``, is read as a set), or,
    when the gold names every value (``x=3, y=4``), as labelled values: ``y=4, x=3`` is right,
    ``x=4, y=3`` wrong, and an unlabelled ``4, 3`` is read in the gold's order (wrong). Each answer
    item is read as a single answer is: a K glued to it is a thousand (``34K, 5K`` is 34000 and
    5000, not 34 and 5), and one with a decimal or a word that is not a unit (``34 thousand``) is
    not an integer of the gold's."""
    gold = [canonical_integer(item) for item in gold_items]
    if all(item is not None for item in gold):
        pred = [canonical_integer(item, thousands=True) for item in pred_items]
        if all(item is not None for item in pred):
            gold_labels, pred_labels = _labels(gold_items), _labels(pred_items)
            if gold_labels is None:  # the gold names no variables: a set; a multiset when both list a repeat's value
                multiset = len(set(gold)) < len(gold) and len(pred) > 1  # ("$3$ and $3$": one value said again)
                return Counter(pred) == Counter(gold) if multiset else set(pred) == set(gold)
            if pred_labels is None and _labels_any(pred_items):  # the answer names some: each must hold
                gold_values = dict(zip(gold_labels, gold))
                named = [(_label(item), value) for item, value in zip(pred_items, pred)]
                return set(pred) == set(gold) and all(gold_values.get(label) == value
                                                      for label, value in named if label is not None)
            pred_labels = pred_labels or gold_labels  # an unlabelled answer is read in the gold's order
            return len(pred) == len(gold) and set(zip(gold_labels, gold)) == set(zip(pred_labels, pred))
        if any(is_plain_number(item, thousands=True) or ends_in_a_word_that_is_not_a_unit(item) for item in pred_items):
            return False
    joined_pred, joined_gold = join_items(pred_items), join_items(gold_items)
    if compact(joined_pred) == compact(joined_gold):
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
    prefix = VARIABLE_PREFIX.match(item.strip())
    return re.sub(r"[{} ]", "", prefix.group(0).split("=")[0]).lower() if prefix else None


def _labels_any(items: list[str]) -> bool:
    return any(_label(item) is not None for item in items)

