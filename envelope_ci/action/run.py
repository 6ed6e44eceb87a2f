"""One action run: inputs -> base pins -> ``api.run`` (or ``api.merge``) -> comment, summary, annotations, outputs;
``main`` is the entrypoint.

``mode: shard`` runs one part of the suite and publishes nothing but its files and outputs;
``mode: merge`` judges every part's report as one run and publishes it like ``mode: run``.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from .. import api, atomic, supervise
from ..api import BaseSource
from ..config import RunConfig
from ..errors import UsageError
from ..formats.console import render_console
from ..formats.html import HTML
from ..github.client import GitHubClient
from ..github.commands import append_summary, error_annotation, warning, write_outputs
from ..model import ExitCode
from ..pins_history import HISTORY_FILES, load_history, write_history
from ..report.model import Report
from ..result import RunResult
from ..secrets import Secrets
from .basepins import fetch_base_pins, git_in
from .event import PullRequest, load_event, pull_request_of
from .inputs import InputError, Inputs, allowed_secrets, read_input, read_inputs
from .log import announce_masks, fenced_group
from .publish import (
    OUTPUT_NAMES,
    case_annotations,
    error_markdown,
    failure_annotation,
    file_outputs,
    footer,
    not_posted_note,
    publish_comment,
    report_markdown,
    report_outputs,
    report_warnings,
    trend_section,
    trend_unavailable,
)
from .suite import Suite, locate, run_config

# Files a previous run in this job may have left in the suite's report folder.
STALE_FILES = ("report.json", "report.md", "junit.xml", HTML.filename, "comment.md", *HISTORY_FILES)


@dataclass
class Outcome:
    """What one action run did: the step's exit status and the outputs to write."""

    exit_code: ExitCode
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Job:
    """What one action run works with, fixed once the inputs are read."""

    env: Mapping[str, str]
    out: TextIO
    secrets: Secrets
    inputs: Inputs
    workspace: Path
    suite: Suite
    pull: PullRequest | None
    client: GitHubClient | None


@dataclass(frozen=True)
class Ran:
    """The run's result (None when it wrote no report), its exit code, and what it said on stderr."""

    result: RunResult | None
    exit_code: ExitCode
    said: str


def main(env: Mapping[str, str] | None = None, out: TextIO | None = None) -> int:
    """Run the action for `env` (default os.environ), printing workflow commands to `out`; the exit status."""
    env = dict(os.environ if env is None else env)
    out = out or sys.stdout
    # First, before anything else is printed: hide the secrets in the log.
    secrets = Secrets([read_input(env, "github-token"), env.get("EVAL_API_KEY", ""), *allowed_secrets(env)])
    announce_masks(secrets, out)
    outcome = execute(env, out, secrets)
    values = {name: secrets.mask(outcome.outputs.get(name, "")) for name in OUTPUT_NAMES}
    if env.get("GITHUB_OUTPUT"):
        write_outputs(env["GITHUB_OUTPUT"], values)
    else:
        out.write("envelope-ci: outputs " + json.dumps(values, ensure_ascii=False) + "\n")
    out.flush()
    return int(outcome.exit_code)


def execute(env: Mapping[str, str], out: TextIO, secrets: Secrets) -> Outcome:
    """Everything but masking and writing the outputs; returns the exit status and the outputs."""
    workspace = Path(env.get("GITHUB_WORKSPACE") or os.getcwd()).resolve()
    outputs: dict[str, str] = dict.fromkeys(OUTPUT_NAMES, "")
    try:
        inputs = read_inputs(env)
        suite = locate(inputs, workspace)
    except InputError as exc:
        out.write(error_annotation(None, None, "envelope-ci: bad input", str(exc)) + "\n")
        outputs["exit-code"] = str(int(ExitCode.USAGE))
        return Outcome(ExitCode.USAGE, outputs)
    os.chdir(suite.workdir)
    job = Job(env, out, secrets, inputs, workspace, suite, _pull_request(env, out), _client(inputs, env, out))
    _clear(suite.out_dir)
    if inputs.mode == "merge":
        ran = merge_suite(inputs.reports, suite.out_dir, out, secrets)
        base = _merged_base(ran)
    else:
        base = _base_pins(job)
        ran = run_suite(run_config(inputs, suite, env), base, out, secrets)
    if inputs.mode == "shard":
        return _shard_outcome(job, ran, outputs)
    outputs["comment-url"] = _publish(job, ran, base)
    outputs.update(_annotate(job, ran))
    outputs["exit-code"] = str(int(ran.exit_code))
    if ran.exit_code == ExitCode.INCONCLUSIVE and not inputs.fail_on_inconclusive:
        out.write("envelope-ci: inconclusive, and fail-on-inconclusive is false — "
                  "the step passes (output exit-code is 3).\n")
        return Outcome(ExitCode.PASS, outputs)
    return Outcome(ran.exit_code, outputs)


def run_suite(config: RunConfig, base: BaseSource | None, out: TextIO, secrets: Secrets) -> Ran:
    """``api.run`` (bounded by the ``max-run-time`` input when it is set) with its console summary and progress in a
    fenced log group; errors become exit codes."""
    return _attempt("envelope-ci run", lambda: supervise.run(config, base), out, secrets)


def merge_suite(pattern: str, out_dir: Path, out: TextIO, secrets: Secrets) -> Ran:
    """``api.merge`` of the shards' reports that the ``reports`` glob names, as ``run_suite`` runs ``api.run``."""
    return _attempt("envelope-ci merge", lambda: api.merge(_matching(pattern), out_dir, (HTML.name,)), out, secrets)


def _matching(pattern: str) -> list[Path]:
    """The files a glob names (``**`` included), relative to the working directory; none is bad input."""
    paths = sorted(Path(p) for p in glob.glob(pattern, recursive=True) if Path(p).is_file())
    if not paths:
        raise UsageError(f"input 'reports': no file matches {pattern!r} under {Path.cwd()}; download the shards' "
                         "artifacts first (actions/download-artifact) and name their report.json files")
    return paths


def _attempt(title: str, call: Callable[[], RunResult], out: TextIO, secrets: Secrets) -> Ran:
    """One library call with its console summary and progress in a fenced log group; errors become exit codes."""
    with fenced_group(out, secrets, title) as said:
        try:
            result = call()
            print(render_console(result.report, [p.as_posix() for p in result.written]))
            return Ran(result, result.exit_code, said.getvalue())
        except UsageError as exc:
            said.write("".join(f"error: {problem}\n" for problem in exc.problems))
            return Ran(None, ExitCode.USAGE, said.getvalue())
        except OSError as exc:  # as on the command line: a `pins` input naming a directory, an unwritable report folder
            said.write(f"error: {exc.filename + ': ' if exc.filename else ''}{exc.strerror or exc}\n")
            return Ran(None, ExitCode.USAGE, said.getvalue())
        except KeyboardInterrupt:
            said.write("envelope-ci: interrupted\n")
            return Ran(None, ExitCode.INTERRUPTED, said.getvalue())
        except supervise.RanOutOfTime as exc:  # before there was anything to report: while loading the fixtures
            said.write(f"envelope-ci: {exc}\n")
            return Ran(None, ExitCode.INCONCLUSIVE, said.getvalue())
        except Exception as exc:  # a crash still gets a summary, a comment and outputs
            said.write(traceback.format_exc())
            said.write(f"internal error: {type(exc).__name__}: {exc}\n")
            return Ran(None, ExitCode.SOFTWARE, said.getvalue())


def _pull_request(env: Mapping[str, str], out: TextIO) -> PullRequest | None:
    """The event's pull request, warning when the event cannot be read."""
    event, problem = load_event(env.get("GITHUB_EVENT_PATH"))
    if problem:
        out.write(warning(problem) + "\n")
    return pull_request_of(event)


def _client(inputs: Inputs, env: Mapping[str, str], out: TextIO) -> GitHubClient | None:
    """A client for this repository when there is a token, else None (a warning when the settings are unusable)."""
    if not (inputs.github_token and env.get("GITHUB_REPOSITORY")):
        return None
    try:
        return GitHubClient(env.get("GITHUB_API_URL") or "https://api.github.com", env["GITHUB_REPOSITORY"],
                            inputs.github_token)
    except ValueError as exc:
        out.write(warning(f"cannot talk to the GitHub API: {exc}") + "\n")
        return None


def _clear(out_dir: Path) -> None:
    """Create the report folder and remove what an earlier run left there."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in STALE_FILES:
        with contextlib.suppress(FileNotFoundError):
            (out_dir / name).unlink()


def _base_pins(job: Job) -> BaseSource | None:
    """The base branch's pins, for the comment's pin diff: pull requests only; a warning when unavailable."""
    if job.pull is None:
        return None
    suite = job.suite
    base = fetch_base_pins(job.workspace, suite.workdir, suite.workdir / suite.pins, job.env.get("GITHUB_SHA", ""),
                           job.pull[0], job.client)
    if base.error:
        job.out.write(warning(f"base branch pins unavailable: {base.error}") + "\n")
    return base


def _merged_base(ran: Ran) -> BaseSource | None:
    """Where the shards found the base branch's pins, for the comment's last lines."""
    base = ran.result.report.base if ran.result else None
    return BaseSource(None, base.source, base.error) if base else None


def _shard_outcome(job: Job, ran: Ran, outputs: dict[str, str]) -> Outcome:
    """A shard publishes only its files and outputs, and passes once its report is written: the merge job comments
    and sets the check."""
    outputs["exit-code"] = str(int(ran.exit_code))
    if ran.result is None:
        job.out.write(failure_annotation(ran.exit_code, ran.said) + "\n")
        return Outcome(ran.exit_code, outputs)
    report = ran.result.report
    outputs.update({**report_outputs(report), **file_outputs(ran.result.written, job.workspace)})
    line = (f"envelope-ci shard {job.inputs.shard} of {job.suite.key}: graded {report.summary.total} case(s), "
            f"provisional verdict {report.verdict.value} (exit {int(ran.exit_code)}); "
            "the merge job's report is the gate.\n")
    job.out.write(line)
    if job.env.get("GITHUB_STEP_SUMMARY"):
        append_summary(job.env["GITHUB_STEP_SUMMARY"], line)
    return Outcome(ExitCode.PASS, outputs)


def _publish(job: Job, ran: Ran, base: BaseSource | None) -> str:
    """Write comment.md, post the comment, append the job summary; the comment's URL or ""."""
    pr = job.pull[0] if job.pull else None
    mask = job.secrets.mask
    if ran.result is not None:
        tail = mask(_trend(job, ran.result.report) + footer(job.env, pr, base))
        body, summary = report_markdown(ran.result.report, job.suite.key, tail, mask)
    else:
        body = summary = mask(error_markdown(job.suite.key, ran.exit_code, ran.said) + footer(job.env, pr, None))
    atomic.write_text(job.suite.out_dir / "comment.md", body)
    url, not_posted = publish_comment(job.inputs.comment, job.env, job.pull, job.client, body, job.suite.key, job.out)
    if job.env.get("GITHUB_STEP_SUMMARY"):
        append_summary(job.env["GITHUB_STEP_SUMMARY"], not_posted_note(not_posted) + summary)
    return url


def _trend(job: Job, report: Report) -> str:
    """The comment's collapsed trend of the strata this PR touches (the ``history`` input; pull requests only), its
    history.json and history.md written beside the report; "" when not asked for."""
    if not job.inputs.history or job.pull is None:
        return ""
    workdir = job.suite.workdir
    try:
        history = load_history(workdir / job.inputs.fixtures, workdir / job.suite.pins, _base_ref(job),
                               job.inputs.history)
    except UsageError as exc:
        job.out.write(warning(f"envelope-ci: the trend of the strata is unavailable: {exc}") + "\n")
        return trend_unavailable(str(exc))
    write_history(history, job.suite.out_dir)
    return trend_section(report, history)


def _base_ref(job: Job) -> str:
    """The base branch as this test merge has it (its first parent, the baseline the base pins come from), else
    ``origin/<base>`` (a checkout of the PR's head, not of the test merge)."""
    sha = job.env.get("GITHUB_SHA", "")
    if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", sha):
        proc = git_in(job.suite.workdir)("rev-list", "--parents", "-n", "1", sha, "--")
        if proc is not None and proc.returncode == 0 and len(proc.stdout.split()) == 3:
            return f"{sha}^1"
    base = job.pull[0].get("base") if job.pull else None
    ref = base.get("ref") if isinstance(base, dict) else None
    return f"origin/{ref}" if isinstance(ref, str) and ref else "origin/HEAD"


def _annotate(job: Job, ran: Ran) -> dict[str, str]:
    """Print the run's annotations and warnings; the outputs that come from its report."""
    if ran.result is None:
        job.out.write(failure_annotation(ran.exit_code, ran.said) + "\n")
        return {}
    report = ran.result.report
    job.out.writelines(line + "\n" for line in [*case_annotations(report, job.suite.workdir, job.workspace),
                                                *report_warnings(report)])
    return {**report_outputs(report), **file_outputs(ran.result.written, job.workspace)}
