"""One attempt: a single HTTP exchange with one endpoint, its failure put into words."""
from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import requests
import urllib3
from msgspec.structs import replace

from ..errors import UsageError
from ..grading.grade import prompt_tokens_estimate
from ..model import DEFAULT_PROVIDER, Case, Envelope
from ..providers.base import Provider
from ..secrets import Secrets
from ..urls import origin, shown_host
from .reading import TRANSPORT_ERRORS, Limits, deadline_passed, read_stream, read_whole
from .watchdog import Alarm, Watchdog, WatchedAdapter

USER_AGENT = "envelope-ci"
# The body keys in which each wire format asks for at most so many answer tokens (Chat, its newer name, Responses).
_ANSWER_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


@dataclass(frozen=True)
class ClientSettings:
    """How to talk to one endpoint."""

    base_url: str
    model: str
    api_key: str | None = None
    extra_headers: Mapping[str, str] = field(default_factory=dict)
    temperature: float = 0.0
    stream: bool = False
    connect_timeout_s: float = 10.0
    case_timeout_s: float = 120.0
    max_response_bytes: int = 16 * 1024 * 1024
    provider: str = DEFAULT_PROVIDER  # a named endpoint's wire format (a judge's); the run's own is --provider

    def __repr__(self) -> str:  # never show the key or header values
        return f"ClientSettings(base_url={self.base_url!r}, model={self.model!r}, stream={self.stream})"


class Client:
    """One worker's connection pool and the single-attempt exchange."""

    def __init__(self, provider: Provider, settings: ClientSettings, secrets: Secrets, watchdog: Watchdog) -> None:
        self.provider = provider
        self.settings = settings
        self.secrets = secrets
        self.watchdog = watchdog
        self.session = requests.Session()
        for scheme in ("http://", "https://"):
            self.session.mount(scheme, WatchedAdapter())
        self.url = provider_url(provider, settings.base_url)
        _read_environment_once(self.session, self.url)
        self.headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": USER_AGENT}
        self.headers.update(settings.extra_headers)
        self.headers.update(provider.headers(settings.api_key))  # the key the provider's way: Bearer, x-api-key...

    def close(self) -> None:
        self.session.close()

    def request_body(self, case: Case) -> dict[str, Any]:
        """The body this client posts for ``case``, in its provider's wire format."""
        s = self.settings
        return self.provider.request_body(case, s.model, s.temperature, s.stream)

    def attempt(self, case: Case, body: Mapping[str, Any] | None = None) -> Envelope:
        """One HTTP exchange, within the case's deadline from connect to last byte.

        ``elapsed_ms`` spans send to last byte: no parsing, no grading. Redirects are not followed:
        requests would resend the body, and every header but ``Authorization``, to the other host. ``body``: the
        one ``request_body`` built, when the caller already has it (the pacer reckoned its tokens from it).
        """
        s = self.settings
        payload = json.dumps(self.request_body(case) if body is None else body).encode("utf-8")
        deadline_s = case.timeout_s or s.case_timeout_s
        timeout = (min(s.connect_timeout_s, deadline_s), deadline_s)
        t0 = time.perf_counter()
        with self.watchdog.deadline(deadline_s) as alarm:
            try:
                resp = self.session.post(self.url, data=payload, headers=self.headers, timeout=timeout, stream=True,
                                         allow_redirects=False)
            except TRANSPORT_ERRORS as exc:
                return self._failed(exc, t0, deadline_s, alarm)
            try:
                env = self._read(resp, Limits(t0, deadline_s, s.max_response_bytes, alarm))
            except TRANSPORT_ERRORS as exc:
                return self._failed(exc, t0, deadline_s, alarm)
            finally:
                resp.close()
        return replace(env, headers=self.secrets.scrub(env.headers), body=self.secrets.scrub(env.body),
                       provider=self.provider.name)

    def _read(self, resp: requests.Response, limits: Limits) -> Envelope:
        if (self.settings.stream and resp.status_code == 200
                and "text/event-stream" in resp.headers.get("content-type", "")):
            return read_stream(resp, limits, self.provider)
        return read_whole(resp, limits)

    def _failed(self, exc: BaseException, t0: float, deadline_s: float, alarm: Alarm) -> Envelope:
        elapsed = (time.perf_counter() - t0) * 1000.0
        detail = (deadline_passed(deadline_s) if alarm.fired
                  else failure_detail(exc, min(self.settings.connect_timeout_s, deadline_s), deadline_s, self.url))
        return Envelope(error=re.sub(r"\s+", " ", self.secrets.mask(detail))[:300], elapsed_ms=round(elapsed, 3),
                        provider=self.provider.name)


def tokens_charged(case: Case, body: Mapping[str, Any]) -> float:
    """What a token limit charges a request before it is answered, as OpenAI's cookbook reckons it: the prompt's
    tokens (characters / 4) and the most it may answer, as the body the provider builds asks it (Anthropic's
    default ``max_tokens`` included); the answer puts the pacer's mirror right."""
    asked = [body.get(key) for key in _ANSWER_LIMITS]
    most = next((n for n in asked if isinstance(n, (int, float)) and not isinstance(n, bool)), 0)
    return float(prompt_tokens_estimate(case) + most)


def provider_url(provider: Provider, base_url: str) -> str:
    """Where ``provider`` posts for ``base_url``, refused unless at its origin: the host check vets the base URL only,
    and a plug-in's ``url()`` must not send the key and the prompts elsewhere."""
    url = provider.url(base_url)
    if origin(url) is None or origin(url) != origin(base_url):
        raise UsageError(f"provider {provider.name!r} would post to {shown_host(url, base_url)}, not the "
                         f"endpoint's host {shown_host(base_url, url)}: a provider may only add a path to the base URL")
    return url


def _read_environment_once(session: requests.Session, url: str) -> None:
    """What requests reads from the environment for every request (proxies and NO_PROXY, a CA bundle, ~/.netrc), read
    once for ``url``.

    Every attempt goes to the same URL, and requests would walk ``os.environ`` and stat ~/.netrc
    again for each: a fixed cost per attempt that a loaded machine turns into milliseconds.
    The session then leaves the environment alone and uses what was read, as it would have.
    """
    session.proxies.update(requests.utils.get_environ_proxies(url))
    session.verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True
    session.auth = requests.utils.get_netrc_auth(url)
    session.trust_env = False


def failure_detail(exc: BaseException, connect_s: float, deadline_s: float, url: str) -> str:
    """What went wrong in words a reader can act on: which timeout, or the socket's own error."""
    if isinstance(exc, requests.ConnectTimeout):
        return f"ConnectTimeout: no connection within {connect_s:g} s"
    if isinstance(exc, (requests.ReadTimeout, urllib3.exceptions.ReadTimeoutError, TimeoutError)):
        return deadline_passed(deadline_s)
    root = _root_cause(exc)
    errno = re.search(r"\[Errno -?\d+\][^'\")]*", str(root))
    if not errno:
        return f"{type(root).__name__}: {root}"
    where = urllib3.util.parse_url(url)
    return f"{type(root).__name__}: {errno.group(0).strip()} ({where.host}:{where.port})"


def _root_cause(exc: BaseException) -> BaseException:
    root: BaseException = exc
    # requests wraps urllib3's MaxRetryError ("Max retries exceeded" is urllib3's
    # wording, not our retries); the socket's own error is its `reason`.
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    if isinstance(reason, BaseException):
        root = reason
    while root.__cause__ is not None or (root.__context__ is not None and not str(root)):
        root = root.__cause__ or root.__context__  # type: ignore[assignment]
    return root
