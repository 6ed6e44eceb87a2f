"""The endpoint edge: POST /chat/completions with honest timing, caps, retries and concurrency.

Nothing here grades. Each attempt becomes an ``Envelope``; requests' exceptions are
turned into envelopes at this edge so the core never sees a socket. Retries happen
only for transport failures (drop, empty), with a per-case and a per-run budget.
"""
from __future__ import annotations

import datetime
import email.utils
import json
import random
import re
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import requests
import urllib3

from .classify import classify
from .config import RunConfig
from .model import Case, Envelope, Label, RetryPolicy
from .recordings import RecordingWriter
from .secrets import Secrets
from .sse import StreamAssembler, flush_sse, iter_sse_data

USER_AGENT = "envelope-ci"
_SECRET_HEADERS = frozenset({"set-cookie", "authorization", "proxy-authorization", "api-key", "x-api-key", "cookie"})
# Everything a socket read can throw once requests hands us the raw stream.
_TRANSPORT_ERRORS = (requests.RequestException, urllib3.exceptions.HTTPError, OSError)
DEFAULT_RETRY = RetryPolicy()
# How an envelope cut off at the size cap starts: retrying it would only fetch it again.
OVERSIZED = "response larger than the cap"
_NO_RETRY_STATUSES = frozenset({400, 401, 403, 404, 405, 413, 415, 422})


@dataclass(frozen=True)
class ClientSettings:
    """How to talk to one endpoint."""

    base_url: str
    model: str
    api_key: str | None = None
    extra_headers: Mapping[str, str] = field(default_factory=dict)
    temperature: float = 0.0
    stream: bool = False
    connect_timeout_s: float = 10.0
    case_timeout_s: float = 120.0
    max_response_bytes: int = 16 * 1024 * 1024

    def __repr__(self) -> str:  # never show the key or header values
        return f"ClientSettings(base_url={self.base_url!r}, model={self.model!r}, stream={self.stream})"


def request_body(case: Case, settings: ClientSettings) -> dict[str, Any]:
    """The JSON body for one case: model, messages, temperature, and the case's options."""
    body: dict[str, Any] = {"model": settings.model, "messages": list(case.messages), "temperature": settings.temperature}
    body.update(case.request)
    if settings.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def safe_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Response headers worth recording: lower-cased, secrets dropped."""
    return {k.lower(): v for k, v in headers.items() if k.lower() not in _SECRET_HEADERS}


def _decode_body(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return data.decode("utf-8", "replace")


class Client:
    """One worker's connection pool and the single-attempt exchange."""

    def __init__(self, settings: ClientSettings, secrets: Secrets) -> None:
        self.settings = settings
        self.secrets = secrets
        self.session = requests.Session()
        self.url = settings.base_url.rstrip("/") + "/chat/completions"
        self.headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": USER_AGENT}
        self.headers.update(settings.extra_headers)
        if settings.api_key:
            self.headers["Authorization"] = f"Bearer {settings.api_key}"

    def close(self) -> None:
        self.session.close()

    def attempt(self, case: Case) -> Envelope:
        """One HTTP exchange. ``elapsed_ms`` spans send to last byte: no parsing, no grading."""
        s = self.settings
        payload = json.dumps(request_body(case, s)).encode("utf-8")
        deadline_s = case.timeout_s or s.case_timeout_s
        timeout = (min(s.connect_timeout_s, deadline_s), deadline_s)
        t0 = time.perf_counter()
        try:
            resp = self.session.post(self.url, data=payload, headers=self.headers, timeout=timeout, stream=True)
        except _TRANSPORT_ERRORS as exc:
            return self._failed(exc, t0, deadline_s)
        try:
            if s.stream and resp.status_code == 200 and "text/event-stream" in resp.headers.get("content-type", ""):
                env = self._read_stream(resp, t0, deadline_s)
            else:
                env = self._read_whole(resp, t0, deadline_s)
            return replace(env, headers=self.secrets.scrub(env.headers), body=self.secrets.scrub(env.body))
        except _TRANSPORT_ERRORS as exc:
            return self._failed(exc, t0, deadline_s)
        finally:
            resp.close()

    def _failed(self, exc: BaseException, t0: float, deadline_s: float) -> Envelope:
        elapsed = (time.perf_counter() - t0) * 1000.0
        if isinstance(exc, requests.ConnectTimeout):
            detail = f"ConnectTimeout: no connection within {min(self.settings.connect_timeout_s, deadline_s):g} s"
        elif isinstance(exc, (requests.ReadTimeout, urllib3.exceptions.ReadTimeoutError, TimeoutError)):
            detail = f"ReadTimeout: no complete response within the case deadline of {deadline_s:g} s"
        else:
            root: BaseException = exc
            # requests wraps urllib3's MaxRetryError ("Max retries exceeded" is urllib3's
            # wording, not our retries); the socket's own error is its `reason`.
            reason = getattr(exc.args[0], "reason", None) if exc.args else None
            if isinstance(reason, BaseException):
                root = reason
            while root.__cause__ is not None or (root.__context__ is not None and not str(root)):
                root = root.__cause__ or root.__context__  # type: ignore[assignment]
            errno = re.search(r"\[Errno -?\d+\][^'\")]*", str(root))
            where = urllib3.util.parse_url(self.url)
            detail = f"{type(root).__name__}: {errno.group(0).strip()} ({where.host}:{where.port})" if errno else f"{type(root).__name__}: {root}"
        return Envelope(error=re.sub(r"\s+", " ", self.secrets.mask(detail))[:300], elapsed_ms=round(elapsed, 3))

    def _over(self, t0: float, deadline_s: float, size: int) -> str | None:
        if size > self.settings.max_response_bytes:
            return f"{OVERSIZED} of {self.settings.max_response_bytes} bytes: cut off"
        if time.perf_counter() - t0 > deadline_s:
            return f"no complete response within the case deadline of {deadline_s:g} s"
        return None

    @staticmethod
    def _read1(resp: requests.Response, t0: float, deadline_s: float) -> bytes:
        """What the body has next, never waiting past the case's total deadline.

        requests' read timeout bounds each wait, not the whole body: a server trickling a
        chunk just inside it would run far past ``timeout_s``. So each read gets the time left.
        """
        sock = getattr(getattr(resp.raw, "connection", None), "sock", None)
        if sock is not None:
            sock.settimeout(max(deadline_s - (time.perf_counter() - t0), 0.001))
        return resp.raw.read1(65536, decode_content=True)

    def _read_whole(self, resp: requests.Response, t0: float, deadline_s: float) -> Envelope:
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = self._read1(resp, t0, deadline_s)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            over = self._over(t0, deadline_s, size)
            if over:
                return Envelope(error=over, http_status=None, elapsed_ms=round((time.perf_counter() - t0) * 1000.0, 3))
        t_end = time.perf_counter()
        return Envelope(
            http_status=resp.status_code,
            elapsed_ms=round((t_end - t0) * 1000.0, 3),
            headers=safe_headers(resp.headers),
            body=_decode_body(b"".join(chunks)),
        )

    def _drain(self, resp: requests.Response, limit: int = 65536, wait_s: float = 0.05) -> None:
        """After ``[DONE]`` (timings taken): read the body's end, briefly, so the connection is reused.

        Without it every streamed call opens a new connection and pays the handshake inside its timing.
        A server that keeps the stream open after ``[DONE]`` only costs ``wait_s``; the connection is then closed.
        """
        sock = getattr(getattr(resp.raw, "connection", None), "sock", None)
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
        except _TRANSPORT_ERRORS:
            return
        finally:
            try:
                sock.settimeout(before)  # the next request is sent with the usual timeout
            except OSError:
                pass

    def _read_stream(self, resp: requests.Response, t0: float, deadline_s: float) -> Envelope:
        assembler = StreamAssembler()
        buffer = bytearray()
        size = 0
        ttft: float | None = None
        t_last = t0
        while True:
            chunk = self._read1(resp, t0, deadline_s)
            if not chunk:
                break
            size += len(chunk)
            over = self._over(t0, deadline_s, size)
            if over:
                return Envelope(error=over, elapsed_ms=round((time.perf_counter() - t0) * 1000.0, 3))
            now = time.perf_counter()
            for data in iter_sse_data(buffer, chunk):
                if assembler.feed(data) and ttft is None:
                    ttft = now
                t_last = now
            if assembler.done:
                self._drain(resp)
                break
        for data in flush_sse(buffer):
            assembler.feed(data)
        return Envelope(
            http_status=resp.status_code,
            elapsed_ms=round((t_last - t0) * 1000.0, 3),
            ttft_ms=round((ttft - t0) * 1000.0, 3) if ttft is not None else None,
            headers=safe_headers(resp.headers),
            body=assembler.body(),
            stream_complete=assembler.complete,
            notes=(f"{assembler.bad_lines} stream line(s) were not JSON and were skipped",) if assembler.bad_lines else (),
        )


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The server's requested wait: ``retry-after-ms``, then ``Retry-After`` as seconds or an HTTP date."""
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # "-0000": HTTP dates are GMT
        when = when.replace(tzinfo=datetime.timezone.utc)
    return max(0.0, when.timestamp() - (now if now is not None else time.time()))


def is_quota_exhausted(body: Any) -> bool:
    """A 429 that says the quota is gone: waiting will not help."""
    text = json.dumps(body) if not isinstance(body, str) else body
    return "insufficient_quota" in text


def retry_verdict(envelope: Envelope, label: Label) -> tuple[bool, str]:
    """Whether a transport failure is worth another attempt, and why not when it is not."""
    if not label.is_transport:
        return False, "graded answers are never retried"
    if envelope.error and envelope.error.startswith(OVERSIZED):
        return False, "an oversized response will not shrink on retry"
    status = envelope.http_status
    if str(envelope.headers.get("x-should-retry", "")).lower() == "false":
        return False, "server said x-should-retry: false"
    if status == 429 and is_quota_exhausted(envelope.body):
        return False, "429 insufficient_quota is not transient"
    if status in _NO_RETRY_STATUSES or (status is not None and 400 <= status < 500 and status not in (408, 409, 425, 429)):
        return False, f"HTTP {status} will not change on retry"
    code = envelope.body.get("error", {}).get("code") if isinstance(envelope.body, dict) and isinstance(envelope.body.get("error"), dict) else None
    if status == 200 and isinstance(code, int) and 400 <= code < 500 and code not in (408, 409, 425, 429):
        return False, f"the stream carried a {code} error, which will not change on retry"
    return True, ""


class Throttle:
    """Run-wide pause: when the server says 429, every worker waits, not just the one that was told."""

    def __init__(self, stop: threading.Event) -> None:
        self._until = 0.0
        self._lock = threading.Lock()
        self._stop = stop

    def pause(self, seconds: float) -> None:
        with self._lock:
            self._until = max(self._until, time.monotonic() + seconds)

    def wait(self) -> None:
        while not self._stop.is_set():
            left = self._until - time.monotonic()
            if left <= 0:
                return
            self._stop.wait(min(left, 0.5))


class Budget:
    """The per-run retry budget shared by all workers."""

    def __init__(self, total: int) -> None:
        self._left = total
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self._left <= 0:
                return False
            self._left -= 1
            return True


@dataclass
class LiveOutcome:
    """Envelopes per case id (repeats in order), and whether the run was cut short."""

    envelopes: dict[str, list[Envelope]]
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)


class Progress:
    """One updating line on a terminal; in CI a line every so many cases, never one per request."""

    def __init__(self, total: int, stream: Any = None, quiet: bool = False) -> None:
        self.total = total
        self.done = 0
        self.labels: dict[str, int] = {}
        self.t0 = time.monotonic()
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = max(10, total // 10)
        self.quiet = quiet
        self._lock = threading.Lock()

    def tick(self, label: str) -> None:
        with self._lock:
            self.done += 1
            self.labels[label] = self.labels.get(label, 0) + 1
            if self.quiet:
                return
            if self.tty or self.done % self.every == 0 or self.done == self.total:
                counts = " ".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
                line = f"[{self.done}/{self.total}] {counts} {time.monotonic() - self.t0:.1f}s"
                self.stream.write(("\r" + line.ljust(78)) if self.tty else line + "\n")
                if self.tty and self.done == self.total:
                    self.stream.write("\n")
                self.stream.flush()


def backoff_s(attempt: int, policy: RetryPolicy, rng: random.Random) -> float:
    """Exponential backoff with jitter, as openai-python does."""
    return min(policy.base_delay_s * 2 ** (attempt - 1), policy.max_delay_s) * (1 - 0.25 * rng.random())


def call_with_retries(
    client: Client,
    case: Case,
    policy: RetryPolicy,
    budget: Budget,
    throttle: Throttle,
    stop: threading.Event,
    rng: random.Random,
) -> tuple[Envelope, list[dict[str, Any]]]:
    """Attempts until a graded answer, a non-retryable failure, or a spent budget."""
    log: list[dict[str, Any]] = []
    attempt = 0
    while True:
        throttle.wait()
        attempt += 1
        env = client.attempt(case)
        label = classify(env, case).label
        entry: dict[str, Any] = {"attempt": attempt, "label": label.value, "http_status": env.http_status, "elapsed_ms": env.elapsed_ms}
        if env.error:
            entry["error"] = env.error
        log.append(entry)
        retry, why = retry_verdict(env, label)
        if not retry:
            notes = (f"not retried: {why}",) if label.is_transport else ()
            return replace(env, attempts=attempt, notes=notes), log
        wanted = retry_after_s(env.headers)
        gave_up = None
        if wanted is not None and wanted > policy.max_retry_after_s:
            gave_up = f"the server asked to retry after {wanted:.0f} s, more than the cap of {policy.max_retry_after_s:.0f} s (--max-retry-after)"
        elif attempt >= policy.max_attempts:
            gave_up = f"gave up after {attempt} attempt(s) (--max-attempts)"
        elif stop.is_set():
            gave_up = "interrupted before a retry"
        elif not budget.take():
            gave_up = f"the run's retry budget is spent (--retry-budget {policy.run_budget})"
        if gave_up:
            entry["gave_up"] = gave_up
            return replace(env, attempts=attempt, notes=(gave_up,)), log
        # Retry-After 0 or negative (Azure sends -1) is no wait at all: back off instead of hammering.
        delay = wanted if wanted is not None and wanted > 0 else backoff_s(attempt, policy, rng)
        entry["retry_in_s"] = round(delay, 3)
        if env.http_status == 429:
            throttle.pause(delay)
            throttle.wait()
        else:
            stop.wait(delay)
        if stop.is_set():  # interrupted while waiting: do not send the retry early
            entry["gave_up"] = "interrupted before a retry"
            return replace(env, attempts=attempt, notes=("interrupted before a retry",)), log


def settings_from(config: RunConfig, extra_headers: Mapping[str, str]) -> ClientSettings:
    return ClientSettings(
        base_url=config.base_url or "",
        model=config.model or "",
        api_key=config.api_key,
        extra_headers=dict(extra_headers),
        temperature=config.temperature,
        stream=config.stream,
        case_timeout_s=config.timeout_s,
    )


def run_live(
    cases: Sequence[Case],
    settings: ClientSettings,
    *,
    concurrency: int = 4,
    repeats: int = 1,
    policy: RetryPolicy = DEFAULT_RETRY,
    record: Path | None = None,
    progress: Progress | None = None,
    stop: threading.Event | None = None,
    grace_s: float = 5.0,
    seed: int | None = None,
) -> LiveOutcome:
    """Every (case, repeat) through a bounded worker pool; results kept in fixture order."""
    stop = stop or threading.Event()
    secrets = Secrets([settings.api_key, *settings.extra_headers.values()])
    jobs = [(i, r) for r in range(repeats) for i in range(len(cases))]
    results: dict[tuple[int, int], Envelope] = {}
    next_job = iter(jobs)
    job_lock = threading.Lock()
    done_lock = threading.Lock()  # results and recording lines in the same (finishing) order
    throttle = Throttle(stop)
    budget = Budget(policy.run_budget)
    writer = RecordingWriter(record) if record else None

    def worker(index: int) -> None:
        client = Client(settings, secrets)
        rng = random.Random(None if seed is None else seed + index)
        try:
            while not stop.is_set():
                with job_lock:
                    job = next(next_job, None)
                if job is None:
                    return
                case = cases[job[0]]
                try:
                    env, log = call_with_retries(client, case, policy, budget, throttle, stop, rng)
                except Exception as exc:  # a bug of ours must cost one case, not a worker's whole queue
                    detail = secrets.mask(f"{type(exc).__name__}: {exc}")[:300]
                    env, log = Envelope(error=f"envelope-ci internal error: {detail}"), [{"attempt": 1, "label": "drop", "error": detail}]
                with done_lock:
                    results[job] = env
                    if writer:
                        writer.write(case.id, env, log)
                if progress:
                    progress.tick(log[-1]["label"])
        finally:
            client.close()

    threads = [threading.Thread(target=worker, args=(i,), name=f"envelope-ci-{i}", daemon=True) for i in range(min(concurrency, len(jobs)) or 1)]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive() and not stop.is_set():
            t.join(0.1)
    if stop.is_set():
        end = time.monotonic() + grace_s
        for t in threads:
            t.join(max(0.0, end - time.monotonic()))
    if writer:
        writer.close()
    outcome = LiveOutcome({c.id: [] for c in cases}, interrupted=stop.is_set())
    # A case's repeats in the order they finished, as the recording lists them, so --replay sees the same run.
    with done_lock:
        finished = list(results.items())
    for (i, _), env in finished:
        outcome.envelopes[cases[i].id].append(env)
    missing = [c.id for c in cases if not outcome.envelopes[c.id]]
    for cid in missing:
        outcome.envelopes[cid] = [Envelope(error="not run: the run was interrupted before this case finished")]
    if outcome.interrupted:
        outcome.notes.append(f"interrupted: {len(results)} of {len(jobs)} calls finished; {len(missing)} case(s) not run")
    return outcome


class Interrupts:
    """First Ctrl-C/SIGTERM: stop scheduling and finish politely. Second Ctrl-C: leave now (130)."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self._saved: dict[int, Any] = {}

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._saved[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.stop.set()
        sys.stderr.write("\nenvelope-ci: stopping: finishing calls in flight, then writing the reports (Ctrl-C again to quit now)\n")

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)


def fetch_envelopes(cases: Sequence[Case], config: RunConfig, extra_headers: Mapping[str, str] | None = None,
                    policy: RetryPolicy | None = None) -> LiveOutcome:
    """The live path the runner plugs in: settings from the config, signals handled, progress shown."""
    settings = settings_from(config, extra_headers or {})
    stop = threading.Event()
    progress = Progress(len(cases) * config.repeats, quiet=config.quiet)
    with Interrupts(stop):
        return run_live(
            cases, settings, concurrency=config.concurrency, repeats=config.repeats,
            policy=policy or config.retry, record=config.record, progress=progress, stop=stop,
        )

