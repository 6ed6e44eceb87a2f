"""Adaptive concurrency: the run sends as many requests at once as the server takes, never more than --concurrency.

AIMD, as TCP paces a link: a 429, or a 503 with Retry-After (the server saying it is
overloaded and when to come back), halves the run's concurrency; each ``limit`` answers in a
row (about one round of requests) raise it by one, up to the ceiling. A fixed concurrency
against a rate-limited server sends the whole pool into every refusal: after each run-wide
pause every worker fires at once and all but a few are refused again.
"""
from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable

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
