"""An OpenAI-compatible chat server on 127.0.0.1 whose latency grows with its load, for the time-level tests.

Each answer takes ``base_ms`` × ``speed`` × the load factor × the case's own factor. The load
factor is read a moment after a request arrives (so a burst of requests sees itself): 1.0
with one request in flight, rising linearly to ``busy_factor`` at ``busy_at`` in flight. A
case is named in the prompt as ``[[ID]]``; its answer is ``answers[ID]`` (default "ok").
"""
from __future__ import annotations

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_KEY = re.compile(r"\[\[([^\]]+)\]\]")
_SETTLE_S = 0.005  # how long a request waits to see the burst it came in


class LoadedServer:
    """Start with ``with LoadedServer() as srv:``; ``srv.url`` is the base URL (``.../v1``)."""

    def __init__(self, base_ms: float = 100.0, busy_factor: float = 1.6, busy_at: int = 8) -> None:
        self.base_ms = base_ms
        self.busy_factor = busy_factor
        self.busy_at = busy_at
        self.speed = 1.0  # every answer slower (2.5) or faster: another runner, another endpoint
        self.case_factor: dict[str, float] = {}  # one case slower than its neighbours
        self.answers: dict[str, str] = {}
        self.model = "loaded-model-1"
        self.in_flight = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> LoadedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def load_factor(self, in_flight: int) -> float:
        """1.0 alone, ``busy_factor`` at ``busy_at`` requests in flight, linear between."""
        busy = min(max(in_flight, 1), self.busy_at)
        return 1.0 + (self.busy_factor - 1.0) * (busy - 1) / max(self.busy_at - 1, 1)

    def answer(self, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """The completion for a request, and how long it takes (seconds) under the load it came in."""
        text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        found = _KEY.search(text)
        key = found.group(1) if found else ""
        time.sleep(_SETTLE_S)
        with self._lock:
            load = self.load_factor(self.in_flight)
        seconds = self.base_ms * self.speed * load * self.case_factor.get(key, 1.0) / 1000.0
        content = self.answers.get(key, "ok")
        completion = {"id": f"chatcmpl-{time.monotonic_ns()}", "object": "chat.completion", "created": int(time.time()),
                      "model": self.model,
                      "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                   "finish_reason": "stop"}],
                      "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}}
        return completion, max(0.0, seconds - _SETTLE_S)


def _handler(server: LoadedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            """Quiet: the tests read the reports, not the server's log."""

        def setup(self) -> None:
            """No Nagle: headers and body written apart would otherwise wait on a delayed ACK (some 40 ms)."""
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            with server._lock:
                server.in_flight += 1
            try:
                completion, seconds = server.answer(body)
                time.sleep(seconds)
            finally:
                with server._lock:
                    server.in_flight -= 1
            data = json.dumps(completion).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.send_header("x-request-id", f"req-{time.monotonic_ns()}")
            self.end_headers()
            self.wfile.write(data)

    return Handler
