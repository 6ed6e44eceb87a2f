"""The live run's progress line on stderr: counts of labels so far, never a line per request."""
from __future__ import annotations

import sys
import threading
import time
from typing import Any


class Progress:
    """One updating line on a terminal; in CI a line every so many cases, never one per request."""

    def __init__(self, total: int, stream: Any = None, quiet: bool = False) -> None:
        self.total = total
        self.done = 0
        self.labels: dict[str, int] = {}
        self.t0 = time.monotonic()
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = max(10, total // 10)
        self.quiet = quiet
        self._lock = threading.Lock()

    def tick(self, label: str) -> None:
        """One more call finished with ``label``; show it if a line is due."""
        with self._lock:
            self.done += 1
            self.labels[label] = self.labels.get(label, 0) + 1
            if not self.quiet and (self.tty or self.done % self.every == 0 or self.done == self.total):
                self._show()

    def _show(self) -> None:
        counts = " ".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        line = f"[{self.done}/{self.total}] {counts} {time.monotonic() - self.t0:.1f}s"
        self.stream.write(("\r" + line.ljust(78)) if self.tty else line + "\n")
        if self.tty and self.done == self.total:
            self.stream.write("\n")
        self.stream.flush()
