"""Everything pure after grading, in one call: judge against pins, strata, lanes, fixtures, the gate."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from ..findings import Alert, FixtureChanges, LaneStats, LatencyShift, StratumRow, Summary
from ..model import DEFAULT_PROVIDER, GRADER_VERSION, Case, Fingerprint, Gate, Grade, Lane, Pins, Thresholds, Verdict
from .cases import CaseResult, Judged, answered, judge_case
from .fixtures import fixture_changes, fixtures_alert
from .gate import case_gate, decide
from .lanes import lanes_report
from .levels import latency_shift, recorded_level, run_level, shift_alert_message
from .strata import strata_report
from .summary import summarize


@dataclass(frozen=True)
class RunShape:
    """What analysis needs to know of how the run was made."""

    lane: Lane
    endpoint_class: str
    temperature: float
    live: bool
    # Why only some cases ran (--filter): a subset says nothing of a stratum's rate or size,
    # so strata are not judged, and the run is at best inconclusive, never a pass.
    partial: str | None = None
    # Offline: recordings made for another request than the case sends now (case id -> what
    # differs), and cases answered by recordings that carry no request record (older ones).
    stale: Mapping[str, str] = field(default_factory=dict)
    unverified: tuple[str, ...] = ()
    # A --filter run: the cases a person picked are no fair sample of the endpoint's level (they may be the slow
    # ones), so its level is reported, never judged against, recorded or alerted on (analysis.levels).
    filtered: bool = False


# The results an analysis holds: a run's CaseResult, or a merge's rows (what the report needs of them differs).
R = TypeVar("R", bound=Judged, covariant=True)


@dataclass(frozen=True)
class Analysis(Generic[R]):
    """A run's findings before they become a report; ``gates`` is aligned with ``results``."""

    results: tuple[R, ...]
    gates: tuple[Gate, ...]
    summary: Summary
    strata: Mapping[str, StratumRow]
    alerts: tuple[Alert, ...]
    lanes: LaneStats
    fixtures: FixtureChanges
    fingerprint: Fingerprint
    verdict: Verdict
    blockers: tuple[str, ...]
    stale: tuple[str, ...] = ()  # cases graded on recordings of another request: the next step re-records them
    # findings a team chose not to fail on (fingerprint_change: warn): the report's notes say them
    warnings: tuple[str, ...] = ()
    latency: LatencyShift | None = None  # the run's latency level against the pins' (analysis.levels)
    level_ms: float | None = None  # a live run's own level: what its --record lines are stamped with
    unverified: tuple[str, ...] = ()  # cases graded on recordings without a request record: a re-pin must vouch


def fingerprint_changes(results: Sequence[Judged]) -> dict[str, list[str]]:
    """Delivered cases measured under another fingerprint than their pin's, grouped by what differs."""
    groups: dict[str, list[str]] = {}
    for r in results:
        if r.pin is not None and r.delivered and not r.comparable:
            groups.setdefault(r.fingerprint.differences(r.pin.fingerprint), []).append(r.id)
    return groups


def fingerprint_alert(results: Sequence[Judged], thresholds: Thresholds) -> Alert | None:
    """``fingerprint_changed``: the pins are another experiment, so size and time went unjudged."""
    said = _fingerprint_change(results) if thresholds.fingerprint_change == "fail" else None
    if said is None:
        return None
    return Alert("fingerprint_changed", None,
                 f"{said}. Size and time were not judged; re-pin under the new fingerprint on an "
                 "adjudication run (--move-baseline), or run with the pinned settings")


def fingerprint_warning(results: Sequence[Judged], thresholds: Thresholds) -> str | None:
    """The same finding under ``fingerprint_change: warn``: not a failure, but never silent."""
    said = _fingerprint_change(results) if thresholds.fingerprint_change == "warn" else None
    if said is None:
        return None
    return f"{said}; size and time were not judged (fingerprint_change: warn keeps this from failing the run)"


def _fingerprint_change(results: Sequence[Judged]) -> str | None:
    """What differs between the run and its pins, and for which cases; None when nothing does."""
    groups = fingerprint_changes(results)
    if not groups:
        return None
    count = sum(len(ids) for ids in groups.values())
    parts = [f"{what} ({len(ids)} case(s): {', '.join(ids[:5])}{' ...' if len(ids) > 5 else ''})"
             for what, ids in groups.items()]
    return f"{count} case(s) ran under another fingerprint than their pins: {'; '.join(parts)}"


def lowered_alert(lowered: Sequence[str], thresholds: Thresholds) -> Alert | None:
    """``baseline_lowered`` for teams that set ``baseline_lowered: fail``; otherwise it is a warning in the outputs."""
    if not lowered or thresholds.baseline_lowered != "fail":
        return None
    return Alert("baseline_lowered", None,
                 f"this change lowers the baseline of {len(lowered)} case(s) the base branch had right and stable: "
                 f"{', '.join(lowered[:10])}{' ...' if len(lowered) > 10 else ''} (baseline_lowered: fail)")


def recordings_alerts(shape: RunShape, thresholds: Thresholds) -> list[Alert]:
    """``stale_recording``: an answer graded offline was made for another prompt than the PR ships.

    Recordings without a request record are an alert too (``unverified_recording``) with
    ``recordings: strict``; otherwise a note says how many there are.
    """
    alerts = []
    if shape.stale:
        listed = "; ".join(f"{cid}: {what}" for cid, what in list(shape.stale.items())[:10])
        more = f" (and {len(shape.stale) - 10} more)" if len(shape.stale) > 10 else ""
        alerts.append(Alert("stale_recording", None,
                            f"{len(shape.stale)} case(s) are graded on answers recorded for another request "
                            f"than they send now: {listed}{more}; re-record them (run --record, then import)"))
    if shape.unverified and thresholds.recordings == "strict":
        alerts.append(Alert("unverified_recording", None,
                            f"{len(shape.unverified)} case(s) are graded on recordings that do not say "
                            f"what they answered: {', '.join(shape.unverified[:10])} (recordings: strict); "
                            "re-record them"))
    return alerts


def lost_repeats(results: Sequence[Judged]) -> list[str]:
    """Cases with a repeat still undelivered after retries: the evidence is short, so the run is inconclusive."""
    # One repeat is never lost: a delivered case's label is its only repeat's.
    return [f"{r.id}: repeat {', '.join(map(str, r.lost_repeats))} of {r.repeats} got no gradeable answer"
            for r in results if r.repeats > 1 and r.lost_repeats]


def run_fingerprint(shape: RunShape, grades: Mapping[str, Sequence[Grade]]) -> Fingerprint:
    """The run's fingerprint; the model id is what the responses said, never the flag, and the judges what graded."""
    ids = sorted({g.model_id for gs in grades.values() for g in gs if g.model_id})
    judges = sorted({j for gs in grades.values() for g in gs if g.judge for j in g.judge.split(",")})
    formats = sorted({g.provider for gs in grades.values() for g in gs if answered(g)})  # the answers' wire formats
    return Fingerprint(shape.lane.value, shape.endpoint_class, ",".join(ids) or None, shape.temperature, GRADER_VERSION,
                       ",".join(judges) or None, ",".join(formats) or DEFAULT_PROVIDER)


def analyse(
    cases: Sequence[Case],
    grades: Mapping[str, Sequence[Grade]],
    pins: Pins | None,
    current_hash: str,
    shape: RunShape,
    thresholds: Thresholds,
    files: Mapping[str, str] | None = None,
    extra_blockers: Sequence[str] = (),
    lowered: Sequence[str] = (),
    suite: Sequence[Case] | None = None,
) -> Analysis[CaseResult]:
    """Judge every case against its pin, then the strata, lanes and fixtures, then the gate.

    ``lowered`` names the cases whose baseline this change lowers (see ``promotion.downgraded_pins``).
    ``suite`` is the whole suite when ``cases`` is one shard of it: the fixtures are compared in full.
    """
    fp = run_fingerprint(shape, grades)
    own = run_level(grades) if shape.live else None  # a live run is one batch; offline, each recording says its own
    judged_at = None if shape.filtered else own
    results = tuple(judge_case(c, grades[c.id], fp, pins.cases.get(c.id) if pins else None, thresholds,
                               judged_at if shape.live else recorded_level(grades[c.id])) for c in cases)
    changes = fixture_changes(cases if suite is None else suite, pins, current_hash, files)
    concluded = conclude(results, fp, changes, shape, thresholds, extra_blockers, lowered)
    if shape.filtered and own is not None:  # said, from the subset; judged, recorded and alerted on never
        concluded = replace(concluded, latency=latency_shift(results, True, own))
    return replace(concluded, level_ms=judged_at)


def conclude(
    results: tuple[R, ...],
    fp: Fingerprint,
    changes: FixtureChanges,
    shape: RunShape,
    thresholds: Thresholds,
    extra_blockers: Sequence[str] = (),
    lowered: Sequence[str] = (),
) -> Analysis[R]:
    """Everything after judging each case: strata, alerts, lanes, the gate.

    ``envelope-ci merge`` calls it on every shard's cases.
    """
    strata, alerts, held = strata_report(results, thresholds)
    if shape.partial:
        alerts, held = [], [shape.partial]
    shift = latency_shift(results, shape.filtered)
    shifted = shift_alert_message(shift, thresholds) if not shape.filtered else None
    alerts += [a for a in (fixtures_alert(changes), fingerprint_alert(results, thresholds),
                           lowered_alert(lowered, thresholds), *recordings_alerts(shape, thresholds),
                           Alert("latency_shift", None, shifted) if shifted else None) if a]
    blockers: list[str] = [*held, *lost_repeats(results)]
    if shape.live and shape.lane is Lane.ADJUDICATION:
        blind = [r.id for r in results if r.delivered and r.fingerprint.model_id is None]
        if blind:
            blockers.append(f"adjudication run but the response named no model for: {', '.join(blind[:10])} "
                            "(failing closed)")
    blockers += extra_blockers
    verdict = decide(alerts, results, thresholds, blockers)
    if extra_blockers:  # an interrupted run judged nothing it did not finish: never a pass or a fail
        verdict = Verdict.INCONCLUSIVE
    gates = tuple(case_gate(r, alerts) for r in results)
    warning = fingerprint_warning(results, thresholds)
    warnings = (warning,) if warning else ()
    return Analysis(results, gates, summarize(results), strata, tuple(alerts), lanes_report(results), changes, fp,
                    verdict, tuple(blockers), tuple(shape.stale), warnings, shift, unverified=tuple(shape.unverified))
