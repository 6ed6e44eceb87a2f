"""Each stratum as its own instrument over delivered cases, and the ceiling detector."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..findings import Alert, StratumRow
from ..model import STRATA_SPEC, UNSTRATIFIED, Stratum, Thresholds
from .cases import Judged
from .summary import rate


@dataclass
class _Bucket:
    cases: int = 0
    n: int = 0
    passed: float = 0.0
    undelivered: int = 0
    ids_failed: list[str] = field(default_factory=list)


def whole(count: float) -> int | float:
    """A stratum's count of right answers: an integer unless a flaky case counted by its share."""
    rounded = round(count, 6)
    return int(rounded) if rounded.is_integer() else rounded


def _buckets(results: Sequence[Judged]) -> dict[str, _Bucket]:
    buckets: dict[str, _Bucket] = {s.name: _Bucket() for s in (*STRATA_SPEC, UNSTRATIFIED)}
    unstratified = UNSTRATIFIED.name
    for r in results:
        b = buckets[r.stratum or unstratified]  # a case without a stratum is counted under unstratified
        b.cases += 1
        if not r.delivered:
            b.undelivered += 1
            continue
        b.n += 1
        right, delivered = r.passes  # answers, not envelope channels: a time or size miss fails its own channel
        b.passed += right / delivered if right < delivered else 1.0
        if right < delivered:
            b.ids_failed.append(r.id)
    return buckets


def _alerts_of(spec: Stratum, b: _Bucket, pass_rate: float | None, t: Thresholds) -> tuple[list[Alert], list[str]]:
    """One stratum's own alarms (too thin, under its floor, over its watermark), and the rate alarms held back.

    A rate alarm waits for delivery: when the stratum's undelivered cases, counted the other
    way (as passes for a floor, as failures for a watermark), would keep it on the right side
    of the bar, the run cannot tell, so the alarm is held and the run is inconclusive.
    """
    alerts: list[Alert] = []
    held: list[str] = []
    name = spec.name
    if spec is not UNSTRATIFIED and (0 < b.cases < t.thin_below or (b.cases == 0 and t.require_strata)):
        alerts.append(Alert("thin_stratum", name,
                            f"{name} has {b.cases} case(s); at least {t.thin_below} are needed to tell luck "
                            "from coverage"))
    if pass_rate is None:
        return alerts, held
    optimistic = rate(b.passed + b.undelivered, b.n + b.undelivered) or 0.0
    pessimistic = rate(b.passed, b.n + b.undelivered) or 0.0
    if spec.floor and spec.floor_alert:
        floor = getattr(t, spec.floor)
        if pass_rate < floor:
            failed = ", ".join(b.ids_failed[:5]) + (" ..." if len(b.ids_failed) > 5 else "")
            message = (f"{name} pass rate {pass_rate:.3f} < floor {floor:.2f} ({whole(b.passed):g}/{b.n}; "
                       f"not right every time: {failed})")
            if optimistic < floor:
                alerts.append(Alert(spec.floor_alert, name, message))
            else:
                held.append(f"{spec.floor_alert} held: {message}, but {b.undelivered} undelivered case(s) "
                            f"could lift it to {optimistic:.3f}")
    if spec.watermark:
        mark = getattr(t, spec.watermark)
        if pass_rate >= mark:
            message = (f"{name} pass rate {pass_rate:.3f} >= watermark {mark:.2f}: the yardstick has slipped; "
                       "add harder cases")
            if pessimistic >= mark:
                alerts.append(Alert(f"{name}_too_easy", name, message))
            else:
                held.append(f"{name}_too_easy held: {name} pass rate {pass_rate:.3f} >= watermark {mark:.2f} "
                            "over delivered cases, "
                            f"but {b.undelivered} undelivered case(s) could keep it at {pessimistic:.3f}")
    return alerts, held


def _ceiling(rows: dict[str, StratumRow], buckets: dict[str, _Bucket], t: Thresholds) -> tuple[list[Alert], list[str]]:
    """The ceiling alarm: every stratum saturated at once (held while undelivered cases could break it)."""
    def at(spec: Stratum, passed_over: int) -> bool:
        row = rows[spec.name]
        return (spec.ceiling is not None and row.pass_rate is not None
                and (rate(row.passed, passed_over) or 0.0) >= getattr(t, spec.ceiling))

    if not all(at(spec, rows[spec.name].n) for spec in STRATA_SPEC):
        return [], []
    if all(at(spec, rows[spec.name].n + buckets[spec.name].undelivered) for spec in STRATA_SPEC):
        return [Alert("ceiling", None,
                      "every stratum is at its ceiling: the suite can no longer fail; replace stretch cases")], []
    return [], ["ceiling held: every stratum is at its ceiling over delivered cases, "
                "but undelivered cases could break it"]


def strata_report(results: Sequence[Judged], t: Thresholds) -> tuple[dict[str, StratumRow], list[Alert], list[str]]:
    """Each stratum as its own instrument over delivered cases, the ceiling detector, and the alarms held for
    delivery."""
    buckets = _buckets(results)
    rows: dict[str, StratumRow] = {}
    alerts: list[Alert] = []
    held: list[str] = []
    for spec in (*STRATA_SPEC, UNSTRATIFIED):
        b = buckets[spec.name]
        if spec is UNSTRATIFIED and b.cases == 0:
            continue
        pass_rate = rate(b.passed, b.n)
        rows[spec.name] = StratumRow(n=b.n, passed=whole(b.passed), pass_rate=pass_rate, cases=b.cases,
                                     undelivered=b.undelivered)
        found, waiting = _alerts_of(spec, b, pass_rate, t)
        alerts += found
        held += waiting
    found, waiting = _ceiling(rows, buckets, t)
    return rows, alerts + found, held + waiting
