"""The promotion rule: who may move the baseline, what new pins hold, and what moving them changes."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..model import Fingerprint, Lane, Outcome, Pin, Pins, Thresholds
from ..report.model import PinBrief, PinMove, PinsUpdate
from .analyse import Analysis
from .cases import pinned_good
from .channels import channel_for


def write_refusal(
    lane: Lane,
    in_ci: bool,
    run_fp: Fingerprint,
    stored: Pins | None,
    move_baseline: bool,
    undelivered: list[str],
    blockers: Sequence[str] = (),
) -> str | None:
    """Why these results may not become the pins, or None when they may.

    Pins are the team's memory: only a human's adjudication run, outside CI, on the
    same experiment as the stored baseline (or an explicitly announced move) may
    write them, and never from a run that left cases ungraded.
    """
    if in_ci:
        return "refusing to write pins in CI (CI or GITHUB_ACTIONS is 'true'): pins are written by a person and reviewed in the PR"
    if lane is not Lane.ADJUDICATION:
        return f"refusing to write pins from a {lane.value} run: only --lane adjudication may move the baseline"
    if undelivered:
        shown = ", ".join(undelivered[:5]) + (" ..." if len(undelivered) > 5 else "")
        return f"refusing to write pins: {len(undelivered)} case(s) got no gradeable envelope ({shown})"
    if blockers:
        return f"refusing to write pins: the run failed closed ({blockers[0]})"
    if stored is not None and stored.fingerprint is not None and not move_baseline:
        if stored.fingerprint.comparable_key() != run_fp.comparable_key():
            return (
                f"refusing to write pins: this run's fingerprint is another experiment than the pinned one ({run_fp.differences(stored.fingerprint)}); "
                "pass --move-baseline to move the baseline on purpose"
            )
    return None


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
    return Pins(analysis.fixtures.hash, analysis.fingerprint, cases, dict(files))


def pin_brief(pin: Pin | None) -> PinBrief | None:
    """A pin as the diffs show it."""
    return None if pin is None else PinBrief(pin.chars, pin.tokens, pin.ms, pin.label)


def pins_update_of(before: Analysis, old: Pins | None, new: Pins) -> PinsUpdate:
    """What writing these pins changes: the pins that moved, and the regressions the new baseline accepts."""
    moved = []
    for cid, pin in new.cases.items():
        prior = old.cases.get(cid) if old else None
        if prior != pin:
            to = pin_brief(pin)
            assert to is not None
            moved.append(PinMove(cid, pin_brief(prior), to))
    return PinsUpdate(
        moved=tuple(moved),
        removed=tuple(sorted(set(old.cases) - set(new.cases))) if old else (),
        accepted_regressions=tuple(r.case.id for r in before.results if r.outcome is Outcome.REGRESSION),
        previous_alerts=tuple(a.code for a in before.alerts),
    )


def downgraded_pins(base: Pins | None, head: Pins | None) -> tuple[str, ...]:
    """Cases the base branch pinned right and stable that this PR's pins no longer do.

    Rewriting pins is how a reviewed change moves the baseline, so it is not a gate failure;
    but a regression re-pinned in the same PR must be impossible to miss in the comment.
    """
    if base is None or head is None:
        return ()
    return tuple(sorted(cid for cid, pin in base.cases.items() if pinned_good(pin) and cid in head.cases and not pinned_good(head.cases[cid])))
