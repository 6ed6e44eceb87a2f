"""Repeats -> case results; summary, strata and ceiling alerts, lanes, fixtures, verdict. Pure."""
from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .channels import Measure, channel_for
from .model import (
    STRATA,
    UNSTRATIFIED,
    Case,
    Channel,
    Fingerprint,
    Grade,
    Label,
    Outcome,
    Pin,
    Pins,
    Thresholds,
    Verdict,
)

_SEVERITY = [Label.TRUNCATED, Label.SCHEMA, Label.WRONG, Label.RIGHT]


@dataclass(frozen=True)
class CaseResult:
    """One case, graded over its repeats and judged against its pin."""

    case: Case
    label: Label
    channel: Channel
    reasons: tuple[str, ...]
    measure: Measure
    grades: tuple[Grade, ...]
    fingerprint: Fingerprint
    pin: Pin | None
    comparable: bool | None
    outcome: Outcome

    @property
    def delivered(self) -> bool:
        return not self.label.is_transport

    @property
    def shown(self) -> Grade:
        """The repeat whose label the case carries: its text and reasons are the ones shown."""
        return next((g for g in self.grades if g.label is self.label), self.grades[-1])


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile: an observed value, never an interpolation."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _median_int(values: list[int]) -> int | None:
    return int(statistics.median_low(values)) if values else None


def case_label(grades: Sequence[Grade]) -> Label:
    """The worst delivered repeat; transport only when nothing was delivered."""
    delivered = [g.label for g in grades if not g.label.is_transport]
    if delivered:
        return min(delivered, key=_SEVERITY.index)
    return grades[-1].label


def measure_of(grades: Sequence[Grade]) -> Measure:
    """Median size and time over delivered repeats, p95 of time."""
    ok = [g for g in grades if not g.label.is_transport]
    times = [g.elapsed_ms for g in ok if g.elapsed_ms is not None]
    tokens = [g.tokens for g in ok if g.tokens is not None]
    return Measure(
        chars=_median_int([g.chars for g in ok if g.chars is not None]),
        tokens=_median_int(tokens),
        tokens_estimated=any(g.tokens_estimated for g in ok),
        ms=round(statistics.median(times), 3) if times else None,
        ms_p95=round(percentile(times, 0.95) or 0.0, 3) if times else None,
    )


def pinned_good(pin: Pin) -> bool:
    """The pin recorded a right answer within its envelope: a last-good baseline."""
    return pin.label == Label.RIGHT.value and pin.channel == Channel.STABLE.value


def outcome_of(label: Label, channel: Channel, pin: Pin | None) -> Outcome:
    """Regression only when the pin was right and in its envelope and now is not."""
    if label.is_transport:
        return Outcome.UNDELIVERED
    if pin is None:
        return Outcome.NEW
    was_good = pinned_good(pin)
    now_good = channel is Channel.STABLE
    if was_good and not now_good:
        return Outcome.REGRESSION
    if not was_good and now_good:
        return Outcome.IMPROVEMENT
    if not was_good:
        return Outcome.KNOWN_FAILURE
    return Outcome.UNCHANGED


def judge_case(
    case: Case,
    grades: Sequence[Grade],
    run_fp: Fingerprint,
    pin: Pin | None,
    thresholds: Thresholds,
) -> CaseResult:
    """Aggregate one case's repeats and compare them with its pin."""
    label = case_label(grades)
    measure = measure_of(grades)
    model_ids = sorted({g.model_id for g in grades if g.model_id})
    # A case may set its own temperature; what was sent is what the measurement means.
    temperature = float(case.request.get("temperature", run_fp.temperature))
    fp = Fingerprint(run_fp.lane, run_fp.endpoint_class, ",".join(model_ids) or None, temperature, run_fp.grader_version)
    comparable = None
    if pin is not None:
        comparable = pin.fingerprint is not None and pin.fingerprint.comparable_key() == fp.comparable_key()
    # Size and time are judged against the last-good measurement only: a failing answer's
    # size is no baseline (a fix that answers at full length is not a size regression).
    baseline = pin if pin is not None and pinned_good(pin) else None
    channel, envelope_reasons = channel_for(label, measure, case.max_chars, baseline, bool(comparable), thresholds)
    shown = next((g for g in grades if g.label is label), grades[-1])
    reasons = list(shown.reasons) + envelope_reasons
    if pin is not None and not comparable and not label.is_transport:
        reasons.append(f"size/time not compared with the pin: its fingerprint is another experiment ({fp.differences(pin.fingerprint)})")
    if len(grades) > 1:
        reasons.append("repeats: " + ",".join(g.label.value for g in grades))
    return CaseResult(case, label, channel, tuple(reasons), measure, tuple(grades), fp, pin, comparable, outcome_of(label, channel, pin))


def rate(num: int, den: int) -> float | None:
    """A ratio, or None (JSON null) when there is nothing to divide by: never NaN."""
    return round(num / den, 6) if den else None


def summarize(results: Sequence[CaseResult]) -> dict[str, Any]:
    """Label counts (all six) and the three rates, none folded into another."""
    counts = {label.value: 0 for label in Label}
    for r in results:
        counts[r.label.value] += 1
    total = len(results)
    right, wrong = counts["right"], counts["wrong"]
    channels = {c.value: 0 for c in Channel}
    for r in results:
        channels[r.channel.value] += 1
    return {
        "total": total,
        "counts": counts,
        "channels": channels,
        "naive_pass_rate": rate(right, total),
        "yield": rate(right + wrong, total),
        "accuracy_on_yield": rate(right, right + wrong),
        "delivered": total - counts["drop"] - counts["empty"],
        "stable": channels["stable"],
    }


@dataclass(frozen=True)
class Alert:
    """A strata or fixtures alarm: a code other tools match on, and a sentence for people."""

    code: str
    message: str
    stratum: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "stratum": self.stratum, "message": self.message}


@dataclass
class _Bucket:
    cases: int = 0
    n: int = 0
    passed: int = 0
    undelivered: int = 0
    ids_failed: list[str] = field(default_factory=list)


def stratum_of(case: Case) -> str:
    return case.stratum or UNSTRATIFIED


def strata_report(results: Sequence[CaseResult], t: Thresholds) -> tuple[dict[str, Any], list[Alert]]:
    """Each stratum as its own instrument over delivered cases, and the ceiling detector."""
    buckets: dict[str, _Bucket] = {name: _Bucket() for name in (*STRATA, UNSTRATIFIED)}
    for r in results:
        b = buckets[stratum_of(r.case)]
        b.cases += 1
        if not r.delivered:
            b.undelivered += 1
            continue
        b.n += 1
        if r.channel is Channel.STABLE:
            b.passed += 1
        else:
            b.ids_failed.append(r.case.id)
    out: dict[str, Any] = {}
    alerts: list[Alert] = []
    floors = {"easy": t.easy_floor, "medium": t.medium_floor, UNSTRATIFIED: t.easy_floor}
    for name, b in buckets.items():
        if name == UNSTRATIFIED and b.cases == 0:
            continue
        pass_rate = rate(b.passed, b.n)
        out[name] = {"n": b.n, "passed": b.passed, "pass_rate": pass_rate, "cases": b.cases, "undelivered": b.undelivered}
        if name in STRATA and (0 < b.cases < t.thin_below or (b.cases == 0 and t.require_strata)):
            alerts.append(Alert("thin_stratum", f"{name} has {b.cases} case(s); at least {t.thin_below} are needed to tell luck from coverage", name))
        if pass_rate is None:
            continue
        floor = floors.get(name)
        if floor is not None and pass_rate < floor:
            code = "medium_regression" if name == "medium" else "easy_regression"
            failed = ", ".join(b.ids_failed[:5]) + (" ..." if len(b.ids_failed) > 5 else "")
            alerts.append(Alert(code, f"{name} pass rate {pass_rate:.3f} < floor {floor:.2f} ({b.passed}/{b.n}; not stable: {failed})", name))
        if name == "stretch" and pass_rate >= t.stretch_high:
            alerts.append(Alert("stretch_too_easy", f"stretch pass rate {pass_rate:.3f} >= watermark {t.stretch_high:.2f}: the yardstick has slipped; add harder cases", name))
    rates = {name: out.get(name, {}).get("pass_rate") for name in STRATA}
    if all(v is not None for v in rates.values()):
        if rates["easy"] >= t.ceiling_easy and rates["medium"] >= t.ceiling_medium and rates["stretch"] >= t.stretch_high:
            alerts.append(Alert("ceiling", "every stratum is at its ceiling: the suite can no longer fail; replace stretch cases"))
    return out, alerts


def lanes_report(results: Sequence[CaseResult]) -> dict[str, Any]:
    """How many cases were judged like-for-like against their pin, and what flipped."""
    matched = mismatched = flips = unpinned = undelivered = 0
    flipped: list[str] = []
    for r in results:
        if r.pin is None:
            unpinned += 1
        elif not r.delivered:  # no response, no fingerprint: nothing was compared
            undelivered += 1
        elif r.comparable:
            matched += 1
            if r.pin.label != r.label.value:
                flips += 1
                flipped.append(r.case.id)
        else:
            mismatched += 1
    return {
        "matched_fingerprints": matched,
        "fingerprint_mismatches": mismatched,
        "grade_flips": flips,
        "flipped": flipped,
        "unpinned": unpinned,
        "undelivered": undelivered,
    }


def fixture_changes(cases: Iterable[Case], pins: Pins | None, current_hash: str, files: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Which cases (and files) the fixtures added, removed or modified since the pins were written."""
    if pins is None:
        return {"hash": current_hash, "pinned_hash": None, "changed": False, "added": [], "removed": [], "modified": [], "files_changed": []}
    files = files or {}
    files_changed = sorted(p for p in set(files) | set(pins.files) if files.get(p) != pins.files.get(p)) if pins.files else []
    now = {c.id: c.digest for c in cases}
    added = sorted(set(now) - set(pins.cases))
    removed = sorted(set(pins.cases) - set(now))
    modified = sorted(cid for cid in now if cid in pins.cases and pins.cases[cid].hash != now[cid])
    return {
        "hash": current_hash,
        "pinned_hash": pins.fixtures_hash,
        "changed": current_hash != pins.fixtures_hash,
        "added": added,
        "removed": removed,
        "modified": modified,
        "files_changed": files_changed,
    }


def fixtures_alert(changes: Mapping[str, Any]) -> Alert | None:
    if not changes["changed"]:
        return None
    parts = [f"{k}: {', '.join(changes[k][:10])}" for k in ("added", "removed", "modified") if changes[k]]
    files = changes.get("files_changed") or []
    if files:
        parts.append(f"files: {', '.join(files[:10])}")
    if not any(changes[k] for k in ("added", "removed", "modified")):
        parts.append("no case changed: a comment, formatting, or a non-case file such as envelope-ci.yaml")
    return Alert("fixtures_changed", f"fixtures differ from the pinned hash ({'; '.join(parts)}); rewrite the pins on an adjudication run and commit them in this PR")


def decide(
    alerts: Sequence[Alert],
    results: Sequence[CaseResult],
    t: Thresholds,
    blockers: Sequence[str] = (),
) -> Verdict:
    """The gate: alerts or regressions fail; otherwise undelivered cases or blockers make it inconclusive."""
    if alerts or any(r.outcome is Outcome.REGRESSION for r in results):
        return Verdict.FAIL
    delivered = sum(r.delivered for r in results)
    share = delivered / len(results) if results else 0.0
    # Nothing delivered is never a pass, whatever the configured share: there is no evidence.
    if blockers or share < t.min_delivered_share or delivered == 0:
        return Verdict.INCONCLUSIVE
    return Verdict.PASS
