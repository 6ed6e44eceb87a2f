"""--max-run-time over the whole run: the run in a forked child, the clock in the parent, partial reports when time is
up.

A thread cannot stop Python inside a regular expression that backtracks for ever (a fixture's
schema ``pattern`` or ``regex`` assertion, say): ``re`` holds the interpreter lock, so no other
thread and no signal handler runs until it returns. A process can be killed, though. So a run
with --max-run-time goes in a child process that tells the parent each phase as it begins and
each case's grades as they are made; when the deadline has passed, the parent kills the child
and writes the reports itself from what it was told: the cases graded keep their grades, every
other one is a ``drop`` that says why, a blocker names the phase, and the run is inconclusive.
Without --max-run-time (or without ``fork``) the run is ``api.run`` in-process, as ever.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, NoReturn

import msgspec

from . import api
from .api import BaseSource, Graded
from .config import LIVE_GRACE_S, RunConfig, out_of_time
from .errors import UsageError
from .grading.grade import grade
from .grading.grader_worker import no_dumps
from .model import Case, Envelope, Grade
from .report.build import as_kept
from .result import RunResult

if TYPE_CHECKING:
    from .transport.pool import LiveOutcome

# A run still going this long after its time (and the live grace) is killed: time to finish writing its own reports.
FINISH_GRACE_S = 2.0
# The partial reports get as long as the run had, and at least this: they load the fixtures again.
PARTIAL_AT_LEAST_S = 10.0
# A child still running this long after a SIGTERM or Ctrl-C was passed on to it is stuck (in a regex, say): killed.
STOP_GRACE_S = 3.0
# The parent looks at its clock at least this often while it waits on the child: a signal moves the deadline.
_TICK_S = 0.25

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_GRADING = "grading"
_WRITING_REPORTS = "writing the reports"
# Phases before the cases are loaded, or before the envelopes to grade are read: the partial
# reports would have to do again what got stuck, so none are written.
_BEFORE_CASES = ("loading ", "reading ")


class RanOutOfTime(Exception):
    """The run reached --max-run-time where no partial report can be written (while loading the fixtures): exit 3."""


def run(config: RunConfig, base: BaseSource | None = None) -> RunResult:
    """``api.run``, bounded by --max-run-time when it is set: past it, partial reports and an inconclusive result.

    Raises what ``api.run`` raises, and ``RanOutOfTime`` when time ran out before there was anything to report.
    """
    if config.max_run_time_s is None or not hasattr(os, "fork"):
        return api.run(config, base)
    api.check_config(config)  # bad flags are named at once, without a child
    no_dumps()  # the child's python grader worker must not read this process's environment or memory either
    limit = config.max_run_time_s
    started = time.monotonic()
    seen = _Seen()
    finished = _in_child(
        lambda channel: channel.send(("result", api.run(config, base, watch=_Streaming(channel, started, limit)))),
        partial(_kill_at, started, limit), seen)
    if finished and seen.out_of_time is None:
        return seen.outcome()
    return _partial_reports(config, base, seen, limit)


def _kill_at(started: float, limit: float, seen: _Seen) -> float:
    """When a run still going is killed: ``limit`` s after its start, and the graces after that (a live run's calls
    in flight get theirs).

    A run asked to stop (SIGTERM, Ctrl-C) that has not ended STOP_GRACE_S later is killed then: stuck where no
    signal handler runs, it would otherwise hold the caller until its deadline.
    """
    deadline = started + limit + (LIVE_GRACE_S if seen.calling else 0.0) + FINISH_GRACE_S
    return deadline if seen.stop_asked is None else min(deadline, seen.stop_asked + STOP_GRACE_S)


@dataclass
class _Seen:
    """What the parent has heard from a child so far (mutable: it fills as the messages arrive)."""

    doing: str | None = None  # the phase the run is in
    calling: bool = False  # the live calls began: those in flight at the deadline get the pool's grace
    order: tuple[str, ...] = ()  # the cases to grade, in the order they are graded
    grades: dict[str, list[Grade]] = field(default_factory=dict)  # the cases graded so far
    out_of_time: str | None = None  # the phase in which the child found its time up (before writing pins)
    stop_asked: float | None = None  # when a SIGTERM or Ctrl-C was passed on to the child
    started: float = field(default_factory=time.monotonic)  # when the supervised run began
    result: RunResult | None = None
    raised: BaseException | None = None

    def take(self, message: tuple[Any, ...]) -> None:
        kind, value = message
        if kind == "phase":
            self.doing = value
            self.calling = self.calling or value == api.CALLING
        elif kind == "order":
            self.order = value
        elif kind == "graded":
            self.grades.update(value)
        elif kind == "out of time":
            self.out_of_time = self.doing = value
        elif kind == "result":
            self.result = value
        else:
            self.raised = UsageError(value) if kind == "usage" else value

    @property
    def ended(self) -> bool:
        """The child has said its last: a result, what it raised, or that its time was up."""
        return self.result is not None or self.raised is not None or self.out_of_time is not None

    def stuck(self) -> str | None:
        """The case being graded when the run was stopped (they are graded in order, one at a time), if it was
        grading."""
        return next((i for i in self.order if i not in self.grades), None) if self.doing == _GRADING else None

    def outcome(self) -> RunResult:
        """The child's result, or what it raised raised here; a child that died without either is an internal error."""
        if self.raised is not None:
            raise self.raised
        if self.result is None:
            raise RuntimeError("the run's process ended without a result (killed from outside?)")
        return self.result


class _OutOfTime(Exception):
    """Raised in the child where it finds its own time up: before writing pins, which a run out of time never writes."""


class _Streaming(api.Watch):
    """The child's watch: each phase and each case's grades to the parent as they happen."""

    def __init__(self, channel: _Channel, started: float, limit: float) -> None:
        self.channel, self.time_up = channel, started + limit

    def phase(self, doing: str) -> None:
        if doing == api.WRITING_PINS and time.monotonic() >= self.time_up:
            self.channel.send(("out of time", doing))
            raise _OutOfTime(doing)
        self.channel.send(("phase", doing))

    def grade(self, cases: Sequence[Case], envelopes: Mapping[str, Sequence[Envelope]],
              graded: dict[str, list[Grade]] | None) -> Graded:
        """One case at a time, as ``grade_all`` grades each (on one core), each sent as soon as it is graded."""
        if graded is not None:  # a live run's, graded as they arrived
            self.channel.send(("graded", graded))
            return Graded(graded)
        self.channel.send(("order", tuple(c.id for c in cases)))
        grades: dict[str, list[Grade]] = {}
        for case in cases:
            grades[case.id] = [grade(e, case) for e in envelopes[case.id]]
            self.channel.send(("graded", {case.id: [as_kept(g) for g in grades[case.id]]}))
        return Graded(grades)


@dataclass(frozen=True)
class _Stopped:
    """Where the run was when it was stopped, and why (its time ran out, or it was asked to), in the words of the
    reports."""

    reached: str  # ``out_of_time``'s words, or that it was asked to stop and had not
    doing: str
    stuck: str | None = None  # the case it was grading

    def where(self) -> str:
        return f"while grading case {self.stuck}" if self.stuck else f"while {self.doing}"

    def headline(self) -> str:
        return f"{self.reached} {self.where()}"


class _Known(api.Watch):
    """The partial reports' grading: the grades the run made before it was stopped, and for every other case a drop
    that says why."""

    def __init__(self, grades: Mapping[str, list[Grade]], stopped: _Stopped) -> None:
        self.known, self.stopped = grades, stopped

    def grade(self, cases: Sequence[Case], envelopes: Mapping[str, Sequence[Envelope]],
              graded: dict[str, list[Grade]] | None) -> Graded:
        reached = self.stopped.reached
        grades = {c.id: self.known.get(c.id)
                  or [_not_graded(c, f"not graded: {reached} while grading this case" if c.id == self.stopped.stuck
                                  else f"not run: {reached} {self.stopped.where()}; this case was not graded")]
                  for c in cases}
        done = sum(c.id in self.known for c in cases)
        return Graded(grades, (f"{self.stopped.headline()} and was stopped: {done} of {len(cases)} case(s) graded, "
                               f"{len(cases) - done} not graded",))


def _not_graded(case: Case, why: str) -> Grade:
    return msgspec.structs.replace(grade(Envelope(error=why, attempts=0), case), reasons=(why,))


def _no_calls(cases: Sequence[Case], config: RunConfig, headers: Mapping[str, str]) -> LiveOutcome:
    """The partial reports of a live run call nothing: the grades are what the run sent before it was stopped."""
    from .transport.pool import LiveOutcome

    return LiveOutcome({})


def _partial_reports(config: RunConfig, base: BaseSource | None, seen: _Seen, limit: float) -> RunResult:
    """The reports of a run stopped at --max-run-time, written from what it said it had done (in a child too: they
    must end)."""
    asked = seen.stop_asked is not None and seen.stop_asked + STOP_GRACE_S < seen.started + limit
    reached = f"the run was asked to stop and had not {STOP_GRACE_S:g} s later" if asked else out_of_time(limit)
    stopped = _Stopped(reached, seen.doing or "starting", seen.stuck())
    if seen.doing is None or seen.doing.startswith(_BEFORE_CASES):
        raise RanOutOfTime(f"{stopped.headline()} and was stopped; no report was written: nothing had been graded")
    print(f"envelope-ci: {stopped.headline()}: stopped it, writing the reports for what it had done", file=sys.stderr)
    partial_config = replace(config, write_pins=False, move_baseline=False,
                             formats=() if seen.doing == _WRITING_REPORTS else config.formats)
    written = _Seen()
    give_up = time.monotonic() + max(limit, PARTIAL_AT_LEAST_S)
    if _in_child(lambda channel: channel.send(("result", api.run(partial_config, base, _no_calls,
                                                                 _Known(seen.grades, stopped)))),
                 lambda _: give_up, written):
        return written.outcome()
    raise RanOutOfTime(f"{stopped.headline()} and was stopped; the partial reports could not be written in time either")


# --------------------------------------------------------------------------- the child process and its pipe
class _Channel:
    """The child's end of the pipe: length-prefixed pickles, each written whole.

    Ctrl-C and SIGTERM are held off while a message is written: a handler that raised in the
    middle of one would leave the parent half a message.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, message: tuple[Any, ...]) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        frame = memoryview(len(data).to_bytes(8, "big") + data)
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        try:
            while frame:
                frame = frame[os.write(self.fd, frame):]
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _complete(buffer: bytearray) -> Iterator[tuple[Any, ...]]:
    """The whole messages at the head of ``buffer``, taken out of it."""
    while len(buffer) >= 8 and len(buffer) >= 8 + (size := int.from_bytes(buffer[:8], "big")):
        message = pickle.loads(buffer[8:8 + size])
        del buffer[:8 + size]
        yield message


def _in_child(work: Callable[[_Channel], None], kill_at: Callable[[_Seen], float], seen: _Seen) -> bool:
    """Run ``work`` in a forked child, its messages into ``seen``; False when it was still running at ``kill_at(seen)``
    and was killed.

    While it runs, Ctrl-C and SIGTERM are the child's to answer (a first one stops a live run
    politely, a second Ctrl-C leaves at once), as they are an unsupervised run's.
    """
    with _Forwarding(seen) as forward:
        sys.stdout.flush()
        sys.stderr.flush()
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            _child(work, write_fd, forward.saved)
        os.close(write_fd)
        with contextlib.suppress(OSError):  # the child does the same: whichever comes first
            os.setpgid(pid, pid)
        forward.to(pid)
        try:
            return _follow(read_fd, pid, kill_at, seen)
        finally:
            os.close(read_fd)
            os.waitpid(pid, 0)


def _follow(fd: int, pid: int, kill_at: Callable[[_Seen], float], seen: _Seen) -> bool:
    """Read the child's messages until it ends (True), or kill it and all it started at ``kill_at(seen)`` (False)."""
    buffer = bytearray()
    while (left := kill_at(seen) - time.monotonic()) > 0:
        if not select.select([fd], [], [], min(left, _TICK_S))[0]:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:  # the child, and whatever it started, closed the pipe: it is done
            return True
        buffer += chunk
        for message in _complete(buffer):
            seen.take(message)
        if seen.ended:  # what the child started may hold the pipe open a little longer; the child exits now
            return True
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)  # nothing to tidy: reports and pins are written whole or not at all
    return False


def _child(work: Callable[[_Channel], None], fd: int, handlers: Mapping[int, Any]) -> NoReturn:
    """The child's whole life: its own process group (killed whole), the signal handlers of before, the work, then
    out."""
    try:
        parent = os.getppid()
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        _die_with(parent)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        channel = _Channel(fd)
        try:
            work(channel)
        except _OutOfTime:
            pass
        except UsageError as exc:  # its problems, not its one-line message: they are printed one a line
            channel.send(("usage", exc.problems))
        except BaseException as exc:  # raised again in the parent: exit codes as ever
            channel.send(("raised", _picklable(exc)))
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(0)


def _die_with(parent: int) -> None:
    """This child killed when its parent dies (Linux): in its own process group, it would outlive a killed caller's
    group."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _picklable(exc: BaseException) -> BaseException:
    """``exc``, or its words in one that crosses the pipe (an exception whose arguments do not pickle would be lost)."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


class _Forwarding:
    """The parent's Ctrl-C and SIGTERM handler while a child runs: pass them on (once the child is known), and
    restore after."""

    def __init__(self, seen: _Seen) -> None:
        self.seen = seen
        self.saved: dict[int, Any] = {}
        self.pid: int | None = None
        self.pending: list[int] = []

    def __enter__(self) -> _Forwarding:
        if threading.current_thread() is threading.main_thread():
            self.saved = {sig: signal.signal(sig, self._handle) for sig in _SIGNALS}
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.seen.stop_asked is None:
            self.seen.stop_asked = time.monotonic()
        if self.pid is None:
            self.pending.append(signum)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def to(self, pid: int) -> None:
        self.pid = pid
        for signum in self.pending:
            self._handle(signum, None)

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)

