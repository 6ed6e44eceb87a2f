"""The library API: ``run(config, base) -> RunResult``, the one call the CLI and the Action make (and ``merge`` for
shards).

The pipeline reads in the package's folder order: sources (fixtures, pins, settings,
recordings) -> transport (live envelopes) -> grading -> analysis -> report -> formats.
"""
from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from . import atomic
from .analysis.analyse import Analysis, RunShape, analyse
from .analysis.cases import CaseResult
from .analysis.promotion import downgraded_pins, early_refusal, new_pins, pins_update_of, write_refusal
from .config import RunConfig, pins_read_next_time
from .errors import Problem, UsageError
from .findings import PinsUpdate
from .formats.registry import write_reports
from .grading.envelope import Envelope
from .grading.grade import grade_all
from .grading.grader_worker import close as close_graders
from .grading.grader_worker import hide as hide_from_graders
from .merging import merge as merge  # the library's second call, in a module of its own (see there)
from .model import VERDICT_EXIT, Case, Grade, Pins
from .providers.registry import is_provider, provider_named, unknown_provider
from .report.build import base_diff_rows, build_report, model_change, scrub
from .report.model import BaseDiff, LiveRun, PartialRun, Report, RunInfo
from .report.notes import run_notes
from .report.shard_info import ShardRun, shard_info
from .result import RunResult
from .secrets import Secrets
from .shard import blocker as shard_blocker
from .shard import note as shard_note
from .shard import select as shard_select
from .sources.endpoints import checked_endpoints
from .sources.files import hash_of_digests, resolve_link, suite_digests
from .sources.pins import read_pins, render_pins
from .sources.recordings import offline_envelopes, read_replay, stamp_level
from .sources.requests import Staleness, check_recordings
from .sources.select import filter_problem, select_cases
from .sources.settings import FileConfig, live_refusals, load_suite
from .urls import endpoint_secrets, url_problem

if TYPE_CHECKING:
    from .transport.pool import LiveOutcome

# Fetches live envelopes for cases (the transport edge); tests may plug in their own.
Fetcher = Callable[[Sequence[Case], RunConfig, Mapping[str, str]], "LiveOutcome"]


@dataclass(frozen=True)
class BaseSource:
    """The base branch's pins as found: the pins, none at all (a first PR), or why they are unknown."""

    pins: Pins | None
    source: str | None
    error: str | None = None


@dataclass(frozen=True)
class Graded:
    """Every case's grades, and why grading stopped short of some of them (blockers: the run is then inconclusive)."""

    grades: dict[str, list[Grade]]
    stopped: tuple[str, ...] = ()


class Watch:
    """A run followed from outside: told each phase as it begins, and asked for the grades.

    ``supervise`` runs a run with --max-run-time in a child process with a watch that streams
    the grades to the parent as they are made, so that a run stopped mid-way (a fixture's
    regex that never ends) still has partial reports. This watch follows nothing.
    """

    def phase(self, doing: str) -> None:
        """``doing`` begins, in the words a report says a run was stopped in ("grading", "writing the reports")."""

    def grade(self, cases: Sequence[Case], envelopes: Mapping[str, Sequence[Envelope]],
              graded: dict[str, list[Grade]] | None) -> Graded:
        """Every case's grades: a live run's (``graded``, as they arrived), else its envelopes' graded now."""
        return Graded(graded if graded is not None else grade_all(cases, envelopes))


# Phases a supervisor tells apart: live calls in flight at the deadline get a grace; a run out of time writes no pins.
CALLING = "calling the endpoint and grading its answers"
WRITING_PINS = "writing the pins"


def _number_problems(config: RunConfig) -> list[str]:
    """Numeric flags out of range, NaN or infinite: named before any request, never found after the run."""
    wrong = [f"{flag} must be a finite number of at least {low}, got {value:g}" for flag, value, low in (
        ("--concurrency", config.concurrency, 1), ("--repeats", config.repeats, 1),
        ("--max-attempts", config.retry.max_attempts, 1),
        ("--retry-budget", 0 if config.retry.run_budget is None else config.retry.run_budget, 0),
        ("--max-retry-after", config.retry.max_retry_after_s, 0),
        ("--max-rate-limit-wait", config.retry.max_rate_limit_wait_s, 0))
        if not (math.isfinite(value) and value >= low)]
    if not (config.timeout_s > 0 and math.isfinite(config.timeout_s)):
        wrong.append(f"--timeout must be a positive finite number of seconds, got {config.timeout_s:g}")
    if config.max_run_time_s is not None and not (config.max_run_time_s > 0 and math.isfinite(config.max_run_time_s)):
        wrong.append(f"--max-run-time must be a positive finite number of seconds, got {config.max_run_time_s:g}")
    if not (math.isfinite(config.temperature) and 0 <= config.temperature <= 2):
        wrong.append(f"--temperature must be a number from 0 to 2, got {config.temperature:g}")
    return wrong


def check_config(config: RunConfig) -> None:
    """Every problem with a configuration, raised together before any work (exit 2)."""
    wrong = _number_problems(config)
    url = url_problem(config.base_url) if config.base_url else None
    if url:
        wrong.append(f"--base-url {url}")
    if not is_provider(config.provider):
        wrong.append(unknown_provider(config.provider, "--provider"))
    wrong += [p for p in map(filter_problem, config.filters) if p]
    if config.filters and config.write_pins:
        wrong.append("--write-pins cannot be used with --filter: pins are written from a run of the whole suite")
    if config.shard and (config.filters or config.write_pins):
        wrong.append(f"--shard cannot be used with {'--filter' if config.filters else '--write-pins'}: "
                     "a shard is one part of the whole "
                     "suite, and only the merge of every part is the whole run")
    if config.move_baseline and not config.write_pins:
        wrong.append("--move-baseline only makes sense with --write-pins")
    if config.allow_unverified_recordings and not config.write_pins:
        wrong.append("--allow-unverified-recordings only makes sense with --write-pins")
    if config.base_url and config.replay:
        wrong.append("--base-url and --replay are exclusive: a replay grades recorded envelopes offline")
    if config.record and not config.base_url:
        wrong.append("--record needs a live run (--base-url or EVAL_BASE_URL)")
    for flag, path in (("--out", config.out_dir), ("--record", config.record)):
        if path is not None and path.resolve().is_relative_to(config.fixtures_dir.resolve()):
            wrong.append(f"{flag} {path} is inside the fixtures directory {config.fixtures_dir}: "
                         "what it writes would be read as fixtures "
                         "and change the fixtures hash; write it elsewhere")
    refused = pins_read_next_time(config)
    if refused:
        wrong.append(refused)
    if config.base_url and not config.model:
        wrong.append("a live run needs --model (or EVAL_MODEL)")
    if wrong:
        raise UsageError([Problem("", None, None, w) for w in wrong])


def read_base_pins(path: Path) -> BaseSource:
    """The base branch's pins from a file (``--base-pins``): absent means a first PR."""
    if not path.is_file():
        return BaseSource(None, path.as_posix())
    try:
        return BaseSource(read_pins(path), path.as_posix())
    except UsageError as exc:
        return BaseSource(None, path.as_posix(), str(exc))


def run(config: RunConfig, base: BaseSource | None = None, fetch: Fetcher | None = None,
        watch: Watch | None = None) -> RunResult:
    """Run the whole pipeline for one configuration and write the reports under ``config.out_dir``."""
    started_at = time.monotonic()  # --max-run-time counts from here
    check_config(config)
    watch = watch or Watch()
    try:
        judged = _run(config, base, fetch, watch, started_at)
    finally:
        close_graders()  # the python graders' worker, if this run started one
    watch.phase("writing the reports")
    return replace(judged, written=write_reports(judged.report, config.out_dir, config.formats))


def _excluded(config: RunConfig) -> set[Path]:
    """Files inside the fixtures directory that are not fixtures: the pins, the outputs, a replay or recording."""
    excluded = {resolve_link(config.pins_path), resolve_link(config.out_dir)}
    excluded.update(resolve_link(p) for p in (config.replay, config.record) if p is not None)
    return excluded


@dataclass(frozen=True)
class _Gathered:
    """The envelopes to grade (a live run brings its grades), and what getting them said about the run."""

    # offline: a case's, given when it is graded (sources.recordings.Recorded)
    envelopes: Mapping[str, Sequence[Envelope]]
    interrupted: tuple[str, ...] = ()  # why a live run stopped early: it blocks the verdict
    remarks: tuple[str, ...] = ()  # how the endpoint behaved: notes for the report
    headers: Mapping[str, str] = field(default_factory=dict)  # resolved: their values are secrets
    replayed: int = 0
    # offline: what each case's recordings answered
    requests: Mapping[str, Sequence[Mapping[str, object] | None]] = field(default_factory=dict)
    grades: dict[str, list[Grade]] | None = None  # a live run's: graded as they arrived, their bodies let go
    live: LiveRun | None = None  # a live run's concurrency over time and wait on rate limits


def _envelopes(config: RunConfig, cases: Sequence[Case], settings: FileConfig, fetch: Fetcher | None,
               suite_ids: set[str], started_at: float) -> _Gathered:
    """Live envelopes from the endpoint, or recorded ones (a replay file first, then the fixtures').

    A replay line may name any case of the suite (``suite_ids``), selected by ``--filter`` or not.
    """
    if config.base_url:
        headers = settings.resolved_headers(os.environ, config.allow_key_env)
        outcome = (fetch or partial(_fetch_live, settings=settings, started_at=started_at))(cases, config, headers)
        return _Gathered({}, tuple(outcome.notes) if outcome.interrupted else (), tuple(outcome.remarks()), headers,
                         grades=outcome.grades, live=outcome.live_run())
    replay = read_replay(config.replay, suite_ids) if config.replay else None
    recorded = offline_envelopes(cases, replay)
    return _Gathered(recorded, replayed=recorded.replayed, requests=recorded.requests)


def _fetch_live(cases: Sequence[Case], config: RunConfig, headers: Mapping[str, str], settings: FileConfig,
                started_at: float) -> LiveOutcome:
    """The live client, given plain client settings (it never sees a RunConfig); ``settings`` name the llm-rubric
    judges.

    ``started_at`` is when the run began: --max-run-time counts the loading before the calls too.
    """
    from .transport.http import ClientSettings
    from .transport.judges import judge_settings
    from .transport.live import fetch_envelopes

    judges = judge_settings(cases, settings.endpoints, os.environ, config.timeout_s,
                            settings.path.as_posix() if settings.path else "envelope-ci.yaml")

    client = ClientSettings(
        base_url=config.base_url or "",
        model=config.model or "",
        api_key=config.api_key,
        extra_headers=dict(headers),
        temperature=config.temperature,
        stream=config.stream,
        case_timeout_s=config.timeout_s,
        provider=config.provider,
    )
    return fetch_envelopes(cases, client, concurrency=config.concurrency, repeats=config.repeats, policy=config.retry,
                           record=config.record, quiet=config.quiet, provider=provider_named(config.provider),
                           max_run_s=config.max_run_time_s,
                           started_at=started_at, judges=judges, record_headers=settings.record_headers)


def _run(config: RunConfig, base: BaseSource | None, fetch: Fetcher | None, watch: Watch,
         started_at: float) -> RunResult:
    """The run up to its report: ``run`` writes the files."""
    watch.phase(f"loading the fixtures in {config.fixtures_dir.as_posix()}")
    excluded = _excluded(config)
    cases, settings = load_suite(config.fixtures_dir, excluded, config.config_path)
    settings = replace(settings,
                       endpoints=checked_endpoints(settings.endpoints, config.endpoint_urls, cases, settings.path))
    hide_from_graders((e.api_key_env for e in settings.endpoints.values() if e.api_key_env), settings.headers.values())
    refused = live_refusals(settings, cases, config.base_url, config.allow_key_env) if config.base_url else []
    if refused:  # the settings file is PR content: it never chooses where a secret goes (SECURITY.md)
        raise UsageError(refused)
    pins = read_pins(config.pins_path)
    if config.write_pins:  # refused before a single call when the reason is known already
        early = early_refusal(config.lane, config.in_ci, config.endpoint_class, config.temperature, pins,
                              config.move_baseline, config.provider if config.base_url else None)
        if early:
            raise UsageError(early)
    digests = suite_digests(config.fixtures_dir, excluded, cases)  # the whole suite's, whatever --filter selects
    current_hash = hash_of_digests(digests)
    suite, suite_ids = cases, {c.id for c in cases}
    partial = None
    if config.filters:
        cases = select_cases(cases, config.filters)
        partial = PartialRun(config.filters, len(cases), len(suite_ids))
        # the head pins stay whole: the fixtures are compared in full, as a shard's are
        base = replace(base, pins=_pins_of(base.pins, cases)) if base else None
    if config.shard:
        cases = shard_select(cases, config.shard)
    watch.phase(_gathering(config))
    gathered = _envelopes(config, cases, settings, fetch, suite_ids, started_at)
    watch.phase("grading")
    graded = watch.grade(cases, gathered.envelopes, gathered.grades)
    grades = graded.grades
    watch.phase("analysing the results")
    # Offline, a recording must answer the request the case sends now; live runs ask it afresh.
    recordings = (check_recordings(cases, gathered.requests, config.temperature) if not config.base_url
                  else Staleness({}, ()))
    # the bodies are the bulk of a big replay's memory: grades keep what is needed
    gathered = replace(gathered, envelopes={})
    shape = RunShape(config.lane, config.endpoint_class, config.temperature, bool(config.base_url),
                     _partial_blocker(partial) or shard_blocker(config.shard, len(cases), len(suite)), recordings.stale,
                     recordings.unverified, filtered=bool(config.filters))

    def judged(against: Pins | None) -> Analysis[CaseResult]:
        lowered = downgraded_pins(base.pins, against) if base is not None else ()
        return analyse(cases, grades, against, current_hash, shape, settings.thresholds, digests,
                       (*gathered.interrupted, *graded.stopped), lowered,
                       suite if config.shard or config.filters else None)

    analysis = judged(pins)
    if config.record and analysis.level_ms is not None and config.record.is_file():
        stamp_level(config.record, analysis.level_ms)  # its times are judged against it when it is replayed
    pins_written: Path | None = None
    pins_update: PinsUpdate | None = None
    if config.write_pins:
        watch.phase(WRITING_PINS)
        pins_update, pins = _write_pins(config, analysis, pins, settings, digests, recordings.unverified)
        pins_written = config.pins_path
        # From here on the run is judged against the baseline it just wrote; what the old
        # baseline said about it (regressions accepted, pins moved) is in pins_update.
        analysis = judged(pins)
    base_diff = _base_diff(analysis, base, pins, suite_ids.difference(c.id for c in cases) if config.shard else ())
    run_info = _run_info(config, settings, partial)
    notes = run_notes(run_info, pins is not None, base_diff, gathered.replayed, len(cases), gathered.remarks,
                      recordings.unverified)
    if pins is not None and pins.unknown:
        notes.append(f"the pins file has keys this release does not know, read past: {', '.join(pins.unknown)} "
                     "(a newer envelope-ci wrote them; docs/pins.md, 'How the format evolves')")
    if config.shard:
        notes.append(shard_note(config.shard, len(cases), len(suite)))
    report = msgspec.structs.replace(build_report(analysis, run_info, notes, base_diff, pins_update),
                                     live=gathered.live)
    if config.shard:
        seen = ShardRun(pins, base.pins if base else None, gathered.replayed, (*gathered.interrupted, *graded.stopped),
                        gathered.remarks, recordings.stale, recordings.unverified)
        report = msgspec.structs.replace(report, shard=shard_info(config.shard, suite, analysis, grades, seen))
    secrets = Secrets([config.api_key, *gathered.headers.values(), *endpoint_secrets(config.base_url)])
    if secrets:  # an endpoint may echo the key back into an answer or an error
        report = Report.from_json(secrets.scrub(report.to_json()))
    return RunResult(report, VERDICT_EXIT[analysis.verdict], (), pins_written)


def _gathering(config: RunConfig) -> str:
    """The phase that gets the envelopes, as a report names it."""
    if config.base_url:
        return CALLING
    return (f"reading the recordings in {config.replay.as_posix()}" if config.replay
            else "reading the fixtures' recordings")


def _write_pins(config: RunConfig, analysis: Analysis[CaseResult], old: Pins | None, settings: FileConfig,
                digests: Mapping[str, str], unverified: Sequence[str] = ()) -> tuple[PinsUpdate, Pins]:
    """Write this run as the pins, unless the promotion rule refuses (exit 2, with the reason)."""
    undelivered = [r.case.id for r in analysis.results if not r.delivered]
    stale = next((a.message for a in analysis.alerts if a.code == "stale_recording"), None)
    refusal = write_refusal(config.lane, config.in_ci, analysis.fingerprint, old, config.move_baseline, undelivered,
                            analysis.blockers, stale, () if config.allow_unverified_recordings else unverified)
    if refusal:
        raise UsageError(refusal)
    written = new_pins(analysis, settings.thresholds, digests, old)
    atomic.write_text(config.pins_path, render_pins(written))
    return pins_update_of(analysis, old, written), written


def _base_diff(analysis: Analysis[CaseResult], base: BaseSource | None, head: Pins | None,
               elsewhere: Collection[str] = ()) -> BaseDiff | None:
    """The per-case diff of this PR's pins against the base branch's, when the base was looked for (``elsewhere``:
    other shards' cases)."""
    if base is None:
        return None
    return BaseDiff(
        source=base.source,
        error=scrub(base.error),
        present=base.pins is not None,
        diff=base_diff_rows(analysis.results, base.pins, head, elsewhere),
        downgraded=downgraded_pins(base.pins, head),
        model_change=model_change(base.pins, head),
    )


def _pins_of(pins: Pins | None, cases: Sequence[Case]) -> Pins | None:
    """The pins of the selected cases only: the others were not run, so they are neither removed nor lowered."""
    if pins is None:
        return None
    return msgspec.structs.replace(pins, cases={c.id: pins.cases[c.id] for c in cases if c.id in pins.cases})


def _partial_blocker(partial: PartialRun | None) -> str | None:
    if partial is None:
        return None
    return (f"partial run: --filter selected {partial.selected} of {partial.total} case(s), "
            "so strata were not judged and "
            "the run cannot pass; run the whole suite for a verdict")


def _run_info(config: RunConfig, settings: FileConfig, partial: PartialRun | None) -> RunInfo:
    return RunInfo(
        mode="live" if config.base_url else ("replay" if config.replay else "offline"),
        lane=config.lane.value,
        fixtures_dir=config.fixtures_dir.as_posix(),
        pins=config.pins_path.as_posix(),
        repeats=config.repeats,
        replay=config.replay.as_posix() if config.replay else None,
        model_requested=config.model,
        endpoint_class=config.endpoint_class,
        temperature=config.temperature,
        thresholds=settings.thresholds,
        config_file=settings.path.as_posix() if settings.path else None,
        partial=partial,
        allow_key_env=tuple(config.allow_key_env),
    )
