"""The verifier's verdict on a table of hand-written cases (what counts as correct).

Each row: (response, ground truth, expected verdict, extractor). Run in-process through
``verify``; every case here is benign, so none needs the worker deadline.
"""

from __future__ import annotations

import pytest

from dapo.rewards import verify

A = "Let me think step by step.\nSo the total is computed.\n"  # reasoning before the answer

GSM8K_SOLUTION = ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips "
                  "altogether in April and May.\n#### 72")

CASES: list[tuple[str, str, bool, str]] = [
    # --- integers: formats accepted ---
    (A + "Answer: 34", "34", True, "answer"),
    (A + "Answer: 34.", "34", True, "answer"),
    (A + "Answer: $34$", "34", True, "answer"),
    (A + "**Answer:** 34", "34", True, "answer"),
    (A + "**Answer: 34**", "34", True, "answer"),
    (A + "Answer:\n34", "34", True, "answer"),
    (A + "answer: 34", "34", True, "answer"),
    (A + "Answer: +34", "34", True, "answer"),
    (A + "Answer: 34.0", "34", True, "answer"),
    (A + "Answer: 34.00", "34", True, "answer"),
    (A + "Answer: 034", "34", True, "answer"),
    (A + "Answer: 1,234", "1234", True, "answer"),
    (A + "Answer: 1 234", "1234", True, "answer"),
    (A + "Answer: $1{,}234$", "1234", True, "answer"),
    (A + "Answer: $1\\,234$", "1234", True, "answer"),
    (A + "Answer: 1,234,567", "1234567", True, "answer"),
    (A + "Answer: 1234", "1,234", True, "answer"),
    (A + "Answer: -34", "-34", True, "answer"),
    (A + "Answer: $-34$", "-34", True, "answer"),
    (A + "Answer: \u221234", "-34", True, "answer"),
    (A + "Answer: 0", "0", True, "answer"),
    (A + "Answer: -0", "0", True, "answer"),
    (A + "Answer: $x = 34$", "34", True, "answer"),
    (A + "Answer: $n=34$", "34", True, "answer"),
    (A + "Answer: 34 cm", "34", True, "answer"),
    (A + "Answer: 34 cm^2", "34", True, "answer"),
    (A + "Answer: 34 m/s", "34", True, "answer"),
    (A + "Answer: 7 (mod 10)", "7", True, "answer"),
    (A + "Answer: 34 (since n is even)", "34", True, "answer"),
    # a remark's own math is not a second answer; a relative clause describes the answer
    (A + "Answer: $540$ (since $n$ is even)", "540", True, "answer"),
    (A + "Answer: 540, which is even", "540", True, "answer"),
    (A + "Answer: 34 (n = 3 and m = 4)", "34", True, "answer"),
    (A + "Answer: 34 (for both n = 3 and 4)", "34", True, "answer"),
    (A + "Answer: 1000 (one thousand)", "1000", True, "answer"),
    (A + "Answer: 100 (the sum of the squared terms)", "100", True, "answer"),
    # ...but one that opens with another answer or a scale, or states a number, is not a remark
    (A + "Answer: 34 (and 35)", "34", False, "answer"),
    (A + "Answer: 34 (otherwise 35)", "34", False, "answer"),
    (A + "Answer: $34$ (and $35$)", "34", False, "answer"),
    (A + "Answer: 34 (in thousands)", "34", False, "answer"),
    (A + "Answer: $34$ (in thousands of $x$)", "34", False, "answer"),
    (A + "Answer: $34$ (but $35$ if $n$ is odd)", "34", False, "answer"),
    (A + "Answer: 34 (35 if n is odd)", "34", False, "answer"),  # before: dropped as a remark
    (A + "Answer: 34 hundredths", "34", False, "answer"),  # a fraction word, not a unit
    (A + "Answer: $34$ (though $35$ also works)", "34", False, "answer"),
    (A + "Answer: $34$, which could also be $35$", "34", False, "answer"),
    (A + "Answer: 540, which is 541", "540", False, "answer"),
    # a scale word changes the number: not a unit
    (A + "Answer: 34 thousand", "34", False, "answer"),
    (A + "Answer: 5 million", "5", False, "answer"),
    (A + "Answer: 3 hundred", "3", False, "answer"),
    (A + "Answer: 10 squared", "10", False, "answer"),
    (A + "Answer: $34 \\text{ thousand}$", "34", False, "answer"),
    (A + "Answer: $34 \\text{ apples}$", "34", True, "answer"),
    # a word or remark that makes the number part of an expression: not a unit either
    (A + "Answer: 2(n+1)", "2", False, "answer"),
    (A + "Answer: 4 (2 + \\sqrt{2})", "4", False, "answer"),
    (A + "Answer: $2(\\sqrt{3})$", "2", False, "answer"),
    (A + "Answer: 34 (\\times 10^3)", "34", False, "answer"),
    (A + "Answer: 2 pi", "2", False, "answer"),
    (A + "Answer: 2 \\text{ pi}", "2", False, "answer"),
    (A + "Answer: $2\\mathrm{i}$", "2", False, "answer"),
    (A + "Answer: $2\\mathrm{e}$", "2", False, "answer"),
    (A + "Answer: 2 thirds", "2", False, "answer"),
    (A + "Answer: 3 over pi", "3", False, "answer"),
    (A + "Answer: 2 times n", "2", False, "answer"),
    (A + "Answer: 34 minus y", "34", False, "answer"),
    (A + "Answer: 7 and a half", "7", False, "answer"),
    (A + "Answer: 540 is not correct", "540", False, "answer"),
    (A + "Answer: 12 m", "12", True, "answer"),  # an SI symbol is a unit
    (A + "Answer: 34 A", "34", True, "answer"),
    (A + "Answer: 2 (n-1)", "2", False, "answer"),
    (A + "Answer: 34 (3/4)", "34", False, "answer"),
    # units of several words, and remarks holding words, relations or hyphens, are still dropped
    (A + "Answer: 34 degrees Celsius", "34", True, "answer"),
    (A + "Answer: 34 feet per second", "34", True, "answer"),
    (A + "Answer: 34 years old", "34", True, "answer"),
    (A + "Answer: 34 (n = 3)", "34", True, "answer"),
    (A + "Answer: $34$ (n = 3)", "34", True, "answer"),
    (A + "Answer: 34 (for n \\geq 2)", "34", True, "answer"),
    (A + "Answer: 34 (x-coordinate)", "34", True, "answer"),
    (A + "Answer: 34 (base-10)", "34", True, "answer"),
    (A + "Answer: 60 (seconds/minute)", "60", True, "answer"),
    (A + "Answer: 7(mod 10)", "7", True, "answer"),
    (A + "Answer: 34 \\pmod{1000}", "34", True, "answer"),
    (A + "Answer: $34 \\pmod {1000}$", "34", True, "answer"),
    (A + "Answer: 34 \\pmod 1000", "34", True, "answer"),
    (A + "Answer: $x \\equiv 34 \\pmod{1000}$", "34", True, "answer"),
    (A + "Answer: $35 \\pmod{1000}$", "34", False, "answer"),
    (A + "Answer: $34 \\bmod 1000$", "34", False, "answer"),  # an operation, not a remark
    # a finite decimal is rational: never an irrational number, whatever math-verify's rounding says
    (A + "Answer: $3.141593$", "\\pi", False, "answer"),
    (A + "Answer: $1.414214$", "\\sqrt{2}", False, "answer"),
    (A + "Answer: $1.5708$", "\\frac{\\pi}{2}", False, "answer"),
    (A + "Answer: $\\sqrt{17}$", "4.123105625617661", True, "answer"),  # a rounded gold: math-verify's call
    (A + "Answer: $2.0$", "\\sqrt{4}", True, "answer"),
    (A + "Answer: $\\frac{\\pi}{1}$", "\\pi", True, "answer"),
    # two segments joined by "=" are one equation: its value is compared
    (A + "Answer: $a+b$ = $34$", "34", True, "answer"),
    (A + "Answer: the sum $a+b$=$34$.", "34", True, "any"),
    (A + "Answer: $a+b$ = $35$", "34", False, "answer"),
    (A + "Answer: $a+b$ = $34$ or $35$", "34", False, "answer"),
    (A + "Answer: 34^\\circ \\text{ F}", "34", True, "answer"),
    # one $...$ on the line: the text around it can still offer another answer or change the number
    (A + "Answer: $34$ or 35", "34", False, "answer"),
    (A + "Answer: 35 or $34$", "34", False, "answer"),
    (A + "Answer: either $34$ or 35", "34", False, "answer"),
    (A + "Answer: $34$ (or 35)", "34", False, "answer"),
    (A + "Answer: $34$ or more", "34", False, "answer"),
    (A + "Answer: $34$ thousand", "34", False, "answer"),
    (A + "Answer: $2$\\sqrt{2}", "2", False, "answer"),
    (A + "Answer: $7$ (mod 10)", "7", True, "answer"),
    (A + "Answer: $34$ \\text{ cm}", "34", True, "answer"),
    (A + "Answer: the length is $34$ degrees", "34", True, "answer"),
    # labelled values are compared with their labels
    (A + "Answer: x=4, y=3", "x=3, y=4", False, "answer"),
    (A + "Answer: y=4, x=3", "x=3, y=4", True, "answer"),
    (A + "Answer: 1, 2", "x=2, y=1", False, "answer"),  # read in the gold's order
    (A + "Answer: 2, 1", "x=2, y=1", True, "answer"),
    # an unlabelled gold is a set, whatever the answer names; labels are read loosely
    (A + "Answer: y = 7, x = 5", "5, 7", True, "answer"),
    (A + "Answer: x_1 = 2, x_2 = -1", "-1, 2", True, "answer"),
    (A + "Answer: x_{1} = 5, x_{2} = 7", "x_1=5, x_2=7", True, "answer"),
    (A + "Answer: X=5, Y=7", "x=5, y=7", True, "answer"),
    (A + "Answer: $34^\\circ$", "34", True, "answer"),
    (A + "Answer: $34^{\\circ}$", "34", True, "answer"),
    (A + "Answer: $34\\%$", "34", True, "answer"),
    (A + "Answer: \\$34", "34", True, "answer"),
    (A + "Answer: \\boxed{34}", "34", True, "answer"),
    (A + "Answer: $\\boxed{34}$", "34", True, "answer"),
    (A + "Answer: $\\frac{68}{2}$", "34", True, "answer"),
    (A + "Answer: \u0663\u0664", "34", True, "answer"),  # Arabic-Indic digits
    (A + "Answer: \uff13\uff14", "34", True, "answer"),  # full-width digits
    (A + "Answer: 540", "$540$", True, "answer"),
    (A + "Answer: 540", "\\boxed{540}", True, "answer"),
    # --- integers: near misses and forms rejected ---
    (A + "Answer: 340", "34", False, "answer"),
    (A + "Answer: 3", "34", False, "answer"),
    (A + "Answer: 34", "340", False, "answer"),
    (A + "Answer: 35", "34", False, "answer"),
    (A + "Answer: -34", "34", False, "answer"),
    (A + "Answer: 34", "-34", False, "answer"),
    (A + "Answer: 34.5", "34", False, "answer"),
    (A + "Answer: 33.9999", "34", False, "answer"),
    (A + "Answer: 0.34", "34", False, "answer"),  # no percentage scaling
    (A + "Answer: 3400\\%", "34", False, "answer"),
    (A + "Answer: 3.4e1", "34", False, "answer"),  # scientific notation is not an integer
    (A + "Answer: 1e999999", "34", False, "answer"),
    (A + "Answer: 12,34", "1234", False, "answer"),  # separators only in groups of three
    (A + "Answer: 1,2345", "12345", False, "answer"),
    (A + "Answer: 34th", "34", True, "answer"),  # math-verify drops the ordinal suffix
    (A + "Answer: 34x", "34", False, "answer"),
    # --- hedged answers: several candidates are wrong ---
    (A + "Answer: 34 or 35", "34", False, "answer"),
    (A + "Answer: $34$ or $35$", "34", False, "answer"),
    (A + "Answer: either 34 or 35", "35", False, "answer"),
    (A + "Answer: 34 (or maybe 35)", "34", False, "answer"),
    (A + "Answer: $34 \\text{ or } 35$", "34", False, "answer"),
    (A + "Answer: 34, 35", "34", False, "answer"),
    (A + "Answer: $34$, $35$", "34", False, "answer"),
    (A + "So \\boxed{34} or \\boxed{35}", "34", False, "boxed"),
    # --- last stated answer wins ---
    ("Answer: 35\nWait, let me recheck.\nAnswer: 34", "34", True, "answer"),
    ("Answer: 34\nWait, let me recheck.\nAnswer: 35", "34", False, "answer"),
    ("First \\boxed{35}. Recheck.\nFinal: \\boxed{34}", "34", True, "boxed"),
    ("First \\boxed{34}. Recheck.\nFinal: \\boxed{35}", "34", False, "boxed"),
    ("\\boxed{35}\nAnswer: 34", "34", True, "auto"),
    ("Answer: 35\nActually it is \\boxed{34}", "34", True, "auto"),
    ("So \\boxed{34} and I double check: \\boxed{34}", "34", True, "boxed"),
    # --- no anchor, no answer ---
    (A + "The answer is 34.", "34", False, "answer"),
    (A + "34", "34", False, "answer"),
    (A + "\\boxed{34}", "34", False, "answer"),  # DAPO format asks for the Answer: line
    (A + "Answer: 34", "34", False, "boxed"),
    ("", "34", False, "answer"),
    (A + "Answer:", "34", False, "answer"),
    (A + "Answer: $Answer", "34", False, "answer"),  # the template echoed back
    (A + "\\boxed{34", "34", False, "boxed"),  # unbalanced box
    (A + "\\boxed{}", "34", False, "boxed"),
    # --- boxed extraction ---
    (A + "\\boxed{34}", "34", True, "boxed"),
    (A + "$\\boxed{34}$.", "34", True, "boxed"),
    (A + "\\boxed 34", "34", True, "boxed"),
    (A + "\\fbox{34}", "34", True, "boxed"),
    (A + "\\boxed{\\frac{1}{2}}", "\\frac{1}{2}", True, "boxed"),
    (A + "\\boxed{\\{1, 2\\}}", "\\{2, 1\\}", True, "boxed"),
    (A + "\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt3}{2}", True, "boxed"),
    # --- fractions vs decimals ---
    (A + "Answer: $\\frac{1}{2}$", "\\frac{1}{2}", True, "answer"),
    (A + "Answer: $\\frac12$", "\\frac{1}{2}", True, "answer"),
    (A + "Answer: 0.5", "\\frac{1}{2}", True, "answer"),
    (A + "Answer: 1/2", "\\frac{1}{2}", True, "answer"),
    (A + "Answer: $\\dfrac{2}{4}$", "\\frac{1}{2}", True, "answer"),
    (A + "Answer: $\\frac{1}{3}$", "\\frac{1}{2}", False, "answer"),
    (A + "Answer: 0.6", "\\frac{1}{2}", False, "answer"),
    (A + "Answer: $-\\frac{1}{2}$", "\\frac{1}{2}", False, "answer"),
    (A + "Answer: $\\frac{-1}{2}$", "-\\frac{1}{2}", True, "answer"),
    # --- roots, pi, expressions ---
    (A + "Answer: $2\\sqrt{3}$", "2\\sqrt{3}", True, "answer"),
    (A + "Answer: $\\sqrt{12}$", "2\\sqrt{3}", True, "answer"),
    (A + "Answer: $3\\sqrt{2}$", "2\\sqrt{3}", False, "answer"),
    (A + "Answer: $\\frac{\\pi}{2}$", "\\pi/2", True, "answer"),
    (A + "Answer: $\\pi$", "2\\pi", False, "answer"),
    (A + "Answer: $2x+1$", "1+2x", True, "answer"),
    (A + "Answer: $2x-1$", "1+2x", False, "answer"),
    # --- word answers: compared as words (math-verify reads "seat" as s*e*a*t = "east") ---
    (A + "So \\boxed{\\text{seat}}", "\\text{east}", False, "boxed"),
    (A + "So \\boxed{ACB}", "ABC", False, "boxed"),
    (A + "So \\boxed{\\text{East}}", "\\text{east}", True, "boxed"),
    (A + "Answer: New York", "new york", True, "answer"),
    # --- words in math delimiters after the answer are words, not a second answer ---
    (A + "Answer: $34$ $\\text{square units}$", "34", True, "answer"),
    (A + "Answer: $34$ $\\text{thousand}$", "34", False, "answer"),
    # --- one answer in two boxes is one answer ---
    (A + "Answer: \\boxed{34} and \\boxed{34.0}", "34", True, "answer"),
    # --- after a box, "answer:" in prose states no answer; an answer line corrects the box ---
    (A + "So \\boxed{34}.\nTo verify the answer: plug n = 3 back in.", "34", True, "any"),
    (A + "So \\boxed{34}\n**Why this is the right answer:** 7 is prime", "34", True, "any"),
    (A + "So \\boxed{34}\nThat is my final answer:", "34", True, "any"),
    (A + "So \\boxed{34}\nFinal Answer: 35", "34", False, "any"),
    (A + "So \\boxed{34}\nTherefore, the final answer: 35", "35", True, "any"),
    # --- intervals and tuples ---
    (A + "Answer: $[1, 3)$", "[1,3)", True, "answer"),
    (A + "Answer: $(1, 3)$", "[1,3)", False, "answer"),
    (A + "Answer: $(-\\infty, 2]$", "(-\\infty,2]", True, "answer"),
    (A + "Answer: $(1, 2, 3)$", "(1,2,3)", True, "answer"),
    (A + "Answer: $(1, 3, 2)$", "(1,2,3)", False, "answer"),
    # --- an inequality disjunction is one set of reals, not a hedge (before: all scored hedges) ---
    (A + "So \\boxed{x<-1 \\text{ or } x>2}", "(-\\infty,-1)\\cup(2,\\infty)", True, "boxed"),
    (A + "Answer: x < -1 or x > 2", "(-\\infty,-1)\\cup(2,\\infty)", True, "answer"),
    (A + "Answer: $x \\le 0 \\text{ or } x \\ge 3$", "(-\\infty,0]\\cup[3,\\infty)", True, "answer"),
    (A + "Answer: $x<-1 \\lor x>2$", "(-\\infty,-1)\\cup(2,\\infty)", True, "answer"),
    (A + "Answer: $x<-1$ or $x>2$", "(-\\infty, -1) \\cup (2, \\infty)", True, "answer"),
    (A + "Answer: x > 2 or x < -1", "(-\\infty,-1)\\cup(2,\\infty)", True, "answer"),
    (A + "Answer: x<\\frac12 \\text{ or } x>\\sqrt2", "(-\\infty,0.5)\\cup(\\sqrt{2},\\infty)", True,
     "answer"),
    (A + "Answer: $-1 < x \\le 2$ or $x > 5$", "(-1,2]\\cup(5,\\infty)", True, "answer"),
    (A + "Answer: $(-\\infty,-1)\\cup(2,\\infty)$", "x<-1 \\text{ or } x>2", True, "answer"),
    (A + "Answer: -1 > x or 2 < x", "x<-1 \\text{ or } x>2", True, "answer"),
    (A + "Answer: x<-1, x>2", "x<-1 \\text{ or } x>2", True, "answer"),  # a list, as before
    # ...describing another set is wrong: another endpoint, a closed end for an open one
    (A + "Answer: x < -1 or x > 3", "(-\\infty,-1)\\cup(2,\\infty)", False, "answer"),
    (A + "Answer: x \\le -1 or x > 2", "(-\\infty,-1)\\cup(2,\\infty)", False, "answer"),
    (A + "So \\boxed{x \\le -1 \\text{ or } x>2}", "x<-1 \\text{ or } x>2", False, "boxed"),
    (A + "Answer: x>2", "x<-1 \\text{ or } x>2", False, "answer"),
    # ...and a hedge around a disjunction, or equations joined by "or", stay hedges
    (A + "Answer: x=3 or x=4", "3", False, "answer"),
    (A + "Answer: $35$ or \\boxed{x<-1 \\text{ or } x>2}", "(-\\infty,-1)\\cup(2,\\infty)", False,
     "answer"),
    (A + "Answer: x < -1 or x > 2 or x = 5", "(-\\infty,-1)\\cup(2,\\infty)", False, "answer"),
    # --- percentages, degrees, units: a percent sign is dropped, never scaled, on every number ---
    (A + "Answer: $12.5\\%$", "12.5\\%", True, "answer"),
    (A + "Answer: 12.5", "12.5\\%", True, "answer"),  # before: wrong, where 50 for 50\% was right
    (A + "So \\boxed{12.5\\%}", "12.5", True, "boxed"),
    (A + "Answer: $0.125$", "12.5\\%", False, "answer"),  # as 0.5 for 50\% (verl: wrong too)
    (A + "Answer: .5", "0.5", True, "answer"),  # plain numbers by exact value
    (A + "Answer: 0.50000000000000000000000000001", "0.5", False, "answer"),
    (A + "Answer: 50", "50\\%", True, "answer"),  # integer percentages: the integer path
    (A + "Answer: 0.5", "50\\%", False, "answer"),
    (A + "Answer: $\\frac{1}{2}$", "50\\%", False, "answer"),
    (A + "Answer: $45^\\circ$", "45^\\circ", True, "answer"),
    (A + "Answer: $2.5 \\text{ cm}$", "2.5", True, "answer"),
    (A + "Answer: 2.50", "2.5", True, "answer"),
    (A + "Answer: 2.51", "2.5", False, "answer"),
    # --- thousands separators as models write them ---
    (A + "Answer: $14 {, }916$", "14916", True, "answer"),
    (A + "So \\boxed{11,\\! 111,\\! 111,\\! 100}", "11111111100", True, "boxed"),
    (A + "So $\\boxed{32,\\! 349}$", "32349", True, "boxed"),
    (A + "Answer: 1,000", "1000", True, "answer"),
    (A + "Answer: 1,000.5", "1000.5", True, "answer"),
    (A + "So \\boxed{32, 349}", "32349", False, "boxed"),  # comma + space: a list
    (A + "Answer: 1000,5", "1000.5", False, "answer"),  # a comma is never a decimal point
    (A + "Answer: 1,22", "1.22", False, "answer"),
    # --- "Final Answer:" lines (Minerva format, prose, display blocks, leaked tokens) ---
    (A + "Final Answer: The final answer is $28\\%$. I hope it is correct.", "28\\%", True, "answer"),
    (A + "Final Answer: The final answer is 12,000,023. I hope it is correct.", "12000023", True,
     "answer"),
    (A + "Final Answer: The final answer is $\\frac{3}{56}$. I hope it is correct.", "\\frac{3}{56}",
     True, "answer"),
    (A + "**Final Answer:** The largest $n$ is 34.", "34", True, "answer"),
    (A + "Final Answer: The volume of $ABCDEFGH$ is 120. I hope it is correct.", "120", True,
     "answer"),
    (A + "Final Answer: The value of $N$ is $\\boxed{14{,}916}$. I hope it is correct.", "14916",
     True, "auto"),
    (A + "**Answer:**\n$$\n34\n$$", "34", True, "answer"),
    (A + "Answer: \\[\n\\frac{1}{2}\n\\]", "\\frac12", True, "answer"),
    (A + "Answer: $x = 5$ is the only solution.", "5", True, "answer"),
    (A + "Answer: The winner is Evelyn.", "\\text{Evelyn}", True, "answer"),
    (A + "Answer: 34<|im_end|>", "34", True, "answer"),
    (A + "Final Answer: The final answer is $34$. I hope it is correct.", "35", False, "answer"),
    (A + "Final Answer: The final answer is 34 or 35. I hope it is correct.", "34", False, "answer"),
    (A + "Final Answer: The largest $n$ is 35.", "34", False, "answer"),
    (A + "Answer: $34$ or $\\boxed{35}$", "35", False, "answer"),
    (A + "Answer: $ \n 34 \n $", "34", False, "answer"),  # inline math does not span lines
    # --- several boxes: a set when the ground truth is a list or set, else a hedge ---
    (A + "So \\boxed{1}, \\boxed{2}", "1, 2", True, "boxed"),
    (A + "So \\boxed{1}, \\boxed{2}", "\\{2, 1\\}", True, "boxed"),
    (A + "The solutions are \\boxed{-2} and \\boxed{1}.", "1, -2", True, "auto"),
    (A + "$x = \\boxed{1}$ or $x = \\boxed{2}$", "1, 2", True, "auto"),
    (A + "\\[\\boxed{(2, 2)} \\quad \\text{and} \\quad \\boxed{(6, 2)}\\]", "(2, 2), (6, 2)", True,
     "auto"),
    (A + "So \\boxed{\\frac12}, \\boxed{3}", "3, \\frac{1}{2}", True, "boxed"),
    (A + "So \\boxed{1, 2}", "\\boxed{1}, \\boxed{2}", True, "boxed"),  # a multi-box ground truth
    (A + "Answer: $1$ and $2$", "1, 2", True, "answer"),
    (A + "Answer: 1 or 2", "\\{1, 2\\}", True, "answer"),
    (A + "Answer: 2, 1", "1, 2", True, "answer"),
    (A + "Answer: p=5,q=2; p=7,q=2", "(5,2), (7,2)", True, "answer"),
    (A + "So \\boxed{1}, \\boxed{2}", "1", False, "boxed"),  # one ground truth: a hedge
    (A + "So \\boxed{1}, \\boxed{2}", "2", False, "boxed"),
    (A + "So \\boxed{1}, \\boxed{2}", "1, 2, 3", False, "boxed"),  # an element missing
    (A + "So \\boxed{1}, \\boxed{2}, \\boxed{3}", "1, 2", False, "boxed"),  # an extra element
    (A + "So \\boxed{1}, \\boxed{3}", "1, 2", False, "boxed"),
    (A + "So \\boxed{\\frac13}, \\boxed{3}", "3, \\frac{1}{2}", False, "boxed"),
    (A + "\\boxed{(2, 2)} \\quad \\text{and} \\quad \\boxed{(6, 3)}", "(2, 2), (6, 2)", False,
     "boxed"),
    (A + "So \\boxed{1} no, wait: it is \\boxed{2}", "1, 2", True, "boxed"),  # "," chains them
    (A + "So \\boxed{1} then recheck \\boxed{2}", "1, 2", False, "boxed"),  # no separator
    (A + "\\boxed{1}\n\\boxed{2}", "1, 2", False, "boxed"),  # only the last box's line
    (A + "So \\boxed{1, 2}", "\\boxed{1} then \\boxed{2}", False, "boxed"),
    (A + "Answer: 2, 1", "(1, 2)", False, "answer"),  # a tuple keeps its order
    (A + "Answer: x=4, 3", "x=3, y=4", False, "answer"),  # the label it names must hold
    (A + "Answer: y=4, 3", "x=3, y=4", True, "answer"),
    # --- a space after \boxed: the same box to TeX ---
    (A + "The answer is \\boxed { 34 }.", "34", True, "boxed"),
    (A + "So \\boxed {x + 1}", "x+1", True, "boxed"),
    (A + "Answer: $\\boxed {2 \\sqrt{3}}$", "2\\sqrt3", True, "answer"),
    (A + "So \\boxed {1, 2}", "1, 2", True, "boxed"),
    (A + "So \\boxed 5", "5", True, "boxed"),
    (A + "So $35$ or \\boxed {34}.", "34", False, "boxed"),
    # --- Unicode mathematics: read whole, not up to the first symbol math-verify does not know ---
    (A + "Answer: 34·2", "34", False, "answer"),
    (A + "Answer: 34·2", "68", True, "answer"),
    (A + "Answer: 34²", "34", False, "answer"),
    (A + "Answer: 34²", "1156", True, "answer"),
    (A + "Answer: 34×10³", "34", False, "answer"),
    (A + "Answer: 34×10³", "34000", True, "answer"),
    (A + "Answer: 10⁶", "10", False, "answer"),
    (A + "Answer: 2√3", "2", False, "answer"),
    (A + "Answer: 2√3", "2\\sqrt{3}", True, "answer"),
    (A + "Answer: √3", "\\sqrt{3}", True, "answer"),
    (A + "Answer: 12 ÷ 4", "3", True, "answer"),
    (A + "Answer: 34 ≈ 35", "34", False, "answer"),  # two values
    (A + "Answer: x ≈ 11", "11", True, "answer"),  # Math-Verify's suite counts it right
    (A + "Answer: 1,000.99m²", "1000.99", True, "answer"),  # a unit, as before
    # --- a remark that multiplies the number or offers another answer ---
    (A + "Answer: 34 (x 1000)", "34", False, "answer"),
    (A + "Answer: 34 (times 10)", "34", False, "answer"),
    (A + "Answer: 34 (possibly 35)", "34", False, "answer"),
    (A + "Answer: 34 (maybe 35)", "34", False, "answer"),
    (A + "Answer: 34\\text{ (or 35)}", "34", False, "answer"),
    (A + "Answer: 34 (x = 3)", "34", True, "answer"),  # a condition, not a product
    (A + "Answer: 34 (n odd: 35)", "34", False, "answer"),  # another answer, after a colon
    (A + "Answer: 34 (mod 1000)", "34", True, "answer"),
    # --- what the box or number is part of (before: each read as the bare box / number) ---
    (A + "So \\boxed{34} or 35", "34", False, "boxed"),
    (A + "So \\boxed{2}\\sqrt{3}", "2", False, "boxed"),
    (A + "So $x = -\\boxed{34}$", "34", False, "boxed"),
    (A + "So $x = -\\boxed{34}$", "-34", True, "boxed"),
    (A + "Answer: at least $34$", "34", False, "answer"),
    (A + "Answer: $34.\\overline{3}$", "34", False, "answer"),
    (A + "Answer: $0.\\overline{3}$", "\\frac13", True, "answer"),
    (A + "Answer: 0.5000001", "\\frac12", False, "answer"),
    (A + "Answer: 34 hours", "34 \\text{ minutes}", False, "answer"),
    (A + "Answer: $x > 2$", "(2,\\infty)", True, "answer"),
    (A + "So \\boxed{x<-1} or \\boxed{x>2}", "(-\\infty,-1)\\cup(2,\\infty)", True, "boxed"),
    # --- GSM8K's answer field, a worked solution ending in "#### <answer>" (was read whole: math-verify
    # took one of its numbers, wrong past 1000 characters or with "5 and 6" in it) ---
    (A + "Answer: 72", GSM8K_SOLUTION, True, "answer"),
    (A + "Answer: 24", GSM8K_SOLUTION, False, "answer"),
    (A + "So the total is \\boxed{72}.", GSM8K_SOLUTION + "\n", True, "any"),
    (A + "Answer: 10", "The answer is 5 and 6 is wrong, so 5*2=<<5*2=10>>10\n#### 10", True, "answer"),
    (A + "Answer: 42", "Step.\n" * 200 + "So 6*7 = <<6*7=42>>42.\n#### 42", True, "answer"),
    # --- a decimal with thousands separators is one number (was split into the list "1, 234.56") ---
    (A + "Answer: 1234.56", "1,\\!234.56", True, "answer"),
    (A + "Answer: 1234.5", "1,234.5", True, "answer"),
    (A + "Answer: 1234.56", "\\$1,\\!234.56", True, "answer"),
    (A + "Answer: 234.5, 1", "1,234.5", False, "answer"),
    (A + "Answer: 1234.6", "1,234.5", False, "answer"),
    # --- two values joined by a symbol, or an enumeration: math-verify read the last number alone ---
    (A + "Answer: \\boxed{34 \\vee 35}", "35", False, "answer"),
    (A + "Answer: \\boxed{34 \\wedge 35}", "35", False, "answer"),
    (A + "Answer: \\boxed{34 \\cup 35}", "35", False, "answer"),
    (A + "Answer: \\boxed{34 \\mid 35}", "35", False, "answer"),
    (A + "Answer: \\boxed{34 \\to 35}", "35", False, "answer"),
    (A + "Answer: $34 \\Rightarrow 35$", "35", False, "answer"),
    (A + "Answer: 1, 2, \\ldots, 34", "34", False, "answer"),
    (A + "Answer: $\\{1, 2, \\dots, 34\\}$", "34", False, "answer"),
    (A + "Answer: 1, 2, ..., 34", "34", False, "answer"),
    (A + "Answer: 1 + 2 + \\cdots + 34", "34", False, "answer"),
    (A + "Answer: 1, 2, \\ldots, 34", "1, 2, \\ldots, 34", True, "answer"),
    (A + "Answer: $\\lim_{n \\to \\infty} a_n = 1$", "1", True, "answer"),
    (A + "Answer: $(-\\infty, 1) \\cup (2, \\infty)$", "(-\\infty,1)\\cup(2,\\infty)", True, "answer"),
    # --- a count's noun, or an area's unit, after the number (were wrong) ---
    (A + "Answer: 3 times", "3", True, "answer"),
    (A + "Answer: 2 times", "3", False, "answer"),
    (A + "Answer: 2 real roots", "2", True, "answer"),
    (A + "Answer: 34 of them", "34", True, "answer"),
    (A + "Answer: 34 cm squared", "34", True, "answer"),
    (A + "Answer: 34 units squared", "34", True, "answer"),
    (A + "Answer: 34 cm cubed", "34", True, "answer"),
    (A + "Answer: 10 cubed", "10", False, "answer"),
    (A + "Answer: 34 cm squared", "34 \\text{ cm}^2", True, "answer"),
    (A + "Answer: 34 cm squared", "34 \\text{ cm}", False, "answer"),  # an area for a length
    (A + "Answer: 34 cm cubed", "34 \\text{ cm}^3", True, "answer"),
    # --- a wrapped unit with a power in the ground truth (was left to math-verify: wrong) ---
    (A + "Answer: 34 cm^2", "34 \\text{ cm}^2", True, "answer"),
    (A + "Answer: $34 \\text{ cm}^2$", "34", True, "answer"),
    (A + "Answer: 34 cm", "34 \\text{ cm}^2", False, "answer"),
    (A + "Answer: 35 cm^2", "34 \\text{ cm}^{2}", False, "answer"),
    (A + "Answer: $\\frac{1}{2}^2$", "\\frac12", False, "answer"),
    # --- an en dash for a minus sign (was wrong); not a range ---
    (A + "Answer: \u20135", "-5", True, "answer"),
    (A + "Answer: $x = \u20135$", "-5", True, "answer"),
    (A + "Answer: \u20135", "5", False, "answer"),
    (A + "Answer: 3\u20135", "-2", False, "answer"),
    # --- LaTeX's spaces and empty groups hid what follows a box or a number (were right) ---
    (A + "So \\boxed{34}\\,000", "34", False, "boxed"),
    (A + "So \\boxed{34}\\,\\times 10^3", "34", False, "boxed"),
    (A + "So \\boxed{34}{}^2", "34", False, "boxed"),
    (A + "So \\boxed{34}\\ \\text{thousand}", "34", False, "boxed"),
    (A + "So \\boxed{34} \\div 2", "34", False, "boxed"),
    (A + "So \\boxed{34} \\quad 35", "34", False, "boxed"),
    (A + "The answer is $\\boxed{34}\\,000$.", "34", False, "any"),
    (A + "Answer: 34\\,\\text{thousand}", "34", False, "answer"),
    (A + "Answer: 34~\\text{million}", "34", False, "answer"),
    (A + "Answer: \\frac12\\,\\text{million}", "\\frac12", False, "answer"),
    (A + "So \\boxed{34}\\, \\text{cm}", "34", True, "boxed"),
    (A + "Answer: 34~\\text{apples}", "34", True, "answer"),
    (A + "Answer: 34\\,000", "34000", True, "answer"),
    # --- two numbers on two lines, or joined by \in, &, |; a tie or a zero-width space between digits ---
    (A + "Answer: 34 \\\\ 35", "35", False, "answer"),
    (A + "Answer: $$\n34 \\\\\n35\n$$", "35", False, "answer"),
    (A + "Answer: 34 \\in 35", "35", False, "answer"),
    (A + "Answer: 34 | 35", "35", False, "answer"),
    (A + "Answer: 34 \\& 35", "35", False, "answer"),
    (A + "Answer: 34~35", "34", False, "answer"),
    (A + "Answer: 34\u200b35", "34", False, "answer"),
    (A + "Answer: 3\u200b4", "34", True, "answer"),
    # --- a reasoning model's thinking: the answer is read after it alone (an answer tried inside counted) ---
    ("<think>\nAnswer: 35\nHmm wait, that is wrong.\n</think>\nThe count is 34.", "35", False, "answer"),
    ("<think>\nAnswer: 35\n</think>\nAnswer: 34", "34", True, "answer"),
    ("<think>\nAnswer: 35\n</think>\nAnswer: 34", "35", False, "answer"),
    ("<think>\nso the answer is \\boxed{34}", "34", False, "any"),  # still thinking when it ended
    ("<think>\n" + "Let me think. " * 2000 + "Answer: 34", "34", False, "any"),  # ... past max_response_chars (was right)
    ("<think>\n" + "x " * 12000 + "</think>\nAnswer: 34", "34", True, "any"),
    ("First, 17 * 2 = 34.\n</think>\n\\boxed{34}", "34", True, "any"),  # a template that opened <think>
    # --- a remark that offers another value in words the rules did not know (were right) ---
    (A + "Answer: 34 (could also be 35)", "34", False, "answer"),
    (A + "Answer: 34 (might be 35)", "34", False, "answer"),
    (A + "Answer: 34 (as well as 35)", "34", False, "answer"),
    (A + "Answer: 34 (actually 35)", "34", False, "answer"),
    (A + "Answer: 34 (wait, 35)", "34", False, "answer"),
    (A + "Answer: 34 (if wrong, 35)", "34", False, "answer"),
    (A + "Answer: 1, 2 (and possibly 3)", "1, 2", False, "answer"),
    (A + "So \\boxed{34} (could also be 35)", "34", False, "boxed"),
    (A + "Answer: 34 (may be checked by 2 methods)", "34", True, "answer"),
    # --- a proof's end mark on the Answer line was read as the answer (was wrong) ---
    (A + "Answer: 34 $\\blacksquare$", "34", True, "answer"),
    (A + "Answer: 34. $\\square$", "34", True, "answer"),
    (A + "Answer: 35 $\\blacksquare$", "34", False, "answer"),
    # --- a plain-text mixed number (was wrong); a list that goes on (was right for its first value) ---
    (A + "Answer: 2 1/2", "\\frac52", True, "answer"),
    (A + "Answer: -2 1/2", "-\\frac52", True, "answer"),
    (A + "Answer: 2 1/2", "\\frac32", False, "answer"),
    (A + "Answer: 34, \\ldots", "34", False, "answer"),
    # --- a multiple-choice letter with its text (was wrong) ---
    (A + "Answer: (C) 12", "C", True, "answer"),
    (A + "Answer: \\textbf{(C)}\\ 12", "C", True, "answer"),
    (A + "Answer: C. 12", "C", True, "answer"),
    (A + "So \\boxed{C}", "\\textbf{(C) }12", True, "boxed"),
    (A + "Answer: (B) 12", "C", False, "answer"),
    (A + "Answer: (A) or (B)", "A", False, "answer"),
    # --- a ground truth in dollars is money: another unit is another quantity (was right) ---
    (A + "Answer: 5 cents", "\\$5", False, "answer"),
    (A + "Answer: 5\\%", "\\$5", False, "answer"),
    (A + "Answer: 5 dollars", "\\$5", True, "answer"),
    (A + "Answer: \\$5.00", "\\$5", True, "answer"),
    (A + "Answer: 5", "\\$5", True, "answer"),
    # --- styling around the value (was wrong) ---
    (A + "So \\boxed{\\boldsymbol{34}}", "34", True, "boxed"),
    (A + "So \\boxed{\\textcolor{red}{34}}", "34", True, "boxed"),
    (A + "Answer: {\\color{red}34}", "34", True, "answer"),
    (A + "Answer: $\\bm{34}$", "34", True, "answer"),
    (A + "So \\boxed{\\bm{\\frac{3}{4}}}", "\\frac34", True, "boxed"),
    (A + "So \\boxed{\\underline{35}}", "34", False, "boxed"),
    (A + "Answer: \\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}",
     "\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}", True, "answer"),
]


@pytest.mark.parametrize(("response", "ground_truth", "expected", "extractor"), CASES)
def test_verdict(response: str, ground_truth: str, expected: bool, extractor: str) -> None:
    correct, pred = verify(response, ground_truth, extractor=extractor)
    assert correct is expected, f"pred={pred!r}"


def test_table_is_large_and_balanced() -> None:
    assert len(CASES) >= 80
    assert sum(expected for *_, expected, _ in CASES) >= 30
    assert sum(not expected for *_, expected, _ in CASES) >= 30
