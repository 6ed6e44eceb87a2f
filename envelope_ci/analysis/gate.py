"""The gate: the one place that decides what fails the run, and what each case does to it."""
from __future__ import annotations

from collections.abc import Sequence

from ..findings import Alert
from ..model import STRATA_SPEC, UNSTRATIFIED, Channel, Gate, Outcome, Thresholds, Verdict
from .cases import Judged

# The alerts that mean "this stratum's cases fail the run".
FLOOR_ALERTS = frozenset(s.floor_alert for s in (*STRATA_SPEC, UNSTRATIFIED) if s.floor_alert)


def decide(
    alerts: Sequence[Alert],
    results: Sequence[Judged],
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


def case_gate(result: Judged, alerts: Sequence[Alert]) -> Gate:
    """What one case does to the run; JUnit, annotations and every table read this, never re-derive it.

    A case fails the gate when it regressed against its pin, or when its stratum's floor
    alert fired and it is one of the answers not right in every repeat that set it off (a
    time or size miss fails its own channel, never also a floor). Transport failures
    make the run inconclusive, never red; any other unstable case is tolerated.
    """
    if not result.delivered:
        return Gate.UNDELIVERED
    if result.channel is Channel.STABLE:
        return Gate.PASS
    floors_broken = {a.stratum for a in alerts if a.code in FLOOR_ALERTS}
    not_right = result.passes[0] < result.passes[1]
    if result.outcome is Outcome.REGRESSION or (not_right and (result.stratum or UNSTRATIFIED.name) in floors_broken):
        return Gate.FAIL
    return Gate.TOLERATED
