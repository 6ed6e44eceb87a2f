"""What to do about a red or inconclusive run: one place words each next step and its exact command.

Every output (console, report.md, the comment) shows these, so a team never has to work
out from the tables which command moves them forward.
"""
from __future__ import annotations

import posixpath
import shlex
from collections.abc import Sequence

from ..analysis.analyse import Analysis
from ..analysis.cases import Judged
from ..config import OUT_OF_TIME
from ..model import CONFIG_NAMES, Outcome, Verdict
from .model import NextStep, RunInfo

_LISTED = 5
# Alerts a re-pin answers, and alerts that need the suite itself changed.
_SUITE_ALERTS = {
    "stretch_too_easy": "the stretch stratum has become easy: add harder stretch cases "
                        "(or raise stretch_high in envelope-ci.yaml)",
    "ceiling": "every stratum is at its ceiling, so the suite can no longer fail: "
               "replace stretch cases with harder ones",
    "thin_stratum": "a stratum has too few cases to tell luck from coverage: add cases to it "
                    "(thin_below in envelope-ci.yaml)",
    "unverified_recording": "some recordings do not say what request they answered: "
                            "re-record them (run --record, then import)",
    "baseline_lowered": "this PR's pins lower the baseline of cases the base branch had right and stable: "
                        "restore those pins, or have a code owner approve the lowered baseline and set "
                        "baseline_lowered: warn",
}


def _ids(ids: Sequence[str]) -> str:
    return ", ".join(ids[:_LISTED]) + (" ..." if len(ids) > _LISTED else "")


def _run_words(run: RunInfo) -> list[str]:
    """The flags that make another run the same kind of run as this one."""
    words = ["envelope-ci", "run", run.fixtures_dir, "--pins", run.pins]
    if run.config_file and not _found_without_flag(run.config_file, run.fixtures_dir):
        words += ["--config", run.config_file]
    if run.endpoint_class not in (None, "unspecified"):
        words += ["--endpoint-class", run.endpoint_class]
    if run.temperature:
        words += ["--temperature", str(run.temperature)]
    if run.mode == "replay" and run.replay:
        words += ["--replay", run.replay]
    if run.repeats > 1:
        words += ["--repeats", str(run.repeats)]
    return words


def _found_without_flag(config_file: str, fixtures_dir: str) -> bool:
    """Whether a run of ``fixtures_dir`` surely finds this thresholds file by itself (the first name it looks for),
    so the command need not name it."""
    return posixpath.normpath(config_file) == posixpath.normpath(posixpath.join(fixtures_dir, CONFIG_NAMES[0]))


def _command(words: list[str], run: RunInfo) -> str:
    command = " ".join(shlex.quote(str(w)) for w in words)
    if run.mode == "live":
        command += f' --base-url "$EVAL_BASE_URL" --model {shlex.quote(str(run.model_requested or "MODEL"))}'
    return command


def pin_command(run: RunInfo, move_baseline: bool = False) -> str:
    """The command that rewrites the pins from the same kind of run as this one (locally, then commit)."""
    tail = ["--lane", "adjudication"] + (["--move-baseline"] if move_baseline else [])
    return _command(_run_words(run) + tail, run) + " --write-pins"


def rerun_command(run: RunInfo) -> str:
    """The command that runs this run again."""
    return _command(_run_words(run) + ["--lane", run.lane], run)


def rerecord_command(run: RunInfo, case_ids: Sequence[str]) -> str:
    """Record these cases afresh against the endpoint, then make the recordings the fixtures' answers."""
    selected = " ".join(f"--filter {shlex.quote(cid)}" for cid in case_ids[:_LISTED * 4])
    fixtures = shlex.quote(run.fixtures_dir)
    return (f'envelope-ci run {fixtures} --base-url "$EVAL_BASE_URL" '
            f'--model {shlex.quote(str(run.model_requested or "MODEL"))} '
            f"{selected} --record rerecorded.jsonl --out envelope-ci-out; "
            f"envelope-ci import rerecorded.jsonl --into {fixtures}")


def next_steps(analysis: Analysis[Judged], run: RunInfo) -> tuple[NextStep, ...]:
    """The next steps for this run, most pressing first; none for a pass."""
    if analysis.verdict is Verdict.PASS:
        return ()
    codes = {a.code for a in analysis.alerts}
    steps: list[NextStep] = []
    if "fixtures_changed" in codes:
        steps.append(NextStep("the fixtures changed without a pin update: re-pin locally on an adjudication run, "
                              "review the diff of the pins file and commit it in this PR", pin_command(run)))
    if "fingerprint_changed" in codes:
        steps.append(NextStep("cases ran under another fingerprint than their pins (model, endpoint class or "
                              "temperature): if that change is intended, re-pin under it; otherwise run with the "
                              "pinned settings", pin_command(run, move_baseline=True)))
    regressions = [r.id for r in analysis.results if r.outcome is Outcome.REGRESSION]
    if regressions:
        steps.append(NextStep(f"{len(regressions)} case(s) regressed ({_ids(regressions)}): fix the prompt or the "
                              "model; if the new answers are what you want, re-pin to accept them", pin_command(run)))
    floors = [a for a in analysis.alerts if a.code.endswith("_regression")]
    if floors and not regressions:
        steps.append(NextStep("a stratum is below its floor (" + "; ".join(a.message for a in floors)
                              + "): fix the failing cases, or move cases that are harder than their stratum", None))
    if analysis.stale:
        steps.append(NextStep(f"{len(analysis.stale)} case(s) are graded on answers recorded for another request "
                              f"than they send now ({_ids(list(analysis.stale))}): re-record them on a live run, "
                              "then import the recordings", rerecord_command(run, analysis.stale)))
    steps += [NextStep(why, None) for code, why in _SUITE_ALERTS.items() if code in codes]
    steps += _inconclusive_steps(analysis, run)
    return tuple(steps)


def _inconclusive_steps(analysis: Analysis[Judged], run: RunInfo) -> list[NextStep]:
    """Why the run could not judge, and how to get a run that can."""
    steps = []
    undelivered = [r for r in analysis.results if not r.delivered]
    out_of_time: list[Judged] = []
    unanswered: list[Judged] = []
    for r in undelivered:
        (out_of_time if any(OUT_OF_TIME in reason for reason in r.reasons) else unanswered).append(r)
    if out_of_time:
        steps.append(NextStep(f"{OUT_OF_TIME} before {len(out_of_time)} case(s) were graded "
                              f"({_ids([r.id for r in out_of_time])}): "
                              "if a case hangs grading (the blockers name it), fix its pattern or assertion; "
                              "otherwise raise --max-run-time", None))
    if unanswered:
        first = unanswered[0].reasons[0] if unanswered[0].reasons else "no response"
        steps.append(NextStep(f"{len(unanswered)} case(s) got no gradeable answer ({_ids([r.id for r in unanswered])}; "
                              f"first: {first}): check the endpoint and the network, then run again",
                              rerun_command(run)))
    if run.partial is not None:
        steps.append(NextStep(f"a partial run (--filter) cannot pass: grade all {run.partial.total} cases "
                              "for a verdict", rerun_command(run)))
    elif analysis.blockers and not undelivered:
        steps.append(NextStep("the run could not judge everything (" + "; ".join(analysis.blockers[:3])
                              + "): run it again", rerun_command(run)))
    return steps
