"""One wall-clock deadline per attempt, from connect to last byte: a thread shuts the socket of any attempt past it."""
from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection

# The attempt running on this thread: the connection hooks below hand it their socket.
_running = threading.local()


class Alarm:
    """One attempt's deadline; once it ``fired``, whatever socket the attempt uses is shut down."""

    def __init__(self, at: float, lock: threading.Lock) -> None:
        self.at = at
        self.fired = False
        self._lock = lock
        self._sock: socket.socket | None = None

    def attach(self, sock: socket.socket) -> None:
        """The socket the attempt now reads: shut at once if the deadline has passed already (say, during connect)."""
        with self._lock:
            self._sock = sock
            if self.fired:
                _shut(sock)

    def fire(self) -> None:
        """Called with the lock held, by the watchdog."""
        self.fired = True
        if self._sock is not None:
            _shut(self._sock)

    def detach(self) -> None:
        with self._lock:
            self._sock = None


def _shut(sock: socket.socket) -> None:
    """Shut the socket down so a blocked read returns now; the base class's shutdown, so TLS state is left alone."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


class Watchdog:
    """One thread per run watching every attempt in flight, like ``curl --max-time``.

    requests' read timeout bounds each ``recv``, not the response: a server that trickles the
    status line or the headers a byte at a time would keep an attempt alive for hours. Only
    closing the socket from outside ends a blocked read whatever phase the response is in.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._alarms: set[Alarm] = set()
        self._next = math.inf
        self._closed = False
        self._thread = threading.Thread(target=self._watch, name="envelope-ci-watchdog", daemon=True)
        self._thread.start()

    @contextmanager
    def deadline(self, seconds: float) -> Iterator[Alarm]:
        """Watch the attempt run inside the block on this thread; its socket is shut ``seconds`` from now."""
        alarm = Alarm(time.monotonic() + seconds, self._lock)
        with self._lock:
            if self._closed:
                alarm.fired = True  # the run is over: no more attempts
            self._alarms.add(alarm)
            if alarm.at < self._next:
                self._wake.notify()
        _running.alarm = alarm
        try:
            yield alarm
        finally:
            _running.alarm = None
            alarm.detach()
            with self._lock:
                self._alarms.discard(alarm)

    def close(self) -> None:
        """End the watch, firing every alarm left: attempts still in flight when the run ends are cut now."""
        with self._lock:
            self._closed = True
            for alarm in self._alarms:
                alarm.fire()
            self._wake.notify()
        self._thread.join()

    def _watch(self) -> None:
        with self._lock:
            while not self._closed:
                now = time.monotonic()
                for alarm in [a for a in self._alarms if a.at <= now]:
                    alarm.fire()
                    self._alarms.discard(alarm)
                self._next = min((a.at for a in self._alarms), default=math.inf)
                self._wake.wait(None if self._next == math.inf else self._next - now)


def _attach(sock: Any) -> None:
    alarm: Alarm | None = getattr(_running, "alarm", None)
    if alarm is not None and sock is not None:
        alarm.attach(sock)


class _Watched:
    """Hands the connection's socket to the attempt's alarm: once connected, and again for each request on a
    kept-alive connection."""

    sock: Any

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        _attach(self.sock)

    def putrequest(self, method: str, url: str, skip_host: bool = False, skip_accept_encoding: bool = False) -> None:
        _attach(self.sock)
        super().putrequest(method, url, skip_host, skip_accept_encoding)  # type: ignore[misc]


class _WatchedHTTPConnection(_Watched, HTTPConnection):
    """A plain connection the watchdog can cut."""


class _WatchedHTTPSConnection(_Watched, HTTPSConnection):
    """As ``_WatchedHTTPConnection``; the TLS handshake itself is bounded by the connect timeout."""


class _WatchedHTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


_WATCHED_POOLS = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}


class WatchedAdapter(HTTPAdapter):
    """requests' adapter whose connections report their sockets to the watchdog (directly or through an HTTP proxy)."""

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any) -> None:
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        self.poolmanager.pool_classes_by_scheme = _WATCHED_POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if type(manager) is urllib3.ProxyManager:  # a SOCKS proxy keeps its own connections: per-recv timeouts only
            manager.pool_classes_by_scheme = _WATCHED_POOLS
        return manager
