"""What a row's values become in a :class:`~dapo.data.records.Problem`: a prompt (text or a chat
list) and its uid, a ground truth, each checked, or a DataError naming the row (``where``) and
what is wrong. Apart from :mod:`dapo.data.loaders` so that its row-wise reading and the columnar
one of :mod:`dapo.data.columnar` share them (and so the same messages)."""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
import sys
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy

from dapo.data.readers import JsonFloat, json_integer
from dapo.data.records import DataError, closing_prefill

Prompt = str | list[dict[str, str]]  # text, or a chat list of {"role", "content"} (Problem.prompt)


def prompt_uid(prompt: Prompt) -> str:
    """Stable id of a prompt's content: copies of one problem share it."""
    return hashlib.sha1(json.dumps(prompt, sort_keys=True).encode()).hexdigest()[:16]


class PromptMemo:
    """The validated prompts of the rows read so far, and their uids, by their raw text or (role,
    content) pairs: a copy of a prompt (DAPO-Math-17K repeats each ~100x) is neither validated nor
    hashed again (a third of the time of reading that file), and holds its first copy's prompt
    object, not one of its own (1.8M rows of 18k prompts, kept with data.dedup_train=false)."""

    def __init__(self, assistant_prefill: bool = False) -> None:
        self._read: dict[Any, tuple[Prompt, str]] = {}
        self.assistant_prefill = assistant_prefill  # (data.assistant_prefill)

    def prompt_and_uid(self, raw: Any, where: str, key: str) -> tuple[Prompt, str]:
        memo_key = _raw_prompt_key(raw)
        known = self._read.get(memo_key) if memo_key is not None else None
        if known is None:
            prompt = prompt_value(raw, where, key, self.assistant_prefill)
            known = prompt, prompt_uid(prompt)
            if memo_key is not None:
                self._read[memo_key] = known
        return known

    def by_keys(self, memo_keys: list[Any], where_of: Callable[[int], str], key: str) -> list[tuple[Prompt, str]]:
        """:meth:`prompt_and_uid` of the rows whose raw prompts have these keys (what
        ``_raw_prompt_key`` makes of them, built from a table's columns, :mod:`dapo.data.columnar`):
        a copy is one dict look-up, with no row of its own; ``where_of(i)`` names the i-th row."""
        found = list(map(self._read.get, memo_keys))
        if None in found:
            for index, memo_key in enumerate(memo_keys):
                if found[index] is None:
                    raw = memo_key if isinstance(memo_key, str) else [{"role": r, "content": c} for r, c in memo_key]
                    found[index] = self.prompt_and_uid(raw, where_of(index), key)
        return found


def _raw_prompt_key(raw: Any) -> Any:
    """What ``prompt_value`` makes of ``raw`` depends on alone, hashable: the text, or a chat list's
    (role, content) pairs (its messages' other keys are dropped); None for another form."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in raw
    ):
        return tuple((m["role"], m["content"]) for m in raw)
    return None


def _encodable(text: str, where: str, key: str) -> str:
    """``text``, if it is valid Unicode (a lone surrogate "\\ud835" from a cut JSON escape is not,
    and would stop training when the tokenizer meets it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise DataError(f"{where}: invalid text at {key!r}: {error.reason} at character {error.start}") from None
    return text


def _plain_decimal(value: float) -> str:
    """A finite float as an answer states it: no exponent, no float32 widening noise (a parquet
    float32 column arrives as the double nearest 0.3f, 0.30000001192092896; it reads 0.3), and
    the shortest digits of a whole one (``1e23`` reads 100000000000000000000000, where
    ``int(1e23)`` is the double's exact 99999999999999991611392; a whole float32 is read as the
    double it widens to, its exact value: 2**40, not float32's shortest 1099511600000)."""
    if value.is_integer():
        return "0" if value == 0 else numpy.format_float_positional(value, trim="-")
    narrow = numpy.float32(value)
    return numpy.format_float_positional(narrow if float(narrow) == value else value, trim="-")


def prompt_value(value: Any, where: str, key: str, assistant_prefill: bool = False) -> Prompt:
    """The prompt ``value`` holds (text, or a chat list), or a DataError starting with ``where``. A
    chat ending in an assistant message is one only with ``assistant_prefill`` (data.assistant_prefill)."""
    if _is_column_of_messages(value):  # datasets' Sequence({role, content}): a dict of lists
        value = [{"role": role, "content": content} for role, content in zip(value["role"], value["content"])]
    value = _json_chat_list(value)
    if isinstance(value, str):
        if not value.strip():
            raise DataError(f"{where}: empty prompt at {key!r}")
        return _encodable(value, where, key)
    if isinstance(value, list) and value:
        messages = []
        for message in value:
            if not (
                isinstance(message, dict)
                and isinstance(message.get("role"), str)
                and isinstance(message.get("content"), str)
            ):
                parts = isinstance(message, dict) and isinstance(message.get("content"), list)
                raise DataError(
                    f"{where}: wrong type at {key!r}: chat messages must be "
                    f"{{'role': str, 'content': str}}, got {message!r:.80}"
                    + (" (content parts are not read: give each message's text as its content)" if parts else "")
                )
            messages.append({"role": message["role"], "content": _encodable(message["content"], where, key)})
        if not any(message["content"].strip() for message in messages):
            raise DataError(f"{where}: empty prompt at {key!r} (every message is empty)")
        if closing_prefill(messages) is not None and not assistant_prefill:  # the policy would answer after it
            raise DataError(f"{where}: the prompt at {key!r} ends with an assistant message (a reference "
                            "solution?); a prompt ends with the message to answer, or set "
                            "data.assistant_prefill=true where it is a prefill the response continues, as TRL reads it")
        return messages
    if isinstance(value, list):
        raise DataError(f"{where}: empty prompt at {key!r} (no messages)")
    raise DataError(
        f"{where}: wrong type at {key!r}: prompt must be text or a chat list, got {type(value).__name__}"
    )


def literal_text(text: str) -> Any:
    """``text`` decoded as JSON, else as a Python literal (``ast.literal_eval``: no code runs);
    ``text`` itself where it is neither."""
    try:
        return json.loads(text, parse_int=json_integer, parse_float=JsonFloat)
    except (json.JSONDecodeError, RecursionError):
        pass
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return text


# between two messages of NumPy's str() of an object array (pandas' to_csv of a list column read
# from parquet): "...'system'}\n {'content': ..." has no comma
_NUMPY_ITEM_BREAK = re.compile(r"\}\n \{")
_OPENS_A_LIST_OF_OBJECTS = re.compile(r"\s*\[\s*\{")  # "[{", and json.dumps(..., indent=2)'s "[\n  {"


def _json_chat_list(value: Any) -> Any:
    """A chat list stored as its JSON text (a CSV export's, a string column's), or as Python's
    repr of it (pandas' ``to_csv`` of a chat-list column: ``[{'role': 'user', ...}]``, and of one
    read from parquet, NumPy's, without commas between messages), as the list; any other value as
    it is. Only a list of objects each with a "role" counts, so a text prompt that happens to
    start with a bracket stays text; one whose messages are not {role: text, content: text}
    (OpenAI's content parts, a null content) is the list, refused as a real list is, not read as
    its JSON text."""
    if not (isinstance(value, str) and _OPENS_A_LIST_OF_OBJECTS.match(value)):
        return value
    decoded = literal_text(value)
    if decoded is value and _NUMPY_ITEM_BREAK.search(value):
        decoded = literal_text(_NUMPY_ITEM_BREAK.sub("}, {", value))
    is_chat = isinstance(decoded, list) and all(isinstance(m, dict) and "role" in m for m in decoded)
    return decoded if is_chat else value


def _is_column_of_messages(value: Any) -> bool:
    return (isinstance(value, dict) and set(value) == {"role", "content"}
            and all(isinstance(v, list) for v in value.values()) and len(value["role"]) == len(value["content"]))


def _integer_digits(value: int) -> str:
    """``str(value)``, also past Python's int-to-text limit (4300 digits), where str() raises: an
    integer ground truth written as a Python literal (a CSV's struct text, ast.literal_eval) is read
    in full, as a JSON integer's digits are (:func:`dapo.data.readers.json_integer`)."""
    try:
        return str(value)
    except ValueError:
        limit = sys.get_int_max_str_digits()
        sys.set_int_max_str_digits(0)
        try:
            return str(value)
        finally:
            sys.set_int_max_str_digits(limit)


def _decimal_digits(value: Decimal) -> str:
    """A decimal as an answer states it: no exponent, no trailing zeros of its scale (a decimal(5, 2)
    column's 4.00 reads 4, 0.50 reads 0.5, as a float column's 540.0 reads 540)."""
    digits = format(value, "f")
    digits = digits.rstrip("0").rstrip(".") if "." in digits else digits
    return "0" if digits in ("-0", "") else digits


def answer_value(value: Any, where: str, key: str) -> str:
    if isinstance(value, Decimal):  # a parquet decimal128 column (SQL and pandas exports): its digits
        if not value.is_finite():
            raise DataError(f"{where}: ground truth at {key!r} is {value}, not a number an answer can state")
        value = _decimal_digits(value)
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise DataError(
            f"{where}: wrong type at {key!r}: ground truth must be text or a number, "
            f"got {type(value).__name__}"
        )
    if isinstance(value, float):
        if not math.isfinite(value):
            raise DataError(f"{where}: ground truth at {key!r} is {value}, not a number an answer can state")
        # 540.0 (JSON writers) -> 540; 1e-05 -> 0.00001; a float32 column's 0.30000001192092896 -> 0.3
        plain = _plain_decimal(value)
        # a JSON literal the float does not hold (more digits than a double): as written, no exponent
        literal = getattr(value, "literal", None)
        value = plain if literal is None or Decimal(literal) == Decimal(repr(float(value))) else format(
            Decimal(literal), "f")
    text = _encodable(_integer_digits(value) if isinstance(value, int) else str(value), where, key).strip()
    if not text:
        raise DataError(f"{where}: missing ground truth at {key!r} (empty)")
    return text
