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
    add_mask,
    append_summary,
    error_annotation,
    fit_comment,
    marker_for,
    warning,
    write_outputs,
)
from .publish import case_annotations, error_markdown, footer, post_comment, report_outputs
from .render.escape import clean, inline
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
