"""Ctrl-C and SIGTERM during a live run: stop politely first, leave at once the second time."""
from __future__ import annotations

import signal
import sys
import threading
from typing import Any

# The process's one stop flag: the command line installs the handlers on it before any heavy
# import, so a SIGTERM in the first second (a cancelled CI job) still ends with reports.
STOP = threading.Event()


class Interrupts:
    """First Ctrl-C/SIGTERM: stop scheduling and finish politely. Second Ctrl-C: leave now (130).

    A context manager: the handlers are installed only on the main thread (signal's rule)
    and the previous ones restored on exit.
    """

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self._saved: dict[int, Any] = {}

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._saved[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.stop.set()
        sys.stderr.write("\nenvelope-ci: stopping: finishing calls in flight, then writing the reports "
                         "(Ctrl-C again to quit now)\n")

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
