"""A fake OpenAI-compatible ``/v1/embeddings`` server on 127.0.0.1, for the ``similar`` assertion's live tests.

Standard library only, real HTTP over a real socket. It answers ``POST {url}/embeddings``
with OpenAI's shape: ``{"object": "list", "data": [{"object": "embedding", "index": 0,
"embedding": [...]}], "model": MODEL, "usage": {"prompt_tokens", "total_tokens"}}``.

::

    with FakeEmbeddings() as emb:
        emb.url                                  # "http://127.0.0.1:PORT/v1"
        emb.plant("Refunds take 5 days.", [1.0, 0.0])
        emb.fail("Refunds", [503, 503])          # the next two calls whose input contains it get a 503
        emb.inputs                               # every input asked for, in arrival order

A text with no planted vector gets its letter counts (a-z) plus one: similar wording, similar vector.
"""
from __future__ import annotations

import http.server
import json
import threading
from typing import Any

MODEL = "fake-embed-1"


class FakeEmbeddings:
    """The server: planted vectors and failures, and what it was asked."""

    def __init__(self) -> None:
        self.vectors: dict[str, list[float]] = {}
        self.failures: list[tuple[str, list[int]]] = []
        self.inputs: list[str] = []
        self.requests: list[dict[str, Any]] = []  # the parsed bodies, with the Authorization header under "_auth"
        self._lock = threading.Lock()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def plant(self, text: str, vector: list[float]) -> None:
        self.vectors[text] = vector

    def fail(self, key: str, statuses: list[int]) -> None:
        """The next calls whose input contains ``key`` get these statuses, one each, before a vector."""
        self.failures.append((key, list(statuses)))

    def __enter__(self) -> FakeEmbeddings:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def answer(self, body: Any, auth: str | None) -> tuple[int, dict[str, Any]]:
        """The status and body for one request."""
        text = body.get("input") if isinstance(body, dict) else None
        with self._lock:
            self.requests.append({**(body if isinstance(body, dict) else {}), "_auth": auth})
            if not isinstance(text, str):
                return 400, {"error": {"message": "input must be a string", "type": "invalid_request_error"}}
            self.inputs.append(text)
            for key, statuses in self.failures:
                if key in text and statuses:
                    status = statuses.pop(0)
                    return status, {"error": {"message": f"fake failure {status}", "type": "server_error"}}
        vector = self.vectors.get(text) or [float(text.lower().count(c)) for c in "abcdefghijklmnopqrstuvwxyz"] + [1.0]
        return 200, {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": vector}],
                     "model": MODEL, "usage": {"prompt_tokens": len(text) // 4, "total_tokens": len(text) // 4}}


def _handler(fake: FakeEmbeddings) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            """Quiet: a test's output is its own."""

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            status, out = (fake.answer(body, self.headers.get("authorization")) if self.path.endswith("/embeddings")
                           else (404, {"error": {"message": f"no route {self.path}"}}))
            data = json.dumps(out).encode("utf-8")
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
