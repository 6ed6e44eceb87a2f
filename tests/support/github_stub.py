"""A local stand-in for the GitHub REST API (issue comments and contents) over a real socket, for tests."""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

WRITE_TOKEN = "ghs_stubWriteToken0123456789abcdefABCDEF"
READ_TOKEN = "ghs_stubReadOnlyToken9876543210zyxwvuZYXW"
# A personal access token: it posts as a user, and GET /user answers for it.
PAT_TOKEN = "ghp_stubPersonalToken0123456789abcdefABCD"
PAT_LOGIN = "octo-ci-bot"
# A GitHub App's installation token: not a user (GET /user is 403), but GraphQL's viewer names it.
APP_TOKEN = "ghs_stubAppInstallationToken0123456789ab"
APP_LOGIN = "envelope-ci-app[bot]"
BOT_LOGIN = "github-actions[bot]"
BOT_USER_ID = 41898282  # github-actions[bot]'s real user id
REPO_ID = 1296269
MAX_BODY = 65536
DOCS = "https://docs.github.com/rest"

_TOO_LONG = {
    "message": "Validation Failed",
    "errors": [
        {
            "resource": "IssueComment",
            "code": "unprocessable",
            "field": "data",
            "message": "Body is too long (maximum is 65536 characters)",
        }
    ],
    "documentation_url": "https://docs.github.com/rest/issues/comments#create-an-issue-comment",
    "status": "422",
}
_READ_ONLY = {
    "message": "Resource not accessible by integration",
    "documentation_url": "https://docs.github.com/rest/issues/comments#create-an-issue-comment",
    "status": "403",
}
_NOT_FOUND = {"message": "Not Found", "documentation_url": DOCS, "status": "404"}
_BAD_CREDENTIALS = {"message": "Bad credentials", "documentation_url": DOCS, "status": "401"}


@dataclass(frozen=True)
class RecordedRequest:
    """One request the stub received; the Authorization header is redacted to its scheme."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class _Planted:
    """A canned response served instead of the real one for the next `count` requests."""

    count: int
    status: int
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class _State:
    """Everything the stub remembers; guarded by `lock` because the server is threaded."""

    comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    files: dict[tuple[str, str], str] = field(default_factory=dict)
    requests: list[RecordedRequest] = field(default_factory=list)
    planted: list[_Planted] = field(default_factory=list)
    next_id: int = 1_000_000_001
    lock: threading.Lock = field(default_factory=threading.Lock)


class GitHubStub:
    """A threaded HTTP server on 127.0.0.1 mimicking the GitHub endpoints envelope-ci uses; `.url` is the API base."""

    def __init__(
        self,
        repo: str = "octo-org/widgets",
        *,
        tokens: Mapping[str, bool] | None = None,
        files: Mapping[tuple[str, str], str] | None = None,
    ) -> None:
        """`tokens` maps each accepted token to whether it may write (default: WRITE_TOKEN, READ_TOKEN, PAT_TOKEN).

        PAT_TOKEN acts as the user PAT_LOGIN; every other token as github-actions[bot].
        """
        self.repo = repo
        self.tokens = dict(tokens) if tokens is not None else {WRITE_TOKEN: True, READ_TOKEN: False, PAT_TOKEN: True, APP_TOKEN: True}
        self.state = _State(files=dict(files or {}))
        # Where Link headers point; tests change it to check the client refuses other hosts.
        self.link_base: str | None = None
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # -- lifecycle --------------------------------------------------------------------------

    def __enter__(self) -> GitHubStub:
        handler = type("Handler", (_Handler,), {"stub": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{port}"
        # A short poll interval: shutdown() waits up to one interval, once per test.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="github-stub", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- seeding and inspection -------------------------------------------------------------

    def seed_comment(self, issue: int, body: str, *, login: str = "octocat", user_type: str = "User") -> dict[str, Any]:
        """Add a comment by anyone (a human by default) as if posted earlier; returns its JSON."""
        with self.state.lock:
            return self._create(issue, body, login, user_type)

    def seed_many(self, issue: int, count: int, *, login: str = "octocat") -> None:
        """Add `count` ordinary human comments to an issue."""
        for i in range(count):
            self.seed_comment(issue, f"Looks good to me ({i + 1})", login=login)

    def comments(self, issue: int) -> list[dict[str, Any]]:
        """A snapshot of an issue's comments, oldest first."""
        with self.state.lock:
            return [dict(c) for c in self.state.comments.get(issue, [])]

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order."""
        with self.state.lock:
            return list(self.state.requests)

    def add_file(self, ref: str, path: str, text: str) -> None:
        """Serve `text` for `path` at `ref` from the contents API."""
        with self.state.lock:
            self.state.files[(ref, path)] = text

    def plant(self, status: int, *, count: int = 1, headers: Mapping[str, str] | None = None, body: Mapping[str, Any] | None = None) -> None:
        """Answer the next `count` requests with this status, headers and JSON body."""
        with self.state.lock:
            self.state.planted.append(
                _Planted(count, status, dict(headers or {}), dict(body or {"message": "planted", "documentation_url": DOCS}))
            )

    def plant_rate_limit(
        self,
        *,
        count: int = 1,
        status: int = 403,
        retry_after: int | str | None = None,
        reset_at: int | None = None,
    ) -> None:
        """Answer the next `count` requests as GitHub does when rate limited (secondary with Retry-After, else primary)."""
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["retry-after"] = str(retry_after)
            body = {
                "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
                "If you reach out to GitHub Support for help, please include the request ID ABCD:1234.",
                "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
                "status": str(status),
            }
        else:
            headers.update(
                {
                    "x-ratelimit-limit": "1000",
                    "x-ratelimit-remaining": "0",
                    "x-ratelimit-used": "1000",
                    "x-ratelimit-reset": str(reset_at if reset_at is not None else int(time.time()) + 60),
                    "x-ratelimit-resource": "core",
                }
            )
            body = {
                "message": "API rate limit exceeded for installation ID 12345678.",
                "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
                "status": str(status),
            }
        self.plant(status, count=count, headers=headers, body=body)

    # -- behaviour (called by the handler with the lock held) -------------------------------

    def _create(self, issue: int, body: str, login: str, user_type: str) -> dict[str, Any]:
        comment_id = self.state.next_id
        self.state.next_id += 1
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        comment = {
            "url": f"https://api.github.com/repos/{self.repo}/issues/comments/{comment_id}",
            "html_url": f"https://github.com/{self.repo}/pull/{issue}#issuecomment-{comment_id}",
            "issue_url": f"https://api.github.com/repos/{self.repo}/issues/{issue}",
            "id": comment_id,
            "node_id": "IC_kwDO" + base64.b64encode(str(comment_id).encode()).decode().rstrip("="),
            "user": {
                "login": login,
                "id": BOT_USER_ID if login == BOT_LOGIN else 583231,
                "type": user_type,
                "site_admin": False,
            },
            "created_at": stamp,
            "updated_at": stamp,
            "author_association": "NONE" if user_type == "Bot" else "CONTRIBUTOR",
            "body": body,
            "reactions": {"url": "", "total_count": 0, "+1": 0, "-1": 0},
            "performed_via_github_app": None,
        }
        self.state.comments.setdefault(issue, []).append(comment)
        return comment

    def _find(self, comment_id: int) -> dict[str, Any] | None:
        for comments in self.state.comments.values():
            for comment in comments:
                if comment["id"] == comment_id:
                    return comment
        return None


class _Handler(BaseHTTPRequestHandler):
    """Routes one request to the stub; every response carries Content-Length so keep-alive works."""

    stub: GitHubStub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # -- plumbing ---------------------------------------------------------------------------

    def _handle(self, method: str) -> None:
        stub = self.stub
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        headers = {k: v for k, v in self.headers.items()}
        auth = headers.get("Authorization", "")
        if "Authorization" in headers:
            headers["Authorization"] = auth.split(" ", 1)[0] + " <redacted>"
        with stub.state.lock:
            stub.state.requests.append(RecordedRequest(method, parts.path, query, headers, body))
            planted = stub.state.planted[0] if stub.state.planted else None
            if planted is not None:
                planted.count -= 1
                if planted.count <= 0:
                    stub.state.planted.pop(0)
        if planted is not None:
            self._send(planted.status, planted.body, planted.headers)
            return
        token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else None
        if token not in stub.tokens:
            self._send(401, _BAD_CREDENTIALS)
            return
        can_write = stub.tokens[token]
        login = {PAT_TOKEN: PAT_LOGIN, APP_TOKEN: APP_LOGIN}.get(token, BOT_LOGIN)
        with stub.state.lock:
            status, payload, extra = self._route(method, parts.path, query, body, can_write, login)
        self._send(status, payload, extra)

    def _route(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, can_write: bool, login: str
    ) -> tuple[int, Any, dict[str, str]]:
        stub = self.stub
        if method == "POST" and path == "/graphql":
            graphql = body.get("query", "") if isinstance(body, dict) else ""
            if "viewer" not in graphql:
                return 400, {"message": "the stub answers only { viewer { login } }"}, {}
            return 200, {"data": {"viewer": {"login": login}}}, {}
        if method == "GET" and path == "/user":
            if login.endswith("[bot]"):
                # An installation token (GITHUB_TOKEN) is not a user.
                return 403, {"message": "Resource not accessible by integration", "documentation_url": DOCS}, {}
            return 200, {"login": login, "id": 583231, "type": "User", "site_admin": False}, {}
        prefixes = (f"/repos/{stub.repo}", f"/repositories/{REPO_ID}")
        rest = next((path[len(p) :] for p in prefixes if path.startswith(p + "/")), None)
        if rest is None:
            return 404, _NOT_FOUND, {}
        if method in ("POST", "PATCH", "DELETE") and not can_write:
            return 403, _READ_ONLY, {"x-accepted-github-permissions": "issues=write; pull_requests=write"}

        if m := re.fullmatch(r"/issues/(\d+)/comments", rest):
            issue = int(m.group(1))
            if method == "GET":
                return self._list(path, issue, query)
            if method == "POST":
                problem = _validate_body(body)
                if problem is not None:
                    return 422, problem, {}
                created = stub._create(issue, body["body"], login, "Bot" if login.endswith("[bot]") else "User")
                return 201, created, {"Location": created["url"]}
        if m := re.fullmatch(r"/issues/comments/(\d+)", rest):
            comment = stub._find(int(m.group(1)))
            if comment is None:
                return 404, _NOT_FOUND, {}
            if method == "GET":
                return 200, comment, {}
            if method == "PATCH":
                problem = _validate_body(body)
                if problem is not None:
                    return 422, problem, {}
                # The real API lets only the author (or an admin) edit; the bot is not an admin.
                if comment["user"]["login"] != login:
                    return 403, {"message": "Must have admin rights to Repository.", "documentation_url": DOCS}, {}
                comment["body"] = body["body"]
                comment["updated_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                return 200, comment, {}
            if method == "DELETE":
                for comments in stub.state.comments.values():
                    if comment in comments:
                        comments.remove(comment)
                return 204, None, {}
        if method == "GET" and rest.startswith("/contents/"):
            file_path = unquote(rest[len("/contents/") :])
            ref = (query.get("ref") or ["main"])[0]
            text = stub.state.files.get((ref, file_path))
            if text is None:
                return 404, _NOT_FOUND, {}
            if "application/vnd.github.raw" in self.headers.get("Accept", ""):
                return 200, text.encode("utf-8"), {"Content-Type": "application/vnd.github.raw; charset=utf-8"}
            return 200, _content_json(stub.repo, file_path, ref, text), {}
        return 404, _NOT_FOUND, {}

    def _list(self, path: str, issue: int, query: dict[str, list[str]]) -> tuple[int, Any, dict[str, str]]:
        comments = self.stub.state.comments.get(issue, [])
        per_page = max(1, min(100, int((query.get("per_page") or ["30"])[0])))
        page = max(1, int((query.get("page") or ["1"])[0]))
        last = max(1, -(-len(comments) // per_page))
        items = comments[(page - 1) * per_page : page * per_page]
        # Like github.com, the links use the repository-id form of the path.
        base = (self.stub.link_base or self.stub.url) + f"/repositories/{REPO_ID}/issues/{issue}/comments"

        def link(n: int, rel: str) -> str:
            return f'<{base}?per_page={per_page}&page={n}>; rel="{rel}"'

        links = []
        if page > 1:
            links += [link(page - 1, "prev"), link(1, "first")]
        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        return 200, items, ({"Link": ", ".join(links)} if links else {})

    def _send(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        if payload is None:
            data = b""
            content_type = None
        elif isinstance(payload, bytes):
            data = payload
            content_type = None
        else:
            data = json.dumps(payload).encode("utf-8")
            content_type = "application/json; charset=utf-8"
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("X-GitHub-Api-Version-Selected", "2022-11-28")
        self.send_header("X-GitHub-Request-Id", "ABCD:1234:5678:9ABC:DEF0")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if not any(k.lower().startswith("x-ratelimit-") for k in (headers or {})):
            self.send_header("x-ratelimit-limit", "1000")
            self.send_header("x-ratelimit-remaining", "999")
            self.send_header("x-ratelimit-reset", str(int(time.time()) + 3600))
            self.send_header("x-ratelimit-resource", "core")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)


def _validate_body(body: Any) -> dict[str, Any] | None:
    """The 422 payload GitHub gives for a missing or too long comment body, or None when it is fine."""
    if not isinstance(body, dict) or not isinstance(body.get("body"), str):
        return {
            "message": "Invalid request.\n\n\"body\" wasn't supplied.",
            "documentation_url": "https://docs.github.com/rest/issues/comments#create-an-issue-comment",
            "status": "422",
        }
    if len(body["body"]) > MAX_BODY:
        return _TOO_LONG
    return None


def _content_json(repo: str, path: str, ref: str, text: str) -> dict[str, Any]:
    """The JSON form of a contents response (base64, as GitHub sends it)."""
    encoded = base64.encodebytes(text.encode("utf-8")).decode("ascii")
    return {
        "type": "file",
        "encoding": "base64",
        "size": len(text.encode("utf-8")),
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "content": encoded,
        "url": f"https://api.github.com/repos/{repo}/contents/{quote(path)}?ref={quote(ref)}",
    }
