"""How fast the run sends: as many requests at once as the server takes (never more than --concurrency), started
no faster than the server's request limit refills.

AIMD, as TCP paces a link: a 429, or a 503 with Retry-After (the server saying it is
overloaded and when to come back), halves the run's concurrency; each ``limit`` answers in a
row (about one round of requests) raise it by one, up to the ceiling. A fixed concurrency
against a rate-limited server sends the whole pool into every refusal: after each run-wide
pause every worker fires at once and all but a few are refused again.

``Pacer`` spaces the starts to the rates an endpoint's ``x-ratelimit-*-requests`` and ``-tokens``
headers say its limits refill at: a run that held everything until the limit was full again sat idle while the
server was ready, and then burst into it.
"""
from __future__ import annotations

import enum
import math
import threading
import time
from collections.abc import Callable

from .retry_after import RateLimit

# Requests of a limit the pacer leaves to the server: threads and sockets deliver starts spaced at the refill
# rate a little unevenly, and a request that arrives early must still find one. Spacing exactly to the last
# request drew a 429, and a whole-second Retry-After for the whole run, about one run in two (a 10-a-second
# bucket, 15 requests past its burst); one in hand costs a single refill once.
KEPT_IN_HAND = 1

# The history keeps change points only; past this many it merges them in pairs (``thinned``),
# so a long run oscillating at its server's rate limit still writes a short report.
MAX_HISTORY_POINTS = 200


class Pressure(enum.Enum):
    """What one attempt says about the server's capacity (``retry.pressure`` tells)."""

    LIMITED = "limited"  # 429, or 503 with Retry-After: too many requests
    ANSWERED = "answered"  # an answer: the server keeps up at this concurrency
    NEITHER = "neither"  # a drop, a 500, a cut stream: nothing about capacity


class AdaptiveLimit:
    """The run's concurrency limit: workers take a slot for each attempt and give it back with what the attempt said.

    A burst of refusals from one overload halves the limit once, not once per refusal: only an
    attempt admitted since the last decrease (same ``epoch``) can lower it again, or count
    towards raising it. With ``adaptive`` False the limit stays at the ceiling: a fixed --concurrency.
    """

    def __init__(self, ceiling: int, adaptive: bool = True, clock: Callable[[], float] = time.monotonic) -> None:
        self.ceiling = ceiling
        self.limit = ceiling
        self._adaptive = adaptive
        self._clock = clock
        self._t0 = clock()
        self._in_flight = 0
        self._epoch = 0
        self._answered = 0  # answers in a row since the last change
        self._cond = threading.Condition(threading.Lock())
        self.history: list[tuple[float, int]] = [(0.0, ceiling)]  # (seconds since the start, limit from then on)

    def acquire(self, stop: threading.Event) -> int:
        """Wait for a free slot (not past ``stop``); the epoch the attempt is admitted in, for ``release``."""
        with self._cond:
            while self._in_flight >= self.limit and not stop.is_set():
                self._cond.wait(0.5)
            self._in_flight += 1
            return self._epoch

    def release(self, epoch: int, signal: Pressure) -> None:
        """Give the slot back: a refusal lowers the limit, answers raise it."""
        with self._cond:
            self._in_flight -= 1
            if signal is Pressure.LIMITED:
                self._lower(epoch)
            elif signal is Pressure.ANSWERED and epoch == self._epoch:  # an answer admitted before a decrease
                # proves nothing since
                self._raise()
            self._cond.notify_all()

    def _lower(self, epoch: int) -> None:
        self._answered = 0
        if not self._adaptive or epoch != self._epoch:  # admitted before the last decrease: the same overload
            return
        self._epoch += 1
        self._set(max(1, self.limit // 2))

    def _raise(self) -> None:
        self._answered += 1
        if self._adaptive and self._answered >= self.limit and self.limit < self.ceiling:
            self._answered = 0
            self._set(self.limit + 1)

    def _set(self, limit: int) -> None:
        if limit != self.limit:
            self.limit = limit
            self.history.append((round(self._clock() - self._t0, 3), limit))
            if len(self.history) > MAX_HISTORY_POINTS:
                self.history = thinned(self.history)


def thinned(points: list[tuple[float, int]]) -> list[tuple[float, int]]:
    """The change points merged in neighbouring pairs into the lower one, the first and last kept, repeats dropped.

    Half as many points that still say how low the concurrency went, when, and where it ended.
    """
    inner = points[1:-1]
    merged = [min(inner[i:i + 2], key=lambda point: point[1]) for i in range(0, len(inner), 2)]
    kept = [points[0], *merged, points[-1]]
    return [point for i, point in enumerate(kept) if i == 0 or point[1] != kept[i - 1][1]]


class _Mirror:
    """One limit of an endpoint (its requests, or its tokens) as the server's last answer showed it."""

    def __init__(self, now: float) -> None:
        self.seen = 0  # the start whose answer last set it
        self.size = math.inf
        self.left = math.inf  # what the server would take now; below 0, starts already waiting their turn
        self.rate = 0.0  # what it refills a second; 0 while unknown
        self.at = now  # when ``left`` was true
        self.open: dict[int, float] = {}  # what each start not answered yet would take of it (before ``charge``)

    def wait_for(self, cost: float, now: float) -> float:
        """Seconds until it holds ``cost`` and one more such start in hand (never more than the limit's size)."""
        self.left = min(self.size, self.left + (now - self.at) * self.rate)
        self.at = now
        cost = self.charge(cost)
        need = cost + min(KEPT_IN_HAND * cost, self.size - cost)
        return (need - self.left) / self.rate if cost > 0 and self.left < need and self.rate > 0 else 0.0

    def charge(self, cost: float) -> float:
        """What a start is counted as taking: a start larger than the whole limit cannot be paced to it (the server
        refuses it, or charges only what it used), so it is not counted at all."""
        return cost if cost <= self.size else 0.0

    def start(self, start: int, cost: float, taken: bool) -> None:
        """Count a start as open; ``taken``: it was paced to this limit, so it takes its cost from the mirror now."""
        self.open[start] = cost  # charged as the limit known when an answer comes: it may not be known yet
        if taken:
            self.left -= self.charge(cost)

    def observe(self, start: int, limit: RateLimit | None, now: float) -> None:
        """Close ``start``; set the mirror from the limit its answer states, unless older than the last that did."""
        self.open.pop(start, None)
        if limit is None or start < self.seen:
            return
        self.seen, self.at, self.size = start, now, limit.size
        self.rate = limit.refill_per_s or self.rate  # a full limit says nothing of its rate
        self.left = limit.remaining - sum(map(self.charge, self.open.values()))


class Pacer:
    """One endpoint's request and token limits, mirrored: each start takes a request, and its estimated tokens, from
    them, and waits its turn when either has too little left.

    Each mirror is the server's bucket as its last answer showed it (a generic cell rate
    algorithm): ``remaining``, less what every other start not yet answered takes (threads send in
    no fixed order, so the server may not have counted any of them), refilled at
    ``(size - remaining) / reset`` a second, ``reset`` being the time until the limit is full
    again (OpenAI's meaning). A start that finds too little left beyond one more such start kept
    in hand waits until it has refilled, so once a limit runs low the starts are spaced at its
    refill rate. Until an answer states a limit, it holds nothing.
    """

    def __init__(self, max_wait_s: float = math.inf, clock: Callable[[], float] = time.monotonic) -> None:
        self._max_wait_s = max_wait_s
        self._clock = clock
        self._lock = threading.Lock()
        self._started = 0  # starts so far, numbered from 1
        self._requests = _Mirror(clock())
        self._tokens = _Mirror(clock())
        self._held_until = -math.inf
        self.held = 0  # starts that waited their turn
        self.held_s = 0.0  # seconds during which at least one start waited (overlaps counted once)

    def admit(self, tokens: float = 0.0) -> tuple[int, float]:
        """Take a start of ``tokens`` estimated tokens: its number, for ``observe``, and the seconds it must wait for
        the limits to refill.

        A wait longer than ``max_wait_s`` (--max-retry-after) is not taken: the request goes at
        once, takes nothing from the mirrors (the server will refuse it), and its 429 decides.
        """
        with self._lock:
            now = self._clock()
            self._started += 1
            wait = max(self._requests.wait_for(1.0, now), self._tokens.wait_for(tokens, now))
            taken = wait <= self._max_wait_s
            self._requests.start(self._started, 1.0, taken)
            self._tokens.start(self._started, tokens, taken)
            if not taken:
                return self._started, 0.0
            self._count(now, wait)
            return self._started, wait

    def observe(self, start: int, requests: RateLimit | None, tokens: RateLimit | None = None) -> None:
        """Close ``start`` (call it once for each, answered or not), and set the mirrors from what its answer says of
        the limits."""
        with self._lock:
            now = self._clock()
            self._requests.observe(start, requests, now)
            self._tokens.observe(start, tokens, now)

    def _count(self, now: float, wait: float) -> None:
        """Add a wait to the held time, counting once what overlaps the waits before it."""
        if wait <= 0:
            return
        self.held += 1
        self.held_s += max(0.0, now + wait - max(now, self._held_until))
        self._held_until = max(self._held_until, now + wait)
