"""A table of hand-written cases of what the verifier counts as correct; the table goes on in
verdict_cases_later.py (the formats found in models' outputs since) and is run by
test_rewards_equivalence_table.py.

Each row: (response, ground truth, expected verdict, extractor).
"""

from __future__ import annotations

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
]

