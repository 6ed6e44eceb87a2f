"""The worker pool: every (case, repeat) through a bounded set of threads, each graded as it arrives."""
from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from ..config import LIVE_GRACE_S, out_of_time
from ..grading.envelope import classify, spoken_text
from ..grading.grade import grade
from ..grading.rubric import judge_request, rubrics
from ..model import Case, Envelope, Grade, RetryPolicy
from ..providers.base import Provider
from ..providers.openai_chat import OPENAI_CHAT
from ..providers.registry import provider_named
from ..report.build import as_kept
from ..report.model import ConcurrencyChange, LiveRun
from ..secrets import Secrets
from ..sources.recordings import RecordingWriter
from ..sources.requests import request_record
from ..urls import endpoint_secrets
from .adaptive import AdaptiveLimit
from .embeddings import Embedder
from .http import Client, ClientSettings, provider_url
from .progress import Progress
from .retry import Budget, Throttle, call_with_retries, rate_limit_spent
from .watchdog import Watchdog

DEFAULT_RETRY = RetryPolicy()
Job = tuple[int, int]  # (case index, repeat)


# From this many cut streams on, a run suggests --concurrency 1: one cut is a hiccup, several a pattern.
CUT_STREAMS_NOTE_AT = 2


@dataclass
class LiveOutcome:
    """Grades per case id (repeats in the order they finished), whether the run was cut short, and what the server
    did to it.

    Grades, not envelopes: each envelope is graded, recorded and let go as it arrives, so a run's
    memory does not grow with the size of its answers (a grade keeps the preview, not the text).
    """

    grades: dict[str, list[Grade]]
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)  # why an interrupted run judges nothing
    cut_streams: int = 0  # attempts whose stream the server cut before a finish_reason (retried as drops)
    rate_limit_wait_s: float = 0.0  # how long the run was paused on 429s (and held by x-ratelimit-remaining-*: 0)
    paced_s: float = 0.0  # of it, held by x-ratelimit-remaining-*: 0 before the server had to refuse
    spaced: int = 0  # request starts that waited for an endpoint's request limit to refill (not in the wait above)
    spaced_s: float = 0.0  # how long they waited, overlaps counted once per endpoint
    rate_limit_spent: bool = False  # the run reached --max-rate-limit-wait: cases left were not run
    concurrency: int = 1
    budget_spent: str | None = None  # the retry budget ran out and refused retries: how it was set
    concurrency_history: tuple[tuple[float, int], ...] = ()  # (seconds into the run, limit from then on): changes only

    def remarks(self) -> list[str]:
        """Report notes on how the endpoint behaved: what a reader should change, or know, about this run."""
        out = []
        if self.cut_streams >= CUT_STREAMS_NOTE_AT:
            out.append(
                f"the server cut {self.cut_streams} streamed response(s) before a finish_reason (retried as drops): "
                + ("it may serve one request at a time (llama-cpp-python cuts a stream when the next request arrives, "
                   "unless started with --interrupt_requests False); try --concurrency 1" if self.concurrency > 1 else
                   "one request at a time, so not for another request: "
                   "a proxy's timeout shorter than the answers take?"))
        if self.rate_limit_spent:
            out.append(f"rate limited: the run stopped after waiting {self.rate_limit_wait_s:.1f} s on 429s "
                       "(--max-rate-limit-wait); the cases left are undelivered")
        elif self.rate_limit_wait_s > 0:
            on = "429s" if not self.paced_s else (
                f"rate limits ({self.paced_s:.1f} s of it holding requests "
                "until a used-up x-ratelimit-remaining-* reset)")
            out.append(f"rate limited: the run waited {self.rate_limit_wait_s:.1f} s on {on} "
                       "(attempts are not counted against --max-attempts)")
        if self.spaced:
            out.append(f"paced to the server's rate limits: {self.spaced} request(s) waited {self.spaced_s:.1f} s "
                       "in all for them to refill (x-ratelimit-*-requests, -tokens), not counted as waiting on rate "
                       "limits")
        out.extend(self._concurrency_remark())
        if self.budget_spent:
            out.append(f"retries ended by the budget, not the server: {self.budget_spent}; "
                       "raise --retry-budget for a run that resolves them")
        return out

    def _concurrency_remark(self) -> list[str]:
        """How far 429s (or 503s with Retry-After) lowered the concurrency, and whether answers brought it back."""
        if not self.concurrency_history:
            return []
        top = self.concurrency_history[0][1]
        low_at, low = min(self.concurrency_history, key=lambda point: (point[1], point[0]))
        if low == top:
            return []
        end_at, end = self.concurrency_history[-1]
        after = f"back to {top} by {end_at:.1f} s" if end == top else f"{end} at the end"
        return [f"concurrency lowered from {top} to {low} at {low_at:.1f} s by 429s or 503s with Retry-After, {after} "
                "(--concurrency is the ceiling)"]

    def live_run(self) -> LiveRun:
        """The report's ``live`` block."""
        history = self.concurrency_history or ((0.0, self.concurrency),)
        return LiveRun(self.concurrency, tuple(ConcurrencyChange(t, n) for t, n in history),
                       round(self.rate_limit_wait_s, 3))


def run_live(
    cases: Sequence[Case],
    settings: ClientSettings,
    *,
    provider: Provider = OPENAI_CHAT,
    concurrency: int = 4,
    repeats: int = 1,
    policy: RetryPolicy = DEFAULT_RETRY,
    record: Path | None = None,
    progress: Progress | None = None,
    stop: threading.Event | None = None,
    grace_s: float = LIVE_GRACE_S,
    seed: int | None = None,
    max_run_s: float | None = None,
    started_at: float | None = None,
    judges: Mapping[str, ClientSettings] | None = None,
    record_headers: Sequence[str] = (),
) -> LiveOutcome:
    """Every (case, repeat) through a bounded worker pool, so a slow endpoint is called in parallel but never flooded.

    ``stop`` ends scheduling, and so does ``max_run_s`` (--max-run-time) passing, counted from ``started_at``
    (``time.monotonic()`` when the run began: loading the fixtures used some of it; default now); calls in flight then
    get ``grace_s`` to finish, and are cut after it. ``seed`` makes the backoff jitter reproducible.
    A grader that raised is raised again once the run is over, as when grading came after it.
    ``judges`` are the llm-rubric endpoints by name: each answer is judged before it is graded and recorded.
    ``record_headers`` are the response headers a recording keeps (``record_headers`` in envelope-ci.yaml).
    """
    _check_urls(settings, provider, judges or {})
    writer = RecordingWriter(record, record_headers) if record else None
    watchdog = Watchdog()
    try:
        pool = _Pool(cases, settings, provider, policy, stop or threading.Event(), progress, writer, repeats, watchdog,
                     judges or {}, concurrency)
        threads = [threading.Thread(target=pool.work, args=(i, seed), name=f"envelope-ci-{i}", daemon=True)
                   for i in range(pool.limiter.ceiling)]
        for t in threads:
            t.start()
        started = time.monotonic() if started_at is None else started_at
        if _join(threads, pool.stop, grace_s, started + (max_run_s or math.inf)) and max_run_s is not None:
            pool.out_of_time = out_of_time(max_run_s)
    finally:
        watchdog.close()  # calls still in flight after the grace are cut here
        if writer:
            writer.close()
    if pool.grading_error is not None:
        raise pool.grading_error
    return pool.outcome()


def _check_urls(settings: ClientSettings, provider: Provider, judges: Mapping[str, ClientSettings]) -> None:
    """Refuse, before any call, a provider that would post away from its endpoint's host (a usage error, exit 2)."""
    provider_url(provider, settings.base_url)
    for name, judge in judges.items():
        provider_url(provider_named(judge.provider, f"endpoints.{name}.provider"), judge.base_url)


def _join(threads: list[threading.Thread], stop: threading.Event, grace_s: float, deadline: float) -> bool:
    """Wait for the workers, stopping them at the run's ``deadline``; once stopped, give the calls in flight
    ``grace_s`` in all.

    True when the deadline stopped the run.
    """
    out_of_time = False
    for t in threads:
        while t.is_alive() and not stop.is_set():
            if time.monotonic() >= deadline:
                out_of_time = True
                stop.set()
            t.join(0.1)
    if stop.is_set():
        end = time.monotonic() + grace_s
        for t in threads:
            t.join(max(0.0, end - time.monotonic()))
    return out_of_time


class _Pool:
    """What the workers share: the job queue, the retry budget and pause, the concurrency limit, the watchdog, and
    the grades so far.

    There are as many workers as the limit's ceiling; the limit gates their attempts, not their number.
    """

    def __init__(self, cases: Sequence[Case], settings: ClientSettings, provider: Provider, policy: RetryPolicy,
                 stop: threading.Event, progress: Progress | None, writer: RecordingWriter | None, repeats: int,
                 watchdog: Watchdog, judges: Mapping[str, ClientSettings], concurrency: int) -> None:
        self.cases, self.settings, self.provider, self.policy = cases, settings, provider, policy
        self.stop, self.progress, self.writer, self.watchdog, self.judges = stop, progress, writer, watchdog, judges
        self.secrets = Secrets([s for c in (settings, *judges.values())
                                for s in (c.api_key, *c.extra_headers.values(), *endpoint_secrets(c.base_url))])
        self.repeats = repeats
        self.jobs: list[Job] = [(i, r) for r in range(repeats) for i in range(len(cases))]
        self._next_job = iter(self.jobs)
        self._job_lock = threading.Lock()
        self._done_lock = threading.Lock()  # results and recording lines in the same (finishing) order
        self.results: dict[Job, Grade] = {}
        self.throttle = Throttle(stop, policy.max_rate_limit_wait_s, policy.max_retry_after_s)
        self.budget = Budget.for_run(policy, len(self.jobs))
        self.embedder = Embedder.for_run(judges, self.secrets, watchdog, policy, self.budget, stop)  # for ``similar``
        self.limiter = AdaptiveLimit(min(concurrency, len(self.jobs)) or 1, policy.adaptive_concurrency)
        self.cut_streams = 0
        self.out_of_time: str | None = None  # why the run's time was up, if it was
        self.grading_error: Exception | None = None

    def work(self, index: int, seed: int | None) -> None:
        """One worker: its own connection pool, taking jobs until none are left or the run stops."""
        client = Client(self.provider, self.settings, self.secrets, self.watchdog)
        judges = {name: Client(provider_named(s.provider, f"endpoints.{name}.provider"), s, self.secrets, self.watchdog)
                  for name, s in self.judges.items()}  # each judge in its own endpoint's wire format
        rng = random.Random(None if seed is None else seed + index)
        try:
            while not self.stop.is_set() and not self.throttle.spent:  # spent: the server will not have us
                job = self._take()
                if job is None:
                    return
                case = self.cases[job[0]]
                env, log = self._call(client, case, rng)
                self._finish(job, case, self.embedder.attach(case, self._judged(judges, case, env, rng), rng), log)
        finally:
            for c in (client, *judges.values()):
                c.close()

    def _take(self) -> Job | None:
        with self._job_lock:
            return next(self._next_job, None)

    def _call(self, client: Client, case: Case, rng: random.Random) -> tuple[Envelope, list[dict[str, Any]]]:
        try:
            return call_with_retries(client, case, self.policy, self.budget, self.throttle, self.limiter,
                                     self.stop, rng)
        except Exception as exc:  # a bug of ours must cost one case, not a worker's whole queue
            detail = self.secrets.mask(f"{type(exc).__name__}: {exc}")[:300]
            return (Envelope(error=f"envelope-ci internal error: {detail}", provider=client.provider.name),
                    [{"attempt": 1, "label": "drop", "error": detail}])

    def _judged(self, judges: Mapping[str, Client], case: Case, env: Envelope, rng: random.Random) -> Envelope:
        """The envelope with each llm-rubric's judge envelope attached (same retries and budget), so it is graded
        and recorded with them.

        An answer the envelope alone labels (a drop, a cut) is not sent to the judge: there is nothing to judge.
        """
        asked = rubrics(case)
        judged = classify(env) if asked else None
        if judged is None or judged.label is not None or judged.reply is None:
            return env
        answer = spoken_text(judged.reply)
        found: dict[str, Envelope] = {}
        for rubric in asked:
            client = judges[rubric.endpoint]
            request = judge_request(case, rubric, answer)
            verdict, _ = self._call(client, request, rng)
            found[rubric.text] = replace(
                verdict, request=request_record(request, client.settings.model, client.settings.temperature,
                                                client.provider))
        return replace(env, judgements=found)

    def _finish(self, job: Job, case: Case, env: Envelope, log: list[dict[str, Any]]) -> None:
        """Record the envelope, then keep only its grade: the body goes with the envelope."""
        graded = self._grade(env, case)
        with self._done_lock:
            if graded is not None:
                self.results[job] = graded
            self.cut_streams += sum(1 for entry in log if entry.get("stream_cut"))
            if self.writer:  # with what was asked, so an offline run can tell the answer is still to today's request
                self.writer.write(
                    case.id, replace(env, request=request_record(case, self.settings.model, self.settings.temperature,
                                                                 self.provider)),
                    log)
        if self.progress:  # the case's label with its judges' verdicts, not its last attempt's without them
            self.progress.tick(graded.label.value if graded is not None else log[-1]["label"])

    def _grade(self, env: Envelope, case: Case) -> Grade | None:
        """The envelope's grade, its text cut to the report's preview; None once a grader raised (the run raises it
        at its end)."""
        try:
            done = grade(env, case)
        except Exception as exc:  # a user's grader (exit 2) or a bug of ours: raised once,
            # as when grading came after the run
            with self._done_lock:
                self.grading_error = self.grading_error or exc
            return None
        return as_kept(done)

    def outcome(self) -> LiveOutcome:
        """Grades per case; a case never finished gets a drop that says why."""
        spaced, spaced_s = self.throttle.spaced()
        outcome = LiveOutcome({c.id: [] for c in self.cases}, interrupted=self.stop.is_set(),
                              cut_streams=self.cut_streams, rate_limit_wait_s=self.throttle.waited_s,
                              paced_s=self.throttle.paced_s, spaced=spaced, spaced_s=spaced_s,
                              rate_limit_spent=self.throttle.spent,
                              concurrency=self.limiter.ceiling, concurrency_history=tuple(self.limiter.history),
                              budget_spent=(
                                  f"{self.budget.spent()}, and {self.budget.refused} failed attempt(s) got no retry"
                                  if self.budget.refused else None))
        # A case's repeats in the order they finished, as the recording lists them, so --replay sees the same run.
        with self._done_lock:
            finished = list(self.results.items())
        for (i, _), graded in finished:
            outcome.grades[self.cases[i].id].append(graded)
        missing = [c for c in self.cases if not outcome.grades[c.id]]
        why = self._why_stopped()
        for case in missing:
            outcome.grades[case.id] = [grade(self._unrun(f"not run: {why} before this case finished"), case)]
        for case in self.cases:  # a repeat never sent is lost evidence, as a dropped one is:
            # the run cannot pass on fewer
            unsent = self.repeats - len(outcome.grades[case.id])
            outcome.grades[case.id] += (
                [grade(self._unrun(f"not run: {why} before this repeat finished"), case)] * max(0, unsent))
        if outcome.interrupted:
            outcome.notes.append(
                f"{why}: {len(self.results)} of {len(self.jobs)} calls finished; {len(missing)} case(s) not run")
        return outcome

    def _unrun(self, why: str) -> Envelope:
        """A drop for a call never made, in the run's wire format, so it names no provider the run did not use."""
        return Envelope(error=why, provider=self.provider.name)

    def _why_stopped(self) -> str:
        if self.out_of_time:
            return self.out_of_time
        if self.stop.is_set():
            return "the run was interrupted"
        return rate_limit_spent(self.policy.max_rate_limit_wait_s)
