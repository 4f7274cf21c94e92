"""How the driver submits a call to the policy ranks and finds which died: all ranks or none get a
call (a signal while submitting waits; an error part-way marks the group broken), inputs that no
rank could take are refused before any rank is called, and the ranks that no longer answer are
asked together, under one deadline. The ranks are stand-ins, Ray actors only where Ray's waiting is
what is tested."""

from __future__ import annotations

import os
import signal
import time
from types import SimpleNamespace

import pytest

from dapo.trainer import ray_faults
from dapo.trainer.ray_policy import RayPolicyGroup
from tests.trainer.test_trainer_policy import make_samples


class RayTaskError(Exception):
    pass


class RayActorError(Exception):
    pass


FAKE_RAY = SimpleNamespace(get=lambda refs: list(refs),
                           exceptions=SimpleNamespace(RayTaskError=RayTaskError, RayActorError=RayActorError))


class Method:
    def __init__(self, rank: FakeRank, name: str) -> None:
        self.rank, self.name = rank, name

    def remote(self, *args):
        self.rank.calls.append(self.name)
        if self.rank.on_call is not None:
            self.rank.on_call()
        return 0.5  # a learning rate, as end_step returns


class FakeRank:
    """A rank handle that records the calls submitted to it (``on_call`` runs as one is)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.on_call = None

    def __getattr__(self, name: str) -> Method:
        return Method(self, name)


def fake_group(world_size: int) -> RayPolicyGroup:
    group = object.__new__(RayPolicyGroup)
    group._ray, group.ranks, group.world_size = FAKE_RAY, [FakeRank() for _ in range(world_size)], world_size
    group.sequence_parallel_size = 1
    return group


@pytest.fixture
def ctrl_c_raises():
    """Python's own Ctrl-C handler for the test: a test run started in the background of a shell
    without job control (`cmd &` in a script) inherits SIGINT ignored, and the deferral then
    rightly puts back "ignored" and raises nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_an_interrupt_while_submitting_is_raised_once_every_rank_has_the_call(ctrl_c_raises):
    """Before, a Ctrl-C between two ranks' submissions left rank 0 alone in the call's collectives."""
    import threading

    assert threading.current_thread() is threading.main_thread()
    group = fake_group(3)
    group.ranks[0].on_call = lambda: os.kill(os.getpid(), signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        group.end_step()
    assert [rank.calls for rank in group.ranks] == [["end_step"]] * 3
    assert group.broken is None  # the ranks are in step
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is back


def test_a_second_interrupt_while_submitting_is_raised_at_once_and_marks_the_group_broken(ctrl_c_raises):
    """(a submission that hangs must still be interruptible): the ranks are then out of step."""
    group = fake_group(3)
    group.ranks[0].on_call = group.ranks[1].on_call = lambda: os.kill(os.getpid(), signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        group.end_step()
    assert [rank.calls for rank in group.ranks] == [["end_step"], ["end_step"], []]
    assert group.broken and "KeyboardInterrupt while submitting" in group.broken
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_error_part_way_through_submitting_marks_the_group_broken():
    """(rank 1's arguments would not serialise): rank 0 may wait in a collective for the others,
    so a further call raises at once instead of queueing behind it."""
    group = fake_group(2)

    def unpicklable() -> None:
        raise TypeError("cannot pickle this rank's arguments")

    group.ranks[1].on_call = unpicklable
    with pytest.raises(TypeError, match="cannot pickle"):
        group.end_step()
    assert group.broken and "only 1 of the 2 rank(s)" in group.broken
    with pytest.raises(RuntimeError, match="no further call"):
        group.end_step()
    assert [rank.calls for rank in group.ranks] == [["end_step"], ["end_step"]]  # nothing more submitted


@pytest.mark.parametrize("bad", ["no old log-probs", "normaliser of another batch"])
def test_update_inputs_no_rank_could_take_are_refused_before_any_rank_is_called(bad):
    """Before, the ranks checked them: one rank raised while the others went on into the update's
    collectives, and the run stopped only after the grace (RANK_DEATH_GRACE_S)."""
    import torch

    group = fake_group(2)
    samples = make_samples(torch.Generator().manual_seed(0))
    if bad == "no old log-probs":
        with pytest.raises(ValueError, match="off-policy update needs every sample's old_logprobs"):
            group.update(samples)
    else:
        for sample in samples:
            sample.old_logprobs = [0.0] * len(sample.response_ids)
        with pytest.raises(ValueError, match="global counts .* are below this rank's share"):
            group.update(samples, num_tokens=3.0, num_seqs=1.0)
    assert [rank.calls for rank in group.ranks] == [[], []]


# 9 s of Ray; the default suite keeps a dead rank named at once (test_trainer_ray)
@pytest.mark.slow
def test_the_ranks_that_do_not_answer_are_asked_together_under_one_deadline(monkeypatch):
    """Before, each rank was asked in turn with 30 s of its own: every blocked rank (a peer left in
    a collective) added 30 s before the run stopped; now all of them together take one deadline."""
    import ray

    @ray.remote(num_cpus=0)
    class Rank:
        def ready(self) -> bool:
            return True

        def block(self) -> None:  # as a rank blocked in a collective
            time.sleep(300)

    monkeypatch.setattr(ray_faults, "RANK_PROBE_TIMEOUT_S", 3.0)
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        group = object.__new__(RayPolicyGroup)
        group._ray, group.ranks = ray, [Rank.remote() for _ in range(4)]
        ray.get([rank.ready.remote() for rank in group.ranks])
        group.ranks[1].block.remote()
        group.ranks[3].block.remote()
        ray.kill(group.ranks[2])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # ray.kill is asynchronous: until rank 2 is dead
            try:
                ray.get(group.ranks[2].ready.remote(), timeout=60)
            except ray.exceptions.RayActorError:
                break
            time.sleep(0.1)
        started = time.monotonic()
        assert group._dead_ranks(RuntimeError("a collective failed")) == "policy rank 1, 2, 3 (Ray actor PolicyRank)"
        assert time.monotonic() - started < 3.0 + 4.0  # one deadline, not one per blocked rank
    finally:
        ray.shutdown()


def test_a_sigterm_while_the_driver_waits_on_the_ranks_ends_as_the_cli_handler_says():
    """Ray's get runs the signal handlers itself and raised SystemExit(1) in place of the CLI's
    SystemExit(143): a multi-rank run stopped by SIGTERM during the ranks' set-up, generation or
    update exited with status 1 and without "stopped by SIGTERM". The handler's own exit now
    arrives, and the handler that replaced itself (a second signal ends the process) stays so."""
    import threading

    import ray

    def unwind(signum: int, _frame: object) -> None:  # the dapo CLI's (exit_on_termination)
        signal.signal(signum, signal.SIG_DFL)
        raise SystemExit(128 + signum)

    @ray.remote(num_cpus=0)
    class Rank:
        def ready(self) -> bool:
            return True

        def work(self) -> None:
            time.sleep(30)

    ray.init(num_cpus=1, include_dashboard=False)
    previous = signal.signal(signal.SIGTERM, unwind)
    try:
        group = object.__new__(RayPolicyGroup)
        group._ray, group.ranks = ray, [Rank.remote()]
        assert group._get([group.ranks[0].ready.remote()]) == [True]
        assert signal.getsignal(signal.SIGTERM) is unwind  # put back after a call
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
        with pytest.raises(SystemExit) as stopped:
            group._get([group.ranks[0].work.remote()])
        assert stopped.value.code == 128 + signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)
        ray.shutdown()


def failing_group(cause: BaseException) -> tuple[RayPolicyGroup, RayTaskError]:
    """Two stand-in ranks whose every call fails with ``cause``, as Ray raises a rank's error: a
    RayTaskError holding it as ``cause``, whose text is the rank's whole remote traceback."""
    error = RayTaskError("\x1b[36mray::PolicyRank.save_checkpoint()\x1b[39m (pid=1, ip=10.0.0.1)\n"
                         "Traceback (most recent call last):\n  ...\n" + repr(cause))
    error.cause = cause

    def get(refs):
        raise error

    group = fake_group(2)
    group._ray = SimpleNamespace(get=get, wait=lambda refs, num_returns, timeout: (list(refs), []),
                                 exceptions=FAKE_RAY.exceptions)
    return group, error


def test_a_ranks_os_error_or_user_error_is_raised_as_the_rank_raised_it():
    """A rank's FileNotFoundError (a checkpoint without policy/.metadata) reached the CLI as Ray's
    dual-class stand-in: an OSError without strerror, so `dapo train: error:` printed Ray's whole
    remote traceback, colour codes and all, instead of one line. The rank's own error is raised
    now (chained to Ray's, which --debug shows); any other error stays Ray's."""
    from dapo.errors import UserError

    cause = FileNotFoundError("/runs/x/checkpoints/step-000004 holds no sharded policy state (policy/.metadata)")
    group, error = failing_group(cause)
    with pytest.raises(FileNotFoundError) as raised:
        group.load_checkpoint("/runs/x/checkpoints/step-000004", {"num_nonfinite_skipped": 0})
    assert raised.value is cause and raised.value.__cause__ is error

    user = UserError("a rank's set-up refused the model")
    group, _ = failing_group(user)
    with pytest.raises(UserError) as refused:
        group.end_step()
    assert refused.value is user

    group, error = failing_group(RuntimeError("a bug on the rank"))
    with pytest.raises(RayTaskError) as bug:
        group.end_step()
    assert bug.value is error


def test_a_rank_that_cannot_write_its_checkpoint_part_reads_as_one_process_full_disk(tmp_path):
    """The driver's side of a rank's failed checkpoint write: the rank's OSError, as the group raises
    it, becomes "No space left on device (checkpoint step N not written; the earlier ones are
    kept)" in RunState.save, as one process's does, and the half-written checkpoint goes."""
    import errno

    from dapo.config import load_config
    from dapo.trainer.run_state import RunState

    full = OSError(errno.ENOSPC, "No space left on device", str(tmp_path))
    group, _ = failing_group(full)
    with pytest.raises(OSError) as raised:
        group.save_checkpoint(tmp_path, hf_export=True)
    assert raised.value is full
    state = RunState(load_config([], [f"output_dir={tmp_path / 'run'}"]))
    try:
        with pytest.raises(OSError, match=r"^\[Errno 28\] No space left on device \(checkpoint step 2 not written; "
                                          r"the earlier ones are kept\)") as named:
            state.save(2, {}, group, tokenizer=None, model_config_json="{}")
        assert named.value.__cause__ is full
        assert not [p for p in (tmp_path / "run" / "checkpoints").iterdir()]  # no half-written checkpoint left
    finally:
        state.close()


def rank_whose_dcp_save_fails(monkeypatch, failure: BaseException):
    """A PolicyRank whose DCP save fails as torch.distributed.checkpoint reports it on every rank:
    a CheckpointException holding each rank's error as it came through DCP's gather (a pickle,
    which keeps no __context__)."""
    import traceback

    from torch.distributed.checkpoint.api import CheckpointException

    from dapo.trainer import ray_rank

    def save_sharded_policy(directory, model, optimizer, scheduler):
        raise CheckpointException("CheckpointException ranks:dict_keys([0, 1])",
                                  {0: (failure, traceback.StackSummary()), 1: (failure, traceback.StackSummary())})

    monkeypatch.setattr(ray_rank, "save_sharded_policy", save_sharded_policy)
    rank = object.__new__(ray_rank.PolicyRank)
    rank.rank, rank.model, rank.policy = 0, None, SimpleNamespace(optimizer=None, scheduler=None)
    return rank


def test_a_full_disk_under_a_ranks_dcp_save_is_raised_as_no_space_left(monkeypatch, tmp_path):
    """A 2-rank run whose output_dir filled up mid-checkpoint stopped with a 117-line traceback
    ending "RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598"
    (torch.save's zip writer over the full disk; DCP's pickled failures keep no OSError), where
    one process says "No space left on device". The rank now raises the OSError: DCP's failure's
    own when it holds one, else what the directory's file system says."""
    import errno
    import shutil

    from torch.distributed.checkpoint.api import CheckpointException

    rank = rank_whose_dcp_save_fails(monkeypatch, PermissionError(errno.EACCES, "Permission denied", "/x/policy"))
    with pytest.raises(PermissionError) as denied:
        rank.save_checkpoint(str(tmp_path), hf_export=False)
    assert denied.value.filename == "/x/policy"

    rank = rank_whose_dcp_save_fails(monkeypatch, RuntimeError("[enforce fail at inline_container.cc:672] . "
                                                               "unexpected pos 704 vs 598"))
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=4096))  # the disk it filled
    with pytest.raises(OSError) as full:
        rank.save_checkpoint(str(tmp_path), hf_export=False)
    assert full.value.errno == errno.ENOSPC and full.value.filename == str(tmp_path)

    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=1 << 30))  # room: not the disk
    with pytest.raises(CheckpointException):
        rank.save_checkpoint(str(tmp_path), hf_export=False)
    assert list(tmp_path.iterdir()) == []  # the probe's file is gone


def test_a_stop_signal_during_a_submission_reaches_its_handler_once_every_rank_has_the_call():
    """SIGHUP (which the dapo CLI handles as SIGTERM) was not held back with SIGINT and SIGTERM: a
    hang-up between two ranks' submissions left one rank in a collective the others never joined."""
    import signal

    from dapo.trainer.ray_faults import STOP_SIGNALS, signals_deferred

    assert signal.SIGHUP in STOP_SIGNALS
    received: list[int] = []
    for signum in STOP_SIGNALS:
        previous = signal.signal(signum, lambda number, _frame: received.append(number))
        try:
            with signals_deferred():
                signal.raise_signal(signum)
                assert received.count(signum) == 0  # held back while the call is submitted
            assert received.count(signum) == 1
        finally:
            signal.signal(signum, previous)


@pytest.mark.parametrize("held_outside", [True, False])
def test_a_second_signal_is_delivered_at_once_through_the_deferrals_around_it(held_outside):
    """A checkpoint's write (a deferral of its own) inside a step that already holds a SIGTERM
    (checkpoint.on_signal=finish_step): the second SIGTERM, in the write, waited for a third. And two
    in the inner one were held again by the outer one."""
    import signal

    from dapo.trainer.ray_faults import signals_deferred

    received: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda number, _frame: received.append(number))
    try:
        with signals_deferred() as outer:
            if held_outside:
                signal.raise_signal(signal.SIGTERM)
                assert outer == [signal.SIGTERM] and received == []
            with signals_deferred() as inner:
                signal.raise_signal(signal.SIGTERM)
                if not held_outside:
                    assert inner == [signal.SIGTERM] and received == []
                    signal.raise_signal(signal.SIGTERM)
                assert received == [signal.SIGTERM]  # now, not at either block's end
                assert inner == [] and outer == []
        assert received == [signal.SIGTERM]  # nothing more held
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_off_the_main_thread_a_deferral_holds_nothing():
    """(a trainer driven from a thread: a non-empty list would stop it after every step)"""
    import threading

    from dapo.trainer.ray_faults import signals_deferred

    held = []

    def run():
        with signals_deferred() as inside:
            held.append(list(inside))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    assert held == [[]]


def test_an_error_leaving_a_deferral_is_raised_as_itself_not_as_the_signal_it_held():
    """A SIGTERM held through a step whose rank then died ended the run "stopped by SIGTERM", the
    rank's death unsaid."""
    import signal

    from dapo.trainer.ray_faults import signals_deferred

    def unwind(signum, _frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, unwind)
    try:
        with pytest.raises(RuntimeError, match="rank 1 died"), signals_deferred():
            signal.raise_signal(signal.SIGTERM)
            raise RuntimeError("rank 1 died")
        assert signal.getsignal(signal.SIGTERM) is unwind
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_closing_twice_stops_nothing_the_second_time():
    """A notebook's trainer.close() after train() (which closed it) neither starts a new local Ray
    (ray.kill of ranks that are gone did) nor stops one another trainer started since."""
    calls = []
    initialized = [True]
    fake = SimpleNamespace(is_initialized=lambda: initialized[0], kill=lambda rank: calls.append(("kill", rank)),
                           shutdown=lambda: (calls.append(("shutdown",)), initialized.__setitem__(0, False)))
    group = object.__new__(RayPolicyGroup)
    group._ray, group.ranks, group.node_groups, group._started_ray = fake, ["rank0", "rank1"], [], True
    group.close()
    assert calls == [("kill", "rank0"), ("kill", "rank1"), ("shutdown",)]
    group.close()  # Ray is down: nothing to look for
    initialized[0] = True  # another trainer's local Ray
    group.close()
    assert calls == [("kill", "rank0"), ("kill", "rank1"), ("shutdown",)]
