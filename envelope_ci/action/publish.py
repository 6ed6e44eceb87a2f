"""What the action publishes from a typed report: the comment and summary, annotations, outputs, and posting the
comment."""
from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..api import BaseSource
from ..formats.escape import clean, fenced, inline
from ..formats.history_md import trend_details
from ..formats.html import HTML
from ..formats.markdown import render_markdown
from ..github.client import GitHubClient
from ..github.commands import error_annotation, warning
from ..github.comment import COMMENT_LIMIT, fit_comment, marker_for
from ..github.rest import GitHubError
from ..model import STRATA, Detail, ExitCode, Gate, Outcome, Verdict
from ..report.history_model import History
from ..report.model import CaseRow, Report, stratum_name
from .event import PullRequest
from .suite import relative_to

# GitHub shows at most 10 error annotations per step; more are dropped silently.
MAX_ANNOTATIONS = 10
OUTPUT_NAMES = (
    "verdict",
    "exit-code",
    "stable",
    "regressions",
    "yield",
    "accuracy-on-yield",
    "alerts",
    "baseline-lowered",
    "report-json",
    "report-markdown",
    "report-html",
    "comment-url",
)
# The report files named by outputs.
REPORT_FILE_OUTPUTS = {"report.json": "report-json", "report.md": "report-markdown", HTML.filename: "report-html"}

# -- the comment and the job summary ------------------------------------------------------------


def report_markdown(report: Report, title: str, tail: str, mask: Callable[[str], str]) -> tuple[str, str]:
    """(comment, job summary): the comment fitted to GitHub's limit around the whole `tail`, the summary in full."""

    @functools.cache
    def render(detail: Detail) -> str:
        return mask(render_markdown(report, detail, title=title))

    return fit_comment(render, limit=COMMENT_LIMIT - len(tail)) + tail, render(Detail.FULL) + tail


def error_markdown(title: str, code: int, said: str) -> str:
    """The comment and summary when the run wrote no report (bad input or a crash)."""
    what = "bad input" if code == ExitCode.USAGE else f"exit {int(code)}"
    text = said.strip() or "(no message)"
    return (
        f"## ❌ envelope-ci: {what} — {inline(title)}\n\n"
        "The run could not start, so no case was graded. The harness said:\n\n"
        f"{fenced(text[-20000:])}\n"
    )


def not_posted_note(why: str | None) -> str:
    """The job summary's first line when the comment could not be posted, else ""."""
    return f"> **The PR comment was not posted:** {inline(why, 1000)}\n\n" if why else ""


def run_link(env: Mapping[str, str]) -> str | None:
    """The URL of this workflow run (its job summaries), when the runner says where it is."""
    server, repo, run_id = env.get("GITHUB_SERVER_URL"), env.get("GITHUB_REPOSITORY"), env.get("GITHUB_RUN_ID")
    if server and repo and run_id and re.fullmatch(r"\d+", run_id):
        attempt = env.get("GITHUB_RUN_ATTEMPT", "")
        suffix = f"/attempts/{attempt}" if re.fullmatch(r"\d+", attempt) and attempt != "1" else ""
        return f"{server.rstrip('/')}/{repo}/actions/runs/{run_id}{suffix}"
    return None


def footer(env: Mapping[str, str], pr: Mapping[str, Any] | None, base: BaseSource | None) -> str:
    """The comment's last lines: what was tested, where the base pins came from, where the full report is."""
    parts = []
    head = pr.get("head", {}).get("sha") if pr and isinstance(pr.get("head"), dict) else None
    if isinstance(head, str) and re.fullmatch(r"[0-9a-f]{7,64}", head):
        parts.append(f"commit `{head[:12]}`")
    link = run_link(env)
    if link:
        parts.append(f"[run and job summary]({link})")
    lines = ["", "---", "<sub>envelope-ci" + (" · " + " · ".join(parts) if parts else "") + "</sub>"]
    if base is not None and base.error:
        lines += ["", f"<sub>base pins: unavailable — {inline(base.error, 600)}</sub>"]
    elif base is not None and base.source:
        lines += ["", f"<sub>base pins: {inline(base.source, 600)}</sub>"]
    return "\n".join(lines) + "\n"


# -- the trend of the strata (the `history` input) -------------------------------------------------


def touched_strata(report: Report) -> list[str]:
    """The strata of the cases this PR changed (a pin moved, or the case itself), in the report's order; none when
    it changed no case that is still there."""
    if report.base is not None:
        changed = {row.id for row in report.base.diff if row.pin_changed or row.fixture}
    else:
        changed = {*report.fixtures.added, *report.fixtures.modified}
    found = {c.stratum_name for c in report.cases if c.id in changed}
    return [name for name in (*STRATA, stratum_name(None)) if name in found]


def trend_section(report: Report, history: History) -> str:
    """The comment's collapsed trend of the strata this PR touches (every stratum when it touches none)."""
    return "\n" + trend_details(history, touched_strata(report)) + "\n"


def trend_unavailable(why: str) -> str:
    """The collapsed trend's place when the base branch's history could not be read: why, and what to do."""
    return ("\n<details><summary>Trend of the strata: the base branch's history could not be read</summary>\n\n"
            f"{inline(why, 600)} (docs/action.md, 'The trend of the strata')\n\n</details>\n\n")


# -- annotations ----------------------------------------------------------------------------------


def annotation_rank(case: CaseRow) -> int | None:
    """How urgently a case deserves an annotation (lower first): failing regressions, other failures, undelivered;
    else None."""
    if case.gate is Gate.FAIL:
        return 0 if case.outcome is Outcome.REGRESSION else 1
    return 2 if case.gate is Gate.UNDELIVERED else None


def case_annotations(report: Report, workdir: Path, workspace: Path) -> list[str]:
    """Annotations on the fixture lines of the cases that fail the gate or went undelivered, at most MAX_ANNOTATIONS,
    then a count.

    A case that fails the gate is an ``::error``; one the endpoint never answered is a
    ``::warning``: the fixture line is not what is wrong.
    """
    ranked = sorted(
        ((rank, i), case) for i, case in enumerate(report.cases) if (rank := annotation_rank(case)) is not None
    )
    lines = [_case_annotation(case, workdir, workspace) for _, case in ranked[:MAX_ANNOTATIONS]]
    extra = len(ranked) - MAX_ANNOTATIONS
    if extra > 0:
        lines.append(
            f"envelope-ci: {extra} more case(s) not annotated (GitHub shows at most {MAX_ANNOTATIONS} "
            "error annotations per step); every case is in the job summary and report.json."
        )
    return lines


def _case_annotation(case: CaseRow, workdir: Path, workspace: Path) -> str:
    """One case's `::error` (fails the gate) or `::warning` (undelivered) on its fixture line."""
    file = relative_to(workdir / case.file, workspace) if case.file else None
    line = case.line if file else None
    title = f"envelope-ci: {clean(case.id)[:100]} — {case.outcome.value.replace('_', ' ')} ({case.channel.value})"
    reasons = "; ".join(case.reasons) or "not stable"
    message = clean(f"{case.label.value} on the {case.channel.value} channel: {reasons}")[:1000]
    if case.gate is Gate.UNDELIVERED:
        return warning(message, file=file, line=line, title=title)
    return error_annotation(file, line, title, message)


def report_warnings(report: Report) -> list[str]:
    """The `::warning`s a judged run deserves beyond its cases: a lowered baseline, an inconclusive verdict."""
    lines = []
    down = report.base.downgraded if report.base else ()
    if down:
        lines.append(warning(f"envelope-ci: baseline lowered — this PR downgrades {len(down)} pin(s) the base branch "
                             f"had right and stable: {', '.join(clean(i) for i in down[:10])} — approve only if "
                             f"intended, after a code owner's review of {clean(report.run.pins)}.",
                             title="envelope-ci: baseline lowered"))
    if report.verdict is Verdict.INCONCLUSIVE:
        lines.append(warning("envelope-ci: the run is inconclusive (too few envelopes could be graded); "
                             "see the job summary."))
    return lines


def failure_annotation(code: int, said: str) -> str:
    """The `::error` for a run that wrote no report: the first lines of what it said."""
    lines = [ln for ln in said.splitlines() if ln.strip()][:10] or [f"envelope-ci exited {int(code)}"]
    title = "envelope-ci: bad input" if code == ExitCode.USAGE else "envelope-ci failed"
    return error_annotation(None, None, title, "\n".join(lines))


# -- outputs --------------------------------------------------------------------------------------


def fmt_output(value: float | None) -> str:
    """A report number as an output string: "" for null, rates rounded to six places."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(round(value, 6))
    return str(value)


def report_outputs(report: Report) -> dict[str, str]:
    """The step outputs that come from the report."""
    return {
        "verdict": report.verdict.value,
        "stable": str(report.summary.stable),
        "regressions": str(len(report.regressions)),
        "yield": fmt_output(report.summary.yield_),
        "accuracy-on-yield": fmt_output(report.summary.accuracy_on_yield),
        "alerts": ",".join(report.alerts),
        # A team can require a code owner's review of the pins file when this is true.
        "baseline-lowered": "true" if report.base and report.base.downgraded else "false",
    }


def file_outputs(written: Sequence[Path], workspace: Path) -> dict[str, str]:
    """report-json, report-markdown and report-html: the files written, relative to the workspace."""
    return {REPORT_FILE_OUTPUTS[p.name]: relative_to(p, workspace) or str(p)
            for p in written if p.name in REPORT_FILE_OUTPUTS}


# -- posting --------------------------------------------------------------------------------------


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
        return "", str(exc) + (_read_only_advice(pr, repo) if exc.status == 403 else "")
    return result.url, None


def _read_only_advice(pr: Mapping[str, Any], repo: str) -> str:
    """What to do about a 403 on the comment, naming the fork when the PR comes from one."""
    head = pr.get("head")
    head_repo = ((head.get("repo") or {}).get("full_name")) if isinstance(head, dict) else None
    fork = isinstance(head_repo, str) and head_repo.lower() != repo.lower()
    return (
        " — the token is read-only"
        + (f" (a pull request from the fork {head_repo}: GITHUB_TOKEN cannot write there)" if fork else "")
        + "; give the job `permissions: pull-requests: write`, or post from a workflow_run workflow"
        " (docs/action.md, 'Pull requests from forks')"
    )


def publish_comment(
    enabled: bool, env: Mapping[str, str], pull: PullRequest | None, client: GitHubClient | None, body: str, key: str,
    out: TextIO
) -> tuple[str, str | None]:
    """Post or edit the sticky comment when asked and possible: (url or "", why it was not posted or None)."""
    if not enabled:
        out.write("envelope-ci: comment: false — not commenting; the report is in the job summary.\n")
        return "", None
    if pull is None:
        event = env.get("GITHUB_EVENT_NAME") or "run"
        out.write(f"envelope-ci: no pull request in this {event} event — the report is in the job summary only.\n")
        return "", None
    pr, number = pull
    url, why = post_comment(client, number, body, marker_for(key), pr, env.get("GITHUB_REPOSITORY", ""))
    if why:
        out.write(warning(f"envelope-ci could not post the PR comment: {why}. "
                          "The full report is in the job summary.") + "\n")
    else:
        out.write(f"envelope-ci: PR comment {url}\n")
    return url, why
