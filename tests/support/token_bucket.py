"""A third-party-like rate-limited endpoint: a token bucket in front of the fake OpenAI server, with OpenAI's headers.

Standard library and ``tests/support/fake_openai.py`` only. Every chat request takes a token from a
bucket of ``burst`` tokens (default ``rpm``) refilled at ``rpm`` per "minute" (``minute_s`` real
seconds, so tests scale it down), counted when the request arrives, as OpenAI counts it. Every
answer carries the request limit's headers as OpenAI writes them:

* ``x-ratelimit-limit-requests``: the bucket's size;
* ``x-ratelimit-remaining-requests``: the whole tokens left after this request took its own;
* ``x-ratelimit-reset-requests``: the time until the bucket is full again, as a Go duration
  (``"520ms"``, ``"35.5s"``, ``"1m0s"``): OpenAI's meaning, not the time to the next token.

An empty bucket answers 429 ``rate_limit_exceeded`` with ``Retry-After`` in whole seconds (rounded
up: what most servers send) and the same three headers, remaining ``0``; the request takes no token.

::

    from tests.support.token_bucket import TokenBucket, serve_token_bucket

    with serve_token_bucket(TokenBucket(rpm=600, minute_s=6.0)) as srv:   # 100 requests a second, 600 at once
        srv.url                        # "http://127.0.0.1:PORT/v1", a started FakeOpenAI
        srv.chaos.counts               # {"answered": n, "refused": n}
        srv.all_requests               # every request with its arrival time (``t``) and behaviour

The bucket sits in the fake's ``chaos`` hook, which sees each chat request before the planted
behaviours: every answer the bucket lets through is ``answer`` (default ``Behaviour.ok("ok")``)
with the headers added, whatever was planted.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

from tests.support.fake_openai import RPM_LIMIT_BODY, Behaviour, FakeOpenAI, _go_duration


@dataclass
class TokenBucket:
    """The bucket and the answers it sends. Its ``behaviour`` is called under the fake's lock, so it needs none."""

    rpm: int = 120
    burst: int | None = None
    minute_s: float = 60.0
    answer: Behaviour = field(default_factory=lambda: Behaviour.ok("ok"))
    counts: dict[str, int] = field(default_factory=lambda: {"answered": 0, "refused": 0})
    _tokens: float | None = None
    _last: float = 0.0

    @property
    def size(self) -> int:
        return self.burst or self.rpm

    @property
    def interval_s(self) -> float:
        """Real seconds between two new tokens."""
        return self.minute_s / self.rpm

    def behaviour(self, key: str | None) -> Behaviour:
        """The answer to one chat request: the planted answer with the limit's headers, or a 429."""
        tokens = self._refill(time.monotonic())
        if tokens < 1:
            self.counts["refused"] += 1
            wait = (1 - tokens) * self.interval_s
            return Behaviour.status(429, RPM_LIMIT_BODY, {"Retry-After": str(math.ceil(wait)), **self._headers(0.0)})
        self._tokens = tokens - 1
        self.counts["answered"] += 1
        return replace(self.answer, headers={**self.answer.headers, **self._headers(self._tokens)})

    def _refill(self, now: float) -> float:
        """The tokens in the bucket now; the bucket starts full."""
        if self._tokens is None:
            self._tokens, self._last = float(self.size), now
        self._tokens = min(float(self.size), self._tokens + (now - self._last) / self.interval_s)
        self._last = now
        return self._tokens

    def _headers(self, tokens: float) -> dict[str, str]:
        """OpenAI's three request-limit headers for a bucket holding ``tokens``."""
        return {"x-ratelimit-limit-requests": str(self.size),
                "x-ratelimit-remaining-requests": str(math.floor(tokens)),
                "x-ratelimit-reset-requests": _go_duration((self.size - tokens) * self.interval_s)}


def serve_token_bucket(bucket: TokenBucket) -> FakeOpenAI:
    """A started fake server behind ``bucket`` (``srv.chaos`` is the bucket); close it, or use it in ``with``."""
    return FakeOpenAI(bucket.answer, chaos=bucket).start()  # type: ignore[arg-type]  # the chaos hook is duck-typed
