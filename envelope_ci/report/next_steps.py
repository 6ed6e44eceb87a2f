"""What to do about a red or inconclusive run: one place words each next step and its exact command.

Every output (console, report.md, the comment) shows these, so a team never has to work
out from the tables which command moves them forward. The steps come in the order to take
them, and each command is one the tool accepts once the steps before it are done: a command
that the tool would refuse (exit 2) is worse than none.
"""
from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterable, Sequence

from ..analysis.analyse import Analysis
from ..analysis.cases import Judged
from ..config import OUT_OF_TIME
from ..model import CONFIG_NAMES, Outcome, Verdict
from .model import NextStep, RunInfo

_LISTED = 5
# Where a re-record writes (beside the fixtures, never in them: it would be read as a fixture).
_RECORDING = "rerecorded.jsonl"
# Alerts that need the suite itself changed: no command does it.
_SUITE_ALERTS = {
    "stretch_too_easy": "the stretch stratum has become easy: add harder stretch cases "
                        "(or raise stretch_high in envelope-ci.yaml)",
    "ceiling": "every stratum is at its ceiling, so the suite can no longer fail: "
               "replace stretch cases with harder ones",
    "thin_stratum": "a stratum has too few cases to tell luck from coverage: add cases to it "
                    "(thin_below in envelope-ci.yaml)",
    "baseline_lowered": "this PR's pins lower the baseline of cases the base branch had right and stable: "
                        "restore those pins, or have a code owner approve the lowered baseline and set "
                        "baseline_lowered: warn",
}


def _ids(ids: Sequence[str]) -> str:
    return ", ".join(ids[:_LISTED]) + (" ..." if len(ids) > _LISTED else "")


def _words(run: RunInfo, replay: str | None) -> list[str]:
    """The flags that make another run the same experiment as this one, on the answers of ``replay`` if any."""
    words = ["envelope-ci", "run", run.fixtures_dir, "--pins", run.pins]
    if run.config_file and not _found_without_flag(run.config_file, run.fixtures_dir):
        words += ["--config", run.config_file]
    if run.endpoint_class not in (None, "unspecified"):
        words += ["--endpoint-class", run.endpoint_class]
    if run.temperature:
        words += ["--temperature", str(run.temperature)]
    if replay:
        words += ["--replay", replay]
    if run.repeats > 1:
        words += ["--repeats", str(run.repeats)]
    return words


def _found_without_flag(config_file: str, fixtures_dir: str) -> bool:
    """Whether a run of ``fixtures_dir`` surely finds this thresholds file by itself (the first name it looks for),
    so the command need not name it."""
    return posixpath.normpath(config_file) == posixpath.normpath(posixpath.join(fixtures_dir, CONFIG_NAMES[0]))


def _live(run: RunInfo) -> str:
    """The endpoint of a live step: from the environment, so no URL or key is ever written into a report."""
    model = shlex.quote(run.model_requested) if run.mode == "live" and run.model_requested else '"$EVAL_MODEL"'
    allowed = "".join(f" --allow-key-env {shlex.quote(name)}" for name in run.allow_key_env)
    return f'--base-url "$EVAL_BASE_URL" --model {model}{allowed}'


def _command(words: Sequence[str], live: str | None = None, tail: str = "") -> str:
    """Words quoted for a shell, then ``live`` and ``tail`` as they are: ``"$EVAL_BASE_URL"`` must stay a variable."""
    command = " ".join(shlex.quote(str(w)) for w in words)
    return " ".join(part for part in (command, live, tail) if part)


def _same_kind(run: RunInfo, words: Sequence[str], tail: str = "", replay: str | None = None) -> str:
    """A run of the same kind as this one (live, replayed or offline), ``replay`` standing in for its replay file."""
    replayed = (replay or run.replay) if run.mode == "replay" else None
    return _command([*_words(run, replayed), *words], _live(run) if run.mode == "live" else None, tail)


def pin_command(run: RunInfo, move_baseline: bool = False, vouch: bool = False, replay: str | None = None) -> str:
    """The command that rewrites the pins from the same kind of run as this one (locally, then commit)."""
    flags = ["--lane", "adjudication"] + (["--move-baseline"] if move_baseline else [])
    return _same_kind(run, flags + (["--allow-unverified-recordings"] if vouch else []), "--write-pins", replay)


def rerun_command(run: RunInfo, replay: str | None = None) -> str:
    """The command that runs this run again."""
    return _same_kind(run, ["--lane", run.lane], replay=replay)


def recording_path(run: RunInfo) -> str:
    """Where a re-record writes: the working directory, unless that is inside the fixtures (``--record`` refuses)."""
    inside = not posixpath.isabs(run.fixtures_dir) and all(p in ("", ".", "..") for p in run.fixtures_dir.split("/"))
    return posixpath.normpath(posixpath.join(run.fixtures_dir, "..", _RECORDING)) if inside else _RECORDING


def _id_filter(case_id: str) -> str:
    """A --filter that selects exactly this case: glob characters and a prefix are escaped."""
    glob = "".join(f"[{c}]" if c in "*?[" else c for c in case_id)
    return glob if glob == case_id and not case_id.startswith(("tag:", "stratum:", "id:")) else f"id:{glob}"


def rerecord_command(run: RunInfo, case_ids: Sequence[str] | None) -> str:
    """A live run that records these cases (None: every case) afresh: ``--record`` writes a request record with each
    answer."""
    selected = [w for cid in case_ids for w in ("--filter", _id_filter(cid))] if case_ids is not None else []
    return _command(_words(run, None), _live(run), _command([*selected, "--record", recording_path(run)]))


def import_command(run: RunInfo) -> str:
    """The command that makes the re-recorded answers the fixtures' own (sidecars beside the fixture files)."""
    return _command(["envelope-ci", "import", recording_path(run), "--into", run.fixtures_dir])


def next_steps(analysis: Analysis[Judged], run: RunInfo) -> tuple[NextStep, ...]:
    """The next steps for this run, in the order to take them, a re-pin last; none for a pass."""
    if analysis.verdict is Verdict.PASS:
        return ()
    codes = {a.code for a in analysis.alerts}
    rerecord = _to_rerecord(analysis, run, codes)
    regressions = [r.id for r in analysis.results if r.outcome is Outcome.REGRESSION and r.id not in rerecord]
    steps: list[NextStep] = []
    if regressions:
        steps.append(NextStep(f"{len(regressions)} case(s) regressed ({_ids(regressions)}): fix the prompt or the "
                              "model, then run again (to accept the new answers instead, re-pin: the last step)",
                              rerun_command(run)))
    if "latency_shift" in codes:
        steps.append(NextStep("the endpoint answered slower everywhere than when the pins were measured "
                              "(latency_shift): check its load or the runner and run again; if this is its new "
                              "normal, re-pin from a live adjudication run, or raise latency_shift_slack in "
                              "envelope-ci.yaml", rerun_command(run)))
    floors = [a for a in analysis.alerts if a.code.endswith("_regression")]
    if floors and not regressions:
        steps.append(NextStep("a stratum is below its floor (" + "; ".join(a.message for a in floors)
                              + "): fix the failing cases, or move cases that are harder than their stratum", None))
    steps += _recording_steps(run, rerecord)
    replay = recording_path(run) if rerecord and run.mode == "replay" else None  # the file the later steps replay
    steps += [NextStep(why, None) for code, why in _SUITE_ALERTS.items() if code in codes]
    steps += _inconclusive_steps(analysis, run, rerecord, replay)
    repin = _repin_step(analysis, run, codes, regressions, rerecord, replay)
    if repin is not None:
        steps.append(repin)
    elif rerecord:
        steps.append(NextStep("then run again on the new answers", rerun_command(run, replay)))
    return tuple(steps)


def _to_rerecord(analysis: Analysis[Judged], run: RunInfo, codes: set[str]) -> dict[str, str]:
    """The cases whose recorded answers cannot be judged or pinned as they are, each with why: only a live run can
    answer them afresh."""
    if run.mode == "live":
        return {}
    why = dict.fromkeys(analysis.stale, "recorded for another request than the case sends now")
    for r in analysis.results:
        if not r.delivered and not _out_of_time(r):
            why.setdefault(r.id, f"no gradeable recorded answer ({r.reasons[0] if r.reasons else 'none recorded'})")
        elif r.lost_repeats:
            why.setdefault(r.id, "a recorded repeat has no gradeable answer")
    if "unverified_recording" in codes:
        why.update({cid: "recorded without a request record (recordings: strict)"
                    for cid in analysis.unverified if cid not in why})
    return why


def _out_of_time(r: Judged) -> bool:
    """Whether --max-run-time, not the answer, left this case ungraded: another recording would not help."""
    return any(OUT_OF_TIME in reason for reason in r.reasons)


def _recording_steps(run: RunInfo, rerecord: dict[str, str]) -> list[NextStep]:
    """Re-record the cases that need it, then import them (a replay: record the whole suite anew and replay that)."""
    if not rerecord:
        return []
    ids = list(rerecord)
    first = rerecord[ids[0]]
    live = ("on a live run (EVAL_BASE_URL, EVAL_MODEL and EVAL_API_KEY set for your endpoint; a judge "
            "on another host also needs --endpoint NAME=URL)")
    checked = "its report shows whether the new answers regress: re-pinning accepts them as they are"
    if run.mode == "replay":
        return [NextStep(f"{len(ids)} case(s) cannot be judged on the replayed answers ({_ids(ids)}; first: {first}): "
                         f"record the whole suite afresh {live} into {recording_path(run)}, and replay that instead "
                         f"of {run.replay}; {checked}", rerecord_command(run, None))]
    return [NextStep(f"{len(ids)} case(s) cannot be judged on their recorded answers ({_ids(ids)}; first: {first}): "
                     f"re-record them {live}; {checked}", rerecord_command(run, ids)),
            NextStep("then import the new recordings into the fixtures (a case that holds its answer in its "
                     "fixture file, recorded: or completion:, needs that deleted first)", import_command(run))]


def _repin_step(analysis: Analysis[Judged], run: RunInfo, codes: set[str], regressions: Sequence[str],
                rerecord: dict[str, str], replay: str | None) -> NextStep | None:
    """One re-pin that answers every reason to re-pin this run has, with every flag it needs to be accepted."""
    moves = _moves_baseline(analysis, rerecord)
    reasons = _repin_reasons(analysis, run, codes, rerecord, moves)
    if not reasons and not regressions:
        return None
    listed = f"{len(regressions)} regressed case(s) ({_ids(regressions)})"
    why = (f"{'; '.join(reasons)}: re-pin" if reasons else f"to accept the new answers of the {listed} instead: re-pin")
    why += " locally on an adjudication run, review the diff of the pins file and commit it in this PR"
    if regressions and reasons:
        why += f"; this also accepts the {listed} as their new baseline: fix them first, unless you mean to accept them"
    if moves:
        why += ("; --move-baseline moves the baseline to the new fingerprint: if that change was not intended, "
                "run with the pinned settings instead")
    vouch = [] if run.mode == "replay" and rerecord else [c for c in analysis.unverified if c not in rerecord]
    if vouch:
        why += (f"; --allow-unverified-recordings vouches for the answers of {len(vouch)} case(s) whose recordings "
                f"carry no request record ({_ids(vouch)}): check those answers are real first, or re-record them")
    return NextStep(why, pin_command(run, moves, bool(vouch), replay))


def _repin_reasons(analysis: Analysis[Judged], run: RunInfo, codes: set[str], rerecord: dict[str, str],
                   moves: bool) -> list[str]:
    """Why the pins must be written again, besides regressions to accept."""
    imported = bool(rerecord) and run.mode != "replay" and analysis.fixtures.pinned_hash is not None
    return [why for cond, why in (
        ("fixtures_changed" in codes, "the fixtures changed without a pin update"),
        (imported and "fixtures_changed" not in codes, "the import changes the fixtures"),
        (moves, "cases ran under another fingerprint than their pins (model, endpoint class, temperature or judge)"),
    ) if cond]


def _moves_baseline(analysis: Analysis[Judged], rerecord: dict[str, str]) -> bool:
    """Whether the re-pin will be another experiment than the pins (a case's fingerprint, or the run's models or
    judges): then it is refused without --move-baseline. Answers to be re-recorded are expected as pinned."""
    pinned = [(r, r.pin.fingerprint) for r in analysis.results if r.pin is not None and r.pin.fingerprint is not None]
    if any(r.delivered and r.comparable is False and r.id not in rerecord for r, _ in pinned):
        return True
    stored = [fp for _, fp in pinned]
    after = [r.fingerprint for r in analysis.results if r.delivered and r.id not in rerecord]
    after += [fp for r, fp in pinned if not r.delivered or r.id in rerecord]
    return bool(stored) and (_names(fp.model_id for fp in stored) != _names(fp.model_id for fp in after)
                             or _names(fp.judge for fp in stored) != _names(fp.judge for fp in after))


def _names(joined: Iterable[str | None]) -> set[str]:
    """The model ids (or judges) named in fingerprints, which join several with commas."""
    return {name for names in joined if names for name in names.split(",")}


def _inconclusive_steps(analysis: Analysis[Judged], run: RunInfo, rerecord: dict[str, str],
                        replay: str | None) -> list[NextStep]:
    """Why the run could not judge, and how to get a run that can (recorded answers: the re-record steps)."""
    steps = []
    undelivered = [r for r in analysis.results if not r.delivered]
    out_of_time = [r for r in undelivered if _out_of_time(r)]
    unanswered = [r for r in undelivered if not _out_of_time(r) and r.id not in rerecord]
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
    lost = tuple(f"{cid}: repeat" for cid in rerecord)
    blockers = [b for b in analysis.blockers if not b.startswith(lost)]
    if run.partial is not None:
        steps.append(NextStep(f"a partial run (--filter) cannot pass: grade all {run.partial.total} cases "
                              "for a verdict", rerun_command(run, replay)))
    elif blockers and not undelivered:
        steps.append(NextStep("the run could not judge everything (" + "; ".join(blockers[:3])
                              + "): run it again", rerun_command(run, replay)))
    return steps
