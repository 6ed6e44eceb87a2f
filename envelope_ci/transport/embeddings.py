"""The embeddings calls of a live run's ``similar`` assertions: each text embedded once per run, each call's envelope
attached to the model's.

The wire shape is OpenAI's ``POST /v1/embeddings``: ``{"model": MODEL, "input": TEXT}`` in,
``{"data": [{"embedding": [...]}], "model": ...}`` out (``grading.assertions.similar`` reads
it). The endpoint is ``embeddings`` under ``endpoints`` in envelope-ci.yaml, allowed by the
operator like a judge's (``sources.endpoints``). A failed call is retried as a model call's
drop is (``retry.retry_verdict``): up to --max-attempts, from the run's retry budget, after the
server's Retry-After (up to --max-retry-after) or a backoff. One that never arrives is attached
as it came back: grading then makes the case undelivered, never ``wrong``.
"""
from __future__ import annotations

import random
import threading
from collections.abc import Mapping
from typing import Any

from msgspec.structs import replace

from ..canonical import digest
from ..grading.assertions.similar import read_vector, similars, texts_to_embed
from ..grading.envelope import classify
from ..model import Case, Envelope, Label, RetryPolicy
from ..providers.openai_chat import OpenAIChat
from ..secrets import Secrets
from ..sources.endpoints import EMBEDDINGS
from .http import Client, ClientSettings
from .retry import Budget, backoff_s, retry_verdict
from .retry_after import retry_after_s
from .watchdog import Watchdog


class _EmbeddingsWire(OpenAIChat):
    """OpenAI's wire format at ``/embeddings``: its own request body and path; its name (on the envelopes it makes),
    errors, headers and key are chat's, so grading reads a failed call's status and error as it reads any."""

    path = "/embeddings"  # after the base URL, as chat's /chat/completions is

    def request_body(self, case: Case, model: str, temperature: float, stream: bool) -> dict[str, Any]:
        """The model and the one text to embed (the asking case's only message); never streamed."""
        return {"model": model, "input": case.messages[0]["content"]}


_WIRE = _EmbeddingsWire()


class Embedder:
    """One run's embeddings client: the ``embeddings`` endpoint's settings, the run's retry budget and stop, and the
    embeddings already fetched, by text (the expected texts come back on every repeat of every case)."""

    def __init__(self, settings: ClientSettings | None, secrets: Secrets, watchdog: Watchdog, policy: RetryPolicy,
                 budget: Budget, stop: threading.Event) -> None:
        self.settings, self.secrets, self.watchdog = settings, secrets, watchdog
        self.policy, self.budget, self.stop = policy, budget, stop
        self._fetched: dict[str, Envelope] = {}  # by text, each read and written under its own gate
        self._gates: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()  # for the gates

    @classmethod
    def for_run(cls, endpoints: Mapping[str, ClientSettings], secrets: Secrets, watchdog: Watchdog,
                policy: RetryPolicy, budget: Budget, stop: threading.Event) -> Embedder:
        """The run's embedder: ``endpoints`` are the named endpoints its cases call (the judges' mapping)."""
        return cls(endpoints.get(EMBEDDINGS), secrets, watchdog, policy, budget, stop)

    def attach(self, case: Case, env: Envelope, rng: random.Random) -> Envelope:
        """The envelope with an embeddings call's envelope for each text its ``similar`` assertions compare, so it is
        graded and recorded with them; an answer the envelope alone labels (a drop, a cut) is not embedded."""
        if self.settings is None or not similars(case):
            return env
        judged = classify(env)
        if judged.label is not None or judged.reply is None:
            return env
        return replace(env, embeddings={text: self._embedding(case, text, rng)
                                        for text in texts_to_embed(case, judged.reply)})

    def _embedding(self, case: Case, text: str, rng: random.Random) -> Envelope:
        """The text's embeddings envelope: fetched once per run, the workers asking for it meanwhile waiting for that
        one call; a failed one is fetched again when next asked."""
        with self._lock:
            gate = self._gates.setdefault(text, threading.Lock())
        with gate:
            found = self._fetched.get(text)
            if found is None:
                found = self._fetch(case, text, rng)
                if read_vector(found)[0] is not None:
                    self._fetched[text] = found
        return found

    def _fetch(self, case: Case, text: str, rng: random.Random) -> Envelope:
        """One text's embeddings call with its retries, recorded with what it asked for."""
        assert self.settings is not None  # attach asks only when the run has the endpoint
        asking = Case(id=f"{case.id} (embeddings)", stratum=None, messages=({"role": "user", "content": text},),
                      file=case.file, line=case.line, digest="")
        client = Client(_WIRE, self.settings, self.secrets, self.watchdog)
        try:
            env, attempts = self._attempts(client, asking, rng)
        except Exception as exc:  # a bug of ours must cost one case's embedding, not a worker's whole queue
            env, attempts = Envelope(error=f"envelope-ci internal error: {self.secrets.mask(repr(exc))[:300]}"), 1
        finally:
            client.close()
        model = self.settings.model
        return replace(env, attempts=attempts,
                       request={"digest": digest({"model": model, "input": text}), "parts": {"model": model}})

    def _attempts(self, client: Client, asking: Case, rng: random.Random) -> tuple[Envelope, int]:
        """Attempts until a body, a failure not worth retrying, the case's attempts or the run's budget are spent, or
        the run stops."""
        attempt = 0
        while True:
            attempt += 1
            env = client.attempt(asking)
            failed = env.error is not None or env.http_status != 200
            retry, _ = retry_verdict(env, Label.DROP if failed else None)
            if not retry or attempt >= self.policy.max_attempts or self.stop.is_set() or not self.budget.take():
                return env, attempt
            wanted = retry_after_s(env.headers)
            delay = wanted if wanted is not None and wanted > 0 else backoff_s(attempt, self.policy, rng)
            if delay > self.policy.max_retry_after_s or self.stop.wait(delay):
                return env, attempt
