"""The one Retry-After parser: how long a server asked us to wait."""
from __future__ import annotations

import datetime
import email.utils
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
