"""`dapo` stopped by a signal, Ctrl-C or a closed pipe: what it says, what it leaves running, and
the exit code a scheduler reads."""

import os
import signal

import pytest

from dapo.cli.main import main
from tests.rewards.test_rewards_pool import alive, start_scoring_program

TERMINATED = """
import sys
from dapo.cli.main import exit_on_termination
from dapo.rewards.pool import WorkerPool
exit_on_termination()
pool = WorkerPool(1, [sys.argv[1] + ":f"], timeout_s=300.0)
try:
    pool.run([("fn", 0, "response", "1", {})])
finally:
    pool.close()
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_to_the_commands_group_stops_what_reward_functions_started(tmp_path, signum):
    """Reward workers lead their own process groups, so a signal to the command's group (`timeout`,
    `kill -- -PGID`, a closed terminal) reaches the trainer alone: it must unwind and close them."""
    command, child = start_scoring_program(tmp_path, TERMINATED, start_new_session=True)
    try:
        os.killpg(command.pid, signum)
        assert command.wait(timeout=60) == 128 + signum
    finally:
        if command.poll() is None:
            os.killpg(command.pid, signal.SIGKILL)
    assert not alive(child)


def test_main_called_from_python_leaves_the_callers_signal_handlers(capsys):
    """(else a SIGTERM to a notebook or a pytest session that called main() fails one cell or
    test and goes on)"""
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGHUP)}
    assert main(["config", "default"]) == 0
    assert {signum: signal.getsignal(signum) for signum in before} == before


def train_raising(monkeypatch, error: BaseException) -> None:
    """`dapo train`'s Trainer stands in for one whose train() raises ``error``."""
    import dapo.trainer

    class Raising:
        def __init__(self, cfg):
            pass

        def train(self):
            raise error

    monkeypatch.setattr(dapo.trainer, "Trainer", Raising)


def raised_while_handling(stop: BaseException) -> RuntimeError:
    """What torch.save raises when a Ctrl-C lands in its writer: an error of its own, the
    KeyboardInterrupt its context."""
    try:
        try:
            raise stop
        except BaseException:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 6061760 vs 6061648")  # noqa: B904 (as torch raises it: an implicit context)
    except RuntimeError as error:
        return error


@pytest.mark.parametrize("stop, code, says", [
    (KeyboardInterrupt(), 130, "stopped by Ctrl-C; no checkpoint in"),
    (SystemExit(128 + signal.SIGTERM), 143, "stopped by SIGTERM; the same command resumes from its newest checkpoint"),
    (raised_while_handling(KeyboardInterrupt()), 130, "stopped by Ctrl-C; no checkpoint in"),  # in a checkpoint write
])
def test_an_interrupted_train_says_where_it_goes_on_instead_of_a_traceback(tmp_path, capsys, monkeypatch, stop, code,
                                                                           says):
    train_raising(monkeypatch, stop)
    if code == 143:
        (tmp_path / "checkpoints" / "step-000004").mkdir(parents=True)
        (tmp_path / "checkpoints" / "step-000004" / "trainer_state.pt").write_bytes(b"")
    assert main(["train", f"output_dir={tmp_path}"]) == code
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    if code == 143:
        assert err.rstrip().endswith(str(tmp_path / "checkpoints" / "step-000004"))


def test_an_error_that_no_signal_caused_is_raised_as_it_is(tmp_path, monkeypatch):
    train_raising(monkeypatch, RuntimeError("a real failure"))
    with pytest.raises(RuntimeError, match="a real failure"):
        main(["train", f"output_dir={tmp_path}"])


def test_output_piped_into_a_reader_that_stops_early_ends_quietly():
    """`dapo config --explain | head -3`: before, exit 2 and "dapo config: error: Broken pipe"."""
    import subprocess
    import sys

    program = "import sys; from dapo.cli.main import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", program, "config", "--explain"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # as head does once it has its lines: here before the first
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and "error" not in stderr.lower(), stderr


def test_ctrl_c_outside_the_training_loop_stops_without_a_traceback(tmp_path, capsys, monkeypatch):
    """`dapo eval` and `dapo ablate`, or `dapo train` while it imports and checks the run, printed
    a KeyboardInterrupt traceback: only the training loop caught it."""
    import dapo.cli.main as cli

    def interrupted(ns):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_eval", interrupted)
    assert main(["eval", str(tmp_path)]) == 130
    assert capsys.readouterr().err == "dapo eval: stopped by Ctrl-C\n"
