"""Whether and when to try a case again: the verdict, the backoff, the budgets, the run-wide pause."""
from __future__ import annotations

import json
import math
import random
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from msgspec.structs import replace

from ..errors import UsageError
from ..grading.envelope import stream_was_cut, transport_label
from ..grading.grade import grade
from ..model import Case, Envelope, Label, RetryPolicy
from .adaptive import AdaptiveLimit, Pacer, Pressure
from .http import Client, tokens_charged
from .reading import OVERSIZED
from .retry_after import rate_limit, rate_limit_reset_s, retry_after_s, spent_limit_reset_s, unpaced_kinds

_NO_RETRY_STATUSES = frozenset({400, 401, 403, 404, 405, 413, 415, 422})
_RETRYABLE_4XX = (408, 409, 425, 429)
AttemptLog = list[dict[str, Any]]
# The default --retry-budget, half a retry per call: with three attempts a run whose attempts fail at a
# rate p needs p + p² retries per call, 0.2 at the 17% of a bad day (10% 503s, 5% resets, 2% cut
# bodies; 429s cost none); past a third failing the server is down, and the budget stops the run
# doubling its load. Never below the old fixed default, so small suites keep their retries.
RETRIES_PER_CALL = 0.5
MIN_RUN_BUDGET = 100


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
    if status is not None and 300 <= status < 400:
        return False, f"a redirect (HTTP {status}) is not followed"
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


Endpoint = tuple[str, str]  # (base URL, model): one request limit, as OpenAI keeps one per model


class Throttle:
    """Run-wide pause: when the server says 429, every worker waits, not just the one that was told.

    It also keeps the run's total pause, bounded by ``max_wait_s`` (--max-rate-limit-wait): waiting
    on rate limits costs no attempts, so this cap is what stops a run that is limited for good.
    Besides, each endpoint's starts are spaced to its request and token limits' refill rates (``turn``): a
    run going as fast as the server allows is not waiting for it, so that spacing is not in the pause.
    """

    def __init__(self, stop: threading.Event, max_wait_s: float = math.inf, max_space_s: float = math.inf) -> None:
        self._until = 0.0
        self._lock = threading.Lock()
        self._stop = stop
        self._max_space_s = max_space_s
        self._pacers: dict[Endpoint, Pacer] = {}
        self.max_wait_s = max_wait_s
        self.waited_s = 0.0  # the run's pause so far: overlapping pauses count once
        self.paced_s = 0.0  # of it, holding requests until a used-up limit reset (``pace``)
        self.spent = False  # a pause was refused: the run may wait no longer

    def turn(self, endpoint: Endpoint, tokens: float) -> tuple[Pacer, int]:
        """Wait out the run's pause, then the endpoint's next start of ``tokens`` estimated tokens; its pacer and the
        start's number, for the answer.

        A wait for the limit to refill longer than ``max_space_s`` (--max-retry-after) is not taken.
        """
        self.wait()
        with self._lock:
            pacer = self._pacers.setdefault(endpoint, Pacer(self._max_space_s))
        start, delay = pacer.admit(tokens)
        if delay > 0:
            self._stop.wait(delay)
            self.wait()  # a 429 may have paused the run meanwhile
        return pacer, start

    def spaced(self) -> tuple[int, float]:
        """How many starts waited for a limit to refill, and for how long (each endpoint's overlaps counted once)."""
        with self._lock:
            pacers = list(self._pacers.values())
        return sum(p.held for p in pacers), sum(p.held_s for p in pacers)

    def pause(self, seconds: float) -> bool:
        """Pause the run ``seconds`` from now; False, pausing nothing, when that would pass the cap."""
        with self._lock:
            if self.spent or self._extend(seconds) is None:
                self.spent = True
                return False
            return True

    def pace(self, seconds: float) -> None:
        """Hold new attempts ``seconds`` because an answer said its limit is used up, before the server has to refuse
        them.

        It counts as waiting on rate limits, within the same cap; a hold that would pass the cap
        is not taken, and the run goes on: the 429 that follows, if one does, decides.
        """
        with self._lock:
            if not self.spent:
                self.paced_s += self._extend(seconds) or 0.0

    def _extend(self, seconds: float) -> float | None:
        """Move the pause's end ``seconds`` from now if that stays within the cap; the seconds it added, or None."""
        now = time.monotonic()
        until = max(self._until, now + seconds)
        more = until - max(self._until, now)
        if self.waited_s + more > self.max_wait_s:
            return None
        self.waited_s += more
        self._until = until
        return more

    def wait(self) -> None:
        while not self._stop.is_set():
            left = self._until - time.monotonic()
            if left <= 0:
                return
            self._stop.wait(min(left, 0.5))


class Budget:
    """The per-run retry budget shared by all workers, and how many retries it refused."""

    def __init__(self, total: int, flag: str) -> None:
        self.total = total
        self.flag = flag  # how the run set it, for the notes
        self.refused = 0
        self._left = total
        self._lock = threading.Lock()

    @classmethod
    def for_run(cls, policy: RetryPolicy, calls: int) -> Budget:
        """``--retry-budget`` when given, else sized to the run's calls (cases x repeats)."""
        if policy.run_budget is not None:
            return cls(policy.run_budget, f"--retry-budget {policy.run_budget}")
        total = max(MIN_RUN_BUDGET, math.ceil(calls * RETRIES_PER_CALL))
        return cls(total, f"{RETRIES_PER_CALL:g} per call for {calls} call(s), at least {MIN_RUN_BUDGET}; "
                          "--retry-budget sets another")

    def take(self) -> bool:
        with self._lock:
            if self._left <= 0:
                self.refused += 1
                return False
            self._left -= 1
            return True

    def spent(self) -> str:
        return f"the run's retry budget of {self.total} is spent ({self.flag})"


def call_with_retries(
    client: Client,
    case: Case,
    policy: RetryPolicy,
    budget: Budget,
    throttle: Throttle,
    limiter: AdaptiveLimit,
    stop: threading.Event,
    rng: random.Random,
) -> tuple[Envelope, AttemptLog]:
    """Attempts until an answer, a failure not worth retrying, or a spent budget; with the log of each attempt.

    A 429 is the server pacing the run, not the case failing: the run waits it out, and it uses
    neither the case's attempts (--max-attempts) nor the run's retry budget; the throttle's cap
    bounds that waiting instead. Each attempt takes one of the run's concurrency slots (``limiter``).
    """
    log: AttemptLog = []
    tries = _Tries()
    while True:
        env, failure = _attempt(client, case, limiter, throttle, policy, stop)
        entry = _log_entry(len(log) + 1, env, case)
        log.append(entry)
        retry, why = retry_verdict(env, failure)
        if not retry:
            said = (f"not retried: {why}",) if failure is not None else ()
            return replace(env, attempts=len(log), notes=(*env.notes, *said)), log
        limited = env.http_status == 429
        in_a_row = tries.add(env.http_status, client.provider.busy_statuses)
        wanted = retry_after_s(env.headers)
        if wanted is None and limited:
            wanted = rate_limit_reset_s(client.provider.rate_limits(env.headers))
        gave_up = _reason_to_stop(wanted, tries, limited, policy, budget, stop)
        if not gave_up:
            # Retry-After 0 or negative (Azure sends -1) is no wait at all: back off instead of hammering.
            delay = wanted if wanted is not None and wanted > 0 else backoff_s(in_a_row, policy, rng)
            entry["retry_in_s"] = round(delay, 3)
            gave_up = _rate_limit_wait(delay, throttle, stop) if limited else _wait(delay, stop)
        if gave_up:
            entry["gave_up"] = gave_up
            return replace(env, attempts=len(log), notes=(*env.notes, gave_up)), log


def _attempt(client: Client, case: Case, limiter: AdaptiveLimit, throttle: Throttle, policy: RetryPolicy,
             stop: threading.Event) -> tuple[Envelope, Label | None]:
    """One attempt in one of the run's concurrency slots, once the run's pause is over and the endpoint's limit has
    room; with its transport label.

    What the attempt said sets the run's concurrency and the endpoint's pacing, and an answer whose
    limit is used up (``x-ratelimit-remaining-*: 0``) and cannot be paced holds the run's next
    attempts until that limit resets.
    """
    epoch = limiter.acquire(stop)
    signal = Pressure.NEITHER  # a bug of ours raising here gives the slot back all the same
    try:
        env = _paced_attempt(client, case, throttle)
        failure = transport_label(env)
        signal = pressure(env, failure is None, client.provider.busy_statuses)
    finally:
        limiter.release(epoch, signal)
    if env.http_status != 429:  # a 429's own wait is the retry's
        limits = client.provider.rate_limits(env.headers)
        _pace(limits, throttle, policy, unpaced_kinds(limits))
    return env, failure


def _paced_attempt(client: Client, case: Case, throttle: Throttle) -> Envelope:
    """One attempt once the endpoint's limits have room; what its answer says of them paces the next."""
    body = client.request_body(case)
    pacer, start = throttle.turn((client.settings.base_url, client.settings.model), tokens_charged(case, body))
    env: Envelope | None = None
    try:
        env = client.attempt(case, body)
    finally:  # a bug of ours raising in the attempt must not leave the start open for ever
        limits = client.provider.rate_limits(env.headers) if env is not None else {}
        pacer.observe(start, rate_limit(limits, "requests"), rate_limit(limits, "tokens"))
    return env



def pressure(env: Envelope, answered: bool, busy: Collection[int] = (503,)) -> Pressure:
    """What an attempt says about the server's capacity: ``answered`` is whether it carried an answer (no transport
    label); ``busy`` are the provider's overloaded statuses (503; Anthropic's 529 too)."""
    status = env.http_status
    if status == 429 or (status in busy and retry_after_s(env.headers) is not None):
        return Pressure.LIMITED
    return Pressure.ANSWERED if answered else Pressure.NEITHER


def _pace(limits: Mapping[str, str], throttle: Throttle, policy: RetryPolicy, kinds: Sequence[str]) -> None:
    """Hold the run until a limit of ``kinds`` a response's rate-limit headers (``limits``, in the pacer's terms) say
    is used up resets, unless that is longer than --max-retry-after allows: the limits the pacer cannot space requests
    to."""
    reset = spent_limit_reset_s(limits, kinds)
    if reset is not None and 0 < reset <= policy.max_retry_after_s:
        throttle.pace(reset)


def _log_entry(attempt: int, env: Envelope, case: Case) -> dict[str, Any]:
    """One line of the attempt log; its label is the attempt's grade, which the progress line counts."""
    entry: dict[str, Any] = {"attempt": attempt, "label": _attempt_label(env, case), "http_status": env.http_status,
                             "elapsed_ms": env.elapsed_ms}
    if env.error:
        entry["error"] = env.error
    if stream_was_cut(env):
        entry["stream_cut"] = True  # the pool counts these: several suggest a server serving one request at a time
    return entry


def _attempt_label(env: Envelope, case: Case) -> str:
    """The attempt's grade; a user's grader that fails is reported once, when the run grades (exit 2), not as a drop
    here."""
    try:
        return grade(env, case).label.value
    except UsageError:
        return "grader-error"


# A 503 is the server saying it is busy (RFC 9110: temporary overload), not that this case is broken:
# it counts half an attempt against --max-attempts, so a busy server gets twice the patience of a
# failing one. At 10% 503s and 3 attempts a case gives up after six 503s in a row (one in a million),
# not three (one in a thousand: a 48-case run in about 20 would end with an undelivered case).
BUSY_STATUS = 503
_HALVES_PER_ATTEMPT = 2


@dataclass
class _Tries:
    """One case's failed attempts so far: rate-limited ones, busy ones (503) and the rest, and what --max-attempts has
    counted."""

    limited: int = 0
    busy: int = 0
    other: int = 0

    def add(self, status: int | None, busy: Collection[int] = (BUSY_STATUS,)) -> int:
        """Count one failed attempt; how many of its kind there have been (the backoff's exponent). ``busy``: the
        provider's overloaded statuses, counted as a 503 is."""
        if status == 429:
            self.limited += 1
            return self.limited
        if status in busy:
            self.busy += 1
        else:
            self.other += 1
        return self.busy + self.other

    def out_of(self, max_attempts: int) -> bool:
        """Whether the case has used its --max-attempts, a 503 counting half (1 still means one attempt: no retries at
        all)."""
        return max_attempts <= 1 or self.busy + _HALVES_PER_ATTEMPT * self.other >= _HALVES_PER_ATTEMPT * max_attempts

    def gave_up(self) -> str:
        busy = f" ({self.busy} of them 503, counted half: the server was busy)" if self.busy else ""
        besides = f", besides {self.limited} rate-limited one(s)" if self.limited else ""
        return f"gave up after {self.busy + self.other} attempt(s){busy}{besides} (--max-attempts)"


def _reason_to_stop(wanted: float | None, tries: _Tries, limited: bool, policy: RetryPolicy, budget: Budget,
                    stop: threading.Event) -> str | None:
    """Why a retryable failure gets no retry after all; None to go on (which spends one from the run's budget unless
    rate-limited)."""
    if wanted is not None and wanted > policy.max_retry_after_s:
        return (f"the server asked to retry after {wanted:.0f} s, "
                f"more than the cap of {policy.max_retry_after_s:.0f} s (--max-retry-after)")
    if not limited and tries.out_of(policy.max_attempts):
        return tries.gave_up()
    if stop.is_set():
        return "interrupted before a retry"
    if not limited and not budget.take():
        return budget.spent()
    return None


def _rate_limit_wait(delay: float, throttle: Throttle, stop: threading.Event) -> str | None:
    """Pause the whole run before retrying a 429; why not to retry when the run's wait is spent or it was
    interrupted."""
    if not throttle.pause(delay):
        return rate_limit_spent(throttle.max_wait_s)
    throttle.wait()
    return "interrupted before a retry" if stop.is_set() else None


def rate_limit_spent(max_wait_s: float) -> str:
    """The reason a case is undelivered once the run has waited on 429s as long as it may."""
    return f"rate limited: the run has waited on 429s as long as --max-rate-limit-wait allows ({max_wait_s:g} s)"


def _wait(delay: float, stop: threading.Event) -> str | None:
    """Sleep before a retry; why not to retry if interrupted meanwhile."""
    stop.wait(delay)
    return "interrupted before a retry" if stop.is_set() else None  # do not send the retry early
