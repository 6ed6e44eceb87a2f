"""A fake OpenAI-compatible ``/v1/chat/completions`` server for tests and benchmarks.

Standard library only. It serves real HTTP/1.1 over real sockets on 127.0.0.1, so
tests can drive the real envelope-ci CLI against it. The wire shapes (bodies,
error bodies, SSE streams) follow what OpenAI, Azure OpenAI, vLLM and llama.cpp send,
as their API references and source document them.

Quick start
-----------
::

    from tests.support.fake_openai import FakeOpenAI, Behaviour, refused_url

    with FakeOpenAI() as srv:                    # starts a background thread
        srv.url                                  # "http://127.0.0.1:PORT/v1"
        srv.plant("case-1", Behaviour.ok("hello"))
        srv.plant("case-2", [Behaviour.server_error(503), Behaviour.ok("hi")])
        srv.default = Behaviour.ok("fallback")   # when no planted key matches
        # ... client POSTs {srv.url}/chat/completions ...
        srv.attempts("case-2")                   # -> 2
        srv.requests("case-2")[0].t              # time.monotonic() at arrival
        srv.all_requests                         # every request, in arrival order

Import: ``from tests.support.fake_openai import ...``, from the tests and from the
benchmarks run from the repository root (``python -m bench.live_bench``). Tests
mostly take it started from the ``srv`` fixture of ``tests/conftest.py``.

Public API (stable)
-------------------
``FakeOpenAI(default: Behaviour | list[Behaviour] | None = None, *, port: int = 0, chaos: Chaos | None = None)``
    Threaded HTTP/1.1 server on 127.0.0.1 (port 0 = ephemeral). Keep-alive,
    ``TCP_NODELAY`` on accepted sockets; every non-streaming response (status
    line + headers + body) goes out in ONE ``sendall``. No log output.

    ``start() -> FakeOpenAI``   start serving (idempotent); ``__enter__`` calls it.
    ``close(timeout=5.0)``      stop: aborts hang/slow/endless behaviours at once,
                                closes idle keep-alive connections, joins threads.
                                Idempotent; ``stop`` is an alias; ``__exit__`` calls it.
    ``url`` -> ``"http://127.0.0.1:PORT/v1"``; ``base_url`` -> without ``/v1``;
    ``host``, ``port``.
    ``default``                 attribute, a Behaviour or a list of Behaviours
                                (default ``Behaviour.ok()``). A list is indexed by
                                the number of earlier requests with the same key
                                (or with no key), the last entry repeating.
    ``plant(key, behaviour_or_list)``  a Behaviour, or a list: one per successive
                                attempt for that key, the last repeats. Planting
                                again replaces the list and restarts it at its
                                first entry (recorded requests are kept).
    ``unplant(key)``, ``clear()`` (forget plants, records and counters; default kept).
    ``attempts(key) -> int``    requests recorded with that key.
    ``requests(key) -> list[RecordedRequest]``.
    ``all_requests -> list[RecordedRequest]`` (property; a copy).
    ``errors -> list[BaseException]`` (property) exceptions raised inside the
                                fake itself (e.g. ``huge(n_bytes)`` too small); the
                                request then gets a 500 with header
                                ``x-fake-openai-error: 1``. Should stay empty.

``RecordedRequest`` (dataclass)
    ``t`` (``time.monotonic()`` when the request line and headers had been read),
    ``method``, ``path``, ``headers`` (``Headers``: a dict with lower-case keys
    and case-insensitive ``[]``/``get``/``in``), ``body`` (parsed JSON, or None
    when the body is not JSON), ``raw`` (bytes), ``key`` (str | None),
    ``attempt`` (1-based count for that key), ``behaviour`` (the Behaviour
    served, None for non-chat paths), ``stream`` (request had ``"stream": true``),
    ``client`` (the client's ``(host, port)``: same port = same keep-alive connection).

Matching a request to a key
    The key is found as the substring ``[[KEY]]`` anywhere in the text of the
    request's ``messages`` (string contents, and ``text`` of list-of-parts
    contents). If several planted keys occur, the one appearing first wins. If
    no planted key occurs, the first ``[[...]]`` marker (if any) becomes the
    key, still counted by ``attempts()``, and ``default`` is served.

``Behaviour`` (dataclass) -- build with the classmethods below. Every
constructor also takes keyword options (they are dataclass fields):
``delay_ms`` (sleep before the response headers, measured from arrival),
``model`` (default ``"fake-model-1"``), ``headers`` (extra response headers;
they replace defaults of the same name), ``ttft_ms`` (streams: delay after the
headers before the first data chunk), ``chunk_gap_ms`` (streams: gap before
each later delta/finish chunk), ``pings`` (streams: ``: ping`` comment lines
right after the headers and between data chunks), ``stream`` (None = follow the
request's ``"stream"``; True/False force SSE / plain JSON where the kind
supports both).

  Successes (200):
    ``ok(content="Hello! How can I help you today?", finish_reason="stop", usage=True)``
    ``tool_call(name="get_weather", arguments='{"city":"Edinburgh"}', *, content=None, finish_reason="tool_calls")``
        ``arguments`` may also be a dict (json-encoded). content null by default.
    ``refusal(text="I'm very sorry, but I can't assist with that.")``  content null.
    ``length(content='{"')``  finish_reason "length"; completion_tokens is the
        request's ``max_completion_tokens``/``max_tokens`` when given.
    ``content_filter()``  Azure shape: content null, finish_reason content_filter,
        ``content_filter_results`` per choice, ``prompt_filter_results`` on top.
    ``empty_choices()``  ``choices: []``.   ``null_content()``  content null, no
        tool_calls, no refusal, finish "stop".
    ``malformed_json()``  Content-Type application/json, body a truncated ok body.
    ``html_200()``  200 ``text/html`` page.
  Errors (same JSON/HTML whether or not the request streams):
    ``status(code, body=None, headers=None)``  generic. body: dict/list -> JSON;
        str/bytes sent as is (Content-Type application/json if it parses as
        JSON, text/html if it starts with "<", else text/plain; override with
        ``headers``); None -> OpenAI-style ``{"error":{...}}`` for the code.
    ``rate_limited(retry_after=None, retry_after_ms=None, retry_after_date=None)``
        429 ``rate_limit_exceeded`` + ``x-ratelimit-*`` headers. ``retry_after``
        -> ``Retry-After: <seconds>`` (number or str, sent as is);
        ``retry_after_ms`` -> ``retry-after-ms: <ms>``; ``retry_after_date`` ->
        ``Retry-After: <HTTP-date>``: a str is sent verbatim, a datetime is
        formatted, a number means "this many seconds after the response is
        sent" (rounded UP to the next whole second; HTTP-dates have 1 s
        resolution). ``retry_after`` and ``retry_after_date`` are exclusive.
    ``quota_exhausted()``  429 ``insufficient_quota`` (not transient).
    ``server_error(code=500)``  500 OpenAI ``server_error`` JSON; 502/504 nginx
        HTML; 503 llama.cpp ``{"error":{"code":503,"message":"Loading model",
        "type":"unavailable_error"}}``; other codes an OpenAI-style JSON.
    ``bad_request_context_length()``  400 ``context_length_exceeded``.
    ``unauthorized()``  401 vLLM ``{"error":"Unauthorized"}``.
    ``flat_error()``  400 older-vLLM flat ``{"object":"error",...,"code":400}``.
  Transport faults:
    ``reset(partial=True)``  send the headers (with the full Content-Length)
        and part of the body -- or of the SSE stream -- then SO_LINGER 0 +
        close: the client sees an RST mid-body. ``partial=False``: RST before
        any byte of the response.
    ``hang(seconds=30.0, content=...)``  send nothing for ``seconds`` (aborted at
        once by ``close()``), then a normal ``ok`` response (late).
    ``slow_body(chunks=5, gap_ms=200, content=...)``  headers at once, then an
        ok body (full Content-Length) trickled in ``chunks`` pieces, each after
        ``gap_ms``. For streaming requests: an ok stream of ``chunks`` content
        deltas, ``gap_ms`` apart.
    ``trickle_head(gap_ms=2000, content=...)``  an ok response (plain JSON) sent one
        byte every ``gap_ms``, status line and headers first: each read waits less
        than any read timeout, the whole never arrives in time.
    ``huge(n_bytes=None)``  a 200 ok JSON body of exactly ``n_bytes`` bytes
        (minimum about 400); ``None`` = endless (chunked JSON that never ends).
        For streaming requests: ~16 KiB content deltas until about ``n_bytes``
        of content, then finish + [DONE]; ``None`` = endless stream.
  Streaming (request ``"stream": true``): ``ok``, ``length``, ``tool_call``,
    ``refusal`` stream in the openai-python capture shape: a role chunk
    (``{"role":"assistant","content":"","refusal":null}``; tool calls: content
    null + the tool-call header; refusals: content null + ``"refusal":""``),
    deltas, a finish_reason chunk, then -- if the request had
    ``stream_options.include_usage`` and ``usage=True`` -- a ``choices: []``
    usage chunk, then ``data: [DONE]``. Content is split into word pieces
    (``re.findall(r"\\S+\\s*|\\s+")``), tool arguments into 8-char pieces.
    ``content_filter``, ``null_content`` and ``empty_choices`` stream too
    (role + content_filter finish; role with content null + stop; no choice
    chunks at all), and so does ``malformed_json`` (role chunk, then a truncated
    ``data:`` line, then [DONE]). Other kinds answer as for non-streaming.
    Streams use ``Transfer-Encoding: chunked`` (keep-alive); one SSE event per
    HTTP chunk.
    ``stream_cut(content="The answer is", done=False)``  role + deltas, then the
        HTTP body ends cleanly (terminal chunk) with no finish chunk and no [DONE].
        ``done=True``: a bare ``data: [DONE]`` before the end, still no finish
        chunk (what llama-cpp-python's server sends a stream it interrupts).
    ``stream_error(content="Partial", message=...)``  role + deltas, then vLLM's
        ``data: {"error":{"message":...,"type":"InternalServerError","param":null,
        "code":500}}`` and ``data: [DONE]`` (status already 200).
    ``stream_azure_prefilter(content=...)``  Azure's ``choices: []`` chunk with
        ``prompt_filter_results`` first, then a normal ok stream. For a
        non-streaming request: an Azure-shaped ok body (filter results).
    ``stream_cut`` and ``stream_error`` answer with SSE even to a non-streaming
    request (a server that ignores ``stream``).

Chaos (a third-party endpoint on a bad day): ``FakeOpenAI(chaos=Chaos(...))`` or
    ``srv.chaos = Chaos(...)``. Before any planted behaviour, each chat request meets
    a token bucket of ``rpm`` requests per "minute" (``burst`` tokens, default
    ``rpm``; a "minute" lasts ``minute_s`` real seconds, so tests scale it down):
    beyond it a 429 with ``retry-after-ms``, ``Retry-After`` (whole seconds,
    rounded up) and ``x-ratelimit-*`` headers saying when the next token comes.
    A request the bucket lets through is then, by a draw seeded with ``seed``, the
    request's key and its number among that key's requests let through (so each
    case's sequence is the same whatever the threads' order), a 429 carrying only
    ``x-ratelimit-reset-requests`` (a Go duration, e.g. ``25ms``) with
    probability ``share_429``, or a llama.cpp 503 with probability ``share_503``.
    The random 429 also says the token limit (``x-ratelimit-reset-tokens: 6m0s``)
    is far from spent, so a client must pick the limit that is. With probability
    ``share_reset`` the draw is an RST before any byte (``reset(partial=False)``), and
    with ``share_cut`` a body cut mid-way by an RST (``reset()``). None of these advances
    the key's planted list. ``srv.chaos.counts`` -> ``{"bucket_429": n, "random_429": n,
    "random_503": n, "random_reset": n, "random_cut": n}``.

Other endpoints: ``GET /v1/models`` (one model), ``GET /health``
(``{"status":"ok"}``); any other path is a 404 OpenAI-style error. A chat
request whose body is not JSON gets a 400 ``invalid_request_error``. All are
recorded.

Module functions
    ``refused_url() -> str``  "http://127.0.0.1:PORT/v1" for a port nobody
        listens on (bound to port 0, read, closed).
    ``serve_fixed_delay(delay_ms, content="ok", *, port=0) -> FakeOpenAI``
        a STARTED server whose default is ``Behaviour.ok(content,
        delay_ms=delay_ms)``; call ``close()`` (or use it in ``with``).

CLI (manual use / benchmarks)
    ``python -m tests.support.fake_openai --port 0 --delay-ms 50 [--content TEXT]``
    (from the repository root)
    prints the URL (one line, flushed) and serves ``ok`` with that delay until
    SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import email.utils
import http
import http.server
import json
import math
import os
import random
import re
import signal
import socket
import socketserver
import string
import struct
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Behaviour",
    "Chaos",
    "FakeOpenAI",
    "Headers",
    "RecordedRequest",
    "refused_url",
    "serve_fixed_delay",
    "DEFAULT_MODEL",
]

DEFAULT_MODEL = "fake-model-1"
SYSTEM_FINGERPRINT = "fp_fake0c0ffee"
HOST = "127.0.0.1"

# --------------------------------------------------------------------------- bodies
# Error bodies as the servers' API references document them, unless noted.
OPENAI_500_BODY = {
    "error": {
        "message": "The server had an error while processing your request. Sorry about that!",
        "type": "server_error",
        "param": None,
        "code": None,
    }
}
NGINX_HTML = (
    "<html>\r\n<head><title>{code} {phrase}</title></head>\r\n<body>\r\n"
    "<center><h1>{code} {phrase}</h1></center>\r\n<hr><center>nginx</center>\r\n"
    "</body>\r\n</html>\r\n"
)
LLAMACPP_503_BODY = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
RATE_LIMIT_BODY = {
    "error": {
        "message": (
            "Rate limit reached for 10KTPM-200RPM in organization org-fake on tokens per min. "
            "Limit: 10000 / min. Please try again in 6ms. Contact us through our help center "
            "at help.openai.com if you continue to have issues."
        ),
        "type": "tokens",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}
QUOTA_BODY = {
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "param": None,
        "code": None,
    }
}
CONTEXT_LENGTH_BODY = {
    "error": {
        "message": (
            "This model's maximum context length is 4097 tokens. However, your messages "
            "resulted in 4294 tokens. Please reduce the length of the messages."
        ),
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
UNAUTHORIZED_BODY = {"error": "Unauthorized"}
FLAT_ERROR_BODY = {
    "object": "error",
    "message": "max_tokens must be at least 1, got -186.",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}
BAD_JSON_BODY = {
    "error": {
        "message": (
            "We could not parse the JSON body of your request. (HINT: This likely means you "
            "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, "
            "but what was sent was not valid JSON.)"
        ),
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
}
HTML_200_PAGE = (
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\">"
    "<title>Sign in to continue</title></head>\n<body>\n<h1>Authentication required</h1>\n"
    "<p>Please sign in through the corporate gateway to access this service.</p>\n"
    "</body>\n</html>\n"
)
_SAFE = {"filtered": False, "severity": "safe"}
AZURE_PROMPT_FILTER_RESULTS = [
    {
        "prompt_index": 0,
        "content_filter_results": {
            "hate": dict(_SAFE),
            "jailbreak": {"filtered": False, "detected": False},
            "self_harm": dict(_SAFE),
            "sexual": dict(_SAFE),
            "violence": dict(_SAFE),
        },
    }
]
AZURE_SAFE_RESULTS = {"hate": dict(_SAFE), "self_harm": dict(_SAFE), "sexual": dict(_SAFE), "violence": dict(_SAFE)}
AZURE_FILTERED_RESULTS = {
    "hate": dict(_SAFE),
    "self_harm": dict(_SAFE),
    "sexual": dict(_SAFE),
    "violence": {"filtered": True, "severity": "medium"},
}


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _rand(n: int) -> str:
    return "".join(random.choices(string.ascii_letters + string.digits, k=n))


def _phrase(code: int) -> str:
    try:
        return http.HTTPStatus(code).phrase
    except ValueError:
        return "Unknown"


# --------------------------------------------------------------------------- Behaviour
@dataclass
class Behaviour:
    """What the fake does for one request. Build with the classmethods."""

    kind: str = "ok"
    content: str | None = "Hello! How can I help you today?"
    finish_reason: str | None = "stop"
    usage: bool = True
    status_code: int = 200
    body: Any = None
    headers: dict[str, Any] = field(default_factory=dict)
    delay_ms: float = 0.0
    model: str = DEFAULT_MODEL
    ttft_ms: float = 0.0
    chunk_gap_ms: float = 0.0
    pings: bool = False
    stream: bool | None = None
    tool_name: str | None = None
    tool_arguments: str | None = None
    refusal_text: str | None = None
    seconds: float = 0.0
    chunks: int = 1
    gap_ms: float = 0.0
    n_bytes: int | None = None
    partial: bool = True
    error_message: str | None = None
    done: bool = False

    # ---- successes
    @classmethod
    def ok(cls, content: str = "Hello! How can I help you today?", finish_reason: str = "stop",
           usage: bool = True, **opts: Any) -> Behaviour:
        return cls(kind="ok", content=content, finish_reason=finish_reason, usage=usage, **opts)

    @classmethod
    def tool_call(cls, name: str = "get_weather", arguments: str | dict = '{"city":"Edinburgh"}', *,
                  content: str | None = None, finish_reason: str = "tool_calls", **opts: Any) -> Behaviour:
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, separators=(",", ":"))
        return cls(kind="tool_call", tool_name=name, tool_arguments=arguments, content=content,
                   finish_reason=finish_reason, **opts)

    @classmethod
    def refusal(cls, text: str = "I'm very sorry, but I can't assist with that.", **opts: Any) -> Behaviour:
        return cls(kind="refusal", refusal_text=text, content=None, finish_reason="stop", **opts)

    @classmethod
    def length(cls, content: str = '{"', **opts: Any) -> Behaviour:
        return cls(kind="ok", content=content, finish_reason="length", **opts)

    @classmethod
    def content_filter(cls, **opts: Any) -> Behaviour:
        return cls(kind="content_filter", content=None, finish_reason="content_filter", **opts)

    @classmethod
    def empty_choices(cls, **opts: Any) -> Behaviour:
        return cls(kind="empty_choices", content=None, finish_reason=None, **opts)

    @classmethod
    def null_content(cls, **opts: Any) -> Behaviour:
        return cls(kind="null_content", content=None, finish_reason="stop", **opts)

    @classmethod
    def malformed_json(cls, **opts: Any) -> Behaviour:
        return cls(kind="malformed_json", **opts)

    @classmethod
    def html_200(cls, **opts: Any) -> Behaviour:
        return cls(kind="html_200", **opts)

    # ---- HTTP errors
    @classmethod
    def status(cls, code: int, body: Any = None, headers: dict[str, Any] | None = None, **opts: Any) -> Behaviour:
        if body is None:
            body = {"error": {"message": _phrase(code),
                              "type": "server_error" if code >= 500 else "invalid_request_error",
                              "param": None, "code": None}}
        return cls(kind="status", status_code=code, body=body, headers=dict(headers or {}), **opts)

    @classmethod
    def rate_limited(cls, retry_after: float | str | None = None, retry_after_ms: float | str | None = None,
                     retry_after_date: Any = None, **opts: Any) -> Behaviour:
        if retry_after is not None and retry_after_date is not None:
            raise ValueError("retry_after and retry_after_date both set a Retry-After header")
        h: dict[str, Any] = {
            "x-ratelimit-limit-requests": "200",
            "x-ratelimit-limit-tokens": "10000",
            "x-ratelimit-remaining-requests": "199",
            "x-ratelimit-remaining-tokens": "0",
            "x-ratelimit-reset-requests": "300ms",
            "x-ratelimit-reset-tokens": "6ms",
        }
        if retry_after is not None:
            h["Retry-After"] = str(retry_after)
        if retry_after_ms is not None:
            h["retry-after-ms"] = str(retry_after_ms)
        if retry_after_date is not None:
            h["Retry-After"] = _http_date_value(retry_after_date)
        h.update(opts.pop("headers", None) or {})
        return cls.status(429, RATE_LIMIT_BODY, h, **opts)

    @classmethod
    def quota_exhausted(cls, **opts: Any) -> Behaviour:
        return cls.status(429, QUOTA_BODY, opts.pop("headers", None), **opts)

    @classmethod
    def server_error(cls, code: int = 500, **opts: Any) -> Behaviour:
        extra = opts.pop("headers", None) or {}
        if code == 500:
            return cls.status(500, OPENAI_500_BODY, extra, **opts)
        if code in (502, 504):
            html = NGINX_HTML.format(code=code, phrase=_phrase(code))
            h = {"Content-Type": "text/html", "Server": "nginx"}
            h.update(extra)
            return cls.status(code, html, h, **opts)
        if code == 503:
            return cls.status(503, LLAMACPP_503_BODY, extra, **opts)
        return cls.status(code, None, extra, **opts)

    @classmethod
    def bad_request_context_length(cls, **opts: Any) -> Behaviour:
        return cls.status(400, CONTEXT_LENGTH_BODY, opts.pop("headers", None), **opts)

    @classmethod
    def unauthorized(cls, **opts: Any) -> Behaviour:
        return cls.status(401, UNAUTHORIZED_BODY, opts.pop("headers", None), **opts)

    @classmethod
    def flat_error(cls, **opts: Any) -> Behaviour:
        return cls.status(400, FLAT_ERROR_BODY, opts.pop("headers", None), **opts)

    # ---- transport faults
    @classmethod
    def reset(cls, partial: bool = True, **opts: Any) -> Behaviour:
        return cls(kind="reset", partial=partial, **opts)

    @classmethod
    def hang(cls, seconds: float = 30.0, content: str = "This answer arrived late.", **opts: Any) -> Behaviour:
        return cls(kind="hang", seconds=float(seconds), content=content, **opts)

    @classmethod
    def slow_body(cls, chunks: int = 5, gap_ms: float = 200.0,
                  content: str = "This answer trickles in very slowly, piece by piece.", **opts: Any) -> Behaviour:
        if chunks < 1:
            raise ValueError("chunks must be >= 1")
        return cls(kind="slow_body", chunks=int(chunks), gap_ms=float(gap_ms), content=content, **opts)

    @classmethod
    def trickle_head(cls, gap_ms: float = 2000.0, content: str = "This answer came a byte at a time.", **opts: Any) -> Behaviour:
        return cls(kind="trickle_head", gap_ms=float(gap_ms), content=content, **opts)

    @classmethod
    def huge(cls, n_bytes: int | None = None, **opts: Any) -> Behaviour:
        return cls(kind="huge", n_bytes=n_bytes, **opts)

    # ---- special streams
    @classmethod
    def stream_cut(cls, content: str = "The answer is", done: bool = False, **opts: Any) -> Behaviour:
        return cls(kind="stream_cut", content=content, finish_reason=None, done=done, **opts)

    @classmethod
    def stream_error(cls, content: str = "Partial",
                     message: str = "Internal server error: generation failed", **opts: Any) -> Behaviour:
        return cls(kind="stream_error", content=content, error_message=message, **opts)

    @classmethod
    def stream_azure_prefilter(cls, content: str = "Hello! How can I help you today?", **opts: Any) -> Behaviour:
        return cls(kind="stream_azure_prefilter", content=content, **opts)


# --------------------------------------------------------------------------- Chaos
RPM_LIMIT_BODY = {
    "error": {
        "message": "Rate limit reached for requests per min (RPM). Please try again later.",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}


@dataclass
class Chaos:
    """A third-party endpoint on a bad day: a requests-per-minute token bucket, then seeded random 429s and 503s."""

    rpm: int = 120
    burst: int | None = None
    minute_s: float = 60.0
    share_429: float = 0.1
    share_503: float = 0.1
    seed: int = 0
    share_reset: float = 0.0
    share_cut: float = 0.0
    counts: dict[str, int] = field(default_factory=lambda: {"bucket_429": 0, "random_429": 0, "random_503": 0, "random_reset": 0, "random_cut": 0})
    _tokens: float | None = None
    _last: float = 0.0
    _let_through: dict[Any, int] = field(default_factory=dict)

    @property
    def interval_s(self) -> float:
        """Real seconds between two new tokens."""
        return self.minute_s / self.rpm

    def behaviour(self, key: str | None) -> Behaviour | None:
        """The chaos answer to one request, or None to serve the planted one. Call under the fake's lock."""
        wait = self._take(time.monotonic())
        if wait > 0:
            return self._count("bucket_429", self._bucket_full(wait))
        n = self._let_through[key] = self._let_through.get(key, 0) + 1
        draw = random.Random(f"{self.seed}:{key}:{n}").random()
        if draw < self.share_429:
            return self._count("random_429", Behaviour.status(429, RPM_LIMIT_BODY, {
                "x-ratelimit-limit-requests": str(self.rpm), "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": _go_duration(self.interval_s),
                "x-ratelimit-remaining-tokens": "9000", "x-ratelimit-reset-tokens": "6m0s"}))
        draw -= self.share_429
        for what, share, b in (("random_503", self.share_503, Behaviour.server_error(503)), ("random_reset", self.share_reset, Behaviour.reset(partial=False)),
                               ("random_cut", self.share_cut, Behaviour.reset())):
            if draw < share:
                return self._count(what, b)
            draw -= share
        return None

    def _take(self, now: float) -> float:
        """Take a token: 0.0, or the seconds until the next one."""
        size = self.burst or self.rpm
        if self._tokens is None:
            self._tokens, self._last = float(size), now
        self._tokens = min(float(size), self._tokens + (now - self._last) / self.interval_s)
        self._last = now
        if self._tokens >= 1:
            self._tokens -= 1
            return 0.0
        return (1 - self._tokens) * self.interval_s

    def _bucket_full(self, wait: float) -> Behaviour:
        return Behaviour.status(429, RPM_LIMIT_BODY, {
            "retry-after-ms": str(math.ceil(wait * 1000)), "Retry-After": str(math.ceil(wait)),
            "x-ratelimit-limit-requests": str(self.rpm), "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": _go_duration(wait)})

    def _count(self, what: str, b: Behaviour) -> Behaviour:
        self.counts[what] += 1
        return b


def _go_duration(seconds: float) -> str:
    """Seconds as OpenAI writes them in x-ratelimit-reset-*: "25ms", "1s", "6m0s"."""
    if seconds < 1:
        return f"{math.ceil(seconds * 1000)}ms"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{rest:g}s" if minutes else f"{rest:g}s"


def _http_date_value(v: Any) -> Any:
    """Retry-After HTTP-date: str verbatim, datetime formatted, number -> lazily 'now + v' (ceil)."""
    if isinstance(v, str):
        return v
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=_dt.timezone.utc)
        return email.utils.format_datetime(v.astimezone(_dt.timezone.utc), usegmt=True)
    if isinstance(v, (int, float)):
        secs = float(v)
        return lambda: email.utils.formatdate(math.ceil(time.time() + secs), usegmt=True)
    raise TypeError(f"retry_after_date: expected str, datetime or seconds, got {type(v).__name__}")


# --------------------------------------------------------------------------- records
class Headers(dict):
    """Request headers: keys stored lower-case; [], get, `in` are case-insensitive."""

    def __getitem__(self, k: str) -> str:
        return super().__getitem__(k.lower())

    def get(self, k: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(k.lower(), default)

    def __contains__(self, k: object) -> bool:
        return super().__contains__(k.lower() if isinstance(k, str) else k)


@dataclass
class RecordedRequest:
    t: float
    method: str
    path: str
    headers: Headers
    body: Any
    raw: bytes = b""
    key: str | None = None
    attempt: int = 0
    behaviour: Behaviour | None = None
    stream: bool = False
    client: tuple[str, int] | None = None


_MARKER = re.compile(r"\[\[([^\[\]]+)\]\]")


def _message_texts(body: Any) -> list[str]:
    out: list[str] = []
    if not isinstance(body, dict):
        return out
    msgs = body.get("messages")
    if not isinstance(msgs, list):
        return out
    for m in msgs:
        if not isinstance(m, dict):
            continue
        c = m.get("content")
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, list):
            for part in c:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    out.append(part["text"])
    return out


# --------------------------------------------------------------------------- server plumbing
class _Server(http.server.ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True
    block_on_close = False  # we track and join our own threads, with a timeout
    request_queue_size = 128

    def __init__(self, addr: tuple[str, int], handler: type, fake: FakeOpenAI) -> None:
        self.fake = fake
        self._conns: set[socket.socket] = set()
        self._conn_threads: set[threading.Thread] = set()
        self._mu = threading.Lock()
        super().__init__(addr, handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), a reverse DNS lookup that can stall.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = host, port

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = self.socket.accept()
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        with self._mu:
            self._conns.add(sock)
        return sock, addr

    def process_request(self, request: Any, client_address: Any) -> None:
        t = threading.Thread(target=self._run, args=(request, client_address),
                             name="fake-openai-conn", daemon=True)
        with self._mu:
            self._conn_threads.add(t)
        t.start()

    def _run(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            pass
        finally:
            self.shutdown_request(request)
            with self._mu:
                self._conn_threads.discard(threading.current_thread())

    def shutdown_request(self, request: Any) -> None:
        self.forget(request)
        super().shutdown_request(request)

    def forget(self, sock: socket.socket) -> None:
        with self._mu:
            self._conns.discard(sock)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # silent

    def abort_connections(self) -> None:
        with self._mu:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def live_threads(self) -> list[threading.Thread]:
        with self._mu:
            return list(self._conn_threads)


@dataclass
class _Req:
    t: float
    body: Any
    stream: bool
    include_usage: bool
    prompt_tokens: int
    max_tokens: int | None
    id: str
    created: int


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-openai/1.0"
    sys_version = ""
    _sent_any = False

    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    # ---------------------------------------------------------------- low level I/O
    def _send(self, data: bytes) -> bool:
        self._sent_any = True
        try:
            self.connection.sendall(data)
            return True
        except OSError:
            self.close_connection = True
            return False

    def _head(self, code: int, headers: Iterable[tuple[str, Any]], content_type: str | None,
              length: int | None, chunked: bool = False, extra: dict[str, Any] | None = None) -> bytes:
        hs: list[tuple[str, str]] = [
            ("Date", email.utils.formatdate(usegmt=True)),
            ("Server", self.server_version),
        ]
        if content_type is not None:
            hs.append(("Content-Type", content_type))
        hs.append(("x-request-id", "req_" + _rand(24)))
        for k, v in headers:
            hs.append((k, v))
        for k, v in (extra or {}).items():
            hs = [(a, b) for (a, b) in hs if a.lower() != k.lower()]
            hs.append((k, v() if callable(v) else str(v)))
        # framing headers last, never overridden
        hs = [(a, b) for (a, b) in hs if a.lower() not in ("content-length", "transfer-encoding", "connection")]
        if chunked:
            hs.append(("Transfer-Encoding", "chunked"))
        elif length is not None:
            hs.append(("Content-Length", str(length)))
        if self.close_connection:
            hs.append(("Connection", "close"))
        lines = [f"HTTP/1.1 {code} {_phrase(code)}"] + [f"{k}: {v}" for k, v in hs]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _respond(self, code: int, body: bytes, content_type: str | None,
                 extra: dict[str, Any] | None = None) -> bool:
        """Whole response in ONE sendall."""
        return self._send(self._head(code, (), content_type, len(body), extra=extra) + body)

    def _wait_until(self, deadline: float) -> bool:
        """Sleep until deadline (monotonic); False if the server is stopping."""
        stop = self.server.fake._stop
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return not stop.is_set()
            if stop.wait(remaining):
                self.close_connection = True
                return False

    def _rst(self) -> None:
        """Abort the connection with a TCP RST (SO_LINGER 0 + close)."""
        self.close_connection = True
        sock = self.connection
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.server.forget(sock)
        try:
            fd = sock.detach()  # the socket object (and rfile/wfile) no longer own the fd
            if fd >= 0:
                os.close(fd)
        except OSError:
            pass

    def _read_body(self) -> bytes:
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            parts = []
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    break
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline(65537)
            return b"".join(parts)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _read_request(self) -> tuple[bytes, Any, str] | None:
        """The request's raw body, its JSON (None when it is not JSON) and its path without the query; None when
        the body could not be read."""
        try:
            raw = self._read_body()
        except (OSError, ValueError):
            self.close_connection = True
            return None
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            return raw, (json.loads(raw.decode("utf-8")) if raw else None), path
        except (ValueError, UnicodeDecodeError):
            return raw, None, path

    # ---------------------------------------------------------------- entry points
    def do_GET(self) -> None:
        self._guarded(self._get, time.monotonic())

    def do_POST(self) -> None:
        self._guarded(self._post, time.monotonic())

    def _guarded(self, fn: Any, t: float) -> None:
        self._sent_any = False
        try:
            fn(t)
        except OSError:
            self.close_connection = True
        except Exception as e:  # a bug in the fake (or a bad Behaviour): make it visible
            self.server.fake._note_error(e)
            self.close_connection = True
            if not self._sent_any:
                msg = {"error": {"message": f"fake_openai internal error: {e!r}", "type": "fake_openai_error",
                                 "param": None, "code": None}}
                self._respond(500, _dumps(msg), "application/json", extra={"x-fake-openai-error": "1"})

    def _get(self, t: float) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        self.server.fake._record_plain(t, "GET", self.path, self.headers, b"", client=self.client_address)
        if path.endswith("/models"):
            body = {"object": "list", "data": [{"id": DEFAULT_MODEL, "object": "model",
                                                 "created": 1700000000, "owned_by": "fake-openai"}]}
            self._respond(200, _dumps(body), "application/json")
        elif path.endswith("/health"):
            self._respond(200, b'{"status":"ok"}', "application/json")
        else:
            self._not_found()

    def _post(self, t: float) -> None:
        read = self._read_request()
        if read is not None:
            self._answer(t, *read)

    def _answer(self, t: float, raw: bytes, body: Any, path: str) -> None:
        """A POST read: the chat completion planted for it (the fakes of other wire formats answer their own)."""
        fake = self.server.fake
        if not path.endswith("/chat/completions"):
            fake._record_plain(t, "POST", self.path, self.headers, raw, client=self.client_address)
            self._not_found()
            return
        if not isinstance(body, dict):
            fake._record_plain(t, "POST", self.path, self.headers, raw, body=body, client=self.client_address)
            self._respond(400, _dumps(BAD_JSON_BODY), "application/json")
            return
        beh, rec = fake._dispatch(t, self.path, self.headers, raw, body, self.client_address)
        so = body.get("stream_options")
        mt = body.get("max_completion_tokens", body.get("max_tokens"))
        req = _Req(
            t=t,
            body=body,
            stream=rec.stream,
            include_usage=bool(isinstance(so, dict) and so.get("include_usage")),
            prompt_tokens=max(1, sum(len(s) for s in _message_texts(body)) // 4 + 7),
            max_tokens=mt if isinstance(mt, int) and not isinstance(mt, bool) else None,
            id="chatcmpl-" + _rand(29),
            created=int(time.time()),
        )
        self._serve(beh, req)

    def _not_found(self) -> None:
        body = {"error": {"message": f"Invalid URL ({self.command} {self.path})", "type": "invalid_request_error",
                          "param": None, "code": None}}
        self._respond(404, _dumps(body), "application/json")

    # ---------------------------------------------------------------- behaviours
    def _serve(self, b: Behaviour, req: _Req) -> None:
        if b.delay_ms > 0 and not self._wait_until(req.t + b.delay_ms / 1000.0):
            return
        want_stream = req.stream if b.stream is None else b.stream
        kind = b.kind

        if kind == "hang":
            if not self._wait_until(time.monotonic() + b.seconds):
                return
            kind = "ok"

        if kind == "reset":
            if not b.partial:
                self._rst()
                return
            if want_stream:
                self._send(self._stream_head(b))
                events = list(self._ok_events(b, req))[:2]
                for data, _ in events:
                    self._send(_chunk(data))
            else:
                body = _dumps(self._completion(b, req, self._ok_choice(b)))
                cut = max(1, len(body) // 2)
                self._send(self._head(200, (), "application/json", len(body), extra=b.headers) + body[:cut])
            self._wait_until(time.monotonic() + 0.05)
            self._rst()
            return

        if kind == "trickle_head":
            self._trickle(b, req)
            return
        if kind == "status":
            data, ctype = _status_payload(b.body)
            self._respond(b.status_code, data, ctype, extra=b.headers)
            return
        if kind == "html_200":
            self._respond(200, HTML_200_PAGE.encode(), "text/html; charset=utf-8", extra=b.headers)
            return
        if kind == "huge":
            self._huge(b, req, want_stream)
            return
        if kind in ("stream_cut", "stream_error"):
            self._stream(b, req, self._special_events(b, req), tail="end")
            return
        if kind == "slow_body":
            if want_stream:
                pieces = _split_n(b.content or "", b.chunks)
                self._stream(b, req, self._ok_events(b, req, pieces=pieces), gap_ms=b.gap_ms)
            else:
                self._slow_body(b, req)
            return

        if want_stream:
            if kind == "stream_azure_prefilter":
                events = self._special_events(b, req)
            elif kind == "malformed_json":
                events = self._malformed_events(b, req)
            else:
                events = self._ok_events(b, req)
            self._stream(b, req, events)
            return

        if kind == "malformed_json":
            body = _dumps(self._completion(b, req, self._ok_choice(b)))
            self._respond(200, body[: len(body) * 2 // 3], "application/json", extra=b.headers)
            return
        self._respond(200, _dumps(self._completion(b, req, self._ok_choice(b))), "application/json",
                      extra=b.headers)

    # ---------------------------------------------------------------- non-stream shapes
    def _usage(self, b: Behaviour, req: _Req, completion_tokens: int | None = None) -> dict[str, Any]:
        if completion_tokens is None:
            if b.finish_reason == "length" and req.max_tokens is not None:
                completion_tokens = req.max_tokens
            else:
                text = (b.content or "") + (b.tool_arguments or "") + (b.refusal_text or "")
                completion_tokens = max(1, math.ceil(len(text) / 4)) if text else 0
        return {
            "prompt_tokens": req.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": req.prompt_tokens + completion_tokens,
            "completion_tokens_details": {"reasoning_tokens": 0},
        }

    def _completion(self, b: Behaviour, req: _Req, choice: dict[str, Any] | None,
                    completion_tokens: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": req.id,
            "object": "chat.completion",
            "created": req.created,
            "model": b.model,
            "choices": [] if choice is None else [choice],
        }
        if b.usage:
            out["usage"] = self._usage(b, req, completion_tokens)
        out["system_fingerprint"] = SYSTEM_FINGERPRINT
        if b.kind in ("content_filter", "stream_azure_prefilter"):
            out["prompt_filter_results"] = AZURE_PROMPT_FILTER_RESULTS
        return out

    def _ok_choice(self, b: Behaviour) -> dict[str, Any] | None:
        k = b.kind
        if k == "empty_choices":
            return None
        if k == "tool_call":
            msg: dict[str, Any] = {
                "role": "assistant",
                "content": b.content,
                "tool_calls": [{"id": "call_" + _rand(24), "type": "function",
                                "function": {"name": b.tool_name, "arguments": b.tool_arguments}}],
                "refusal": None,
            }
        elif k == "refusal":
            msg = {"role": "assistant", "content": None, "refusal": b.refusal_text}
        elif k == "content_filter":
            return {"finish_reason": "content_filter", "index": 0, "logprobs": None,
                    "message": {"content": None, "role": "assistant", "function_call": None, "tool_calls": None},
                    "content_filter_results": AZURE_FILTERED_RESULTS}
        elif k == "null_content":
            msg = {"role": "assistant", "content": None, "refusal": None}
        else:
            msg = {"role": "assistant", "content": b.content, "refusal": None}
        choice = {"index": 0, "message": msg, "logprobs": None, "finish_reason": b.finish_reason}
        if k == "stream_azure_prefilter":
            choice["content_filter_results"] = AZURE_SAFE_RESULTS
        return choice

    def _slow_body(self, b: Behaviour, req: _Req) -> None:
        body = _dumps(self._completion(b, req, self._ok_choice(b)))
        if not self._send(self._head(200, (), "application/json", len(body), extra=b.headers)):
            return
        n = max(1, min(b.chunks, len(body)))
        step = math.ceil(len(body) / n)
        for i in range(0, len(body), step):
            if not self._wait_until(time.monotonic() + b.gap_ms / 1000.0):
                return
            if not self._send(body[i:i + step]):
                return

    def _trickle(self, b: Behaviour, req: _Req) -> None:
        body = _dumps(self._completion(b, req, self._ok_choice(b)))
        data = self._head(200, (), "application/json", len(body), extra=b.headers) + body
        for i in range(len(data)):
            if not self._wait_until(time.monotonic() + b.gap_ms / 1000.0) or not self._send(data[i:i + 1]):
                return

    def _huge(self, b: Behaviour, req: _Req, want_stream: bool) -> None:
        block = b"x" * 65536
        stop = self.server.fake._stop
        if want_stream:
            self._stream(b, req, self._huge_events(b, req))
            return
        tokens = (b.n_bytes or 0) // 4
        tmpl = _dumps(self._completion(b, req, {"index": 0, "message": {"role": "assistant", "content": "@@FILL@@",
                                                                          "refusal": None},
                                                 "logprobs": None, "finish_reason": "stop"}, tokens))
        prefix, suffix = tmpl.split(b"@@FILL@@", 1)
        if b.n_bytes is None:  # endless, chunked
            if not self._send(self._head(200, (), "application/json", None, chunked=True, extra=b.headers)
                              + _chunk(prefix)):
                return
            big = _chunk(block)
            while not stop.is_set():
                if not self._send(big):
                    return
            self.close_connection = True
            return
        fill = b.n_bytes - len(prefix) - len(suffix)
        if fill < 0:
            raise ValueError(f"huge(): n_bytes must be >= {len(prefix) + len(suffix)}")
        if not self._send(self._head(200, (), "application/json", b.n_bytes, extra=b.headers) + prefix):
            return
        while fill > 0:
            if stop.is_set():
                self.close_connection = True
                return
            n = min(fill, len(block))
            if not self._send(block[:n]):
                return
            fill -= n
        self._send(suffix)

    # ---------------------------------------------------------------- streams
    def _stream_head(self, b: Behaviour) -> bytes:
        return self._head(200, [("Cache-Control", "no-cache")], "text/event-stream; charset=utf-8", None,
                          chunked=True, extra=b.headers)

    def _chunk_obj(self, b: Behaviour, req: _Req, choices: list[Any], **extra: Any) -> bytes:
        obj: dict[str, Any] = {"id": req.id, "object": "chat.completion.chunk", "created": req.created,
                               "model": b.model, "system_fingerprint": SYSTEM_FINGERPRINT, "choices": choices}
        obj.update(extra)
        return b"data: " + _dumps(obj) + b"\n\n"

    def _delta(self, b: Behaviour, req: _Req, delta: dict[str, Any], finish: str | None = None,
               **choice_extra: Any) -> bytes:
        ch = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        ch.update(choice_extra)
        return self._chunk_obj(b, req, [ch])

    def _ok_events(self, b: Behaviour, req: _Req, pieces: list[str] | None = None,
                   finish: bool = True) -> Iterator[tuple[bytes, bool]]:
        """(data, gap_before) pairs for ok/length/tool_call/refusal/content_filter/null/empty streams."""
        k = b.kind
        if k == "empty_choices":
            pass
        elif k == "tool_call":
            args = b.tool_arguments or ""
            yield self._delta(b, req, {"role": "assistant", "content": b.content, "tool_calls": [
                {"index": 0, "id": "call_" + _rand(24), "type": "function",
                 "function": {"name": b.tool_name, "arguments": ""}}], "refusal": None}), False
            for i in range(0, len(args), 8):
                yield self._delta(b, req, {"tool_calls": [{"index": 0, "function": {"arguments": args[i:i + 8]}}]}), True
        elif k == "refusal":
            yield self._delta(b, req, {"role": "assistant", "content": None, "refusal": ""}), False
            for p in _pieces(b.refusal_text or ""):
                yield self._delta(b, req, {"refusal": p}), True
        elif k in ("null_content", "content_filter"):
            yield self._delta(b, req, {"role": "assistant", "content": None if k == "null_content" else "",
                                       "refusal": None}), False
        else:
            yield self._delta(b, req, {"role": "assistant", "content": "", "refusal": None}), False
            for p in (pieces if pieces is not None else _pieces(b.content or "")):
                yield self._delta(b, req, {"content": p}), True
        if not finish:
            return
        if k != "empty_choices":
            if k == "content_filter":
                yield self._delta(b, req, {}, "content_filter", content_filter_results=AZURE_FILTERED_RESULTS), True
            else:
                yield self._delta(b, req, {}, b.finish_reason), True
        if req.include_usage and b.usage:
            yield self._chunk_obj(b, req, [], usage=self._usage(b, req)), False
        yield b"data: [DONE]\n\n", False

    def _special_events(self, b: Behaviour, req: _Req) -> Iterator[tuple[bytes, bool]]:
        if b.kind == "stream_cut":
            yield from self._ok_events(b, req, finish=False)
            if b.done:
                yield b"data: [DONE]\n\n", False
        elif b.kind == "stream_error":
            yield from self._ok_events(b, req, finish=False)
            err = {"error": {"message": b.error_message, "type": "InternalServerError", "param": None, "code": 500}}
            yield b"data: " + _dumps(err) + b"\n\n", True
            yield b"data: [DONE]\n\n", False
        elif b.kind == "stream_azure_prefilter":
            azure = {"choices": [], "created": 0, "id": "", "model": "", "object": "",
                     "prompt_filter_results": AZURE_PROMPT_FILTER_RESULTS}
            yield b"data: " + _dumps(azure) + b"\n\n", False
            yield from self._ok_events(b, req)

    def _malformed_events(self, b: Behaviour, req: _Req) -> Iterator[tuple[bytes, bool]]:
        first = self._delta(b, req, {"role": "assistant", "content": "", "refusal": None})
        yield first, False
        line = self._delta(b, req, {"content": b.content or "x"})
        yield line[: len(line) // 2].rstrip(b"\n") + b"\n\n", True
        yield b"data: [DONE]\n\n", False

    def _huge_events(self, b: Behaviour, req: _Req) -> Iterator[tuple[bytes, bool]]:
        yield self._delta(b, req, {"role": "assistant", "content": "", "refusal": None}), False
        piece = "x" * 16384
        sent = 0
        stop = self.server.fake._stop
        while (b.n_bytes is None or sent < b.n_bytes) and not stop.is_set():
            yield self._delta(b, req, {"content": piece}), True
            sent += len(piece)
        if stop.is_set():
            return
        yield self._delta(b, req, {}, "stop"), True
        if req.include_usage and b.usage:
            yield self._chunk_obj(b, req, [], usage=self._usage(b, req, sent // 4)), False
        yield b"data: [DONE]\n\n", False

    def _stream(self, b: Behaviour, req: _Req, events: Iterable[tuple[bytes, bool]], *,
                tail: str = "end", gap_ms: float | None = None) -> None:
        if not self._send(self._stream_head(b)):
            return
        gap = (b.chunk_gap_ms if gap_ms is None else gap_ms) / 1000.0
        ping = _chunk(b": ping\n\n")
        if b.pings and not self._send(ping):
            return
        if b.ttft_ms > 0 and not self._wait_until(time.monotonic() + b.ttft_ms / 1000.0):
            return
        first = True
        for data, gapped in events:
            if not first:
                if b.pings and gapped and not self._send(ping):
                    return
                if gapped and gap > 0 and not self._wait_until(time.monotonic() + gap):
                    return
            if not self._send(_chunk(data)):
                return
            first = False
        if tail == "end":
            self._send(b"0\r\n\r\n")


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _pieces(text: str) -> list[str]:
    return re.findall(r"\S+\s*|\s+", text)


def _split_n(text: str, n: int) -> list[str]:
    if not text:
        return []
    n = max(1, min(n, len(text)))
    step = math.ceil(len(text) / n)
    return [text[i:i + step] for i in range(0, len(text), step)]


def _status_payload(body: Any) -> tuple[bytes, str]:
    if isinstance(body, (dict, list)):
        return _dumps(body), "application/json"
    data = body.encode("utf-8") if isinstance(body, str) else bytes(body or b"")
    try:
        json.loads(data.decode("utf-8"))
        return data, "application/json"
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or deeper than the parser goes
        pass
    if data.lstrip().startswith(b"<"):
        return data, "text/html; charset=utf-8"
    return data, "text/plain; charset=utf-8"


# --------------------------------------------------------------------------- FakeOpenAI
class FakeOpenAI:
    """The fake server. See the module docstring for the full API."""

    # The request handler: another wire format's fake (fake_anthropic, fake_responses) serves the same
    # Behaviours in its own shapes by a handler subclass, with the same server machinery.
    handler: type[_Handler] = _Handler

    def __init__(self, default: Behaviour | list[Behaviour] | None = None, *, port: int = 0,
                 chaos: Chaos | None = None) -> None:
        self.default: Behaviour | list[Behaviour] = default if default is not None else Behaviour.ok()
        self.chaos = chaos
        self._requested_port = port
        self._lock = threading.Lock()
        self._plants: dict[str, list[Behaviour]] = {}
        self._bracketed: set[str] = set()  # planted keys holding [ or ]: _find_key must scan for them
        self._cursor: dict[Any, int] = {}
        self._counts: dict[str | None, int] = {}
        self._records: list[RecordedRequest] = []
        self._errors: list[BaseException] = []
        self._stop = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle
    def start(self) -> FakeOpenAI:
        if self._server is not None:
            return self
        self._stop.clear()
        self._server = _Server((HOST, self._requested_port), self.handler, self)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout: float = 5.0) -> None:
        srv, self._server = self._server, None
        if srv is None:
            return
        self._stop.set()
        srv.shutdown()
        srv.abort_connections()
        deadline = time.monotonic() + timeout
        for t in srv.live_threads():
            t.join(max(0.0, deadline - time.monotonic()))
        srv.server_close()
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
            self._thread = None

    stop = close

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- addresses
    @property
    def host(self) -> str:
        return HOST

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not running")
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def url(self) -> str:
        return self.base_url + "/v1"

    # ---- configuration
    def plant(self, key: str, behaviour: Behaviour | list[Behaviour]) -> None:
        if not isinstance(key, str) or not key:
            raise ValueError("key must be a non-empty string")
        seq = list(behaviour) if isinstance(behaviour, (list, tuple)) else [behaviour]
        if not seq or not all(isinstance(b, Behaviour) for b in seq):
            raise TypeError("plant() needs a Behaviour or a non-empty list of Behaviours")
        with self._lock:
            self._plants[key] = seq
            self._cursor.pop(("plant", key), None)
            if "[" in key or "]" in key:
                self._bracketed.add(key)

    def unplant(self, key: str) -> None:
        with self._lock:
            self._plants.pop(key, None)
            self._cursor.pop(("plant", key), None)
            self._bracketed.discard(key)

    def clear(self) -> None:
        with self._lock:
            self._plants.clear()
            self._bracketed.clear()
            self._cursor.clear()
            self._counts.clear()
            self._records.clear()
            self._errors.clear()

    # ---- inspection
    def attempts(self, key: str) -> int:
        with self._lock:
            return self._counts.get(key, 0)

    def requests(self, key: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self._records if r.key == key]

    @property
    def all_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._records)

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised inside the fake while serving (should stay empty)."""
        with self._lock:
            return list(self._errors)

    # ---- internals (called from handler threads)
    def _note_error(self, e: BaseException) -> None:
        with self._lock:
            self._errors.append(e)

    def _find_key(self, body: Any) -> tuple[str | None, bool]:
        text = "\n".join(_message_texts(body))
        if not text:
            return None, False
        markers = [m.group(1) for m in _MARKER.finditer(text)]
        # The markers in order are the planted keys' occurrences in order, unless a key holds a bracket:
        # then every key is looked for (slow with thousands of keys, which is why this is not the rule).
        key = self._scan(text) if self._bracketed else next((k for k in markers if k in self._plants), None)
        if key is not None:
            return key, True
        return (markers[0] if markers else None), False

    def _scan(self, text: str) -> str | None:
        """The planted key whose ``[[key]]`` comes first in the text."""
        best: tuple[int, str] | None = None
        for key in self._plants:
            i = text.find(f"[[{key}]]")
            if i >= 0 and (best is None or i < best[0]):
                best = (i, key)
        return best[1] if best is not None else None

    def _dispatch(self, t: float, path: str, headers: Any, raw: bytes, body: dict,
                  client: Any = None) -> tuple[Behaviour, RecordedRequest]:
        with self._lock:
            key, planted = self._find_key(body)
            beh = self.chaos.behaviour(key) if self.chaos is not None else None
            if beh is None:
                beh = self._planted(key, planted)
            n = self._counts.get(key, 0) + 1
            self._counts[key] = n
            rec = RecordedRequest(t=t, method="POST", path=path, headers=_headers(headers), body=body, raw=raw,
                                  key=key, attempt=n, behaviour=beh, stream=body.get("stream") is True,
                                  client=tuple(client) if client else None)
            self._records.append(rec)
        return beh, rec

    def _planted(self, key: str | None, planted: bool) -> Behaviour:
        """The next behaviour planted for the key (or the default's); the cursor moves on."""
        if planted:
            seq, ck = self._plants[key], ("plant", key)  # type: ignore[index]
        else:
            d = self.default
            seq, ck = (list(d) if isinstance(d, (list, tuple)) else [d]), ("default", key)
        i = self._cursor.get(ck, 0)
        self._cursor[ck] = i + 1
        return seq[min(i, len(seq) - 1)]

    def _record_plain(self, t: float, method: str, path: str, headers: Any, raw: bytes, body: Any = None,
                      client: Any = None) -> None:
        with self._lock:
            self._records.append(RecordedRequest(t=t, method=method, path=path, headers=_headers(headers),
                                                 body=body, raw=raw, client=tuple(client) if client else None))


def _headers(msg: Any) -> Headers:
    h = Headers()
    for k, v in msg.items():
        k = k.lower()
        h[k] = f"{dict.get(h, k)}, {v}" if dict.__contains__(h, k) else v
    return h


# --------------------------------------------------------------------------- helpers
def refused_url() -> str:
    """Base URL ("http://127.0.0.1:PORT/v1") of a port nobody listens on."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((HOST, 0))
        port = s.getsockname()[1]
    finally:
        s.close()
    return f"http://{HOST}:{port}/v1"


def serve_fixed_delay(delay_ms: float, content: str = "ok", *, port: int = 0) -> FakeOpenAI:
    """A started FakeOpenAI answering every request with ok(content) after delay_ms. Close it when done."""
    return FakeOpenAI(Behaviour.ok(content, delay_ms=delay_ms), port=port).start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Fake OpenAI-compatible /v1/chat/completions server.")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = ephemeral)")
    ap.add_argument("--delay-ms", type=float, default=0.0, help="delay before each response")
    ap.add_argument("--content", default="ok", help="assistant content of every answer")
    args = ap.parse_args(argv)
    done = threading.Event()

    def _on_signal(signum: int, frame: Any) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    srv = serve_fixed_delay(args.delay_ms, args.content, port=args.port)
    try:
        print(srv.url, flush=True)
        while not done.wait(0.5):
            pass
    finally:
        srv.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
