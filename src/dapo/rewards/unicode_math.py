"""Unicode mathematics as LaTeX: a model may write ``34·2``, ``34²``, ``2√3`` or ``x₁``, and
math-verify stops reading at the first symbol it does not know (``34·2`` was read as 34). A symbol
still unknown after this is left for :mod:`~dapo.rewards.unread` to find."""

from __future__ import annotations

import re
import unicodedata
from fractions import Fraction

_UNICODE_OPERATORS = {"×": "\\times ", "·": "\\cdot ", "⋅": "\\cdot ", "∙": "\\cdot ", "÷": "\\div ",
                      "±": "\\pm ", "∓": "\\mp ", "π": "\\pi ", "∞": "\\infty ", "≈": "\\approx ",
                      "≤": "\\leq ", "≥": "\\geq ", "≠": "\\neq ", "⩽": "\\leq ", "⩾": "\\geq ",
                      "≲": "\\lesssim ", "≳": "\\gtrsim ", "≃": "\\simeq ", "≅": "\\cong ", "∝": "\\propto ",
                      "∈": "\\in ", "∪": "\\cup ", "∩": "\\cap ", "∅": "\\emptyset ", "→": "\\to ",
                      "≡": "\\equiv ", "∠": "\\angle ", "∖": "\\setminus ", "…": "\\ldots ", "⁄": "/", "∕": "/",
                      "−": "-", "－": "-", "£": "\\pounds ", "€": "\\euro ", "¥": "\\yen ",
                      # full-width and ideographic punctuation (a model writing Chinese): "34，35" is a list,
                      # "34或35" a hedge ("or"); quotation marks around an answer show it, nothing more
                      "，": ", ", "、": ", ", "；": "; ", "：": ": ", "（": "(", "）": ")", "或": " or ",
                      "“": "", "”": "", "‘": "", "’": "", "«": "", "»": ""}
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁽⁾ⁿ", "0123456789+-()n")
_SUBSCRIPTS = str.maketrans("₀₁₂₃₄₅₆₇₈₉₊₋₍₎", "0123456789+-()")
# a power of a number or bracket ("34²", "10⁶", "(x+1)²"); after a letter it is left alone: "m²" is
# a unit of area, which the unit rules and math-verify drop (not so "m^{2}" glued to "1,000.99")
_SUPERSCRIPT_RUN = re.compile(r"(?<=[0-9)}\]])[⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁽⁾ⁿ]+")
_SUBSCRIPT_RUN = re.compile("[₀₁₂₃₄₅₆₇₈₉₊₋₍₎]+")
# a root sign and what it covers: a number or name, a parenthesis, or braces ("√3", "√(x+1)")
_ROOT = re.compile(r"([√∛∜]) {0,3}([0-9A-Za-z.]{1,100}|\([^()]{0,200}\)|\{[^{}]{0,200}\})?")
_ROOT_INDEX = {"√": "", "∛": "[3]", "∜": "[4]"}
# vulgar fractions, "3½" a mixed number (3\frac{1}{2}), and "³⁄₄" written with super- and subscripts
_VULGAR_FRACTIONS = {char: "\\frac{{{}}}{{{}}}".format(*Fraction(unicodedata.numeric(char)).limit_denominator(10).as_integer_ratio())
                     for char in "½⅓⅔¼¾⅕⅖⅗⅘⅙⅚⅐⅛⅜⅝⅞⅑⅒"}
_REPLACEMENTS = _UNICODE_OPERATORS | _VULGAR_FRACTIONS
_SCRIPT_FRACTION = re.compile("([⁰¹²³⁴⁵⁶⁷⁸⁹]+)⁄([₀₁₂₃₄₅₆₇₈₉]+)")


def unicode_math_to_latex(answer: str) -> str:
    """``34·2`` -> ``34\\cdot 2``, ``34²`` -> ``34^{2}``, ``2√3`` -> ``2\\sqrt{3}``, ``x₁`` -> ``x_{1}``, ``3½`` -> ``3\\frac{1}{2}``:
    the operators, powers, indices and roots of Unicode as LaTeX (ASCII text is returned as is)."""
    if answer.isascii():
        return answer
    answer = _SCRIPT_FRACTION.sub(lambda m: f"\\frac{{{m.group(1).translate(_SUPERSCRIPTS)}}}"
                                            f"{{{m.group(2).translate(_SUBSCRIPTS)}}}", answer)
    answer = _ROOT.sub(lambda m: f"\\sqrt{_ROOT_INDEX[m.group(1)]}{{{(m.group(2) or '').strip('(){}')}}}"
                       if m.group(2) else f"\\sqrt{_ROOT_INDEX[m.group(1)]}", answer)
    answer = _SUPERSCRIPT_RUN.sub(lambda m: "^{" + m.group(0).translate(_SUPERSCRIPTS) + "}", answer)
    answer = _SUBSCRIPT_RUN.sub(lambda m: "_{" + m.group(0).translate(_SUBSCRIPTS) + "}", answer)
    return "".join(_REPLACEMENTS.get(char, char) for char in answer)
