"""How the driver calls the policy ranks so that a fault never leaves it waiting forever.

Most calls on the ranks are collective (FSDP's all-gathers, the weight sync, DCP): every rank
must get the same calls in the same order. So the driver

- submits a call to all ranks or to none (:meth:`RankCalls._submit`): a SIGINT/SIGTERM/SIGHUP that
  arrives while it submits is delivered once all are submitted, and any other error part-way
  marks the group ``broken``;
- raises a rank's error as it happens (a ``UserError``, of any subclass, or ``OSError`` as the
  rank raised it, not Ray's wrapper; a UserError whose class cannot be rebuilt from its message
  comes as :class:`dapo.trainer.ray_rank.RankUserError`, with that message), naming a dead rank as the likelier cause, and marks the group ``broken`` when
  a rank may still be blocked in a collective another rank left (:meth:`RankCalls._get`): a
  further call raises instead of queueing behind it for good;
- while it waits on the ranks, a signal handler's own exception reaches the caller
  (:func:`handler_errors_kept`), not the SystemExit(1) Ray puts in its place.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from dapo.errors import UserError

RANK_DEATH_GRACE_S = 10.0  # after one rank's error, how long a rank's death may take to show
RANK_PROBE_TIMEOUT_S = 30.0  # how long a rank may take to answer when the driver asks which died
# The signals that stop a run (the dapo CLI handles SIGHUP as it does SIGTERM): deferred while a call
# is submitted to the ranks (signals_deferred), their handlers' exceptions kept while the driver
# waits on the ranks (handler_errors_kept).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
_HELD: list[list[int]] = []  # the signals each signals_deferred active now holds, outermost first
_NOW: list[int] = []  # a signal being delivered at once, through the deferrals that enclose its own


class PolicyRankDied(UserError, RuntimeError):
    """A policy rank's actor died (its process was killed, crashed or ran out of memory)."""


@contextlib.contextmanager
def signals_deferred(signums: tuple[int, ...] = STOP_SIGNALS, notice: str | None = None) -> Iterator[list[int]]:
    """The ``signums`` (SIGINT, SIGTERM and SIGHUP) that arrive inside are delivered (to the handlers
    they would have met) when it ends: a Ctrl-C between two ranks' submissions would leave one rank
    in a collective the others never join. A second signal, counting those that the deferrals it is
    nested in hold, is delivered at once (a submission that hangs can still be interrupted);
    ``notice``, printed at the first, says so to whoever pressed Ctrl-C. Yields the list of the
    signals held so far (empty: none). An error leaving the block drops them: the run stops with
    the error, which a signal would hide (a rank that died with the step, say). Only the main
    thread can set handlers; elsewhere nothing is deferred (Python runs signal handlers in the main
    thread, so no signal interrupts another thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    caught: list[int] = []
    previous: dict[int, Any] = {}

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        previous.clear()

    def defer(signum: int, _frame: Any) -> None:
        caught.append(signum)
        if _NOW or sum(map(len, _HELD)) > 1:  # asked twice (here, or here and in an enclosing deferral): now
            restore()
            caught.clear()
            _NOW.append(signum)  # past the deferrals this one is nested in too
            try:
                signal.raise_signal(signum)
            finally:
                _NOW.pop()
        elif notice is not None:
            with contextlib.suppress(OSError):  # (os.write: a print here could meet the main thread's own, reentrant)
                os.write(sys.stderr.fileno(), f"{notice}\n".encode())

    try:
        for signum in signums:
            # None: installed outside Python, could not be put back; SIG_IGN (nohup): nothing to defer
            if signal.getsignal(signum) not in (None, signal.SIG_IGN):
                previous[signum] = signal.signal(signum, defer)
        _HELD.append(caught)
        yield caught
    except BaseException:
        caught.clear()  # the block's own error stops the run, said as itself rather than as the signal
        raise
    finally:
        if _HELD and _HELD[-1] is caught:
            _HELD.pop()
        restore()
        for signum in caught:
            signal.raise_signal(signum)


@contextlib.contextmanager
def handler_errors_kept() -> Iterator[None]:
    """Inside, the exception a Python signal handler raises reaches the caller as raised. Ray's
    ``get`` and ``wait`` run the handlers themselves while they wait and put their own exception
    in its place, SystemExit(1) for any SystemExit, nothing chained: the dapo CLI's SIGTERM
    (SystemExit(143), "stopped by SIGTERM") ended a multi-rank run silently with exit status 1
    whenever it came while the driver waited on the ranks (their set-up, generation, updates).
    Only the main thread runs handlers; elsewhere nothing changes. A handler that replaces itself
    (the CLI's: the second signal ends the process) stays replaced."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised: list[BaseException] = []
    installed: dict[int, tuple[Any, Any]] = {}

    def keeping(handler: Any) -> Any:
        def call(signum: int, frame: Any) -> None:
            try:
                handler(signum, frame)
            except BaseException as error:
                raised.append(error)
                raise
        return call

    for signum in STOP_SIGNALS:
        if callable(handler := signal.getsignal(signum)):
            installed[signum] = (handler, keeping(handler))
            signal.signal(signum, installed[signum][1])
    try:
        yield
    except BaseException as error:
        if raised and error is not raised[-1]:  # Ray's stand-in for it
            raise raised[-1] from None
        raise
    finally:
        for signum, (handler, wrapper) in installed.items():
            if signal.getsignal(signum) is wrapper:
                signal.signal(signum, handler)


class RankCalls:
    """The driver's calls on the ranks (``ranks``: Ray actor handles; ``_ray``: the ray module),
    mixed into :class:`dapo.trainer.ray_policy.RayPolicyGroup`."""

    broken: str | None = None  # why the ranks can take no further call (see _get)
    _calling = "a call"  # the actor method(s) of the last call submitted: a rank's death names it
    ranks: list[Any]
    _ray: Any

    def _check_usable(self) -> None:
        if self.broken:
            raise RuntimeError(f"the policy ranks can take no further call after an earlier error: {self.broken}")

    def _submit(self, calls: list[tuple[Any, tuple]]) -> list[Any]:
        """Submit ``(actor method, args)`` calls, one per rank, all or none: a signal is deferred
        until all are submitted (:func:`signals_deferred`); an error after some were (their
        arguments would not serialise) makes the group ``broken``, as those ranks may wait in a
        collective for the others."""
        self._check_usable()
        refs: list[Any] = []
        self._calling = ", ".join(sorted({_method_name(method) for method, _ in calls}))  # named if a rank dies
        with signals_deferred():
            try:
                for method, args in calls:
                    refs.append(method.remote(*args))
            except BaseException as error:
                if refs:
                    self.broken = (f"a call went to only {len(refs)} of the {len(calls)} rank(s) it was for "
                                   f"({type(error).__name__} while submitting it): the ranks are out of step")
                raise
        return refs

    def _call(self, calls: list[tuple[Any, tuple]], collective: bool = True, cancellable: bool = False) -> list[Any]:
        """Submit ``calls`` (:meth:`_submit`) and wait for their results (:meth:`_get`)."""
        return self._get(self._submit(calls), collective, cancellable)

    def _get(self, refs: list[Any], collective: bool = True, cancellable: bool = False) -> list[Any]:
        """Results of one call on every rank (Ray raises the first rank's error as it happens). A
        dead rank stops the run with an error naming it, also when a rank it left in a collective
        fails first (the grace below). An error that leaves a rank dead, or in a ``collective`` call
        (blocked for good?), makes the group ``broken``: a further call raises, not waits forever.
        ``cancellable`` (a call each rank makes alone, whose engine checks for it: the native
        and hf engines' generation): a Ctrl-C or SIGTERM while waiting cancels it on every rank, so that
        the call after it (the checkpoint of a stopped evaluation) does not wait for its end."""
        self._check_usable()
        with handler_errors_kept():
            try:
                try:
                    return self._ray.get(refs)
                except self._ray.exceptions.RayTaskError as error:
                    self._raise_if_a_rank_died(refs, collective)
                    if isinstance(cause := getattr(error, "cause", None), (UserError, OSError)):
                        # the user's to fix (a full disk, a missing shard): the rank's own error, which the
                        # CLI names in a line; Ray's stand-in is its whole remote traceback, colour codes included
                        raise cause from error
                    raise
            except (KeyboardInterrupt, SystemExit):
                if cancellable:
                    for ref in refs:
                        with contextlib.suppress(Exception):  # (done already, or its rank gone)
                            self._ray.cancel(ref)
                raise
            except self._ray.exceptions.RayActorError as error:
                self.broken = f"{self._dead_ranks(error)} died while running {self._calling}"
                raise PolicyRankDied(f"{self.broken} ({type(error).__name__}); the run stops here. "
                                     "Rerun the same command to resume from the last checkpoint") from error

    def _raise_if_a_rank_died(self, refs: list[Any], collective: bool) -> None:
        """After one rank's error: a rank that died is the likelier cause (a collective fails
        when a peer dies), so its death is raised instead if it shows within the grace."""
        ended, running = self._ray.wait(refs, num_returns=len(refs), timeout=RANK_DEATH_GRACE_S)
        for ref in ended:
            with contextlib.suppress(self._ray.exceptions.RayTaskError):
                self._ray.get(ref)  # raises RayActorError for a dead rank
        if running and collective:
            self.broken = f"{len(running)} rank(s) still in a call another rank failed (blocked in a collective?)"

    def _dead_ranks(self, error: Exception) -> str:
        """Which ranks no longer answer, e.g. "policy rank 1 (Ray actor PolicyRank)": the one the
        error names, else those that do not answer (a rank blocked in a collective counts too).
        All are asked at once, with one deadline: one by one, each blocked rank took the whole
        timeout, minutes before the run stopped on a large cluster."""
        by_actor = {rank._actor_id.hex(): index for index, rank in enumerate(self.ranks)}
        if getattr(error, "actor_id", None) in by_actor:
            return f"policy rank {by_actor[error.actor_id]} (Ray actor PolicyRank)"
        probes: list[Any] = []
        for rank in self.ranks:
            try:
                probes.append(rank.ready.remote())
            except Exception:  # noqa: BLE001 - a rank that cannot even be asked is gone
                probes.append(None)
        asked = [probe for probe in probes if probe is not None]
        answered, _ = self._ray.wait(asked, num_returns=len(asked), timeout=RANK_PROBE_TIMEOUT_S) if asked else ([], [])
        answered_ids = {ref.hex() for ref in answered}
        dead = []
        for index, probe in enumerate(probes):
            try:
                if probe is None or probe.hex() not in answered_ids:
                    raise TimeoutError
                self._ray.get(probe)  # answered: with its result, or the error of a dead actor
            except Exception:  # noqa: BLE001 - any failure to answer means the rank is gone
                dead.append(str(index))
        return f"policy rank {', '.join(dead) or '?'} (Ray actor PolicyRank)"


def _method_name(method: Any) -> str:
    """``update``, ``generate``, ``save_checkpoint``: the name of a Ray actor method (of any callable)."""
    return str(getattr(method, "_method_name", None) or getattr(method, "__name__", "call"))
