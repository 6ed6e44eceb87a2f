"""Spread work over the machine's cores: a pure per-item function over a large input, or one job read meanwhile.

Only with the ``fork`` start method: the children inherit the items, so nothing but the
results is pickled. Anywhere else, and for small inputs, it runs in-process.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from itertools import islice
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from multiprocessing.reduction import ForkingPickler
from typing import Any, Generic, TypeVar

from .errors import UsageError

T = TypeVar("T")
R = TypeVar("R")

# Below this many items a pool costs more than it saves.
MIN_ITEMS = 4000

_work: tuple[Callable[[Any], Any], Sequence[Any]] | None = None


_HANDLED = {signal.SIGTERM, signal.SIGINT}


def _default_signals() -> None:
    """In a forked child: the signals as Python starts them, not the parent's handlers.

    The command line handles SIGTERM by asking the run to stop politely; a child that
    inherited that handler would ignore the pool's own SIGTERM and the parent would wait on
    it for ever. The parent alone answers Ctrl-C. The child was forked with both signals
    blocked (``_forking``): one sent before this ran waits, and is answered by default now.
    """
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _HANDLED)


@contextmanager
def _forking() -> Iterator[None]:
    """Block SIGTERM and SIGINT while children are forked, so none meets the parent's handler before its own are set.

    Without it, a pool that finished its work before a slow child ran its initializer ends that
    child with SIGTERM into the command line's polite handler, and waits on it for ever (seen under
    load). The parent gets a signal sent meanwhile once the children exist.
    """
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _HANDLED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _child(job: Callable[[], None]) -> None:
    _default_signals()
    job()


def _writer(job: Callable[[], None]) -> None:
    """A child of ``run_concurrently``: it finishes its files through a SIGTERM, as this process does.

    The command line answers SIGTERM (a cancelled CI job) by stopping politely, with reports; a
    writer killed by it mid-file left its temporary file, and this process, finding it failed,
    reported an internal error instead of the run. Nothing here stops a writer with SIGTERM (it is
    joined, never terminated); SIGKILL still ends it.
    """
    _default_signals()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    job()


def _run_slice(bounds: tuple[int, int]) -> list[Any]:
    assert _work is not None
    fn, items = _work
    return [fn(items[i]) for i in range(*bounds)]


def forks() -> bool:
    """Whether work can go to a forked child on another core here (else every helper here works in-process)."""
    return (os.cpu_count() or 1) >= 2 and "fork" in multiprocessing.get_all_start_methods()


def run_concurrently(jobs: Sequence[Callable[[], None]], parallel: bool = True) -> None:
    """Run independent jobs (each writes its own output), in forked children when asked and possible.

    This process runs the first; the others go to one child per other core, one after another
    there. A child per job ran three processes on two cores for a 100,000-case run's reports, and
    the first job, the longest (report.json), waited for a core: 2.2-2.6 s of writing.
    """
    if not parallel or len(jobs) < 2 or not forks():
        one_after_another(jobs)()
        return
    ctx = multiprocessing.get_context("fork")
    rest = jobs[1:]
    shares = min(len(rest), max(1, (os.cpu_count() or 1) - 1))
    children = [ctx.Process(target=_writer, args=(one_after_another(rest[i::shares]),)) for i in range(shares)]
    with _forking():
        for child in children:
            child.start()
    try:
        jobs[0]()  # the parent does one share itself
    finally:
        for child in children:
            child.join()
    failed = [child.exitcode for child in children if child.exitcode != 0]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(children)} child processes writing in parallel failed (exit codes {failed})")


def one_after_another(jobs: Sequence[Callable[[], None]]) -> Callable[[], None]:
    """The jobs as one, run in turn."""

    def run_each() -> None:
        for each in jobs:
            each()

    return run_each


def parallel_map(fn: Callable[[T], R], items: Sequence[T], min_items: int = MIN_ITEMS) -> list[R]:
    """``[fn(x) for x in items]``, in order, on every core when the input is large.

    The parent works the first slice itself while forked children work the others: on a
    2-core machine a parent that only waited left one core idle for half the time. A core a
    background job works on (``in_background``) is not counted: on 2 cores, validating a big
    suite's fixtures in two processes beside the replay's reader used 2 s more CPU and 8-16 MiB
    more memory than one process, and was no faster.
    """
    global _work
    workers = _workers(len(items), min_items)
    if workers < 2:
        return [fn(x) for x in items]
    step = -(-len(items) // workers)
    slices = [(i, min(i + step, len(items))) for i in range(0, len(items), step)]
    _work = (fn, items)
    try:
        with _forking():
            pool = multiprocessing.get_context("fork").Pool(len(slices) - 1, initializer=_default_signals)
        with pool:
            others = pool.map_async(_run_slice, slices[1:])
            first = _run_slice(slices[0])
            parts = [first, *others.get()]
    finally:
        _work = None
    return [r for part in parts for r in part]


def spreads(count: int, min_items: int = MIN_ITEMS) -> bool:
    """Whether ``parallel_map`` would work this many items on other cores now (else it works them here, in turn)."""
    return _workers(count, min_items) > 1


def _workers(count: int, min_items: int) -> int:
    """The processes ``parallel_map`` would work this many items in now: 1 is this one alone."""
    workers = min((os.cpu_count() or 1) - _busy(), 8)
    return workers if count >= min_items and workers >= 2 and forks() else 1


# Items per message from a background job: the parent never holds its list whole as pickled bytes.
_CHUNK = 5000

# How long an ``idle`` job not done when asked for is waited for before this process does it itself.
IDLE_GRACE_S = 5.0

# The background jobs' children (``in_background``): each keeps a core busy while it lives.
_background: set[BaseProcess] = set()
# The reading ends of the background jobs' pipes, here: a child forked later lets go of its copies (``_send_outcome``).
_readers: set[Connection] = set()


def _busy() -> int:
    """How many cores background jobs are working on now."""
    return sum(child.is_alive() for child in _background)


@dataclass(frozen=True)
class Packing(Generic[T]):
    """How a background job's items cross the pipe: as plain data (``pack``, in the child), rebuilt here (``unpack``).

    The pickler calls a record's ``__reduce__`` (a NamedTuple's, a dataclass's) in Python for each
    one, and writes plain tuples, lists and dicts in C: a 100,000-line replay's lines and judged
    envelopes took 0.97-1.35 s to pickle as records (rebuilt by ``tuple.__new__``), 0.48-0.74 s packed
    first; unpickling and unpacking them here costs what unpickling the records did (0.4-0.7 s).
    """

    pack: Callable[[T], Any]
    unpack: Callable[[Any], T]


@contextmanager
def in_background(fn: Callable[[], Iterable[T]], wanted: bool = True, packing: Packing[T] | None = None,
                  idle: bool = False) -> Iterator[Callable[[], list[T]]]:
    """A call that returns ``fn()``'s items as a list, worked out meanwhile in a forked child when ``wanted`` and possible.

    For a job that reads its own input (a big ``--replay`` file), started while the heap is still
    small: a child forked later copies every page whose objects it touches (their reference
    counts change), which costs about what it saves (grading 100,000 cases in two forks spent
    1.3-1.8x the CPU per case). The child pickles the items in chunks as ``fn`` gives them (a
    generator's are let go chunk by chunk), and this process unpickles them one by one; with
    ``packing``, each item is packed there and unpacked here. A UsageError in the child is
    raised by the call with its problems; any other failure runs ``fn`` again in this process,
    so that its error is the real one. A child still working when the block ends (the run failed
    first) is stopped.

    An ``idle`` job is a head start, not a promise: its child runs at the lowest priority (nice 19),
    on what the other processes leave of the cores, and is not counted as a busy core
    (``parallel_map``). Asked for before it is done, it has ``IDLE_GRACE_S`` more (this process,
    waiting, leaves it a core); then it is stopped and ``fn`` runs here: on a machine that other
    work keeps busy, such a child could wait for a core for as long as that work lasts.
    """
    if not wanted or not forks():
        yield lambda: list(fn())
        return
    ctx = multiprocessing.get_context("fork")
    receiving, sending = ctx.Pipe(duplex=False)
    job = partial(_send_outcome, fn, receiving, sending, packing)
    child = ctx.Process(target=_child, args=(partial(_lowest_priority, job) if idle else job,), daemon=True)
    with _forking():
        child.start()
    if not idle:
        _background.add(child)
    _readers.add(receiving)
    sending.close()

    def outcome() -> list[T]:
        if idle and not receiving.poll(IDLE_GRACE_S):  # its child answers only once it has it all: not done in time
            child.terminate()
            child.join()
            return list(fn())
        items: list[T] = []
        try:
            kind, value = receiving.recv()
            while kind == "part":
                items += value if packing is None else map(packing.unpack, value)
                kind, value = receiving.recv()
        except (EOFError, OSError):  # the child died before it finished answering
            kind, value = "failed", None
        child.join()
        if kind == "done":
            return items
        if kind == "usage":
            raise UsageError(value)
        return list(fn())

    try:
        yield outcome
    finally:
        _background.discard(child)
        _readers.discard(receiving)
        receiving.close()
        if child.is_alive():
            child.terminate()
            child.join()


def _lowest_priority(job: Callable[[], None]) -> None:
    """In an ``idle`` job's child: ``job`` at nice 19, run only on what the other processes leave of the cores."""
    os.nice(19)
    job()


def _send_outcome(fn: Callable[[], Iterable[Any]], receiving: Connection, sending: Connection, packing: Packing[Any] | None) -> None:
    """In the child: ``fn``'s items in parts, its UsageError's problems, or word that it failed (the parent then runs it itself).

    The child lets go of the pipe's reading end first: a parent killed meanwhile then leaves no
    reader, and sending fails at once instead of waiting for ever on a full pipe.
    """
    for reader in (receiving, *_readers):  # another job's too: a reader left in this child would keep that job's child waiting
        reader.close()
    pickled = _outcome_pickled(fn, packing)
    try:
        for message in pickled:
            sending.send_bytes(message)
    except OSError:  # the run ended without it (killed at --max-run-time, say): nobody is left to tell
        return


def _outcome_pickled(fn: Callable[[], Iterable[Any]], packing: Packing[Any] | None) -> list[bytes]:
    """``_send_outcome``'s messages, pickled now, while the parent is still busy with its own work.

    Pickled as they were sent, the parent waited on each part: the pipe holds 64 KiB, so the child
    pickled the next part only once the parent had read the last (1.1 s of a 100,000-line replay's
    parts, after the fixtures had loaded). Each part is pickled as ``fn`` gives its items, and they
    are let go: a 100,000-line replay's judged lines, held whole, were 95 MB of the child's 166.
    """
    try:
        items = iter(fn())
        pack = packing.pack if packing is not None else None
        parts = iter(lambda: list(islice(items, _CHUNK)), [])
        # Each part packed as it is pickled: no packed copy of the whole list is ever held.
        return [*(bytes(ForkingPickler.dumps(("part", part if pack is None else [pack(x) for x in part]))) for part in parts),
                bytes(ForkingPickler.dumps(("done", None)))]
    except UsageError as exc:
        return [bytes(ForkingPickler.dumps(("usage", exc.problems)))]
    except BaseException:  # noqa: BLE001 - fn failed, or its list will not pickle: the parent runs fn again and meets the error itself
        return [bytes(ForkingPickler.dumps(("failed", None)))]
