"""Authenticated GitHub API requests: same-origin URLs, bounded rate-limit and transient-failure waits, token-free
errors."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import requests

from ..transport.retry_after import retry_after_s

API_VERSION = "2022-11-28"

_USER_AGENT = "envelope-ci (+https://github.com/features/actions)"
JSON_MEDIA = "application/vnd.github+json"
RAW_MEDIA = "application/vnd.github.raw+json"
# GitHub's own advice when a rate-limit response says nothing about when to come back.
_DEFAULT_RATE_LIMIT_WAIT_S = 60.0
# Seconds added to x-ratelimit-reset: the reset is whole epoch seconds and clocks drift.
_RESET_SKEW_S = 1.0
_TRANSIENT = frozenset({502, 503, 504})


class GitHubError(Exception):
    """A GitHub API call that failed; `status` is the HTTP status, or None when no response came back."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(status, message)
        self.status = status
        self.message = message

    def __str__(self) -> str:
        if self.status is None:
            return f"GitHub API error: {self.message}"
        return f"GitHub API error {self.status}: {self.message}"

    def __repr__(self) -> str:
        return f"GitHubError(status={self.status!r}, message={self.message!r})"


class RestApi:
    """Requests to one GitHub API root (GITHUB_API_URL) with one token, waiting out rate limits within a budget."""

    def __init__(
        self,
        api_url: str,
        token: str,
        *,
        session: requests.Session | None = None,
        max_wait_s: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        max_retries: int = 3,
        timeout_s: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not token:
            raise ValueError("a GitHub token is required")
        if max_retries < 0 or max_wait_s < 0:
            raise ValueError("max_retries and max_wait_s must not be negative")
        self.api_url = api_url.rstrip("/")
        self.max_wait_s = max_wait_s
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        # Private, and kept out of __repr__ and every message: logs of a failed run are public
        # on public repositories.
        self._token = token
        self._session = session if session is not None else requests.Session()
        self._sleep = sleep
        self._clock = clock
        base = urlsplit(self.api_url)
        self._origin = (base.scheme, base.netloc)
        self._base_path = base.path

    def __repr__(self) -> str:
        return f"RestApi(api_url={self.api_url!r})"

    @property
    def graphql_url(self) -> str:
        """The GraphQL endpoint: ``…/graphql`` on github.com, ``HOST/api/graphql`` on GitHub Enterprise Server."""
        if self.api_url.endswith("/api/v3"):
            return self.api_url[: -len("/api/v3")] + "/api/graphql"
        return self.api_url + "/graphql"

    def request(
        self,
        method: str,
        url_or_path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        accept: str = JSON_MEDIA,
        ok: tuple[int, ...] = (200,),
    ) -> requests.Response:
        """Send one API request, waiting out rate limits within the budget; non-`ok` statuses raise GitHubError."""
        url = self._url(url_or_path)
        headers = {
            "Authorization": f"Bearer {self._token}",
            "Accept": accept,
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": _USER_AGENT,
        }
        where = f"{method} {path_of(url)}"
        # A POST that reached GitHub may have created the comment even if the answer was lost;
        # only requests that are safe to repeat are retried on transport trouble.
        repeatable = method in ("GET", "PATCH")
        waited = 0.0
        for attempt in range(self.max_retries + 1):
            last_try = attempt == self.max_retries
            try:
                resp = self._session.request(method, url, params=params, json=json_body, headers=headers,
                                             timeout=self.timeout_s)
            except requests.RequestException as exc:
                if not repeatable or last_try:
                    raise GitHubError(None, self._scrub(f"{where}: {type(exc).__name__}: {exc}")) from None
                waited = self._wait(where, None, float(2**attempt), waited, "the connection failed")
                continue
            if resp.status_code in ok:
                return resp
            message = _api_message(resp)
            wait, reason = self._retry_wait(resp, message, attempt, repeatable)
            if wait is None:
                raise self._error(where, resp, message)
            if last_try:
                raise GitHubError(resp.status_code,
                                  self._scrub(f"{where}: still {reason} after {self.max_retries} retries: {message}"))
            waited = self._wait(where, resp.status_code, wait, waited, f"{reason} ({message})")
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _wait(self, where: str, status: int | None, wait: float, waited: float, reason: str) -> float:
        """Sleep `wait` seconds unless that would take the total past max_wait_s; return the new total."""
        if waited + wait > self.max_wait_s:
            raise GitHubError(
                status,
                self._scrub(
                    f"{where}: {reason}; GitHub asks to wait {wait:.0f}s, which would exceed the "
                    f"{self.max_wait_s:.0f}s cap (max_wait_s, {waited:.0f}s already waited); giving up"
                ),
            )
        self._sleep(wait)
        return waited + wait

    def _retry_wait(self, resp: requests.Response, message: str, attempt: int,
                    repeatable: bool) -> tuple[float | None, str]:
        """How long to wait before retrying a failed response, and why; (None, …) when it is not worth a retry."""
        wait = self._rate_limit_wait(resp, message)
        if wait is not None:
            return wait, "rate limited"
        if repeatable and resp.status_code in _TRANSIENT:
            return float(2**attempt), f"GitHub answered {resp.status_code}"
        return None, ""

    def _rate_limit_wait(self, resp: requests.Response, message: str) -> float | None:
        """Seconds GitHub asks us to wait, or None when the response is not a rate limit."""
        if resp.status_code not in (403, 429):
            return None
        retry_after = retry_after_s(resp.headers, now=self._clock())
        if retry_after is not None:
            return retry_after
        if resp.headers.get("x-ratelimit-remaining") == "0":
            try:
                reset = float(resp.headers["x-ratelimit-reset"])
            except (KeyError, ValueError):
                return _DEFAULT_RATE_LIMIT_WAIT_S
            return max(0.0, reset - self._clock()) + _RESET_SKEW_S
        # A 403 without rate-limit headers is a permission problem ("Resource not accessible
        # by integration") and waiting would not help; a 429 or a secondary-limit 403 that
        # forgot its headers is still a rate limit.
        if resp.status_code == 429 or "rate limit" in message.lower():
            return _DEFAULT_RATE_LIMIT_WAIT_S
        return None

    def _error(self, where: str, resp: requests.Response, message: str) -> GitHubError:
        """Translate a failed response into a GitHubError whose message says what to do about it."""
        text = f"{where}: {message}"
        if resp.status_code == 401:
            text += " (the token is missing, invalid or expired)"
        elif resp.status_code == 403:
            needed = resp.headers.get("x-accepted-github-permissions")
            if needed:
                text += (
                    f" (the token needs {needed}; grant it in the workflow's `permissions:`;"
                    " on pull requests from forks GITHUB_TOKEN is read-only)"
                )
        return GitHubError(resp.status_code, self._scrub(text))

    def _url(self, url_or_path: str) -> str:
        """An absolute URL for an API path, refusing links that would carry the token to another host."""
        if url_or_path.startswith("/"):
            return self.api_url + url_or_path
        if url_or_path == self.graphql_url:
            return url_or_path
        parts = urlsplit(url_or_path)
        if (parts.scheme, parts.netloc) != self._origin or not parts.path.startswith(self._base_path):
            raise GitHubError(None, f"refusing to follow a link outside {self.api_url}: {path_of(url_or_path)}")
        return url_or_path

    def _scrub(self, text: str) -> str:
        """Remove the token from text that may end up in a log."""
        return text.replace(self._token, "***")


def path_of(url: str) -> str:
    """The path part of a URL, for messages (never the query, which may carry refs we did not choose)."""
    return urlsplit(url).path or url


def json_of(resp: requests.Response) -> Any:
    """The response body as JSON, or a GitHubError saying it was not JSON."""
    try:
        return resp.json()
    except ValueError:
        raise GitHubError(resp.status_code, f"{path_of(resp.url)} did not return JSON") from None


def _api_message(resp: requests.Response) -> str:
    """GitHub's error `message`, with the per-field `errors[].message` details that explain a 422."""
    try:
        data = resp.json()
    except ValueError:
        return (resp.text or resp.reason or "").strip()[:200] or f"HTTP {resp.status_code}"
    if not isinstance(data, dict):
        return f"HTTP {resp.status_code}"
    message = str(data.get("message") or f"HTTP {resp.status_code}")
    details = [
        str(err.get("message") or err.get("code"))
        for err in data.get("errors") or []
        if isinstance(err, dict) and (err.get("message") or err.get("code"))
    ]
    return f"{message}: {'; '.join(details)}" if details else message
