"""Write live envelopes as JSONL while the run goes: a crash loses nothing already received.

One line per envelope: ``{"id": CASE_ID, "recorded": ENVELOPE, "attempt_log": [...]}``.
Lines with the same id are repeats. Read back by ``fixtures.load_recordings``.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .model import Envelope


def envelope_to_raw(env: Envelope) -> dict[str, Any]:
    """An envelope in the fixture ``recorded`` shape (only the fields that are set)."""
    if env.error is not None:
        out: dict[str, Any] = {"error": env.error}
    else:
        out = {"http_status": env.http_status, "headers": dict(env.headers), "body": env.body}
    for key in ("elapsed_ms", "ttft_ms", "stream_complete"):
        value = getattr(env, key)
        if value is not None:
            out[key] = value
    out["attempts"] = env.attempts
    if env.notes:
        out["notes"] = list(env.notes)
    return out


class RecordingWriter:
    """Appends and flushes one line per finished envelope; safe across worker threads."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = path.open("w", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, case_id: str, env: Envelope, attempt_log: Sequence[dict[str, Any]] = ()) -> None:
        # ASCII escapes: a server's lone surrogate ("\\ud800") round-trips instead of failing to encode as UTF-8.
        line = json.dumps({"id": case_id, "recorded": envelope_to_raw(env), "attempt_log": list(attempt_log)}, ensure_ascii=True)
        with self._lock:
            if self._fh.closed:  # a call that outlived an interrupted run: the report has moved on
                return
            self._fh.write(line + "\n")
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            self._fh.close()
