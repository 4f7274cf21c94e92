"""Approximations in a remark after an answer, and the value they are checked against.

A remark that approximates (``\\boxed{\\sqrt{2}} (about 1.41)``, ``(\\approx 0.33)``, ``or about 0.33``)
restates the answer when its number is the answer's value rounded to the places it gives, and
hedges with another value otherwise (``(about 7)`` for ``\\sqrt{2}``). The value of a rational answer
is exact (:mod:`~dapo.rewards.number_forms`); the value of a closed form is computed here by
:func:`real_value`, a small evaluator of a bounded grammar:

- decimal numerals (at most 50 digits a part), ``\\pi``, Euler's ``e`` (a lone letter e; not right
  after a digit when a digit or sign follows it, ``1e-5`` and ``2e3`` being scientific notation);
- ``\\sqrt{x}``, ``\\sqrt[n]{x}`` (``n`` an integer from 2 to 64), ``\\frac{a}{b}`` (``\\dfrac``,
  ``\\tfrac``; a one-digit, ``\\pi`` or ``e`` argument may go unbraced: ``\\frac12``, ``\\sqrt2``);
- the functions ``\\exp``, ``\\ln``, ``\\log_b`` (a base must be written: a bare ``\\log`` may be
  base 10 or e), ``\\sin``, ``\\cos``, ``\\tan`` (radians, an argument at most two turns in size: a
  larger one, ``\\sin 30``, may be degrees written without their sign), on a parenthesised or braced
  argument or on one power (``\\ln 2``, ``\\ln e^2``); ``\\exp`` of at most 64 in size, ``\\ln`` and
  ``\\log`` of a positive number; ``\\tan`` not at a pole. A power of a function (``\\sin^2 x``) and
  a product after an unbracketed argument (``\\ln 2\\pi``: ``\\ln(2\\pi)`` or ``\\pi\\ln 2``?) are not read;
- ``+``, ``-``, ``*``, ``/``, ``\\cdot``, ``\\times``, ``\\div``, a product written by juxtaposition
  before a root, fraction, ``\\pi``, ``e``, a function or parenthesis (``2\\sqrt{3}``, ``3\\pi``,
  ``2(1+\\sqrt2)``, ``2\\ln 3``);
- powers with a one-digit or braced exponent whose value is at most 64 in size (``\\pi^2``,
  ``2^{-1}``, ``2^{\\frac13}``, ``e^2``; a non-integer one only on a positive base);
- ``( )``, ``{ }``, ``\\left``/``\\right``, LaTeX spacing and math delimiters.

A decimal written with ``=`` after an answer with a root, ``\\pi``, ``e``, a function or a fractional
power (``\\sqrt2 (= 1.414)``) can only approximate it: :mod:`~dapo.rewards.loose_roundings` reads it as
the approximation it is, with the same rounding rule, when it shows a rounding.

An approximation by a closed form rather than a decimal (``(\\approx \\frac{22}{7})`` after ``\\pi``) is
another value unless it is the value itself (:func:`approximates_with_a_form`); a K glued to an
approximation's number is a thousand (``(about 34K)`` is about 34000, :func:`is_rounding_of`).

Anything else (another letter, a function not listed, a unit, a degree sign, ambiguous TeX such as
``\\sqrt23`` or ``2^10``) is not evaluated: None, and the caller keeps such a remark a
remark, as before. Input is at most :data:`MAX_CHARS` characters and :data:`MAX_DEPTH` nested
groups, arithmetic is :mod:`decimal` at :data:`PRECISION` digits with exponents bounded (an
overflow, a division by zero or a root of a negative is None), so each call is a few hundred
bounded operations: linear, safe in the parent process.
"""

from __future__ import annotations

import functools
import re
from decimal import Context, Decimal, DecimalException, localcontext
from fractions import Fraction

from dapo.rewards.exact_numbers import exact_rational
from dapo.rewards.remark_words import APPROXIMATION_WORDS, NAME, THAT_IS
from dapo.rewards.unicode_math import unicode_math_to_latex

# A remark that opens with an approximation and a number: "(about 35)", "(\approx 0.33)", "(~35)", also
# after a connective: "(or about 35)", "(i.e. about 35)", "(which is about 35)".
APPROXIMATELY = re.compile(
    r"\s*(?:(?:or|" + THAT_IS + r"|which\s+is|so)(?![A-Za-z])[\s,$]{0,4})?"
    r"(?:" + APPROXIMATION_WORDS.format(extra="|ca", signs="~") + ")"
    r"[\s$({]{0,8}([+\-\u2212]?[0-9][0-9,]{0,60}(?:\.[0-9]{1,50})?(?:[Kk](?![A-Za-z]))?)"
    # "about 1/3", "\approx 2\sqrt2": no decimal, a closed form (approximates_with_a_form reads it)
    r"(?![0-9.]{0,60} {0,3}(?:/ {0,3}[0-9]|\^|\\(?:d?frac|sqrt|pi|cdot|times)(?![A-Za-z])))",
    re.IGNORECASE)
# ... an opening of that kind before any value: "(\approx \frac{22}{7})", "(about \sqrt{2})".
APPROXIMATION_OPENING = re.compile(
    r"\s*(?:(?:or|" + THAT_IS + r"|which\s+is|so)(?![A-Za-z])[\s,$]{0,4})?"
    r"(?:" + APPROXIMATION_WORDS.format(extra="|ca", signs="~") + r")[\s$]{0,8}", re.IGNORECASE)

MAX_CHARS = 200  # longer answers are not evaluated
MAX_DEPTH = 12  # nested groups, roots, fractions and powers
PRECISION = 120  # significant digits: an approximation gives at most 50 places
_MAX_EXPONENT = 64
_CONTEXT = Context(prec=PRECISION, Emax=400, Emin=-400)  # traps overflow, division by zero, invalid
_SLACK = Fraction(1, 10**100)  # the computed value's own rounding error, far below any place given
_PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899862803"
              "482534211706798214808651328230664709384461")
_E = Decimal(1).exp(_CONTEXT)
_MAX_TURNS = 4 * _PI  # a trigonometric function's argument, in radians: larger ones may be degrees
_POLE = Decimal("1e-50")  # a cosine this small: tan at a pole, not evaluated
_NOISE = re.compile(r"\$|\\(?:left|right|displaystyle|[,;:! ])(?![A-Za-z])|~|\\q?quad(?![A-Za-z])")
_TOKEN = re.compile(r"\s*(?:([0-9]{1,50}(?:\.[0-9]{0,50})?|\.[0-9]{1,50})|(\\[A-Za-z]+)|([-+*/^_(){}\[\]])"
                    r"|((?:(?<![A-Za-z0-9.])e|(?<=[0-9.])e(?![0-9+\-]))(?![A-Za-z])))")  # e: not 1e-5
_COMMANDS = {"\\dfrac": "\\frac", "\\tfrac": "\\frac", "\\cdot": "*", "\\times": "*", "\\div": "/"}
# A name the answer is given as, read as its value: "x = ", "a_{1} = ", "\\theta = ".
_NAME = re.compile(r"\s*" + NAME + r"\s{0,4}=(?!=)")
# What opens a remark that restates the answer in another form: "or", "i.e.", "=", "or equivalently".
_RESTATEMENT = re.compile(r"\s*(?:(?:or|" + THAT_IS + r"|which\s+is|equivalently|=)(?![A-Za-z])[\s,$]{0,4}){1,2}",
                          re.IGNORECASE)
_FUNCTIONS = frozenset(("\\exp", "\\ln", "\\log", "\\sin", "\\cos", "\\tan"))
_JUXTAPOSED = frozenset(("\\pi", "\\sqrt", "\\frac", "(", "e", *_FUNCTIONS))  # what may follow a factor as a product


class _NotEvaluated(Exception):
    """The answer is outside the grammar (or past its bounds)."""


def real_value(answer: str) -> Decimal | None:
    """The value of ``answer`` when it is a closed form of the grammar in the module docstring
    (``\\sqrt{2}``, ``\\frac{\\pi}{4}``, ``2\\sqrt{3}+1``; after a name, ``x = 2\\pi``), to
    :data:`PRECISION` digits; else None. Cached (a verify call asks it of one form several times)
    for the texts it may evaluate: a longer one is refused before the cache keeps it."""
    if len(answer) > 4 * MAX_CHARS:  # (spacing and delimiters dropped below do not count)
        return None
    return _real_value(answer)


@functools.lru_cache(maxsize=4096)
def _real_value(answer: str) -> Decimal | None:
    text = _NOISE.sub(" ", unicode_math_to_latex(answer)).strip()
    if (name := _NAME.match(text)) is not None:
        text = text[name.end() :]
    if len(text) > MAX_CHARS:
        return None
    tokens = _tokens(text)
    if tokens is None:
        return None
    parser = _Parser(tokens)
    try:
        with localcontext(_CONTEXT):
            value = parser.sum(0)
            if parser.at < len(parser.tokens):
                return None
            value = +value
    except (_NotEvaluated, DecimalException):
        return None
    return value if value.is_finite() else None


def states_the_value(remark: str, value: Fraction | Decimal | None) -> bool:
    """Whether ``remark``, after an opening "or", "i.e.", "=" or "or equivalently", is ``value`` in
    another closed form (``or \\frac{1}{\\sqrt{2}}`` for ``\\frac{\\sqrt{2}}{2}``, ``= 2\\sqrt{2}`` for
    ``\\sqrt{8}``): :func:`real_value` of the rest equals it, to the margin of its rounding."""
    opening = _RESTATEMENT.match(remark[:MAX_CHARS])
    if value is None or opening is None:
        return False
    stated = real_value(remark[opening.end() :].strip().rstrip(".$ "))
    return stated is not None and equals_value(stated, value)


def approximates_with_a_form(remark: str, value: Fraction | Decimal | None) -> bool | None:
    """For ``remark`` that approximates by a closed form, not a decimal numeral (``\\approx
    \\frac{22}{7}``, ``about \\sqrt{2}``, ``about 1/3``): whether the form's value is ``value`` (True:
    it restates the answer) or another (False: a second value, as ``\\pi \\approx \\frac{22}{7}``
    without brackets is; a form is exact, so no rounding makes it the answer's value). None when
    ``remark`` is no such approximation (a decimal's is read with its rounding, :data:`APPROXIMATELY`),
    ``value`` is unknown, or :func:`real_value` does not compute the form."""
    opening = APPROXIMATION_OPENING.match(remark[:MAX_CHARS])
    if value is None or opening is None or APPROXIMATELY.match(remark[:MAX_CHARS]) is not None:
        return None
    stated = real_value(remark[opening.end() :].strip().rstrip(".$ "))
    return None if stated is None else equals_value(stated, value)


def equals_value(stated: Decimal | Fraction, value: Fraction | Decimal) -> bool:
    """Whether a computed (or exact) ``stated`` is ``value``, to the margin of its rounding."""
    value = Fraction(value)
    return abs(Fraction(stated) - value) <= _SLACK * max(1, abs(value))


def is_rounding_of(number: str, value: Fraction | Decimal) -> bool:
    """Whether ``number`` (``1.41``, ``-35``, ``1,414.2``) is ``value`` rounded to the places it gives
    (either way at a tie); a K glued to it counts thousands (``34K`` is 34000 rounded to the nearest
    thousand, never 34). A computed value (a :class:`~decimal.Decimal`) gets a margin for its own
    rounding, far below any place a number may give."""
    scale = 1000 if number[-1:] in ("K", "k") else 1
    number = number[:-1] if scale != 1 else number
    approximation = exact_rational(number.replace("\u2212", "-").rstrip(",.").replace(",", ""))
    if approximation is None:
        return False
    places = len(number.partition(".")[2].rstrip(",."))
    slack = _SLACK if isinstance(value, Decimal) else 0
    return abs(Fraction(value) / scale - approximation) <= Fraction(1, 2 * 10**places) + slack


def _tokens(text: str) -> list[str] | None:
    tokens, at = [], 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            return None if text[at:].strip() else tokens
        token = match.group(match.lastindex or 0)
        tokens.append(_COMMANDS.get(token, token))
        at = match.end()
    return tokens


class _Parser:
    """Recursive descent over the tokens; every method raises :class:`_NotEvaluated` off-grammar."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.at = 0

    def peek(self) -> str:
        return self.tokens[self.at] if self.at < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if not token or (expected is not None and token != expected):
            raise _NotEvaluated
        self.at += 1
        return token

    def digit(self) -> str | None:
        """One digit of a numeral, as TeX reads ``\\frac12`` (the rest stays a token); None if the
        next token is not a numeral."""
        token = self.peek()
        if not token[:1].isdigit():
            return None
        if len(token) == 1:
            self.at += 1
        else:
            self.tokens[self.at] = token[1:]
        return token[0]

    def sum(self, depth: int) -> Decimal:
        if depth > MAX_DEPTH:
            raise _NotEvaluated
        value = self.product(depth)
        while self.peek() in ("+", "-"):
            value = value + self.product(depth) if self.take() == "+" else value - self.product(depth)
        return value

    def product(self, depth: int) -> Decimal:
        value = self.signed(depth)
        while True:
            token = self.peek()
            if token in ("*", "/"):
                self.take()
                value = value * self.signed(depth) if token == "*" else value / self.signed(depth)
            elif token in _JUXTAPOSED:
                value = value * self.power(depth)
            else:
                return value

    def signed(self, depth: int) -> Decimal:
        negative = False
        while self.peek() in ("+", "-"):
            negative ^= self.take() == "-"
        value = self.power(depth)
        return -value if negative else value

    def power(self, depth: int) -> Decimal:
        base = self.atom(depth)
        if self.peek() != "^":
            return base
        self.take()
        digit = self.digit()
        if digit is not None:
            if self.peek()[:1].isdigit():  # "2^10": TeX's 2^1 0, or 2^{10}? not read
                raise _NotEvaluated
            exponent = Decimal(digit)
        else:
            exponent = self.group(depth + 1)
        if abs(exponent) > _MAX_EXPONENT or (base <= 0 and exponent != exponent.to_integral_value()) \
                or (base == 0 and exponent <= 0):
            raise _NotEvaluated
        return base**exponent

    def atom(self, depth: int) -> Decimal:
        token = self.take()
        if token[:1].isdigit() or token.startswith("."):
            return Decimal(token)
        if token == "\\pi":
            return +_PI
        if token in ("(", "{"):
            value = self.sum(depth + 1)
            self.take(")" if token == "(" else "}")
            return value
        if token == "\\frac":
            numerator = self.argument(depth + 1)
            return numerator / self.argument(depth + 1)
        if token == "\\sqrt":
            return self.root(depth + 1)
        if token == "e":
            return +_E
        if token in _FUNCTIONS:
            return self.function(token, depth + 1)
        raise _NotEvaluated

    def function(self, name: str, depth: int) -> Decimal:
        """``\\ln 2``, ``\\sin(\\frac{\\pi}{6})``, ``\\log_2 8``, ``\\exp{2}`` (module rules): the argument
        is bracketed or one power, and a product right after an unbracketed one is not read."""
        if depth > MAX_DEPTH:  # "\\sin\\sin\\sin...": bounded as nested groups are
            raise _NotEvaluated
        base = None
        if name == "\\log":
            self.take("_")  # a bare \log: base 10 or e? not read
            base = self.argument(depth)
        if self.peek() in ("(", "{"):
            argument = self.atom(depth)
        else:
            argument = self.power(depth)  # "\sin^2 x" fails here: "^" is no atom
            if self.peek() in _JUXTAPOSED or self.peek()[:1].isdigit():  # "\ln 2\pi": ln(2π) or π ln 2?
                raise _NotEvaluated
        return _apply(name, argument, base)

    def root(self, depth: int) -> Decimal:
        index = 2
        if self.peek() == "[":
            self.take()
            index_token = self.take()
            if not index_token.isdigit() or len(index_token) > 2 or not 2 <= int(index_token) <= _MAX_EXPONENT:
                raise _NotEvaluated
            index = int(index_token)
            self.take("]")
        radicand = self.argument(depth)
        if index == 2:
            return radicand.sqrt()
        if radicand < 0:
            raise _NotEvaluated
        return radicand ** (Decimal(1) / index)

    def argument(self, depth: int) -> Decimal:
        """A command's argument: braced, one digit (``\\frac12``, ``\\sqrt2``: a longer numeral right
        after it, ``\\sqrt23``, is not read), ``\\pi`` or ``e``."""
        if self.peek() == "{":
            return self.group(depth)
        digit = self.digit()
        if digit is not None:
            return Decimal(digit)
        if self.take() == "e":
            return +_E
        self.at -= 1
        self.take("\\pi")
        return +_PI

    def group(self, depth: int) -> Decimal:
        self.take("{")
        value = self.sum(depth)
        self.take("}")
        return value


def _apply(name: str, argument: Decimal, base: Decimal | None) -> Decimal:
    """``name`` (one of :data:`_FUNCTIONS`) of ``argument`` (``\\log`` to ``base``), within the module's
    bounds, in the current (bounded) decimal context; :class:`_NotEvaluated` outside them."""
    if name == "\\exp":
        if abs(argument) > _MAX_EXPONENT:
            raise _NotEvaluated
        return argument.exp()
    if name in ("\\ln", "\\log"):
        if argument <= 0 or (base is not None and (base <= 0 or base == 1)):
            raise _NotEvaluated
        return argument.ln() if base is None else argument.ln() / base.ln()
    if abs(argument) > _MAX_TURNS:
        raise _NotEvaluated
    sine, cosine = _sin_cos(argument)
    if name == "\\sin":
        return sine
    if name == "\\cos":
        return cosine
    if abs(cosine) < _POLE:
        raise _NotEvaluated
    return sine / cosine


def _sin_cos(x: Decimal) -> tuple[Decimal, Decimal]:
    """(sin x, cos x) by their Taylor series, after reducing ``x`` to [-pi, pi]: at most 80 terms."""
    x -= 2 * _PI * (x / (2 * _PI)).to_integral_value()
    square, tiny = x * x, Decimal(10) ** -(PRECISION + 5)
    sine = sine_term = x
    cosine = cosine_term = Decimal(1)
    for n in range(1, 80):
        sine_term = -sine_term * square / ((2 * n) * (2 * n + 1))
        cosine_term = -cosine_term * square / ((2 * n - 1) * (2 * n))
        sine, cosine = sine + sine_term, cosine + cosine_term
        if abs(sine_term) + abs(cosine_term) < tiny:
            break
    return sine, cosine
