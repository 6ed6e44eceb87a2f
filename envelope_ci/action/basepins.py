"""The base branch's pins for a pull request: git first (the test merge's first parent), then the REST API.

The container runs as root while the checkout belongs to the runner's user; git, named the repository rather than
left to search for it (``sources.history.Git``), reads it without an ownership check.
"""
from __future__ import annotations

import dataclasses
import re
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..api import BaseSource
from ..errors import UsageError
from ..github.client import GitHubClient
from ..github.rest import GitHubError
from ..sources.history import Git as Repository
from ..sources.pins import parse_pins
from .suite import relative_to

_GIT_TIMEOUT_S = 30

Git = Callable[..., "subprocess.CompletedProcess[bytes] | None"]


def git_in(directory: Path) -> Git:
    """A git runner for `directory` (``sources.history.Git``: pointed at the repository, fetching nothing, no secret
    in its environment), or one that gives None when git is missing or hangs."""
    repository = Repository(directory, timeout=_GIT_TIMEOUT_S)

    def run(*args: str) -> subprocess.CompletedProcess[bytes] | None:
        try:
            return repository.run(*args)
        except UsageError:
            return None

    return run


def _git_text(proc: subprocess.CompletedProcess[bytes] | None) -> str | None:
    """A successful git command's output as stripped text, else None."""
    if proc is None or proc.returncode != 0:
        return None
    return proc.stdout.decode("utf-8", "replace").strip()


def _parsed(text: str, origin: str, shown: str) -> BaseSource:
    """The base pins in `text`; unreadable pins are an error the report shows, not a failed run."""
    try:
        return BaseSource(parse_pins(text, shown), origin)
    except UsageError as exc:
        return BaseSource(None, origin, error=str(exc))


def base_pins_from_git(git: Git, sha: str, path: str) -> BaseSource | str:
    """The pins at the test-merge commit's first parent; a str says why git could not tell."""
    if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha):
        return f"GITHUB_SHA is not a commit id: {sha[:80]!r}"
    line = _git_text(git("rev-list", "--parents", "-n", "1", sha, "--"))
    if line is None:
        return f"git has no commit {sha[:12]} here (no .git directory, or git is missing)"
    parents = line.split()[1:]
    if len(parents) != 2:
        # A depth-1 clone shows the merge commit without parents; a checkout of the PR head
        # (`ref: head.sha`) is not the test merge, and its first parent is not the base.
        why = ("has no parents in this clone (fetch-depth: 1)" if not parents
               else "is not a two-parent test-merge commit")
        return f"commit {sha[:12]} {why}"
    base = parents[0]
    shown = git("show", f"{base}:{path}")
    if shown is not None and shown.returncode == 0:
        origin = f"git show {base[:12]}:{path} (test merge's first parent)"
        try:
            return _parsed(shown.stdout.decode("utf-8"), origin, f"{base[:12]}:{path}")
        except UnicodeDecodeError:
            return BaseSource(None, origin, error=f"{path} at {base[:12]} is not UTF-8 text")
    exists = git("cat-file", "-e", f"{base}^{{commit}}")
    if exists is None or exists.returncode != 0:
        return f"the base commit {base[:12]} is not in this clone"
    # The tree says whether the file is there: in a partial clone (filter: blob:none) it is, but its content is
    # not, and git may fetch nothing, so the API is asked rather than reading "no pins" (it fails closed).
    listed = _git_text(git("ls-tree", "--full-tree", "--name-only", base, "--", path))
    if listed:
        return f"{path} is at {base[:12]} but its content is not in this clone (a partial clone: git fetches nothing)"
    return BaseSource(None, f"git: {path} does not exist at {base[:12]} (test merge's first parent)")


def base_pins_from_api(client: GitHubClient | None, base_sha: str | None, path: str) -> BaseSource | str:
    """The pins at the event's `pull_request.base.sha` through the contents API; a str says why not."""
    if client is None:
        return "no github-token to ask the API"
    if not base_sha:
        return "the event names no pull_request.base.sha"
    try:
        text = client.get_file_at_ref(path, base_sha)
    except (GitHubError, ValueError) as exc:
        return f"the contents API failed: {exc}"
    where = f"GET contents/{path}?ref={base_sha[:12]} (pull_request.base.sha)"
    if text is None:
        return BaseSource(None, f"{where}: 404, the base branch has no pins yet")
    return _parsed(text, where, f"{base_sha[:12]}:{path}")


def fetch_base_pins(
    workspace: Path, workdir: Path, pins_abs: Path, sha: str, pr: Mapping[str, Any], client: GitHubClient | None
) -> BaseSource:
    """Base pins via `git show <sha>^1:<path>`, else the REST contents API, else an error saying both reasons."""
    git = git_in(workdir)
    # The repository may sit below the workspace (actions/checkout's `path:`).
    top = _git_text(git("rev-parse", "--show-toplevel"))
    path = relative_to(pins_abs, Path(top) if top else workspace)
    if path is None:
        return BaseSource(None, None, error=f"the pins file {pins_abs} is outside the repository")
    from_git = base_pins_from_git(git, sha, path) if sha else "GITHUB_SHA is not set"
    if isinstance(from_git, BaseSource):
        return from_git
    base = pr.get("base")
    base_sha = base.get("sha") if isinstance(base, dict) else None
    api = base_pins_from_api(client, base_sha if isinstance(base_sha, str) else None, path)
    if isinstance(api, BaseSource):
        return dataclasses.replace(api, source=f"{api.source} — git could not: {from_git}")
    return BaseSource(None, None, error=f"git: {from_git}; API: {api}")
