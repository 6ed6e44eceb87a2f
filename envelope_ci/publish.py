"""What the action publishes from a report: the comment's parts, annotations, outputs.

Pure functions over report.json's plain data, plus the one call that posts the comment;
``envelope_ci.action`` decides when each is used.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .basepins import BasePins, relative_to
from .github import GitHubClient, GitHubError, error_annotation, warning
from .model import ExitCode
from .render.escape import clean, fenced, inline

# GitHub shows at most 10 error annotations per step; more are dropped silently.
MAX_ANNOTATIONS = 10


def annotation_rank(case: Mapping[str, Any], alerts: Sequence[str]) -> int | None:
    """How urgently a case deserves an annotation (lower first), or None for none."""
    if case.get("outcome") == "regression":
        return 0
    if case.get("channel") == "stable":
        return None
    stratum = case.get("stratum")
    undelivered = case.get("outcome") == "undelivered"
    if stratum in (None, "easy") and not undelivered:
        return 1  # held to the easy floor: any such case fails the run
    if stratum == "medium" and not undelivered and "medium_regression" in alerts:
        return 2
    if undelivered:
        return 3  # transport, not the model: it makes the run inconclusive
    return None  # a stretch case failing is what stretch is for


def case_annotations(report: Mapping[str, Any], workdir: Path, workspace: Path) -> list[str]:
    """Annotations on the fixture lines of the cases that matter, at most MAX_ANNOTATIONS, then a count.

    A case that failed the model (a regression, a broken floor) is an ``::error``; one the
    endpoint never answered is a ``::warning``: the fixture line is not what is wrong.
    """
    alerts = list(report.get("alerts") or [])
    ranked = [
        (rank, i, case)
        for i, case in enumerate(report.get("cases") or [])
        if (rank := annotation_rank(case, alerts)) is not None
    ]
    ranked.sort(key=lambda item: item[:2])
    lines = []
    for _, _, case in ranked[:MAX_ANNOTATIONS]:
        file = case.get("file")
        rel = relative_to(workdir / file, workspace) if isinstance(file, str) and file else None
        line = case.get("line") if isinstance(case.get("line"), int) and rel else None
        outcome = str(case.get("outcome", "")).replace("_", " ")
        title = f"envelope-ci: {clean(str(case.get('id')))[:100]} — {outcome} ({case.get('channel')})"
        reasons = "; ".join(str(r) for r in case.get("reasons") or []) or "not stable"
        message = clean(f"{case.get('label')} on the {case.get('channel')} channel: {reasons}")[:1000]
        if case.get("outcome") == "undelivered":  # the endpoint, not the fixture: a warning, not an error
            lines.append(warning(message, file=rel, line=line, title=title))
        else:
            lines.append(error_annotation(rel, line, title, message))
    extra = len(ranked) - MAX_ANNOTATIONS
    if extra > 0:
        lines.append(
            f"envelope-ci: {extra} more case(s) not annotated (GitHub shows at most {MAX_ANNOTATIONS} "
            "error annotations per step); every case is in the job summary and report.json."
        )
    return lines


def fmt_output(value: Any) -> str:
    """A report value as an output string: "" for null, rates rounded to six places."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(round(value, 6))
    return str(value)


def report_outputs(report: Mapping[str, Any] | None) -> dict[str, str]:
    """The step outputs that come from report.json."""
    if report is None:
        return {}
    summary = report.get("summary") or {}
    return {
        "verdict": str(report.get("verdict", "")),
        "stable": fmt_output(summary.get("stable")),
        "regressions": str(len(report.get("regressions") or [])),
        "yield": fmt_output(summary.get("yield")),
        "accuracy-on-yield": fmt_output(summary.get("accuracy_on_yield")),
        "alerts": ",".join(report.get("alerts") or []),
    }


def run_link(env: Mapping[str, str]) -> str | None:
    """The URL of this workflow run (its job summaries), when the runner says where it is."""
    server, repo, run_id = env.get("GITHUB_SERVER_URL"), env.get("GITHUB_REPOSITORY"), env.get("GITHUB_RUN_ID")
    if server and repo and run_id and re.fullmatch(r"\d+", run_id):
        attempt = env.get("GITHUB_RUN_ATTEMPT", "")
        suffix = f"/attempts/{attempt}" if re.fullmatch(r"\d+", attempt) and attempt != "1" else ""
        return f"{server.rstrip('/')}/{repo}/actions/runs/{run_id}{suffix}"
    return None


def footer(env: Mapping[str, str], pr: Mapping[str, Any] | None, base: BasePins | None) -> str:
    """The comment's last lines: what was tested, where the base pins came from, where the full report is."""
    parts = []
    head = pr.get("head", {}).get("sha") if pr and isinstance(pr.get("head"), dict) else None
    sha = head if isinstance(head, str) and re.fullmatch(r"[0-9a-f]{7,64}", head) else None
    if sha:
        parts.append(f"commit `{sha[:12]}`")
    link = run_link(env)
    if link:
        parts.append(f"[run and job summary]({link})")
    lines = ["", "---", "<sub>envelope-ci" + (" · " + " · ".join(parts) if parts else "") + "</sub>"]
    if base is not None:
        if base.error:
            lines += ["", f"<sub>base pins: unavailable — {inline(base.error, 600)}</sub>"]
        elif base.origin:
            lines += ["", f"<sub>base pins: {inline(base.origin, 600)}</sub>"]
    return "\n".join(lines) + "\n"


def error_markdown(title: str, code: int, stderr: str) -> str:
    """The comment and summary when the harness wrote no report (bad input or a crash)."""
    what = "bad input" if code == ExitCode.USAGE else f"exit {code}"
    text = stderr.strip() or "(no message)"
    return (
        f"## ❌ envelope-ci: {what} — {inline(title)}\n\n"
        "The run could not start, so no case was graded. The harness said:\n\n"
        f"{fenced(text[-20000:])}\n"
    )


def post_comment(
    client: GitHubClient | None, number: int, body: str, marker: str, pr: Mapping[str, Any], repo: str
) -> tuple[str, str | None]:
    """Upsert the sticky comment: (url, None), or ("", why it could not be posted)."""
    if client is None:
        return "", "no github-token was given"
    try:
        # A personal access token posts as its user; GITHUB_TOKEN (not a user) as github-actions[bot].
        author = client.viewer_login()
    except GitHubError:
        author = None
    try:
        result = client.upsert_comment(number, body, marker, author=author)
    except GitHubError as exc:
        why = str(exc)
        head_repo = ((pr.get("head") or {}).get("repo") or {}).get("full_name") if isinstance(pr.get("head"), dict) else None
        if exc.status == 403:
            fork = isinstance(head_repo, str) and head_repo.lower() != repo.lower()
            why += (
                " — the token is read-only"
                + (f" (a pull request from the fork {head_repo}: GITHUB_TOKEN cannot write there)" if fork else "")
                + "; give the job `permissions: pull-requests: write`, or post from a workflow_run workflow"
                " (README.md, 'Pull requests from forks')"
            )
        return "", why
    return result.url, None
