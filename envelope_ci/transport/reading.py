"""One response read to its end, whole or streamed, never past the case's deadline or the size cap."""
from __future__ import annotations

import codecs
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import requests
import urllib3

from ..model import Envelope
from ..providers.base import Provider, StreamAssembly
from ..providers.sse import flush_sse, iter_sse_data
from .watchdog import Alarm

# Everything a socket read can throw once requests hands us the raw stream.
TRANSPORT_ERRORS = (requests.RequestException, urllib3.exceptions.HTTPError, OSError)
# How an envelope cut off at the size cap starts: retrying it would only fetch it again.
OVERSIZED = "response larger than the cap"
_SECRET_HEADERS = frozenset({"set-cookie", "authorization", "proxy-authorization", "api-key", "x-api-key", "cookie"})


def safe_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Response headers worth recording: lower-cased, secrets dropped."""
    return {k.lower(): v for k, v in headers.items() if k.lower() not in _SECRET_HEADERS}


def deadline_passed(deadline_s: float) -> str:
    """Why an attempt ended at its deadline, whatever phase it was in."""
    return f"Deadline: no complete response within the case deadline of {deadline_s:g} s (connect to last byte)"


@dataclass(frozen=True)
class Limits:
    """One attempt's clock and caps: when it was sent, its deadline (which ``alarm`` enforces), the most bytes it may
    bring."""

    t0: float
    deadline_s: float
    max_bytes: int
    alarm: Alarm

    def ms(self, t: float) -> float:
        """Milliseconds from sending to ``t``."""
        return round((t - self.t0) * 1000.0, 3)

    def over(self, size: int) -> str | None:
        """Why reading must stop now (the size cap), or None."""
        if size > self.max_bytes:
            return f"{OVERSIZED} of {self.max_bytes} bytes: cut off"
        return None

    def cut_off(self, why: str) -> Envelope:
        """The envelope of a read stopped early: no response to speak of."""
        return Envelope(error=why, elapsed_ms=self.ms(time.perf_counter()))

    def ended(self) -> Envelope | None:
        """At the body's end: a drop when the watchdog ended it (a shut socket reads as an end), else None."""
        return self.cut_off(deadline_passed(self.deadline_s)) if self.alarm.fired else None


def read1(resp: requests.Response) -> bytes:
    """What the body has next; the watchdog, not a socket timeout, bounds the wait."""
    return resp.raw.read1(65536, decode_content=True)


def _socket(resp: requests.Response) -> Any:
    return getattr(getattr(resp.raw, "connection", None), "sock", None)


def _decode_body(data: bytearray) -> tuple[Any, tuple[str, ...]]:
    """The body, and what reading it took: bytes that are not UTF-8 are replaced, not the end of the answer."""
    try:
        return _parsed(data), ()
    except UnicodeDecodeError as exc:
        note = (f"the body is not valid UTF-8 (a bad byte at offset {exc.start}): "
                "read with U+FFFD in place of the bad bytes")
        return _parsed(data.decode("utf-8", "replace")), (note,)


def _parsed(data: bytearray | str) -> Any:
    """The parsed JSON, else the text; a body nested deeper than the parser goes is text too."""
    try:
        return json.loads(data)
    except UnicodeDecodeError:
        raise
    except (ValueError, RecursionError):
        return data.decode("utf-8", "replace") if isinstance(data, bytearray) else data


def read_whole(resp: requests.Response, limits: Limits) -> Envelope:
    """A non-streamed body; ``elapsed_ms`` ends at its last byte."""
    data = bytearray()  # one growing buffer, not a list of chunks and then their join: one copy of the body fewer
    while chunk := read1(resp):
        data += chunk
        over = limits.over(len(data))
        if over:
            return limits.cut_off(over)
    t_end = time.perf_counter()  # the body is decoded after the clock stops: no parsing inside the timing
    cut = limits.ended()
    if cut:
        return cut
    body, notes = _decode_body(data)
    return Envelope(http_status=resp.status_code, elapsed_ms=limits.ms(t_end), headers=safe_headers(resp.headers),
                    body=body, notes=notes)


def read_stream(resp: requests.Response, limits: Limits, provider: Provider) -> Envelope:
    """A streamed body, assembled by the provider; ``ttft_ms`` is the first chunk carrying the answer."""
    stream = provider.new_stream()
    buffer = bytearray()
    size = 0
    ttft: float | None = None
    t_last = limits.t0
    utf8 = _Utf8Check()
    while chunk := read1(resp):
        utf8.feed(chunk)
        size += len(chunk)
        over = limits.over(size)
        if over:
            return limits.cut_off(over)
        now = time.perf_counter()
        for data in iter_sse_data(buffer, chunk, provider.sse_fields):
            if stream.feed(data) and ttft is None:
                ttft = now
            t_last = now
        if stream.done:
            drain(resp)
            break
    cut = None if stream.done else limits.ended()  # no end marker: the watchdog may have shut the stream
    if cut:
        return cut
    for data in flush_sse(buffer):
        stream.feed(data)
    notes: tuple[str, ...] = ((f"{stream.bad_lines} stream line(s) were not JSON and were skipped",)
                              if stream.bad_lines else ())
    if utf8.bad:
        notes += ("the stream is not valid UTF-8: read with U+FFFD in place of the bad bytes",)
    return _streamed(resp, limits, stream, ttft, t_last, notes)


class _Utf8Check:
    """Whether a byte stream is valid UTF-8, whatever chunks it comes in (a character may straddle two)."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self.bad = False

    def feed(self, chunk: bytes) -> None:
        if not self.bad:
            try:
                self._decoder.decode(chunk)
            except UnicodeDecodeError:
                self.bad = True


def _streamed(resp: requests.Response, limits: Limits, stream: StreamAssembly, ttft: float | None, t_last: float,
              notes: tuple[str, ...]) -> Envelope:
    return Envelope(
        http_status=resp.status_code,
        elapsed_ms=limits.ms(t_last),
        ttft_ms=limits.ms(ttft) if ttft is not None else None,
        headers=safe_headers(resp.headers),
        body=stream.body(),
        stream_complete=stream.complete,
        notes=notes,
    )


def drain(resp: requests.Response, limit: int = 65536, wait_s: float = 0.05) -> None:
    """After the stream's end (timings taken): read the body's rest, briefly, so the connection is reused.

    Without it every streamed call opens a new connection and pays the handshake inside its timing.
    A server that keeps the stream open after its end only costs ``wait_s``; the connection is then closed.
    """
    sock = _socket(resp)
    if sock is None:
        return
    before = sock.gettimeout()
    try:
        sock.settimeout(wait_s)
        drained = 0
        while drained <= limit:
            chunk = resp.raw.read1(limit, decode_content=True)
            if not chunk:
                return
            drained += len(chunk)
    except TRANSPORT_ERRORS:
        return
    finally:
        try:
            sock.settimeout(before)  # the next request is sent with the usual timeout
        except OSError:
            pass
