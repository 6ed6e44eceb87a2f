"""The one Retry-After parser: how long a server asked us to wait, and when its rate limit resets."""
from __future__ import annotations

import datetime
import email.utils
import re
import time
from collections.abc import Mapping


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The server's requested wait in seconds, never negative; None when it named none we can read.

    ``retry-after-ms`` first (as openai-python reads it), then ``Retry-After`` as seconds or
    an HTTP date. Header names match in any case, so a plain dict or requests' headers both do.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = _seconds(lowered.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000.0
    value = lowered.get("retry-after")
    if value is None:
        return None
    seconds = _seconds(value)
    return seconds if seconds is not None else _until_date(value, time.time() if now is None else now)


# A Go duration, as OpenAI writes x-ratelimit-reset-*: "1s", "6m0s", "20ms", "1h2m3.5s".
_DURATION = re.compile(r"(\d+(?:\.\d*)?)(h|ms|us|µs|ns|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def rate_limit_reset_s(headers: Mapping[str, str]) -> float | None:
    """When a 429 without Retry-After says its limit resets (``x-ratelimit-reset-requests``/``-tokens``).

    The reset of the limit that is used up (its ``x-ratelimit-remaining-*`` is 0) if the headers
    say which; else the later of the two, so the retry does not arrive before either limit allows it.
    """
    known, spent = _resets(headers)
    return max(spent or known, default=None)


def spent_limit_reset_s(headers: Mapping[str, str]) -> float | None:
    """When a limit the headers say is used up (``x-ratelimit-remaining-*`` is 0) resets; None when none is.

    On an answer this is the server saying the next request would be refused: the run holds
    its requests until then instead of collecting 429s.
    """
    return max(_resets(headers)[1], default=None)


def _resets(headers: Mapping[str, str]) -> tuple[list[float], list[float]]:
    """The readable ``x-ratelimit-reset-*`` waits, and those of the limits whose remaining count is 0."""
    lowered = {k.lower(): v for k, v in headers.items()}
    resets = {kind: duration_s(lowered.get(f"x-ratelimit-reset-{kind}")) for kind in ("requests", "tokens")}
    known = {kind: wait for kind, wait in resets.items() if wait is not None}
    spent = [wait for kind, wait in known.items()
             if str(lowered.get(f"x-ratelimit-remaining-{kind}", "")).strip() == "0"]
    return list(known.values()), spent


def duration_s(value: str | None) -> float | None:
    """A Go duration ("6m0s", "20ms") or plain seconds ("1.5"), in seconds; None when unreadable."""
    if value is None:
        return None
    text = value.strip()
    plain = _seconds(text)
    if plain is not None:
        return plain
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def _seconds(value: str | None) -> float | None:
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
