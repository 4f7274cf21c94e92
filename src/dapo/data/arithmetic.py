"""The built-in task: multi-digit arithmetic with a short step-by-step trace.

A problem is a completion prompt such as ``"123+4567="``; the reference solution is a trace of
column operations followed by the final line the verifier reads::

    3+7=10 2+6+1=9 1+5=6 0+4=4
    Answer: 4690

Addition works column by column from the right, showing the carry-in (``+1``) when there is
one; the last column's full sum gives the leading digits and each earlier column its last digit.
Subtraction borrows (``13-5=8 12-4-1=7 1-0-1=0``), with a ``-(b-a)`` prefix when the result is
negative. Multiplication lists the partial products per digit of the second operand, then adds
them up. Answers are plain integers, so the same verifier that scores real math data scores
these (``Answer: N`` on the last line).

Splits: a problem belongs to the held-out split when a hash of its text falls in a fixed
1-in-``EVAL_SHARE_DENOMINATOR`` bucket, so train and eval are disjoint by construction whatever
the sizes, digit ranges or seeds. Each split is drawn from its own seeded stream, so the eval set
does not change when the training size does. Problems within a split are distinct.
"Held out" means the problem's text: the commuted twin (``b+a`` for ``a+b``) has its own hash,
and every one-digit sum is a column step of the training traces. With the default sizes (1-3
digit addition, 20000 training problems) 73 of the 200 held-out problems have their twin in
training, mostly one- and two-digit ones, whose buckets training covers almost entirely.
Held-out accuracy measures running the column procedure on operand pairs whose text was not
trained, not answers never seen.

Built-in problems are ``verbatim``: the prompt is used as it is, with no
instruction wrapper and no chat template (see :class:`dapo.data.prompts.PromptEncoder`).
"""

from __future__ import annotations

import hashlib
import random

from dapo.data.records import Problem

# The task's own seed, independent of the trainer seed, so the held-out set never changes.
TASK_SEED = 20250317
DATA_SOURCE = "builtin_arithmetic"
EVAL_SHARE_DENOMINATOR = 10  # about 1 problem in 10 is reserved for the held-out split
OPERATORS = ("+", "-", "*")
_MAX_ATTEMPTS_PER_PROBLEM = 50


def _prompt_uid(prompt: str) -> str:
    return hashlib.sha1(prompt.encode()).hexdigest()[:16]


def split_of(a: int, op: str, b: int) -> str:
    """ "eval" for the hash-selected held-out bucket of problems, else "train"."""
    digest = hashlib.sha256(f"{a}{op}{b}".encode()).digest()
    return "eval" if int.from_bytes(digest[:8], "big") % EVAL_SHARE_DENOMINATOR == 0 else "train"


def make_arithmetic_problems(
    n: int,
    split: str,
    min_digits: int = 1,
    max_digits: int = 4,
    ops: list[str] | None = None,
    seed: int = TASK_SEED,
) -> list[Problem]:
    """``n`` distinct problems of ``split`` ("train" or "eval"), deterministic for the arguments.

    Each operand's digit count is drawn uniformly from [min_digits, max_digits], then the
    operand uniformly among numbers with that many digits (0-9 for one digit).
    Raises ValueError when the digit range holds fewer than ``n`` distinct problems.
    """
    ops = list(ops) if ops else ["+"]
    _check_arguments(n, split, min_digits, max_digits, ops)
    rng = random.Random(f"{seed}/{split}/{min_digits}-{max_digits}/{''.join(ops)}")
    problems: list[Problem] = []
    seen: set[str] = set()
    if n == 0:
        return problems
    for _ in range(_MAX_ATTEMPTS_PER_PROBLEM * n + 1000):
        op = rng.choice(ops)
        a, b = _operand(rng, min_digits, max_digits), _operand(rng, min_digits, max_digits)
        prompt = f"{a}{op}{b}="
        if prompt in seen or split_of(a, op, b) != split:
            continue
        seen.add(prompt)
        problems.append(
            Problem(
                uid=_prompt_uid(prompt),
                prompt=prompt,
                ground_truth=str(_evaluate(a, op, b)),
                data_source=DATA_SOURCE,
                extra={"a": a, "op": op, "b": b, "split": split},
                verbatim=True,
            )
        )
        if len(problems) == n:  # checked after each find: the n-th may come on the last attempt
            return problems
    raise ValueError(
        f"only {len(problems)} distinct {split} problems found with {min_digits}-{max_digits} digit "
        f"operands and ops {ops}; ask for fewer than {n} or widen the digit range"
    )


def _check_arguments(n: int, split: str, min_digits: int, max_digits: int, ops: list[str]) -> None:
    if split not in ("train", "eval"):
        raise ValueError(f"split={split!r} must be 'train' or 'eval'")
    if n < 0:
        raise ValueError(f"n={n} must be >= 0")
    if not 1 <= min_digits <= max_digits:
        raise ValueError(f"digit range {min_digits}-{max_digits} must satisfy 1 <= min <= max")
    bad = [op for op in ops if op not in OPERATORS]
    if bad:
        raise ValueError(f"unsupported operators {bad}; choose from {list(OPERATORS)}")


def _operand(rng: random.Random, min_digits: int, max_digits: int) -> int:
    digits = rng.randint(min_digits, max_digits)
    low = 0 if digits == 1 else 10 ** (digits - 1)
    return rng.randint(low, 10**digits - 1)


def _evaluate(a: int, op: str, b: int) -> int:
    return a + b if op == "+" else a - b if op == "-" else a * b


def solution_text(problem: Problem) -> str:
    """The reference response: the step-by-step trace, a newline, and ``Answer: N`` (no EOS)."""
    a, op, b = problem.extra["a"], problem.extra["op"], problem.extra["b"]
    trace = {"+": addition_trace, "-": subtraction_trace, "*": multiplication_trace}[op](a, b)
    return f"{trace}\nAnswer: {_evaluate(a, op, b)}"


def _digits_low_first(a: int, b: int) -> list[tuple[int, int]]:
    width = max(len(str(a)), len(str(b)))
    return list(
        zip(map(int, reversed(str(a).zfill(width))), map(int, reversed(str(b).zfill(width))))
    )


def addition_trace(a: int, b: int) -> str:
    """Column sums from the right, e.g. 123+4567 -> "3+7=10 2+6+1=9 1+5=6 0+4=4"."""
    steps, carry = [], 0
    for x, y in _digits_low_first(a, b):
        total = x + y + carry
        steps.append(f"{x}+{y}{'+1' if carry else ''}={total}")
        carry = total // 10
    return " ".join(steps)


def subtraction_trace(a: int, b: int) -> str:
    """Column differences with borrows, e.g. 123-45 -> "13-5=8 12-4-1=7 1-0-1=0"."""
    if a < b:
        return f"-({b}-{a}) " + subtraction_trace(b, a)
    steps, borrow = [], 0
    for x, y in _digits_low_first(a, b):
        needs_borrow = x - y - borrow < 0
        top = x + 10 if needs_borrow else x
        steps.append(f"{top}-{y}{'-1' if borrow else ''}={top - y - borrow}")
        borrow = int(needs_borrow)
    return " ".join(steps)


def multiplication_trace(a: int, b: int) -> str:
    """Partial products per digit of b, then their running sum, e.g. 123*45 ->
    "123*5=615 123*40=4920 615+4920=5535"."""
    partials = [a * int(d) * 10**place for place, d in enumerate(reversed(str(b)))]
    steps = [
        f"{a}*{int(d) * 10**place}={p}"
        for place, (d, p) in enumerate(zip(reversed(str(b)), partials))
    ]
    running = partials[0]
    for partial in partials[1:]:
        steps.append(f"{running}+{partial}={running + partial}")
        running += partial
    return " ".join(steps)
