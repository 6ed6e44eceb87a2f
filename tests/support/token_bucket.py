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
up: what most servers send) and the same three headers; the request takes no token. With ``tpm``, a
token limit works the same way beside it, with the ``x-ratelimit-*-tokens`` headers.

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
class _Level:
    """One bucket's level: ``size`` at most, refilled ``per_s`` a second; it starts full."""

    size: float
    per_s: float
    level: float | None = None
    last: float = 0.0

    def at(self, now: float) -> float:
        """The level now, refilled since it was last read."""
        if self.level is None:
            self.level, self.last = self.size, now
        self.level = min(self.size, self.level + (now - self.last) * self.per_s)
        self.last = now
        return self.level

    def headers(self, kind: str) -> dict[str, str]:
        """OpenAI's three headers of this limit (``requests`` or ``tokens``), its level as it is."""
        level = self.level if self.level is not None else self.size
        return {f"x-ratelimit-limit-{kind}": str(int(self.size)),
                f"x-ratelimit-remaining-{kind}": str(math.floor(level)),
                f"x-ratelimit-reset-{kind}": _go_duration((self.size - level) / self.per_s)}


@dataclass
class TokenBucket:
    """The bucket and the answers it sends. Its ``behaviour`` is called under the fake's lock, so it needs none.

    With ``tpm``, a token limit too: each request is charged ``token_cost`` tokens from a bucket of
    ``token_burst`` (default ``tpm``) refilled at ``tpm`` a "minute", and refused when it holds fewer.
    """

    rpm: int = 120
    burst: int | None = None
    minute_s: float = 60.0
    answer: Behaviour = field(default_factory=lambda: Behaviour.ok("ok"))
    counts: dict[str, int] = field(default_factory=lambda: {"answered": 0, "refused": 0})
    tpm: int | None = None
    token_burst: int | None = None
    token_cost: int = 0
    _requests: _Level | None = None
    _tokens: _Level | None = None

    @property
    def size(self) -> int:
        return self.burst or self.rpm

    @property
    def interval_s(self) -> float:
        """Real seconds between two new request tokens."""
        return self.minute_s / self.rpm

    def behaviour(self, key: str | None) -> Behaviour:
        """The answer to one chat request: the planted answer with the limits' headers, or a 429."""
        now = time.monotonic()
        requests, tokens = self._levels()
        has, has_tokens = requests.at(now), tokens.at(now) if tokens else math.inf
        if has < 1 or has_tokens < self.token_cost:
            self.counts["refused"] += 1
            wait = max((1 - has) / requests.per_s, (self.token_cost - has_tokens) / tokens.per_s if tokens else 0.0)
            return Behaviour.status(429, RPM_LIMIT_BODY, {"Retry-After": str(math.ceil(wait)), **self._headers()})
        requests.level = has - 1
        if tokens:
            tokens.level = has_tokens - self.token_cost
        self.counts["answered"] += 1
        return replace(self.answer, headers={**self.answer.headers, **self._headers()})

    def _levels(self) -> tuple[_Level, _Level | None]:
        """The request bucket, and the token bucket when there is a token limit."""
        if self._requests is None:
            self._requests = _Level(float(self.size), self.rpm / self.minute_s)
        if self._tokens is None and self.tpm:
            self._tokens = _Level(float(self.token_burst or self.tpm), self.tpm / self.minute_s)
        return self._requests, self._tokens

    def _headers(self) -> dict[str, str]:
        """OpenAI's headers of each limit, as the buckets hold now."""
        requests, tokens = self._levels()
        return {**requests.headers("requests"), **(tokens.headers("tokens") if tokens else {})}


def serve_token_bucket(bucket: TokenBucket) -> FakeOpenAI:
    """A started fake server behind ``bucket`` (``srv.chaos`` is the bucket); close it, or use it in ``with``."""
    return FakeOpenAI(bucket.answer, chaos=bucket).start()  # type: ignore[arg-type]  # the chaos hook is duck-typed
