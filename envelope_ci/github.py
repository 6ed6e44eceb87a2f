"""The GitHub edge: the sticky PR comment, base-branch files, and the runner's file and workflow commands."""

from __future__ import annotations

import email.utils
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import requests

__all__ = [
    "API_VERSION",
    "COMMENT_LIMIT",
    "DEFAULT_BOT_LOGIN",
    "DETAIL_LEVELS",
    "SUMMARY_LIMIT",
    "CommentResult",
    "GitHubClient",
    "GitHubError",
    "add_mask",
    "append_summary",
    "error_annotation",
    "escape_data",
    "escape_property",
    "fit_comment",
    "marker_for",
    "warning",
    "write_outputs",
]

API_VERSION = "2022-11-28"
# The identity GITHUB_TOKEN posts as; a PAT or an app token needs an explicit author.
DEFAULT_BOT_LOGIN = "github-actions[bot]"
# GitHub rejects longer issue comments with 422 "Body is too long (maximum is 65536 characters)".
COMMENT_LIMIT = 65536
# A step summary over 1 MiB is not shown at all (the upload fails), so trim rather than lose it.
SUMMARY_LIMIT = 1024 * 1024
# Rendering levels fit_comment tries, most detailed first.
DETAIL_LEVELS: tuple[str, ...] = ("full", "collapsed", "failing")

_USER_AGENT = "envelope-ci (+https://github.com/features/actions)"
_JSON_MEDIA = "application/vnd.github+json"
_RAW_MEDIA = "application/vnd.github.raw+json"
_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
# GitHub's own advice when a rate-limit response says nothing about when to come back.
_DEFAULT_RATE_LIMIT_WAIT_S = 60.0
# Seconds added to x-ratelimit-reset: the reset is whole epoch seconds and clocks drift.
_RESET_SKEW_S = 1.0
_TRANSIENT = frozenset({502, 503, 504})
_MARKER_KEY_DISALLOWED = re.compile(r"[^A-Za-z0-9._/-]+")
_MARKER_KEY_MAX = 100
_OUTPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


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


@dataclass(frozen=True)
class CommentResult:
    """The comment an upsert left on the PR, and whether it had to be created."""

    id: int
    url: str
    created: bool


class GitHubClient:
    """A small REST client for one repository: comments and contents, with bounded rate-limit waits."""

    def __init__(
        self,
        api_url: str,
        repo: str,
        token: str,
        *,
        session: requests.Session | None = None,
        max_wait_s: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        max_retries: int = 3,
        timeout_s: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Bind to `repo` ("owner/name") at `api_url` (GITHUB_API_URL; GHES ends in /api/v3)."""
        if not _REPO.fullmatch(repo):
            raise ValueError(f"repository must be 'owner/name', got {repo!r}")
        if not token:
            raise ValueError("a GitHub token is required")
        if max_retries < 0 or max_wait_s < 0:
            raise ValueError("max_retries and max_wait_s must not be negative")
        self.api_url = api_url.rstrip("/")
        self.repo = repo
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
        return f"GitHubClient(api_url={self.api_url!r}, repo={self.repo!r})"

    # -- comments -------------------------------------------------------------------------

    def list_comments(self, issue_number: int) -> Iterator[dict[str, Any]]:
        """Yield every comment on an issue or PR, oldest first, following the Link rel="next" pages."""
        url: str | None = f"/repos/{self.repo}/issues/{_issue(issue_number)}/comments"
        params: dict[str, Any] | None = {"per_page": 100}
        seen: set[str] = set()
        while url is not None:
            resp = self._request("GET", url, params=params)
            page = _json(resp)
            if not isinstance(page, list):
                raise GitHubError(resp.status_code, f"expected a list of comments from {_path(url)}")
            yield from page
            # The next link carries its own query (and on github.com a /repositories/{id}
            # path), so follow it verbatim instead of counting pages ourselves.
            next_url = resp.links.get("next", {}).get("url")
            params = None
            if next_url is not None:
                if next_url in seen:
                    raise GitHubError(resp.status_code, f"pagination loops back to {_path(next_url)}")
                seen.add(next_url)
            url = next_url

    def find_own_comment(
        self, issue_number: int, marker: str, author: str | None = None
    ) -> dict[str, Any] | None:
        """The newest comment by the posting identity whose first line is `marker`, or None."""
        login = author or DEFAULT_BOT_LOGIN
        best: dict[str, Any] | None = None
        for comment in self.list_comments(issue_number):
            if not _is_author(comment.get("user"), login):
                # A human quoting our marker (or another bot using it) must never be edited.
                continue
            if not _has_marker(comment.get("body"), marker):
                continue
            if best is None or int(comment["id"]) > int(best["id"]):
                best = comment
        return best

    def upsert_comment(
        self, issue_number: int, body: str, marker: str, *, author: str | None = None
    ) -> CommentResult:
        """Edit our marked comment on the PR in place, or create it; the marker becomes the first line."""
        body = _with_marker(body, marker)
        existing = self.find_own_comment(issue_number, marker, author)
        if existing is not None:
            try:
                resp = self._request(
                    "PATCH",
                    f"/repos/{self.repo}/issues/comments/{int(existing['id'])}",
                    json_body={"body": body},
                )
                return _comment_result(resp, created=False)
            except GitHubError as exc:
                # Deleted between listing and editing: fall through and post a fresh one.
                if exc.status != 404:
                    raise
        resp = self._request(
            "POST",
            f"/repos/{self.repo}/issues/{_issue(issue_number)}/comments",
            json_body={"body": body},
            ok=(201,),
        )
        return _comment_result(resp, created=True)

    def viewer_login(self) -> str | None:
        """The login the token posts as, or None when GitHub will not say (then: github-actions[bot]).

        A user's token (a PAT) answers GET /user. Installation tokens (GITHUB_TOKEN, a GitHub
        App's token) get 403 there, but GraphQL's ``viewer`` names them too, e.g.
        ``my-app[bot]``: without it, an App token's comment would never be found again and
        every push would post a new one.
        """
        resp = self._request("GET", "/user", ok=(200, 401, 403, 404))
        if resp.status_code == 200:
            data = _json(resp)
            login = data.get("login") if isinstance(data, dict) else None
        else:
            resp = self._request("POST", self.graphql_url, json_body={"query": "query { viewer { login } }"}, ok=(200, 401, 403, 404))
            data = _json(resp) if resp.status_code == 200 else None
            viewer = (data.get("data") or {}).get("viewer") if isinstance(data, dict) else None
            login = viewer.get("login") if isinstance(viewer, dict) else None
        return login if isinstance(login, str) and login else None

    @property
    def graphql_url(self) -> str:
        """The GraphQL endpoint: ``…/graphql`` on github.com, ``HOST/api/graphql`` on GitHub Enterprise Server."""
        if self.api_url.endswith("/api/v3"):
            return self.api_url[: -len("/api/v3")] + "/api/graphql"
        return self.api_url + "/graphql"

    # -- contents -------------------------------------------------------------------------

    def get_file_at_ref(self, path: str, ref: str) -> str | None:
        """The UTF-8 text of `path` at git `ref` (e.g. the PR's base sha), or None when it does not exist there."""
        if ".." in path.replace("\\", "/").split("/"):
            # A dot segment could walk the authenticated request out of /contents/ to another endpoint.
            raise ValueError(f"path must stay inside the repository, got {path!r}")
        resp = self._request(
            "GET",
            f"/repos/{self.repo}/contents/{quote(path.lstrip('/'), safe='/')}",
            params={"ref": ref},
            # The raw media type returns the bytes themselves and, unlike the JSON form,
            # works for files over 1 MB.
            accept=_RAW_MEDIA,
            ok=(200, 404),
        )
        if resp.status_code == 404:
            return None
        try:
            return resp.content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise GitHubError(200, f"{path} at {ref} is not UTF-8 text ({exc.reason})") from None

    # -- transport ------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        url_or_path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        accept: str = _JSON_MEDIA,
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
        where = f"{method} {_path(url)}"
        # A POST that reached GitHub may have created the comment even if the answer was lost;
        # only requests that are safe to repeat are retried on transport trouble.
        repeatable = method in ("GET", "PATCH")
        waited = 0.0
        for attempt in range(self.max_retries + 1):
            last_try = attempt == self.max_retries
            try:
                resp = self._session.request(
                    method, url, params=params, json=json_body, headers=headers, timeout=self.timeout_s
                )
            except requests.RequestException as exc:
                if not repeatable or last_try:
                    raise GitHubError(None, self._scrub(f"{where}: {type(exc).__name__}: {exc}")) from None
                waited = self._wait(where, None, float(2**attempt), waited, "the connection failed")
                continue
            if resp.status_code in ok:
                return resp
            message = _api_message(resp)
            wait = self._rate_limit_wait(resp, message)
            reason = "rate limited"
            if wait is None and repeatable and resp.status_code in _TRANSIENT:
                wait, reason = float(2**attempt), f"GitHub answered {resp.status_code}"
            if wait is None:
                raise self._error(where, resp, message)
            if last_try:
                raise GitHubError(
                    resp.status_code,
                    self._scrub(f"{where}: still {reason} after {self.max_retries} retries: {message}"),
                )
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

    def _rate_limit_wait(self, resp: requests.Response, message: str) -> float | None:
        """Seconds GitHub asks us to wait, or None when the response is not a rate limit."""
        if resp.status_code not in (403, 429):
            return None
        retry_after = _parse_retry_after(resp.headers.get("retry-after"), self._clock())
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
            raise GitHubError(None, f"refusing to follow a link outside {self.api_url}: {_path(url_or_path)}")
        return url_or_path

    def _scrub(self, text: str) -> str:
        """Remove the token from text that may end up in a log."""
        return text.replace(self._token, "***")


# -- markers and comment size -----------------------------------------------------------------


def marker_for(key: str) -> str:
    """The hidden HTML comment that identifies one suite's sticky comment, e.g. `<!-- envelope-ci:evals/chat -->`."""
    cleaned = _MARKER_KEY_DISALLOWED.sub("-", key)
    # `--` inside an HTML comment, or a trailing `-` before `-->`, ends or breaks the comment
    # in CommonMark 0.29 (cmark-gfm), which would show the marker as text.
    cleaned = re.sub(r"-{2,}", "-", cleaned).strip("-")[:_MARKER_KEY_MAX].strip("-")
    return f"<!-- envelope-ci:{cleaned or 'default'} -->"


def fit_comment(render: Callable[[str], str], limit: int = COMMENT_LIMIT, margin: int = 2000) -> str:
    """The most detailed `render(level)` (see DETAIL_LEVELS) within `limit - margin` characters, else a trimmed "failing"."""
    budget = limit - margin
    if budget <= 0:
        raise ValueError(f"limit - margin must be positive, got {limit} - {margin}")
    text = ""
    for level in DETAIL_LEVELS:
        # Render lazily: a big suite's full table is only built when it might be used.
        text = render(level)
        if len(text) <= budget:
            return text

    def note(omitted: int) -> str:
        return (
            f"> **Trimmed:** {omitted:,} characters of this report were left out to fit GitHub's "
            f"{limit:,}-character comment limit. The full report is in the job summary and in the "
            "report files (`report.md`, `report.json`)."
        )

    return _trim_markdown(text, budget, len, note)


# -- workflow commands (stdout) ---------------------------------------------------------------


def escape_data(value: str) -> str:
    """Escape a workflow command's message so it stays on one line and cannot end the command early."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """Escape a workflow command property value (file=, title=), which also must not contain `:` or `,`."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def _command(name: str, properties: Mapping[str, str | int | None], message: str) -> str:
    """One `::name k=v,…::message` workflow command line, properties with no value left out."""
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items() if value is not None)
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


def error_annotation(file: str | None, line: int | None, title: str | None, message: str) -> str:
    """An `::error file=…,line=…,title=…::message` command; `file` should be repository-relative."""
    return _command("error", {"file": file, "line": line, "title": title}, message)


def warning(message: str, *, file: str | None = None, line: int | None = None, title: str | None = None) -> str:
    """A `::warning::message` command, optionally pointing at a file and line."""
    return _command("warning", {"file": file, "line": line, "title": title}, message)


def add_mask(value: str) -> str:
    """An `::add-mask::value` command, so the runner hides `value` in every later log line."""
    return _command("add-mask", {}, value)


# -- file commands ($GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY) -------------------------------------


def write_outputs(path: str | os.PathLike[str], outputs: Mapping[str, str]) -> None:
    """Append step outputs to $GITHUB_OUTPUT in the multi-line-safe `name<<ghadelimiter_<uuid>` form."""
    chunks: list[str] = []
    # Validate everything first so a bad value never leaves half the outputs written.
    for name, value in outputs.items():
        if not _OUTPUT_NAME.fullmatch(name):
            raise ValueError(f"invalid output name {name!r}")
        if not isinstance(value, str):
            raise TypeError(f"output {name!r} must be a str, got {type(value).__name__}")
        delimiter = f"ghadelimiter_{uuid.uuid4()}"
        if delimiter in value:
            # Same rule as actions/toolkit: the value would end the heredoc early.
            raise ValueError(f"output {name!r} contains its delimiter {delimiter!r}")
        chunks.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    # newline="" writes "\n" as is: the runner is Linux here and the value is not ours to rewrite.
    with open(path, "a", encoding="utf-8", newline="") as fh:
        fh.write("".join(chunks))


def append_summary(path: str | os.PathLike[str], markdown: str, limit: int = SUMMARY_LIMIT) -> bool:
    """Append Markdown to $GITHUB_STEP_SUMMARY, trimmed so the file stays within `limit` bytes; True if trimmed."""
    text = markdown if markdown.endswith("\n") else markdown + "\n"
    try:
        # The limit is per step and the file is per step: earlier appends count too.
        used = os.path.getsize(path)
    except FileNotFoundError:
        used = 0
    budget = limit - used
    if _utf8_len(text) <= budget:
        _append(path, text)
        return False

    def note(omitted: int) -> str:
        return (
            f"> **Trimmed:** {omitted:,} bytes of this summary were left out to stay under GitHub's "
            "1 MiB step-summary limit. The full report is in the report files (`report.md`, `report.json`)."
        )

    trimmed = _trim_markdown(text, budget, _utf8_len, note)
    if _utf8_len(trimmed) <= budget:
        _append(path, trimmed)
    return True


# -- helpers ----------------------------------------------------------------------------------


def _issue(number: int) -> int:
    """A validated issue or PR number (it goes into a URL path)."""
    if isinstance(number, bool) or int(number) != number or number < 1:
        raise ValueError(f"issue number must be a positive integer, got {number!r}")
    return int(number)


def _path(url: str) -> str:
    """The path part of a URL, for messages (never the query, which may carry refs we did not choose)."""
    return urlsplit(url).path or url


def _json(resp: requests.Response) -> Any:
    """The response body as JSON, or a GitHubError saying it was not JSON."""
    try:
        return resp.json()
    except ValueError:
        raise GitHubError(resp.status_code, f"{_path(resp.url)} did not return JSON") from None


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


def _parse_retry_after(value: str | None, now: float) -> float | None:
    """Retry-After in seconds: delta-seconds or an HTTP date (RFC 9110); None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def _is_author(user: Any, login: str) -> bool:
    """Whether a comment's `user` is the posting identity; an app's bot login may carry a `[bot]` suffix."""
    if not isinstance(user, dict) or not isinstance(user.get("login"), str):
        return False
    # Logins are case-insensitive on GitHub.
    actual = user["login"].casefold()
    wanted = login.casefold()
    if actual == wanted:
        return True
    return user.get("type") == "Bot" and actual.removesuffix("[bot]") == wanted.removesuffix("[bot]")


def _has_marker(body: Any, marker: str) -> bool:
    """Whether the marker is the body's first line, where upsert_comment puts it."""
    # Only the first line counts: our own comment quotes untrusted text further down, and a
    # quoted marker there must not make one suite's comment pass for another's.
    return isinstance(body, str) and body.split("\n", 1)[0].strip() == marker


def _with_marker(body: str, marker: str) -> str:
    """The body with `marker` as its first line (prepended unless already there)."""
    if not marker or "\n" in marker or "\r" in marker:
        raise ValueError(f"a marker is one non-empty line, got {marker!r}")
    return body if _has_marker(body, marker) else f"{marker}\n{body}"


def _comment_result(resp: requests.Response, *, created: bool) -> CommentResult:
    """The CommentResult for a create or edit response."""
    data = _json(resp)
    try:
        return CommentResult(id=int(data["id"]), url=str(data["html_url"]), created=created)
    except (KeyError, TypeError, ValueError):
        raise GitHubError(resp.status_code, f"{_path(resp.url)} returned a comment without id/html_url") from None


def _utf8_len(text: str) -> int:
    """Length in UTF-8 bytes, the unit of the step-summary limit."""
    return len(text.encode("utf-8"))


def _append(path: str | os.PathLike[str], text: str) -> None:
    """Append UTF-8 text to a runner file."""
    with open(path, "a", encoding="utf-8", newline="") as fh:
        fh.write(text)


_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")
_DETAILS_OPEN = re.compile(r"<details(?:\s|>|$)", re.IGNORECASE)
_DETAILS_CLOSE = re.compile(r"</details\s*>", re.IGNORECASE)


def _trim_markdown(text: str, budget: int, measure: Callable[[str], int], note: Callable[[int], str]) -> str:
    """Cut Markdown at a line boundary to fit `budget`, closing an open fence and <details>, then a note."""
    # Linear in the text: a 1 MiB summary has tens of thousands of lines, so nothing here
    # may re-measure or re-join the whole text per line.
    total = measure(text)
    lines = text.splitlines(keepends=True)
    best_lines, best_tail = 0, note(total)
    size = 0
    fence: tuple[str, int] | None = None  # (character, length) of the open fence
    details = 0
    for count, line in enumerate(lines, 1):
        size += measure(line)
        if size > budget:
            break
        fence, details = _block_state(line.rstrip("\r\n"), fence, details)
        closers = (fence[0] * fence[1] + "\n" if fence else "") + "</details>\n" * details
        tail = closers + "\n" + note(total - size) + "\n"
        if size + measure(tail) <= budget:
            best_lines, best_tail = count, tail
    return "".join(lines[:best_lines]) + best_tail


def _block_state(line: str, fence: tuple[str, int] | None, details: int) -> tuple[tuple[str, int] | None, int]:
    """The open code fence and <details> depth after one more line."""
    if fence is not None:
        match = _FENCE_CLOSE.fullmatch(line)
        if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= fence[1]:
            return None, details
        return fence, details
    match = _FENCE_OPEN.fullmatch(line)
    # CommonMark: a backtick fence's info string cannot contain a backtick (that is a code span).
    if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
        return (match.group(1)[0], len(match.group(1))), details
    depth = details + len(_DETAILS_OPEN.findall(line)) - len(_DETAILS_CLOSE.findall(line))
    return None, max(0, depth)
