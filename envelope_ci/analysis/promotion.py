"""The promotion rule: who may move the baseline, what new pins hold, and what moving them changes."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from ..findings import PinBrief, PinMove, PinsUpdate
from ..model import GRADER_VERSION, Fingerprint, Lane, Outcome, Pin, Pins, Thresholds
from .analyse import Analysis
from .cases import CaseResult, Judged, pinned_good
from .channels import channel_for
from .levels import pinned_level, pins_level


def write_refusal(
    lane: Lane,
    in_ci: bool,
    run_fp: Fingerprint,
    stored: Pins | None,
    move_baseline: bool,
    undelivered: list[str],
    blockers: Sequence[str] = (),
    stale: str | None = None,
    unverified: Sequence[str] = (),
) -> str | None:
    """Why these results may not become the pins, or None when they may.

    Pins are the team's memory: only a human's adjudication run, outside CI, on the
    same experiment as the stored baseline (or an explicitly announced move) may
    write them, and never from a run that left cases ungraded or graded recordings of an older request.
    ``unverified`` are cases graded on recordings without a request record: refused unless the
    person re-pinning passed --allow-unverified-recordings (the caller then gives none), never
    on the settings file's word (``recordings: lenient``), which is PR content.
    """
    if in_ci:
        return ("refusing to write pins in CI (CI or GITHUB_ACTIONS is 'true'): "
                "pins are written by a person and reviewed in the PR")
    if lane is not Lane.ADJUDICATION:
        return f"refusing to write pins from a {lane.value} run: only --lane adjudication may move the baseline"
    if undelivered:
        shown = ", ".join(undelivered[:5]) + (" ..." if len(undelivered) > 5 else "")
        return f"refusing to write pins: {len(undelivered)} case(s) got no gradeable envelope ({shown})"
    if blockers:
        return f"refusing to write pins: the run failed closed ({blockers[0]})"
    if stored is not None and stored.fingerprint is not None and not move_baseline:
        # pins written before the run's fingerprint named its judge say nothing of it (each case's pin does)
        judged = run_fp if stored.fingerprint.judge is not None else msgspec.structs.replace(run_fp, judge=None)
        if stored.fingerprint.comparable_key() != judged.comparable_key():
            return (
                "refusing to write pins: this run's fingerprint is another experiment than the pinned one "
                f"({run_fp.differences(stored.fingerprint)}); "
                "pass --move-baseline to move the baseline on purpose"
            )
    if stale:  # pinning an answer to an older prompt would make the gate check nothing
        return f"refusing to write pins: {stale}"
    if unverified:  # deleting a recording's request record must not be a way past the staleness check
        shown = ", ".join(unverified[:5]) + (" ..." if len(unverified) > 5 else "")
        return (f"refusing to write pins: {len(unverified)} case(s) are graded on recordings without a request record, "
                f"so nothing shows they answer the request the case sends now ({shown}); re-record them (run --record, "
                "then import), or, once you have checked their answers are real, pass --allow-unverified-recordings")
    return None


def early_refusal(lane: Lane, in_ci: bool, endpoint_class: str, temperature: float, stored: Pins | None,
                  move_baseline: bool, provider: str | None) -> str | None:
    """Why ``--write-pins`` will be refused, when that is known before any request is sent.

    ``provider``: the live run's wire format; None offline, where each recording names its own.
    """
    fp = Fingerprint(lane.value, endpoint_class, None, temperature, GRADER_VERSION)
    refusal = write_refusal(lane, in_ci, fp, None, move_baseline, [])
    if refusal or stored is None or stored.fingerprint is None or move_baseline:
        return refusal
    # The model id is known only from the responses; endpoint class, temperature and a live run's provider now.
    pinned = stored.fingerprint
    known = Fingerprint(lane.value, endpoint_class, pinned.model_id, temperature, pinned.grader_version, pinned.judge,
                        provider or pinned.provider)
    if known.comparable_key() != pinned.comparable_key():
        return ("refusing to write pins: this run's fingerprint is another experiment than the pinned one "
                f"({known.differences(pinned)}); "
                "pass --move-baseline to move the baseline on purpose")
    return None


def _ms(value: float | None) -> float | None:
    """Timings are pinned to the millisecond: finer digits are noise that would move every pin."""
    return None if value is None else float(round(value))


def _within_noise(old: Pin, new: Pin, t: Thresholds) -> bool:
    """The new measurement is the old pin again, as far as the gate can tell: keep the old pin's bytes."""
    if ((old.hash, old.label, old.channel, old.fingerprint, old.tokens_estimated, old.right_of, old.answer)
            != (new.hash, new.label, new.channel, new.fingerprint, new.tokens_estimated, new.right_of, new.answer)):
        return False

    def inside(before: float | None, after: float | None, slack: float, floor: float = 0.0) -> bool:
        if before is None or after is None:
            return before == after
        return abs(after - before) <= max(before * (slack - 1.0), floor)

    return (inside(old.chars, new.chars, t.size_slack) and inside(old.tokens, new.tokens, t.size_slack)
            and inside(old.ms, new.ms, t.time_slack, t.time_floor_ms)
            and inside(old.ms_p95, new.ms_p95, t.time_slack, t.time_floor_ms)
            and inside(old.level_ms, new.level_ms, t.time_slack, t.time_floor_ms))


def new_pins(analysis: Analysis[CaseResult], thresholds: Thresholds, files: Mapping[str, str],
             old: Pins | None = None) -> Pins:
    """This run as the baseline: each pin's channel judged on its own, not against the old pin.

    A pin whose new measurement is within the noise band of the old one is kept byte for
    byte, so the review diff of the pins file shows only the pins that moved.
    """
    cases: dict[str, Pin] = {}
    lent = pins_level(old)
    for r in analysis.results:
        channel, _ = channel_for(r.label, r.measure, r.case.max_chars, None, False, thresholds,
                                 max_cost=r.case.max_cost, max_latency_ms=r.case.max_latency_ms)
        prior = old.cases.get(r.case.id) if old is not None else None
        pin = Pin(
            hash=r.case.digest,
            label=r.label.value,
            channel=channel.value,
            chars=r.measure.chars,
            tokens=r.measure.tokens,
            tokens_estimated=r.measure.tokens_estimated,
            ms=_ms(r.measure.ms),
            ms_p95=_ms(r.measure.ms_p95),
            fingerprint=Fingerprint(Lane.ADJUDICATION.value, *r.fingerprint.comparable_key()),
            level_ms=_ms(pinned_level(r.level_ms, prior, lent)) if r.measure.ms is not None else None,
            passes=r.passes,
            answer=r.case.answer_digest,  # only a recorded case can be retimed: the others' hash says it all
        )
        cases[r.case.id] = prior if prior is not None and _within_noise(prior, pin, thresholds) else pin
    return Pins(analysis.fixtures.hash, analysis.fingerprint, cases, dict(files))


def pin_brief(pin: Pin | None) -> PinBrief | None:
    """A pin as the diffs show it."""
    return None if pin is None else PinBrief(pin.chars, pin.tokens, pin.ms, pin.label)


def pins_update_of(before: Analysis[Judged], old: Pins | None, new: Pins) -> PinsUpdate:
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
        accepted_regressions=tuple(r.id for r in before.results if r.outcome is Outcome.REGRESSION),
        previous_alerts=tuple(a.code for a in before.alerts),
    )


def downgraded_pins(base: Pins | None, head: Pins | None) -> tuple[str, ...]:
    """Cases the base branch pinned right and stable that this PR's pins no longer do.

    Rewriting pins is how a reviewed change moves the baseline, so it is not a gate failure;
    but a regression re-pinned in the same PR must be impossible to miss in the comment.
    """
    if base is None:
        return ()
    # A pin that disappeared (its line removed, or the whole pins file) is a lowered baseline too.
    head_cases = head.cases if head is not None else {}
    return tuple(sorted(cid for cid, pin in base.cases.items()
                        if pinned_good(pin) and not (cid in head_cases and pinned_good(head_cases[cid]))))
