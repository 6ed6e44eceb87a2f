"""The webhook event the run was triggered by, and the pull request in it (if any)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# A pull request as the event carries it, and its number.
PullRequest = tuple[dict[str, Any], int]


def load_event(path: str | None) -> tuple[dict[str, Any], str | None]:
    """The webhook payload, or ({}, why) when it cannot be read."""
    if not path:
        return {}, None
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        return {}, f"could not read the event payload {path}: {exc}"
    return (data, None) if isinstance(data, dict) else ({}, f"the event payload {path} is not a JSON object")


def pull_request_of(event: Mapping[str, Any]) -> PullRequest | None:
    """The event's pull request and its number, or None (push, workflow_dispatch, issue_comment, …).

    An issue_comment on a PR is deliberately not one: GITHUB_SHA is then the default
    branch, so the run did not test the PR and must not report on it there.
    """
    pr = event.get("pull_request")
    if not isinstance(pr, dict):
        return None
    number = pr.get("number", event.get("number"))
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        return None
    return pr, number
