"""Whether and when to try a case again: the verdict, the backoff, the budgets, the run-wide pause."""
from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import replace
from typing import Any

from ..grading.envelope import transport_label
from ..grading.grade import grade
from ..model import Case, Envelope, Label, RetryPolicy
from .http import Client
from .reading import OVERSIZED
from .retry_after import retry_after_s

_NO_RETRY_STATUSES = frozenset({400, 401, 403, 404, 405, 413, 415, 422})
_RETRYABLE_4XX = (408, 409, 425, 429)
AttemptLog = list[dict[str, Any]]


def is_quota_exhausted(body: Any) -> bool:
    """A 429 that says the quota is gone: waiting will not help."""
    text = json.dumps(body) if not isinstance(body, str) else body
    return "insufficient_quota" in text


def retry_verdict(envelope: Envelope, label: Label | None) -> tuple[bool, str]:
    """Whether a transport failure is worth another attempt, and why not when it is not.

    ``label`` is ``grading.envelope.transport_label(envelope)``: None (or any label that is not
    drop or empty) is an answer, and answers are never retried.
    """
    if label is None or not label.is_transport:
        return False, "graded answers are never retried"
    if envelope.error and envelope.error.startswith(OVERSIZED):
        return False, "an oversized response will not shrink on retry"
    status = envelope.http_status
    if str(envelope.headers.get("x-should-retry", "")).lower() == "false":
        return False, "server said x-should-retry: false"
    if status == 429 and is_quota_exhausted(envelope.body):
        return False, "429 insufficient_quota is not transient"
    if status in _NO_RETRY_STATUSES or (status is not None and 400 <= status < 500 and status not in _RETRYABLE_4XX):
        return False, f"HTTP {status} will not change on retry"
    code = _stream_error_code(envelope.body)
    if status == 200 and isinstance(code, int) and 400 <= code < 500 and code not in _RETRYABLE_4XX:
        return False, f"the stream carried a {code} error, which will not change on retry"
    return True, ""


def _stream_error_code(body: Any) -> Any:
    error = body.get("error") if isinstance(body, dict) else None
    return error.get("code") if isinstance(error, dict) else None


def backoff_s(attempt: int, policy: RetryPolicy, rng: random.Random) -> float:
    """Exponential backoff with jitter, as openai-python does, so workers do not retry in step."""
    return min(policy.base_delay_s * 2 ** (attempt - 1), policy.max_delay_s) * (1 - 0.25 * rng.random())


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


def call_with_retries(
    client: Client,
    case: Case,
    policy: RetryPolicy,
    budget: Budget,
    throttle: Throttle,
    stop: threading.Event,
    rng: random.Random,
) -> tuple[Envelope, AttemptLog]:
    """Attempts until an answer, a failure not worth retrying, or a spent budget; with the log of each attempt."""
    log: AttemptLog = []
    attempt = 0
    while True:
        throttle.wait()
        attempt += 1
        env = client.attempt(case)
        entry = _log_entry(attempt, env, case)
        log.append(entry)
        failure = transport_label(env)
        retry, why = retry_verdict(env, failure)
        if not retry:
            return replace(env, attempts=attempt, notes=(f"not retried: {why}",) if failure is not None else ()), log
        wanted = retry_after_s(env.headers)
        gave_up = _reason_to_stop(wanted, attempt, policy, budget, stop)
        if not gave_up:
            # Retry-After 0 or negative (Azure sends -1) is no wait at all: back off instead of hammering.
            delay = wanted if wanted is not None and wanted > 0 else backoff_s(attempt, policy, rng)
            entry["retry_in_s"] = round(delay, 3)
            gave_up = _wait(delay, env.http_status == 429, throttle, stop)
        if gave_up:
            entry["gave_up"] = gave_up
            return replace(env, attempts=attempt, notes=(gave_up,)), log


def _log_entry(attempt: int, env: Envelope, case: Case) -> dict[str, Any]:
    """One line of the attempt log; its label is the attempt's grade, which the progress line counts."""
    entry: dict[str, Any] = {"attempt": attempt, "label": grade(env, case).label.value, "http_status": env.http_status, "elapsed_ms": env.elapsed_ms}
    if env.error:
        entry["error"] = env.error
    return entry


def _reason_to_stop(wanted: float | None, attempt: int, policy: RetryPolicy, budget: Budget, stop: threading.Event) -> str | None:
    """Why a retryable failure gets no retry after all; None to go on (which spends one from the run's budget)."""
    if wanted is not None and wanted > policy.max_retry_after_s:
        return f"the server asked to retry after {wanted:.0f} s, more than the cap of {policy.max_retry_after_s:.0f} s (--max-retry-after)"
    if attempt >= policy.max_attempts:
        return f"gave up after {attempt} attempt(s) (--max-attempts)"
    if stop.is_set():
        return "interrupted before a retry"
    if not budget.take():
        return f"the run's retry budget is spent (--retry-budget {policy.run_budget})"
    return None


def _wait(delay: float, rate_limited: bool, throttle: Throttle, stop: threading.Event) -> str | None:
    """Sleep before a retry (a 429 pauses the whole run); why not to retry if interrupted meanwhile."""
    if rate_limited:
        throttle.pause(delay)
        throttle.wait()
    else:
        stop.wait(delay)
    return "interrupted before a retry" if stop.is_set() else None  # do not send the retry early
