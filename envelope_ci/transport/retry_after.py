"""The one Retry-After parser: how long a server asked us to wait, when its rate limit resets, how fast it refills."""
from __future__ import annotations

import datetime
import email.utils
import math
import re
import time
from collections.abc import Mapping, Sequence
from typing import NamedTuple

KINDS = ("requests", "tokens")  # the x-ratelimit-*-KIND limits OpenAI sends


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The server's requested wait in seconds, never negative; None when it named none we can read.

    ``retry-after-ms`` first (as openai-python reads it), then ``Retry-After`` as seconds or
    an HTTP date. Header names match in any case, so a plain dict or requests' headers both do.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = _number(lowered.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000.0
    value = lowered.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    return seconds if seconds is not None else _until_date(value, time.time() if now is None else now)


# A Go duration, as OpenAI writes x-ratelimit-reset-*: "1s", "6m0s", "20ms", "1h2m3.5s".
_DURATION = re.compile(r"(\d+(?:\.\d*)?)(h|ms|us|µs|ns|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def rate_limit_reset_s(headers: Mapping[str, str]) -> float | None:
    """When a 429 without Retry-After says its limit takes a request again (``x-ratelimit-*-requests``/``-tokens``).

    The limit that is used up (its ``x-ratelimit-remaining-*`` is 0) if the headers say which; else
    the later of the two, so the retry does not arrive before either limit allows it. A request
    limit whose size is known takes one again once one request has refilled, long before it is full.
    """
    known, spent = _resets(headers)
    return max(spent or known, default=None)


def spent_limit_reset_s(headers: Mapping[str, str], kinds: Sequence[str] = KINDS) -> float | None:
    """When a limit of ``kinds`` the headers say is used up (``x-ratelimit-remaining-*`` is 0) resets; else None.

    On an answer this is the server saying the next request would be refused: the run holds
    its requests until then instead of collecting 429s.
    """
    return max(_resets(headers, kinds)[1], default=None)


class RateLimit(NamedTuple):
    """A request or token limit as one answer states it: its size, what is left of it, and the seconds until it is full
    again."""

    size: float
    remaining: float
    full_in_s: float

    @property
    def refill_per_s(self) -> float | None:
        """Requests (tokens) a second it refills at: what it lacks over the time it takes to fill; None when full."""
        if self.remaining >= self.size or self.full_in_s <= 0:
            return None
        return (self.size - self.remaining) / self.full_in_s

    @property
    def next_in_s(self) -> float:
        """Seconds until it takes one more request: none while one is left, else the time one takes to refill."""
        rate = self.refill_per_s
        return self.full_in_s if rate is None else max(0.0, 1 - self.remaining) / rate


def rate_limit(headers: Mapping[str, str], kind: str = "requests") -> RateLimit | None:
    """``x-ratelimit-limit-KIND``, ``-remaining-KIND`` and ``-reset-KIND`` (``requests`` or ``tokens``), read as
    OpenAI means them.

    None unless all three are readable: without the size, the reset says when the limit is full,
    not how fast it fills, and only a hold until then is safe.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    size = _number(lowered.get(f"x-ratelimit-limit-{kind}"))
    remaining = _number(lowered.get(f"x-ratelimit-remaining-{kind}"))
    full_in = duration_s(lowered.get(f"x-ratelimit-reset-{kind}"))
    if size is None or remaining is None or full_in is None or not 0 < size < math.inf or full_in == math.inf:
        return None
    return RateLimit(size, min(remaining, size), full_in)


def unpaced_kinds(headers: Mapping[str, str]) -> tuple[str, ...]:
    """The limits an answer's headers do not state whole, so the pacer cannot space starts to them: a spent one of
    these holds the run until it resets."""
    return tuple(kind for kind in KINDS if rate_limit(headers, kind) is None)


def _resets(headers: Mapping[str, str], kinds: Sequence[str] = KINDS) -> tuple[list[float], list[float]]:
    """The readable waits of ``kinds`` until each limit takes a request again, and those of the limits whose remaining
    count is 0."""
    lowered = {k.lower(): v for k, v in headers.items()}
    resets = {kind: duration_s(lowered.get(f"x-ratelimit-reset-{kind}")) for kind in kinds}
    limit = rate_limit(lowered) if "requests" in kinds else None
    if limit is not None:
        resets["requests"] = limit.next_in_s
    known = {kind: wait for kind, wait in resets.items() if wait is not None}
    spent = [wait for kind, wait in known.items()
             if str(lowered.get(f"x-ratelimit-remaining-{kind}", "")).strip() == "0"]
    return list(known.values()), spent


def duration_s(value: str | None) -> float | None:
    """A Go duration ("6m0s", "20ms") or plain seconds ("1.5"), in seconds; None when unreadable."""
    if value is None:
        return None
    text = value.strip()
    plain = _number(text)
    if plain is not None:
        return plain
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def _number(value: str | None) -> float | None:
    """A number, clamped at zero (Azure sends -1); None when absent or not a number."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _until_date(value: str, now: float) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # "-0000": HTTP dates are GMT
        when = when.replace(tzinfo=datetime.timezone.utc)
    return max(0.0, when.timestamp() - now)
