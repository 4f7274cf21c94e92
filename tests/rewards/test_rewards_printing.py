"""What reward functions print is captured in the workers (bounded), not streamed into the
trainer's output; per-scorer failures are named on each result."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dapo.config.schema import RewardConfig, RewardFunctionSpec
from dapo.rewards import RewardScorer
from dapo.rewards.pool import WorkerPool

NOISY = '''
import sys

def noisy(response, ground_truth, extra):
    print("x" * 1_000_000)
    sys.stderr.write("e" * 1000)
    return 1.0

def broken(response, ground_truth, extra):
    raise KeyError("no such field")

def below_python(response, ground_truth, extra):
    import ctypes, faulthandler, os, subprocess
    print("python", flush=True)
    os.write(1, b"fd 1\\n")
    ctypes.CDLL(None).printf(b"C printf\\n")  # C stdio: buffered until flushed
    subprocess.run([sys.executable, "-c", "print('child')"], stdout=sys.stdout, stderr=sys.stderr, check=True)
    faulthandler.dump_traceback(sys.stderr)  # needs sys.stderr.fileno()
    os.write(2, b"e" * 100_000)
    return 1.0
'''


@pytest.fixture()
def functions_file(tmp_path: Path) -> Path:
    path = tmp_path / "noisy_rewards.py"
    path.write_text(NOISY)
    return path


def test_a_function_printing_megabytes_does_not_flood_the_trainer(functions_file, capfd, caplog):
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{functions_file}:noisy")], num_workers=1, timeout_s=20.0)
    with caplog.at_level(logging.WARNING, logger="dapo.rewards"), RewardScorer(cfg) as scorer:
        results = scorer.score(["Answer: 1"] * 8, ["1"] * 8)
        results += scorer.score(["Answer: 2"] * 8, ["1"] * 8)
    assert [r.score for r in results] == [2.0] * 8 + [0.0] * 8  # verifier +-1, plus noisy's 1.0
    out, err = capfd.readouterr()
    assert len(out) + len(err) < 20_000, "a reward function's prints reached the trainer's terminal"
    shown = [r for r in caplog.records if "printed while scoring" in r.getMessage()]
    assert len(shown) == 1 and "2000 of 1001001 characters" in shown[0].getMessage()
    assert scorer.printed_chars == {"noisy": 16 * 1_001_001}


def test_each_result_names_the_scorers_that_failed_on_it(functions_file):
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{functions_file}:broken")], num_workers=1)
    with RewardScorer(cfg) as scorer:
        results = scorer.score(["Answer: 1", "Answer: 3"], ["1", "1"])
    assert [r.failed for r in results] == [["broken"], ["broken"]]
    assert all(r.error for r in results) and [r.acc for r in results] == [True, False]  # the verifier's
    assert scorer.first_failure["broken"] == "broken raised KeyError: 'no such field' (the whole traceback is logged above)"


def test_output_written_below_python_is_captured_and_a_real_fileno_is_there(functions_file, capfd, caplog):
    """os.write(1, ...), C printf, a subprocess given sys.stdout: they reached the trainer's
    terminal, and sys.stdout.fileno() raised (subprocess and faulthandler need it)."""
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{functions_file}:below_python")], num_workers=1,
                       timeout_s=60.0)
    with caplog.at_level(logging.WARNING, logger="dapo.rewards"), RewardScorer(cfg) as scorer:
        results = scorer.score(["Answer: 1"] * 2, ["1"] * 2)
    assert [r.score for r in results] == [2.0, 2.0] and not any(r.error for r in results)
    out, err = capfd.readouterr()
    assert "fd 1" not in out + err and "child" not in out + err and "e" * 1000 not in out + err
    [shown] = [r.getMessage() for r in caplog.records if "printed while scoring" in r.getMessage()]
    assert shown.index("python\nfd 1\n") < shown.index("child\n")  # in the order written
    assert "C printf" in shown and "most recent call first" in shown  # (C stdio's buffer flushed)
    assert 2 * 100_000 < scorer.printed_chars["below_python"] < 2 * 110_000


FLOOD = '''
import os

def flood(response, ground_truth, extra):
    """300 MB to fd 1, as a program that inherits it and prints in a loop would; the largest the
    capture file grew to, in MB."""
    import time
    os.write(1, b"start\\n")
    largest = 0
    for _ in range(300):
        os.write(1, b"y" * (1 << 20))
        largest = max(largest, os.fstat(1).st_size)
        time.sleep(0.005)
    return largest / (1 << 20)
'''


def assert_flood_bounded(tmp_path, source: str) -> None:
    """``source``'s flood() prints 300 MB below Python: its capture stays under 100 MB, keeps its
    head, and counts what was cut."""
    (tmp_path / "floods.py").write_text(source)
    (tmp_path / "flood_loop.py").write_text(FLOOD)  # (FLOOD_HOLDING_THE_GIL runs it as a program)
    pool = WorkerPool(1, [f"{tmp_path / 'floods.py'}:flood"], timeout_s=120.0)
    try:
        [(kind, (largest_mb, *_))] = pool.run([("fn", 0, "response", "1", {})])
        head, total = pool.outputs[0]
    finally:
        pool.close()
    assert kind == "ok" and largest_mb < 100, largest_mb
    assert head.startswith("start\nyyy") and len(head) == 2000
    assert 150 << 20 < total <= (300 << 20) + 6  # (what is written while the file is cut is not counted)


def test_output_written_below_python_is_bounded_on_disk(tmp_path):
    """What a program printed below Python went to the capture file whole, however much it was:
    300 MB on disk (or in a tmpfs's memory) for 300 MB printed. Now it is cut back to its head
    past a few MB, and counted."""
    assert_flood_bounded(tmp_path, FLOOD)


FLOOD_HOLDING_THE_GIL = '''
import ctypes, os, shlex, sys

# FLOOD's flood() (flood_loop.py, beside this file) run as a program: its largest capture in MB
CHILD = ("import sys; sys.path.insert(0, sys.argv[1]); from flood_loop import flood; "
         "raise SystemExit(min(255, int(flood(None, None, None))))")

def flood(response, ground_truth, extra):
    """FLOOD's 300 MB, written by a program run from C code that holds the GIL meanwhile (PyDLL
    does not release it, as a C extension that calls system() need not): the largest the capture
    file grew to, in MB (at most 255)."""
    here = os.path.dirname(os.path.abspath(__file__))
    command = f"{shlex.quote(sys.executable)} -c {shlex.quote(CHILD)} {shlex.quote(here)}"
    status = ctypes.PyDLL(None).system(command.encode())
    return float(os.waitstatus_to_exitcode(status))
'''


def test_output_is_bounded_on_disk_while_c_code_holds_the_workers_gil(tmp_path):
    """The cap was held by a thread of the worker, which C code holding the GIL stops: the file
    took all 300 MB. Now the keeper, a process of its own, holds it."""
    assert_flood_bounded(tmp_path, FLOOD_HOLDING_THE_GIL)


LEAVES_A_PRINTER = '''
import os, threading, time

def leaves_a_printer(response, ground_truth, extra):
    """Starts (once a worker) a thread that prints every 10 ms, through Python and below it, and
    returns at once: most of what it prints comes between items."""
    if not any(t.name == "printer" for t in threading.enumerate()):
        def loop():
            while True:
                print("left running: print")
                os.write(2, b"left running: fd 2\\n")
                time.sleep(0.01)
        threading.Thread(target=loop, name="printer", daemon=True).start()
    return 1.0
'''


def test_what_a_thread_left_running_prints_between_items_is_captured(tmp_path, capfd, caplog):
    """Output written between items went to the trainer's terminal (fds 1 and 2, and sys.stdout,
    were the worker's own again as soon as an item ended)."""
    import time

    (tmp_path / "printers.py").write_text(LEAVES_A_PRINTER)
    cfg = RewardConfig(functions=[RewardFunctionSpec(path=f"{tmp_path / 'printers.py'}:leaves_a_printer")],
                       num_workers=1, timeout_s=30.0)
    with caplog.at_level(logging.WARNING, logger="dapo.rewards"), RewardScorer(cfg) as scorer:
        time.sleep(0.5)  # (the thread started in the smoke test, at start-up)
        results = scorer.score(["Answer: 1"] * 4, ["1"] * 4)
        time.sleep(0.5)
        results += scorer.score(["Answer: 1"] * 4, ["1"] * 4)
    out, err = capfd.readouterr()
    assert "left running" not in out + err, "a thread's prints between items reached the trainer's terminal"
    # (and the worker lived: print() holds sys.stdout unreferenced while it writes, and the worker
    # freed the task's own stream under a thread still printing there)
    assert [r.score for r in results] == [2.0] * 8 and not any(r.error for r in results)
    assert scorer.printed_between_items > 20 * len("left running: fd 2\n")
    [shown] = [r.getMessage() for r in caplog.records if "printed between items" in r.getMessage()]
    assert "left running: print\n" in shown and "left running: fd 2\n" in shown
