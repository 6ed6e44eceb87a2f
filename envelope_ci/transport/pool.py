"""The worker pool: every (case, repeat) through a bounded set of threads, results kept per case."""
from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..model import Case, Envelope, RetryPolicy
from ..providers.base import Provider
from ..providers.openai_chat import OPENAI_CHAT
from ..secrets import Secrets
from ..sources.recordings import RecordingWriter
from .http import Client, ClientSettings
from .progress import Progress
from .retry import Budget, Throttle, call_with_retries

DEFAULT_RETRY = RetryPolicy()
Job = tuple[int, int]  # (case index, repeat)


@dataclass
class LiveOutcome:
    """Envelopes per case id (repeats in order), and whether the run was cut short."""

    envelopes: dict[str, list[Envelope]]
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)


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
    grace_s: float = 5.0,
    seed: int | None = None,
) -> LiveOutcome:
    """Every (case, repeat) through a bounded worker pool, so a slow endpoint is called in parallel but never flooded.

    ``stop`` ends scheduling; calls in flight then get ``grace_s`` to finish. ``seed`` makes the backoff jitter reproducible.
    """
    writer = RecordingWriter(record) if record else None
    pool = _Pool(cases, settings, provider, policy, stop or threading.Event(), progress, writer, repeats)
    threads = [threading.Thread(target=pool.work, args=(i, seed), name=f"envelope-ci-{i}", daemon=True)
               for i in range(min(concurrency, len(pool.jobs)) or 1)]
    for t in threads:
        t.start()
    _join(threads, pool.stop, grace_s)
    if writer:
        writer.close()
    return pool.outcome()


def _join(threads: list[threading.Thread], stop: threading.Event, grace_s: float) -> None:
    """Wait for the workers; once stopped, give the calls in flight ``grace_s`` in all, then move on."""
    for t in threads:
        while t.is_alive() and not stop.is_set():
            t.join(0.1)
    if stop.is_set():
        end = time.monotonic() + grace_s
        for t in threads:
            t.join(max(0.0, end - time.monotonic()))


class _Pool:
    """What the workers share: the job queue, the retry budget and pause, and the finished envelopes."""

    def __init__(self, cases: Sequence[Case], settings: ClientSettings, provider: Provider, policy: RetryPolicy,
                 stop: threading.Event, progress: Progress | None, writer: RecordingWriter | None, repeats: int) -> None:
        self.cases, self.settings, self.provider, self.policy = cases, settings, provider, policy
        self.stop, self.progress, self.writer = stop, progress, writer
        self.secrets = Secrets([settings.api_key, *settings.extra_headers.values()])
        self.jobs: list[Job] = [(i, r) for r in range(repeats) for i in range(len(cases))]
        self._next_job = iter(self.jobs)
        self._job_lock = threading.Lock()
        self._done_lock = threading.Lock()  # results and recording lines in the same (finishing) order
        self.results: dict[Job, Envelope] = {}
        self.throttle = Throttle(stop)
        self.budget = Budget(policy.run_budget)

    def work(self, index: int, seed: int | None) -> None:
        """One worker: its own connection pool, taking jobs until none are left or the run stops."""
        client = Client(self.provider, self.settings, self.secrets)
        rng = random.Random(None if seed is None else seed + index)
        try:
            while not self.stop.is_set():
                job = self._take()
                if job is None:
                    return
                case = self.cases[job[0]]
                env, log = self._call(client, case, rng)
                self._finish(job, case, env, log)
        finally:
            client.close()

    def _take(self) -> Job | None:
        with self._job_lock:
            return next(self._next_job, None)

    def _call(self, client: Client, case: Case, rng: random.Random) -> tuple[Envelope, list[dict[str, Any]]]:
        try:
            return call_with_retries(client, case, self.policy, self.budget, self.throttle, self.stop, rng)
        except Exception as exc:  # a bug of ours must cost one case, not a worker's whole queue
            detail = self.secrets.mask(f"{type(exc).__name__}: {exc}")[:300]
            return Envelope(error=f"envelope-ci internal error: {detail}"), [{"attempt": 1, "label": "drop", "error": detail}]

    def _finish(self, job: Job, case: Case, env: Envelope, log: list[dict[str, Any]]) -> None:
        with self._done_lock:
            self.results[job] = env
            if self.writer:
                self.writer.write(case.id, env, log)
        if self.progress:
            self.progress.tick(log[-1]["label"])

    def outcome(self) -> LiveOutcome:
        """Envelopes per case; a case never finished gets a drop that says so."""
        outcome = LiveOutcome({c.id: [] for c in self.cases}, interrupted=self.stop.is_set())
        # A case's repeats in the order they finished, as the recording lists them, so --replay sees the same run.
        with self._done_lock:
            finished = list(self.results.items())
        for (i, _), env in finished:
            outcome.envelopes[self.cases[i].id].append(env)
        missing = [c.id for c in self.cases if not outcome.envelopes[c.id]]
        for cid in missing:
            outcome.envelopes[cid] = [Envelope(error="not run: the run was interrupted before this case finished")]
        if outcome.interrupted:
            outcome.notes.append(f"interrupted: {len(self.results)} of {len(self.jobs)} calls finished; {len(missing)} case(s) not run")
        return outcome
