"""The GitHub Action: action inputs -> `envelope-ci run` -> comment, summary, annotations, outputs.

The harness (``envelope_ci.cli.main``) does all the judging; this module only translates
the runner's environment into a command line, fetches the base branch's pins, and
publishes what the harness wrote. ``entrypoint.py`` at the repository root calls
``main()``; it runs the same way outside a container:

    GITHUB_WORKSPACE=$PWD INPUT_FIXTURES=evals python entrypoint.py

Environment read: ``INPUT_<NAME>`` for every input of action.yml (``INPUT_BASE-URL`` as the
runner spells it, or ``INPUT_BASE_URL``), ``EVAL_API_KEY`` (the endpoint key, never an
input), and ``GITHUB_EVENT_PATH``, ``GITHUB_EVENT_NAME``, ``GITHUB_REPOSITORY``,
``GITHUB_API_URL``, ``GITHUB_WORKSPACE``, ``GITHUB_STEP_SUMMARY``, ``GITHUB_OUTPUT``,
``GITHUB_SHA`` (plus ``GITHUB_SERVER_URL``/``GITHUB_RUN_ID`` for a link to the run).

Exit status is the harness's: 0 pass, 1 regression or alert, 2 bad input, 3 inconclusive
(0 instead when ``fail-on-inconclusive`` is false; the ``exit-code`` output keeps 3).
Failing to post the comment never fails the step: it becomes a ``::warning::``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .basepins import BasePins, fetch_base_pins, relative_to
from .github import (
    COMMENT_LIMIT,
    GitHubClient,
    GitHubError,
    add_mask,
    append_summary,
    error_annotation,
    fit_comment,
    marker_for,
    warning,
    write_outputs,
)
from .render.escape import clean, fenced, inline
from .secrets import Secrets

# The inputs of action.yml and their defaults (tests check the two agree). The runner
# always exports every input; the defaults matter when the script runs outside it.
INPUT_DEFAULTS: dict[str, str] = {
    "fixtures": "evals",
    "pins": "",
    "base-url": "",
    "model": "",
    "lane": "smoke",
    "endpoint-class": "",
    "concurrency": "4",
    "repeats": "1",
    "stream": "false",
    "replay": "",
    "config": "",
    "comment": "true",
    "github-token": "",  # action.yml: ${{ github.token }}
    "fail-on-inconclusive": "true",
    "working-directory": ".",
}
BOOLEAN_INPUTS = ("stream", "comment", "fail-on-inconclusive")
OUTPUT_NAMES = (
    "verdict",
    "exit-code",
    "stable",
    "regressions",
    "yield",
    "accuracy-on-yield",
    "alerts",
    "report-json",
    "report-markdown",
    "comment-url",
)
PINS_NAME = "envelope-pins.json"
# Where reports go, under the workspace so later steps (upload-artifact, a script) can read them.
OUT_ROOT = ".envelope-ci"
# GitHub shows at most 10 error annotations per step; more are dropped silently.
MAX_ANNOTATIONS = 10
EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_INCONCLUSIVE = 0, 1, 2, 3


class InputError(Exception):
    """An action input that cannot be used; the message names it."""


# -- inputs --------------------------------------------------------------------------------------


def read_input(env: Mapping[str, str], name: str) -> str:
    """An input as the runner exports it (`INPUT_BASE-URL`) or in underscore form (`INPUT_BASE_URL`)."""
    upper = name.replace(" ", "_").upper()
    for key in dict.fromkeys((f"INPUT_{upper}", f"INPUT_{upper.replace('-', '_')}")):
        value = env.get(key, "").strip()
        if value:
            return value
    return INPUT_DEFAULTS.get(name, "")


def parse_bool(name: str, value: str) -> bool:
    """YAML 1.2 core-schema booleans, as actions/toolkit's getBooleanInput accepts them."""
    if value in ("true", "True", "TRUE"):
        return True
    if value in ("false", "False", "FALSE"):
        return False
    raise InputError(f"input {name!r} must be true or false, got {value!r}")


@dataclass(frozen=True)
class Inputs:
    """The action inputs, read and checked."""

    fixtures: str
    pins: str
    base_url: str
    model: str
    lane: str
    endpoint_class: str
    concurrency: str
    repeats: str
    stream: bool
    replay: str
    config: str
    comment: bool
    github_token: str
    fail_on_inconclusive: bool
    working_directory: str

    def __repr__(self) -> str:  # never show the token, even in a traceback
        return f"Inputs(fixtures={self.fixtures!r}, working_directory={self.working_directory!r})"


def read_inputs(env: Mapping[str, str]) -> Inputs:
    """All inputs; InputError names every unusable one."""
    values = {name: read_input(env, name) for name in INPUT_DEFAULTS}
    problems: list[str] = []
    flags: dict[str, bool] = {}
    for name in BOOLEAN_INPUTS:
        try:
            flags[name] = parse_bool(name, values[name])
        except InputError as exc:
            problems.append(str(exc))
    if values["lane"] not in ("smoke", "adjudication"):
        problems.append(f"input 'lane' must be smoke or adjudication, got {values['lane']!r}")
    for name in ("concurrency", "repeats"):
        if not re.fullmatch(r"[1-9][0-9]{0,5}", values[name]):
            problems.append(f"input {name!r} must be a positive whole number, got {values[name]!r}")
    if problems:
        raise InputError("; ".join(problems))
    return Inputs(
        fixtures=values["fixtures"],
        pins=values["pins"],
        base_url=values["base-url"],
        model=values["model"],
        lane=values["lane"],
        endpoint_class=values["endpoint-class"],
        concurrency=values["concurrency"],
        repeats=values["repeats"],
        stream=flags["stream"],
        replay=values["replay"],
        config=values["config"],
        comment=flags["comment"],
        github_token=values["github-token"],
        fail_on_inconclusive=flags["fail-on-inconclusive"],
        working_directory=values["working-directory"],
    )


def harness_argv(inputs: Inputs, pins: str, out_dir: Path, base_pins: Path | None, base_error: str | None = None) -> list[str]:
    """The `envelope-ci run` command line for these inputs; paths stay relative to the working directory."""
    argv = ["run", inputs.fixtures, "--pins", pins, "--out", str(out_dir), "--lane", inputs.lane]
    optional = {
        "--base-url": inputs.base_url,
        "--model": inputs.model,
        "--endpoint-class": inputs.endpoint_class,
        "--replay": inputs.replay,
        "--config": inputs.config,
    }
    argv += [item for flag, value in optional.items() if value for item in (flag, value)]
    argv += ["--concurrency", inputs.concurrency, "--repeats", inputs.repeats]
    if inputs.stream:
        argv.append("--stream")
    if base_pins is not None:
        argv += ["--base-pins", str(base_pins)]
    if base_error:
        argv += ["--base-pins-error", base_error]
    return argv


# -- secrets -------------------------------------------------------------------------------------


def announce_masks(secrets: Secrets, out: TextIO) -> None:
    """Tell the runner to hide each secret (each of its lines) in the log, before anything else is printed."""
    for value in secrets.values:
        for line in {value, *value.splitlines()}:
            if line.strip():
                out.write(add_mask(line) + "\n")
    out.flush()


def scrub_files(secrets: Secrets, paths: Sequence[Path]) -> None:
    """Rewrite the files that contain a secret (an endpoint that echoes the key) without it."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            text = path.read_text("utf-8")
            clean_text = secrets.mask(text)
            if clean_text != text:
                path.write_text(clean_text, "utf-8")


class _Tee(io.StringIO):
    """Writes through to a stream, secrets scrubbed, and keeps a copy (error messages go into the summary too)."""

    def __init__(self, stream: TextIO, scrub: Callable[[str], str]) -> None:
        super().__init__()
        self.stream = stream
        self.scrub = scrub

    def write(self, text: str) -> int:
        """Write to the stream, and to the copy."""
        text = self.scrub(text)
        self.stream.write(text)
        return super().write(text)

    def flush(self) -> None:
        """Flush the stream."""
        self.stream.flush()


# -- paths ---------------------------------------------------------------------------------------


def slug(key: str) -> str:
    """A directory name for one suite's reports (two suites in one job must not share it)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", key).strip("-.") or "default"


# -- the event -----------------------------------------------------------------------------------


def load_event(path: str | None) -> tuple[dict[str, Any], str | None]:
    """The webhook payload, or ({}, why) when it cannot be read."""
    if not path:
        return {}, None
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        return {}, f"could not read the event payload {path}: {exc}"
    return (data, None) if isinstance(data, dict) else ({}, f"the event payload {path} is not a JSON object")


def pull_request_of(event: Mapping[str, Any]) -> tuple[dict[str, Any], int] | None:
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


# -- report -> comment, summary, annotations, outputs --------------------------------------------


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
    """`::error` commands on the fixture lines of the cases that matter, at most MAX_ANNOTATIONS, then a count."""
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
    what = "bad input" if code == EXIT_USAGE else f"exit {code}"
    text = stderr.strip() or "(no message)"
    return (
        f"## ❌ envelope-ci: {what} — {inline(title)}\n\n"
        "The run could not start, so no case was graded. The harness said:\n\n"
        f"{fenced(text[-20000:])}\n"
    )


# -- the run -------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one action run did."""

    exit_code: int
    outputs: dict[str, str] = field(default_factory=dict)


def run_harness(argv: Sequence[str], out: TextIO, secrets: Secrets) -> tuple[int, str]:
    """`envelope_ci.cli.main(argv)` in-process, its output shown with workflow commands off; (exit, stderr)."""
    from .cli import main as cli_main

    # The harness prints fixture text and model output: a line of it starting with `::`
    # must not be taken for a workflow command, and an endpoint that echoes the key must
    # not get it into the log (the runner masks it too, but only on a runner).
    token = f"envelope-ci-{uuid.uuid4().hex}"
    out.write("::group::envelope-ci run\n")
    out.write(f"::stop-commands::{token}\n")
    out.flush()
    stdout, stderr = _Tee(out, secrets.mask), _Tee(sys.stderr, secrets.mask)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = cli_main(list(argv))
    except Exception as exc:  # noqa: BLE001 - a crash still gets a summary and outputs
        stderr.write(secrets.mask(traceback.format_exc()))
        stderr.write(f"internal error: {type(exc).__name__}: {exc}\n")
        code = 70
    finally:
        stdout.flush()
        stderr.flush()
        out.write(f"::{token}::\n")
        out.write("::endgroup::\n")
        out.flush()
    return int(code), stderr.getvalue()


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


@dataclass(frozen=True)
class Suite:
    """Where one suite lives and where its reports go."""

    workdir: Path
    key: str  # the fixtures path relative to the workspace: comment marker, title, report folder
    pins: str  # as given to the harness, relative to workdir
    out_dir: Path


def locate(inputs: Inputs, workspace: Path) -> Suite:
    """Resolve the suite's paths; InputError when the working directory does not exist."""
    workdir = (workspace / inputs.working_directory).resolve()
    if not workdir.is_dir():
        raise InputError(f"working-directory {inputs.working_directory!r} is not a directory under {workspace}")
    key = relative_to(workdir / inputs.fixtures, workspace) or inputs.fixtures
    pins = inputs.pins or (Path(inputs.fixtures) / PINS_NAME).as_posix()
    return Suite(workdir, key, pins, workspace / OUT_ROOT / slug(key))


def load_report(suite: Suite, code: int) -> dict[str, Any] | None:
    """report.json when the harness judged the run (exit 0, 1 or 3)."""
    path = suite.out_dir / "report.json"
    if code not in (EXIT_PASS, EXIT_FAIL, EXIT_INCONCLUSIVE) or not path.is_file():
        return None
    report: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return report


def publish_comment(
    inputs: Inputs,
    env: Mapping[str, str],
    pull: tuple[dict[str, Any], int] | None,
    client: GitHubClient | None,
    body: str,
    key: str,
    out: TextIO,
) -> tuple[str, str | None]:
    """Post or edit the sticky comment when asked and possible: (url or "", why it was not posted or None)."""
    if not inputs.comment:
        out.write("envelope-ci: comment: false — not commenting; the report is in the job summary.\n")
        return "", None
    if pull is None:
        event = env.get("GITHUB_EVENT_NAME") or "run"
        out.write(f"envelope-ci: no pull request in this {event} event — the report is in the job summary only.\n")
        return "", None
    pr, number = pull
    url, why = post_comment(client, number, body, marker_for(key), pr, env.get("GITHUB_REPOSITORY", ""))
    if why:
        out.write(warning(f"envelope-ci could not post the PR comment: {why}. The full report is in the job summary.") + "\n")
    else:
        out.write(f"envelope-ci: PR comment {url}\n")
    return url, why


def execute(env: Mapping[str, str], out: TextIO) -> Outcome:
    """Everything but masking and exiting; returns the exit status and the outputs to write."""
    workspace = Path(env.get("GITHUB_WORKSPACE") or os.getcwd()).resolve()
    outputs: dict[str, str] = dict.fromkeys(OUTPUT_NAMES, "")
    try:
        inputs = read_inputs(env)
        suite = locate(inputs, workspace)
    except InputError as exc:
        out.write(error_annotation(None, None, "envelope-ci: bad input", str(exc)) + "\n")
        outputs["exit-code"] = str(EXIT_USAGE)
        return Outcome(EXIT_USAGE, outputs)
    secrets = Secrets([inputs.github_token, env.get("EVAL_API_KEY", "")])
    os.chdir(suite.workdir)

    event, event_problem = load_event(env.get("GITHUB_EVENT_PATH"))
    if event_problem:
        out.write(warning(event_problem) + "\n")
    pull = pull_request_of(event)
    client: GitHubClient | None = None
    if inputs.github_token and env.get("GITHUB_REPOSITORY"):
        try:
            client = GitHubClient(env.get("GITHUB_API_URL") or "https://api.github.com", env["GITHUB_REPOSITORY"], inputs.github_token)
        except ValueError as exc:
            out.write(warning(f"cannot talk to the GitHub API: {exc}") + "\n")

    suite.out_dir.mkdir(parents=True, exist_ok=True)
    for name in ("report.json", "report.md", "junit.xml", "comment.md", "base-pins.json"):
        with contextlib.suppress(FileNotFoundError):
            (suite.out_dir / name).unlink()

    # The base branch's pins (pull requests only), for the comment's pin diff. When they
    # are absent (a first PR) or unknown, the missing file tells the harness "present: false".
    base: BasePins | None = None
    base_file: Path | None = None
    if pull is not None:
        base = fetch_base_pins(workspace, suite.workdir, suite.workdir / suite.pins, env.get("GITHUB_SHA", ""), pull[0], client)
        base_file = suite.out_dir / "base-pins.json"
        if base.text is not None:
            base_file.write_text(base.text, "utf-8")
        if base.error:
            out.write(warning(f"base branch pins unavailable: {base.error}") + "\n")

    base_error = base.error if base is not None else None
    code, stderr = run_harness(harness_argv(inputs, suite.pins, suite.out_dir, base_file, base_error), out, secrets)
    scrub_files(secrets, [suite.out_dir / name for name in ("report.json", "report.md", "junit.xml")])
    report = load_report(suite, code)

    if report is not None:
        tail = footer(env, pull[0] if pull else None, base)
        # The footer (commit, run link, base pins' origin) is kept whole; the report fits around it.
        body = fit_comment(lambda detail: secrets.mask(_render(report, detail, suite.key)), limit=COMMENT_LIMIT - len(tail)) + tail
        summary_md = secrets.mask(_render(report, "full", suite.key)) + tail
    else:
        body = summary_md = secrets.mask(error_markdown(suite.key, code, stderr)) + footer(env, pull[0] if pull else None, None)
    (suite.out_dir / "comment.md").write_text(body, "utf-8")

    outputs["comment-url"], not_posted = publish_comment(inputs, env, pull, client, body, suite.key, out)
    if env.get("GITHUB_STEP_SUMMARY"):
        if not_posted:
            summary_md = f"> **The PR comment was not posted:** {inline(not_posted, 1000)}\n\n" + summary_md
        append_summary(env["GITHUB_STEP_SUMMARY"], summary_md)

    if report is not None:
        out.writelines(line + "\n" for line in case_annotations(report, suite.workdir, workspace))
        outputs.update(report_outputs(report))
        down = (report.get("base") or {}).get("downgraded") or []
        if down:
            out.write(warning(f"envelope-ci: this PR downgrades {len(down)} pin(s) the base branch had right and stable: "
                              f"{', '.join(clean(str(i)) for i in down[:10])} — approve only if intended.") + "\n")
        if report.get("verdict") == "inconclusive":
            out.write(warning("envelope-ci: the run is inconclusive (too few envelopes could be graded); see the job summary.") + "\n")
    elif code != EXIT_PASS:
        said = [ln for ln in stderr.splitlines() if ln.strip()][:10] or [f"envelope-ci exited {code}"]
        title = "envelope-ci: bad input" if code == EXIT_USAGE else "envelope-ci failed"
        out.write(error_annotation(None, None, title, "\n".join(said)) + "\n")
    for name, path in (("report-json", suite.out_dir / "report.json"), ("report-markdown", suite.out_dir / "report.md")):
        if path.is_file():
            outputs[name] = relative_to(path, workspace) or str(path)
    outputs["exit-code"] = str(code)

    if code == EXIT_INCONCLUSIVE and not inputs.fail_on_inconclusive:
        out.write("envelope-ci: inconclusive, and fail-on-inconclusive is false — the step passes (output exit-code is 3).\n")
        return Outcome(EXIT_PASS, outputs)
    return Outcome(code, outputs)


def _render(report: Mapping[str, Any], detail: str, title: str) -> str:
    """The report as Markdown at one detail level (see envelope_ci.github.DETAIL_LEVELS)."""
    from .render.markdown import render_markdown

    return render_markdown(report, detail, title=title)


def main(env: Mapping[str, str] | None = None, out: TextIO | None = None) -> int:
    """Run the action for `env` (default os.environ), printing workflow commands to `out`; the exit status."""
    env = dict(os.environ if env is None else env)
    out = out or sys.stdout
    # First, before anything else is printed: hide the secrets in the log.
    secrets = Secrets([read_input(env, "github-token"), env.get("EVAL_API_KEY", "")])
    announce_masks(secrets, out)
    result = execute(env, out)
    outputs_path = env.get("GITHUB_OUTPUT")
    values = {name: secrets.mask(result.outputs.get(name, "")) for name in OUTPUT_NAMES}
    if outputs_path:
        write_outputs(outputs_path, values)
    else:
        out.write("envelope-ci: outputs " + json.dumps(values, ensure_ascii=False) + "\n")
    out.flush()
    return result.exit_code
