"""Hand-written verifier cases, continued from verdict_cases.py: the answer formats found in
models' outputs since (Final Answer lines, several boxes, Unicode, GSM8K's worked solutions,
thinking blocks, ...). Each row: (response, ground truth, expected verdict, extractor).
"""

from __future__ import annotations

from tests.rewards.verdict_cases import GSM8K_SOLUTION, A

LATER_CASES: list[tuple[str, str, bool, str]] = [
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
    # one $...$ segment said again is one value, not two candidates; anything else between them is not a list
    (A + "Answer: $34$ and $34$", "34", True, "answer"),
    (A + "Answer: $34$, $34$.", "34", True, "answer"),
    (A + "Answer: $34$ or $34$", "34", True, "any"),
    (A + "Answer: $34$ and $34$", "35", False, "answer"),
    (A + "Answer: $34$ - $34$", "34", False, "answer"),
    (A + "Answer: $34$ and $35$", "34", False, "answer"),
    (A + "Answer: $34$ and $34$ (or 35)", "34", False, "answer"),
    (A + "Answer: $3$ and $3$", "3, 3", True, "answer"),
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
    # thinking again after an answer: the final answer is after the last thinking block (here none)
    ("<think>\nx\n</think>\nAnswer: 34\n<think>\nactually Answer: 35\n</think>\n", "35", False, "answer"),
    ("<think>\nx\n</think>\nAnswer: 35\n<think>\nno, 34\n</think>\nAnswer: 34", "34", True, "answer"),
    ("<think>\nx\n</think>\nAnswer: 35\n<think>\nno, 34\n</think>\nAnswer: 34", "35", False, "answer"),
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
    (A + "Answer: 3 1/2", "31/2", False, "answer"),  # the space parts two numbers (was right: 31/2 alike)
    (A + "\\boxed{3 1/2}", "31/2", False, "boxed"),
    (A + "Answer: 31/2", "3 1/2", False, "answer"),
    # --- LaTeX's decimal comma is one number (34{,}5 was paid for the list 34, 5) ---
    (A + "\\boxed{34{,}5}", "34, 5", False, "boxed"),
    (A + "Answer: 34{,}5", "34.5", True, "answer"),
    (A + "Answer: 3{,}14", "3.14", True, "answer"),
    (A + "Answer: 1{,}234", "1234", True, "answer"),
    (A + "\\boxed{0{,}125}", "125", False, "boxed"),  # after a lone 0, a decimal comma (was right)
    (A + "Answer: 0,125", "125", False, "answer"),  # no thousands group starts with 0 (was right)
    (A + "\\boxed{0{,}5}", "\\frac12", True, "boxed"),
    (A + "\\boxed{0{,}125}", "1/8", True, "boxed"),
    (A + "\\boxed{-0{,}125}", "-0.125", True, "boxed"),
    (A + "Answer: 0{,}333333", "1/3", True, "answer"),
    (A + "\\boxed{1{,}\\,2}", "1, 2", True, "boxed"),  # a space after it: a list's comma
    (A + "Answer: 1 000/3", "1000/3", True, "answer"),  # thousands set apart by spaces (in an expression too)
    (A + "\\boxed{2 000 \\pi}", "2000\\pi", True, "boxed"),
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
    (A + "So \\boxed{\\mathbf{1{,}000}}", "1000", True, "boxed"),
    (A + "Answer: \\textbf{1,000}", "1000", True, "answer"),
    (A + "Answer: \\mathbf{4.5}", "4.5", True, "answer"),
    (A + "Answer: \\mathbf{16.0}", "16", True, "answer"),
    (A + "Answer: \\mathbf{\\frac{1}{2}}", "\\frac12", True, "answer"),
    (A + "So \\boxed{\\mathbf{1{,}000}}", "999", False, "boxed"),
    (A + "Answer: \\text{1{,}358}", "1358", True, "answer"),
    (A + "Answer: \\text{a} and \\text{b}", "a", False, "answer"),
    # --- a sign spaced from a grouped number, and grouping by thin spaces (was wrong) ---
    (A + "So \\boxed{- 1,000}", "-1000", True, "boxed"),
    (A + "So \\boxed{- 1{,}000}", "-1000", True, "boxed"),
    (A + "Answer: $x = - 1{,}000$", "-1000", True, "answer"),
    (A + "So \\boxed{- 12 \\pmod{1000}}", "-12", True, "boxed"),
    (A + "So \\boxed{- 1,000}", "1000", False, "boxed"),
    (A + "Answer: 1\\,000.5", "1000.5", True, "answer"),
    (A + "Answer: 1\\,000.5", "1000", False, "answer"),
    (A + "Answer: \\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}",
     "\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}", True, "answer"),
    # --- scientific notation math-verify read as Euler's number times digits: 1e3 was 3e (was right) ---
    (A + "Answer: $3e$", "1e3", False, "answer"),
    (A + "Answer: $1e3$", "10^3", True, "answer"),  # (was wrong)
    (A + "Answer: $2.5e-3$", "\\frac{1}{400}", True, "answer"),  # (was wrong)
    (A + "Answer: $2e$", "2e", True, "answer"),  # Euler's number itself is left alone
    # --- a minus glued to what it subtracts from is not the box's sign (was -3: wrong either way) ---
    (A + "So x = 1-\\boxed{3}", "3", True, "boxed"),
    (A + "So x = 1-\\boxed{3}", "-3", False, "boxed"),
    (A + "So x = a-\\boxed{3}", "-3", False, "boxed"),
    (A + "So x = -\\boxed{3}", "-3", True, "boxed"),
    (A + "So x =-\\boxed{3}", "-3", True, "boxed"),
    # --- boundaries of the number forms and remarks (a third mutation audit found them untested) ---
    (A + "Answer: 1234,567", "1234567", False, "answer"),  # a first group of 4 digits is no thousands grouping
    (A + "Answer: 12.5%", "12.5", True, "answer"),  # a percent sign is a suffix
    (A + "Answer: \\frac{1}{2} (abc)", "\\frac{1}{2}", False, "answer"),  # one token is not a remark in words
    (A + "Answer: \\frac{1}{2} (or 0.5, i.e. 0.50)", "\\frac{1}{2}", True, "answer"),  # two restatements
    (A + "Answer: \\frac{1}{3}, or about 0.33 or 0.5", "\\frac{1}{3}", False, "answer"),  # a second value
    (A + "Answer: \\frac{1}{2} \\text{ million}", "0.5 \\text{ million}", True, "answer"),  # the same scale word
    (A + "Answer: (E) 12", "E", True, "answer"),  # choice E, as A-D
    # --- a box that only wraps another states the inner box's content (was \\boxed{1}: a list read wrong) ---
    (A + "Final: \\boxed{\\boxed{1}}, \\boxed{2}", "1, 2", True, "boxed"),
    (A + "Final: \\boxed{ \\boxed{1} }, \\boxed{2}", "1, 2", True, "boxed"),
    (A + "Final: \\boxed{\\boxed{1}}, \\boxed{2}", "1, 3", False, "boxed"),
    (A + "Final: \\boxed{\\boxed{1}+1}, \\boxed{2}", "1, 2", False, "boxed"),  # more than a box: not unwrapped
]
