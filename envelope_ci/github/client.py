"""One repository's sticky PR comment and base-branch files, over GitHub's REST and GraphQL APIs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import requests

from .comment import has_marker, with_marker
from .rest import RAW_MEDIA, GitHubError, RestApi, json_of, path_of

# The identity GITHUB_TOKEN posts as; a PAT or an app token needs an explicit author.
DEFAULT_BOT_LOGIN = "github-actions[bot]"

_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
# Statuses that mean "no such identity" to the identity lookups, not a failure.
_NO_IDENTITY = (200, 401, 403, 404)


@dataclass(frozen=True)
class CommentResult:
    """The comment an upsert left on the PR, and whether it had to be created."""

    id: int
    url: str
    created: bool


class GitHubClient(RestApi):
    """A small client for one repository: its PR comments and its files at a ref; see RestApi for the waits."""

    def __init__(self, api_url: str, repo: str, token: str, **options: Any) -> None:
        """Bind to `repo` ("owner/name") at `api_url` (GITHUB_API_URL; GHES ends in /api/v3); `options` go to
        RestApi."""
        if not _REPO.fullmatch(repo):
            raise ValueError(f"repository must be 'owner/name', got {repo!r}")
        super().__init__(api_url, token, **options)
        self.repo = repo

    def __repr__(self) -> str:
        return f"GitHubClient(api_url={self.api_url!r}, repo={self.repo!r})"

    def list_comments(self, issue_number: int) -> Iterator[dict[str, Any]]:
        """Yield every comment on an issue or PR, oldest first, following the Link rel="next" pages."""
        url: str | None = f"/repos/{self.repo}/issues/{_issue(issue_number)}/comments"
        params: dict[str, Any] | None = {"per_page": 100}
        seen: set[str] = set()
        while url is not None:
            resp = self.request("GET", url, params=params)
            page = json_of(resp)
            if not isinstance(page, list):
                raise GitHubError(resp.status_code, f"expected a list of comments from {path_of(url)}")
            yield from page
            # The next link carries its own query (and on github.com a /repositories/{id}
            # path), so follow it verbatim instead of counting pages ourselves.
            url, params = resp.links.get("next", {}).get("url"), None
            if url is not None:
                if url in seen:
                    raise GitHubError(resp.status_code, f"pagination loops back to {path_of(url)}")
                seen.add(url)

    def find_own_comment(self, issue_number: int, marker: str, author: str | None = None) -> dict[str, Any] | None:
        """The newest comment by the posting identity whose first line is `marker`, or None."""
        login = author or DEFAULT_BOT_LOGIN
        best: dict[str, Any] | None = None
        for comment in self.list_comments(issue_number):
            # A human quoting our marker (or another bot using it) must never be edited.
            if not _is_author(comment.get("user"), login) or not has_marker(comment.get("body"), marker):
                continue
            if best is None or int(comment["id"]) > int(best["id"]):
                best = comment
        return best

    def upsert_comment(self, issue_number: int, body: str, marker: str, *, author: str | None = None) -> CommentResult:
        """Edit our marked comment on the PR in place, or create it; the marker becomes the first line."""
        body = with_marker(body, marker)
        existing = self.find_own_comment(issue_number, marker, author)
        if existing is not None:
            try:
                resp = self.request("PATCH", f"/repos/{self.repo}/issues/comments/{int(existing['id'])}",
                                    json_body={"body": body})
                return _comment_result(resp, created=False)
            except GitHubError as exc:
                # Deleted between listing and editing: fall through and post a fresh one.
                if exc.status != 404:
                    raise
        resp = self.request("POST", f"/repos/{self.repo}/issues/{_issue(issue_number)}/comments",
                            json_body={"body": body}, ok=(201,))
        return _comment_result(resp, created=True)

    def viewer_login(self) -> str | None:
        """The login the token posts as, or None when GitHub will not say (then: github-actions[bot]).

        A user's token (a PAT) answers GET /user. Installation tokens (GITHUB_TOKEN, a GitHub
        App's token) get 403 there, but GraphQL's ``viewer`` names them too, e.g.
        ``my-app[bot]``: without it, an App token's comment would never be found again and
        every push would post a new one.
        """
        resp = self.request("GET", "/user", ok=_NO_IDENTITY)
        if resp.status_code == 200:
            login = _field(json_of(resp), "login")
        else:
            resp = self.request("POST", self.graphql_url, json_body={"query": "query { viewer { login } }"},
                                ok=_NO_IDENTITY)
            data = json_of(resp) if resp.status_code == 200 else None
            login = _field(_field(_field(data, "data"), "viewer"), "login")
        return login if isinstance(login, str) and login else None

    def get_file_at_ref(self, path: str, ref: str) -> str | None:
        """The UTF-8 text of `path` at git `ref` (e.g. the PR's base sha), or None when it does not exist there."""
        if ".." in path.replace("\\", "/").split("/"):
            # A dot segment could walk the authenticated request out of /contents/ to another endpoint.
            raise ValueError(f"path must stay inside the repository, got {path!r}")
        resp = self.request(
            "GET",
            f"/repos/{self.repo}/contents/{quote(path.lstrip('/'), safe='/')}",
            params={"ref": ref},
            # The raw media type returns the bytes themselves and, unlike the JSON form,
            # works for files over 1 MB.
            accept=RAW_MEDIA,
            ok=(200, 404),
        )
        if resp.status_code == 404:
            return None
        try:
            return resp.content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise GitHubError(200, f"{path} at {ref} is not UTF-8 text ({exc.reason})") from None


def _issue(number: int) -> int:
    """A validated issue or PR number (it goes into a URL path)."""
    if isinstance(number, bool) or int(number) != number or number < 1:
        raise ValueError(f"issue number must be a positive integer, got {number!r}")
    return int(number)


def _field(data: Any, name: str) -> Any:
    """`data[name]` when `data` is a JSON object, else None."""
    return data.get(name) if isinstance(data, dict) else None


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


def _comment_result(resp: requests.Response, *, created: bool) -> CommentResult:
    """The CommentResult for a create or edit response."""
    data = json_of(resp)
    try:
        return CommentResult(id=int(data["id"]), url=str(data["html_url"]), created=created)
    except (KeyError, TypeError, ValueError):
        raise GitHubError(resp.status_code, f"{path_of(resp.url)} returned a comment without id/html_url") from None
