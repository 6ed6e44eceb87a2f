"""The sticky PR comment's text: the hidden marker that finds it again, and a body fitted to GitHub's size limit."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

from ..model import Detail
from .trim import trim_markdown

# GitHub rejects longer issue comments with 422 "Body is too long (maximum is 65536 characters)".
COMMENT_LIMIT = 65536
# The comment is the report's short form: its first screen says what broke and what to do, the
# rest is folded; the smaller level also cuts the long tables. report.md is the full form.
COMMENT_DETAILS = (Detail.COLLAPSED, Detail.FAILING)

_MARKER_KEY_DISALLOWED = re.compile(r"[^A-Za-z0-9._/-]+")
_MARKER_KEY_MAX = 100


def marker_for(key: str) -> str:
    """The hidden HTML comment that identifies one suite's sticky comment, e.g. `<!-- envelope-ci:evals/chat -->`."""
    cleaned = _MARKER_KEY_DISALLOWED.sub("-", key)
    # `--` inside an HTML comment, or a trailing `-` before `-->`, ends or breaks the comment
    # in CommonMark 0.29 (cmark-gfm), which would show the marker as text.
    cleaned = re.sub(r"-{2,}", "-", cleaned).strip("-")[:_MARKER_KEY_MAX].strip("-")
    # `evals/a b`, `evals/a-b` and `evals/a+b` would share a marker: a key that had to be
    # changed carries a digest of the exact key, so two suites never edit each other's comment.
    tail = "" if cleaned == key else "~" + key_digest(key)
    return f"<!-- envelope-ci:{cleaned or 'default'}{tail} -->"


def key_digest(key: str) -> str:
    """Eight hex digits naming a suite key exactly (markers and report folders of keys that had to be cleaned)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def has_marker(body: object, marker: str) -> bool:
    """Whether the marker is the body's first line, where `with_marker` puts it."""
    # Only the first line counts: our own comment quotes untrusted text further down, and a
    # quoted marker there must not make one suite's comment pass for another's.
    return isinstance(body, str) and body.split("\n", 1)[0].strip() == marker


def with_marker(body: str, marker: str) -> str:
    """The body with `marker` as its first line (prepended unless already there)."""
    if not marker or "\n" in marker or "\r" in marker:
        raise ValueError(f"a marker is one non-empty line, got {marker!r}")
    return body if has_marker(body, marker) else f"{marker}\n{body}"


def fit_comment(render: Callable[[Detail], str], limit: int = COMMENT_LIMIT, margin: int = 2000) -> str:
    """The most detailed comment level of `render(detail)` within `limit - margin` characters, else the least
    detailed, trimmed."""
    budget = limit - margin
    if budget <= 0:
        raise ValueError(f"limit - margin must be positive, got {limit} - {margin}")
    text = ""
    for detail in COMMENT_DETAILS:
        # Render lazily: a big suite's full table is only built when it might be used.
        text = render(detail)
        if len(text) <= budget:
            return text

    def note(omitted: int) -> str:
        return (
            f"> **Trimmed:** {omitted:,} characters of this report were left out to fit GitHub's "
            f"{limit:,}-character comment limit. The full report is in the job summary and in the "
            "report files (`report.md`, `report.json`)."
        )

    return trim_markdown(text, budget, len, note)
