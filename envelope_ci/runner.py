"""The one orchestrator: fixtures -> envelopes -> grades -> analysis -> reports -> pins."""
from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .analysis import (
    Alert,
    CaseResult,
    decide,
    fixture_changes,
    fixtures_alert,
    judge_case,
    lanes_report,
    strata_report,
    summarize,
)
from .channels import channel_for
from .classify import classify
from .config import RunConfig, load_file_config
from .errors import Problem, UsageError
from .fixtures import envelope_from_raw, fixture_digests, hash_of_digests, load_cases, load_recordings
from .model import (
    VERDICT_EXIT,
    Case,
    Channel,
    Envelope,
    ExitCode,
    Fingerprint,
    Grade,
    Label,
    Lane,
    Outcome,
    Pin,
    Pins,
    Thresholds,
    Verdict,
)
from .parallel import MIN_ITEMS, parallel_map, run_concurrently
from .pins import read_pins, render_pins, write_refusal
from .render.junit import render_junit
from .render.markdown import render_markdown
from .report import base_diff, build_report, dump_report
from .schemas import SchemaCache
from .secrets import Secrets

if TYPE_CHECKING:
    from .transport import LiveOutcome

# Fetches envelopes for cases from a live endpoint: the transport edge plugs in here.
Fetcher = Callable[[Sequence[Case], RunConfig, Mapping[str, str]], "LiveOutcome"]


@dataclass
class RunResult:
    """What a run produced: the report dict, the exit code, and the files written."""

    report: dict[str, Any]
    exit_code: ExitCode
    written: list[Path] = field(default_factory=list)
    pins_written: Path | None = None


def offline_envelopes(cases: Sequence[Case], replay: Mapping[str, list[Envelope]] | None) -> dict[str, list[Envelope]]:
    """Recorded envelopes: a replay file first, then what each fixture embeds."""
    out: dict[str, list[Envelope]] = {}
    missing: list[Problem] = []
    for case in cases:
        if replay and case.id in replay:
            out[case.id] = replay[case.id]
        elif case.recorded:
            out[case.id] = [envelope_from_raw(e) for e in case.recorded]
        elif case.completion is not None:
            out[case.id] = [Envelope(completion=case.completion)]
        else:
            where = " and it is not in the --replay file either" if replay is not None else ""
            missing.append(Problem(case.file, case.line, "completion",
                                   f"case {case.id!r} has no 'completion' or 'recorded' to grade offline{where} "
                                   "(record one, run it live with --base-url, or replay a recordings file that holds it)"))
    if missing:
        raise UsageError(missing)
    return out


def grade_all(cases: Sequence[Case], envelopes: Mapping[str, list[Envelope]]) -> dict[str, list[Grade]]:
    """Classify every envelope, over all cores for big runs; validators compiled once per schema (per process)."""
    schemas = SchemaCache()

    def grade(case: Case) -> list[Grade]:
        return [classify(e, case, schemas.check_for(case.schema)) for e in envelopes[case.id]]

    return dict(zip((c.id for c in cases), parallel_map(grade, cases), strict=True))


@dataclass(frozen=True)
class Analysis:
    results: list[CaseResult]
    summary: dict[str, Any]
    strata: dict[str, Any]
    alerts: list[Alert]
    lanes: dict[str, Any]
    fixtures: dict[str, Any]
    fingerprint: Fingerprint
    verdict: Verdict
    blockers: list[str]


def run_fingerprint(config: RunConfig, grades: Mapping[str, list[Grade]]) -> Fingerprint:
    """The run's fingerprint; the model id is what the responses said, never the flag."""
    ids = sorted({g.model_id for gs in grades.values() for g in gs if g.model_id})
    return Fingerprint(config.lane.value, config.endpoint_class, ",".join(ids) or None, config.temperature)


def analyse(
    cases: Sequence[Case],
    grades: Mapping[str, list[Grade]],
    pins: Pins | None,
    current_hash: str,
    config: RunConfig,
    thresholds: Thresholds,
    files: Mapping[str, str] | None = None,
) -> Analysis:
    """Everything pure after grading: judge against pins, strata, lanes, the gate."""
    fp = run_fingerprint(config, grades)
    results = [judge_case(c, grades[c.id], fp, pins.cases.get(c.id) if pins else None, thresholds) for c in cases]
    strata, alerts = strata_report(results, thresholds)
    changes = fixture_changes(cases, pins, current_hash, files)
    changed = fixtures_alert(changes)
    if changed:
        alerts.append(changed)
    blockers: list[str] = []
    if config.base_url and config.lane is Lane.ADJUDICATION:
        blind = [r.case.id for r in results if r.delivered and r.fingerprint.model_id is None]
        if blind:
            blockers.append(f"adjudication run but the response named no model for: {', '.join(blind[:10])} (failing closed)")
    verdict = decide(alerts, results, thresholds, blockers)
    return Analysis(results, summarize(results), strata, alerts, lanes_report(results), changes, fp, verdict, blockers)


def new_pins(analysis: Analysis, thresholds: Thresholds, files: Mapping[str, str]) -> Pins:
    """This run as the baseline: each pin's channel judged on its own, not against the old pin."""
    cases: dict[str, Pin] = {}
    for r in analysis.results:
        channel, _ = channel_for(r.label, r.measure, r.case.max_chars, None, False, thresholds)
        cases[r.case.id] = Pin(
            hash=r.case.digest,
            label=r.label.value,
            channel=channel.value,
            chars=r.measure.chars,
            tokens=r.measure.tokens,
            tokens_estimated=r.measure.tokens_estimated,
            ms=r.measure.ms,
            ms_p95=r.measure.ms_p95,
            fingerprint=Fingerprint(Lane.ADJUDICATION.value, *r.fingerprint.comparable_key()),
        )
    return Pins(analysis.fixtures["hash"], analysis.fingerprint, cases, dict(files))


def pins_update_of(before: Analysis, old: Pins | None, new: Pins) -> dict[str, Any]:
    """What writing these pins changes: the pins that moved, and the regressions the new baseline accepts."""
    moved = []
    for cid, pin in new.cases.items():
        prior = old.cases.get(cid) if old else None
        if prior != pin:
            moved.append({
                "id": cid,
                "from": {"label": prior.label, "chars": prior.chars, "tokens": prior.tokens, "ms": prior.ms} if prior else None,
                "to": {"label": pin.label, "chars": pin.chars, "tokens": pin.tokens, "ms": pin.ms},
            })
    return {
        "moved": moved,
        "removed": sorted(set(old.cases) - set(new.cases)) if old else [],
        "accepted_regressions": [r.case.id for r in before.results if r.outcome is Outcome.REGRESSION],
        "previous_alerts": [a.code for a in before.alerts],
    }


def _notes(pins: Pins | None, config: RunConfig, base_info: Mapping[str, Any] | None, replayed: int, total: int) -> list[str]:
    notes = []
    if pins is None:
        notes.append(f"no pins at {config.pins_path.as_posix()}: size and time are not judged against a baseline yet; "
                     f"create them with: envelope-ci run {config.fixtures_dir.as_posix()} --lane adjudication --write-pins (locally, then commit)")
    if config.replay:
        notes.append(f"offline: graded {replayed} case(s) from the recordings in {config.replay.as_posix()} and "
                     f"{total - replayed} from the fixtures' own recordings; no endpoint was called")
    elif not config.base_url:
        notes.append("offline: graded the envelopes recorded in the fixtures, no endpoint was called")
    if base_info and base_info.get("error"):
        notes.append(f"base branch pins unavailable: {base_info['error']}")
    return notes


def downgraded_pins(base: Pins | None, head: Pins | None) -> list[str]:
    """Cases the base branch pinned right and stable that this PR's pins no longer do.

    Rewriting pins is how a reviewed change moves the baseline, so it is not a gate failure;
    but a regression re-pinned in the same PR must be impossible to miss in the comment.
    """
    if base is None or head is None:
        return []
    good = (Label.RIGHT.value, Channel.STABLE.value)
    return sorted(cid for cid, pin in base.cases.items()
                  if (pin.label, pin.channel) == good and cid in head.cases and (head.cases[cid].label, head.cases[cid].channel) != good)


def load_base(config: RunConfig) -> tuple[Pins | None, dict[str, Any] | None]:
    """The base branch's pins, handed over by the action as a file (absent on a first PR)."""
    if config.base_pins_error:
        source = config.base_pins_path.as_posix() if config.base_pins_path else None
        return None, {"source": source, "error": config.base_pins_error, "present": False}
    if config.base_pins_path is None:
        return None, None
    if not config.base_pins_path.is_file():
        return None, {"source": config.base_pins_path.as_posix(), "error": None, "present": False}
    try:
        pins = read_pins(config.base_pins_path)
    except UsageError as exc:
        return None, {"source": config.base_pins_path.as_posix(), "error": str(exc), "present": False}
    return pins, {"source": config.base_pins_path.as_posix(), "error": None, "present": True}


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the run.

    A run allocates hundreds of thousands of long-lived, acyclic objects (cases, envelopes,
    grades, report rows); the collector would rescan them again and again, which cost about a
    quarter of a 100k-case run. Reference counting still frees everything as usual.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def execute(config: RunConfig, fetch: Fetcher | None = None) -> RunResult:
    """Run the whole pipeline for one configuration and write OUT/report.{json,md} and junit.xml."""
    with cyclic_gc_paused():
        return _execute(config, fetch)


def _execute(config: RunConfig, fetch: Fetcher | None) -> RunResult:
    if config.write_pins:
        early = write_refusal(config.lane, config.in_ci, Fingerprint(config.lane.value, "", None, 0.0), None, False, [])
        if early:
            raise UsageError(early)
    excluded = {config.pins_path.resolve(), config.out_dir.resolve()}
    for extra in (config.replay, config.record):
        if extra is not None:
            excluded.add(extra.resolve())
    cases = load_cases(config.fixtures_dir, excluded)
    file_config = load_file_config(config.fixtures_dir, config.config_path)
    thresholds = file_config.thresholds
    pins = read_pins(config.pins_path)
    digests = fixture_digests(config.fixtures_dir, excluded)
    current_hash = hash_of_digests(digests)
    interrupted, live_notes, headers, replayed = False, [], {}, 0
    if config.base_url:
        if fetch is None:
            raise UsageError("live runs need the transport; none was given")
        headers = file_config.resolved_headers(os.environ)
        outcome = fetch(cases, config, headers)
        envelopes, interrupted, live_notes = outcome.envelopes, outcome.interrupted, outcome.notes
    else:
        replay = load_recordings(config.replay, {c.id for c in cases}) if config.replay else None
        replayed = len(replay) if replay else 0
        envelopes = offline_envelopes(cases, replay)
        del replay  # envelopes holds what is needed; the bodies are freed after grading
    grades = grade_all(cases, envelopes)
    del envelopes  # the bodies are the bulk of a big replay's memory; grades keep what is needed
    analysis = analyse(cases, grades, pins, current_hash, config, thresholds, digests)
    if interrupted:
        analysis = replace(analysis, verdict=Verdict.INCONCLUSIVE, blockers=[*analysis.blockers, *live_notes])

    pins_written: Path | None = None
    pins_update: dict[str, Any] | None = None
    if config.write_pins:
        undelivered = [r.case.id for r in analysis.results if not r.delivered]
        refusal = write_refusal(config.lane, config.in_ci, analysis.fingerprint, pins, config.move_baseline, undelivered, analysis.blockers)
        if refusal:
            raise UsageError(refusal)
        written = new_pins(analysis, thresholds, digests)
        config.pins_path.parent.mkdir(parents=True, exist_ok=True)
        config.pins_path.write_text(render_pins(written), "utf-8")
        pins_written = config.pins_path
        pins_update = pins_update_of(analysis, pins, written)
        pins = written
        # From here on the run is judged against the baseline it just wrote; what the old
        # baseline said about it (regressions accepted, pins moved) is in pins_update.
        analysis = analyse(cases, grades, pins, current_hash, config, thresholds, digests)

    base_pins, base_info = load_base(config)
    if base_info is not None:
        base_info["diff"] = base_diff(analysis.results, base_pins, pins)
        base_info["downgraded"] = downgraded_pins(base_pins, pins)
    report = build_report(
        verdict=analysis.verdict,
        results=analysis.results,
        summary=analysis.summary,
        strata=analysis.strata,
        alerts=analysis.alerts,
        lanes=analysis.lanes,
        fixtures=analysis.fixtures,
        fingerprint=analysis.fingerprint,
        run_info={
            "mode": "live" if config.base_url else ("replay" if config.replay else "offline"),
            "lane": config.lane.value,
            "fixtures_dir": config.fixtures_dir.as_posix(),
            "pins": config.pins_path.as_posix(),
            "repeats": config.repeats,
            "replay": config.replay.as_posix() if config.replay else None,
            "model_requested": config.model,
            "endpoint_class": config.endpoint_class,
            "temperature": config.temperature,
            "thresholds": thresholds.__dict__,
            "config_file": file_config.path.as_posix() if file_config.path else None,
        },
        blockers=analysis.blockers,
        notes=_notes(pins, config, base_info, replayed, len(cases)),
        base=base_info,
    )
    if pins_update is not None:
        report["pins_update"] = pins_update
    secrets = Secrets([config.api_key, *headers.values()])
    if secrets:  # an endpoint may echo the key back into an answer or an error
        report = secrets.scrub(report)
    files = write_reports(report, config.out_dir)
    return RunResult(report, VERDICT_EXIT[analysis.verdict], files, pins_written)


def write_reports(report: Mapping[str, Any], out_dir: Path) -> list[Path]:
    """report.json, report.md and junit.xml under ``out_dir``; rendered side by side for big runs."""
    out_dir.mkdir(parents=True, exist_ok=True)
    renderers: dict[str, Callable[[Mapping[str, Any]], str]] = {
        "report.json": dump_report,
        "report.md": render_markdown,
        "junit.xml": render_junit,
    }
    paths = [out_dir / name for name in renderers]

    def job(path: Path, render: Callable[[Mapping[str, Any]], str]) -> Callable[[], None]:
        def write() -> None:
            path.write_text(render(report), "utf-8")

        return write

    run_concurrently([job(p, r) for p, r in zip(paths, renderers.values(), strict=True)], parallel=len(report["cases"]) >= MIN_ITEMS)
    return paths
