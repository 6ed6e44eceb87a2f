"""Everything pure after grading, in one call: judge against pins, strata, lanes, fixtures, the gate."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..model import Case, Fingerprint, Gate, Grade, Lane, Pins, Thresholds, Verdict
from ..report.model import Alert, FixtureChanges, LaneStats, StratumRow, Summary
from .cases import CaseResult, judge_case
from .fixtures import fixture_changes, fixtures_alert
from .gate import case_gate, decide
from .lanes import lanes_report
from .strata import strata_report
from .summary import summarize


@dataclass(frozen=True)
class RunShape:
    """What analysis needs to know of how the run was made."""

    lane: Lane
    endpoint_class: str
    temperature: float
    live: bool


@dataclass(frozen=True)
class Analysis:
    """A run's findings before they become a report; ``gates`` is aligned with ``results``."""

    results: tuple[CaseResult, ...]
    gates: tuple[Gate, ...]
    summary: Summary
    strata: Mapping[str, StratumRow]
    alerts: tuple[Alert, ...]
    lanes: LaneStats
    fixtures: FixtureChanges
    fingerprint: Fingerprint
    verdict: Verdict
    blockers: tuple[str, ...]


def run_fingerprint(shape: RunShape, grades: Mapping[str, Sequence[Grade]]) -> Fingerprint:
    """The run's fingerprint; the model id is what the responses said, never the flag."""
    ids = sorted({g.model_id for gs in grades.values() for g in gs if g.model_id})
    return Fingerprint(shape.lane.value, shape.endpoint_class, ",".join(ids) or None, shape.temperature)


def analyse(
    cases: Sequence[Case],
    grades: Mapping[str, Sequence[Grade]],
    pins: Pins | None,
    current_hash: str,
    shape: RunShape,
    thresholds: Thresholds,
    files: Mapping[str, str] | None = None,
    extra_blockers: Sequence[str] = (),
) -> Analysis:
    """Judge every case against its pin, then the strata, lanes and fixtures, then the gate."""
    fp = run_fingerprint(shape, grades)
    results = tuple(judge_case(c, grades[c.id], fp, pins.cases.get(c.id) if pins else None, thresholds) for c in cases)
    strata, alerts = strata_report(results, thresholds)
    changes = fixture_changes(cases, pins, current_hash, files)
    changed = fixtures_alert(changes)
    if changed:
        alerts.append(changed)
    blockers: list[str] = []
    if shape.live and shape.lane is Lane.ADJUDICATION:
        blind = [r.case.id for r in results if r.delivered and r.fingerprint.model_id is None]
        if blind:
            blockers.append(f"adjudication run but the response named no model for: {', '.join(blind[:10])} (failing closed)")
    blockers += extra_blockers
    verdict = decide(alerts, results, thresholds, blockers)
    if extra_blockers:  # an interrupted run judged nothing it did not finish: never a pass or a fail
        verdict = Verdict.INCONCLUSIVE
    gates = tuple(case_gate(r, alerts) for r in results)
    return Analysis(results, gates, summarize(results), strata, tuple(alerts), lanes_report(results), changes, fp, verdict, tuple(blockers))
