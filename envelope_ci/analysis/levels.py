"""Time against the level it was measured at: each batch's median time, and the shift between the run's and the pins'.

A time belongs to the batch that measured it: a live run (or the shard of one), or the live
run that made a recording. Load or an endpoint slower everywhere moves every time of a batch
together; its level (the median time over its delivered cases) moves with them, so a case is
judged on its share of its batch's level, and the move itself is reported as a shift.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..findings import LatencyShift
from ..model import Grade, Pin, Pins, Thresholds
from .cases import Judged, measure_of, median, pinned_good

# Fewer timed cases than this are no level: one or two answers are their own outliers.
MIN_LEVEL_CASES = 5


def level_of(times: Sequence[float]) -> float | None:
    """A batch's level, once it has enough timed cases to have one."""
    return round(median(list(times)), 3) if len(times) >= MIN_LEVEL_CASES else None


def run_level(grades: Mapping[str, Sequence[Grade]]) -> float | None:
    """A live run's own level (or its shard's): the median time of its timed cases."""
    times = [ms for ms in (measure_of(gs).ms for gs in grades.values()) if ms is not None]
    return level_of(times)


def recorded_level(grades: Sequence[Grade]) -> float | None:
    """The level of the live run that recorded a case's answers, when that run had one (offline)."""
    return next((g.level_ms for g in grades if g.level_ms is not None), None)


def pins_level(pins: Pins | None) -> float | None:
    """The level the pins hold: the median of their levels, lent to a case measured in too small a batch."""
    if pins is None:
        return None
    levels = [p.level_ms for p in pins.cases.values() if p.level_ms]
    return round(median(levels), 3) if levels else None


def pinned_level(level_ms: float | None, old: Pin | None, lent: float | None) -> float | None:
    """The level a new pin records: its case's own, else the one its old pin held, else the pins' (borrowed)."""
    if level_ms is not None:
        return level_ms
    return old.level_ms if old is not None and old.level_ms else lent


def latency_shift(results: Sequence[Judged], partial: bool, subset_level: float | None = None) -> LatencyShift | None:
    """How the run's level compares with the pins', over the cases timed at a level of their own against a
    last-good pin that has one (a --filter run: at its subset's level, ``subset_level``, which judged none of
    them)."""
    pairs = [(level, pinned) for r in results
             if r.delivered and r.comparable and r.pin is not None and pinned_good(r.pin)
             for level, pinned in ((subset_level or r.level_ms, r.pin.level_ms),) if level and pinned]
    if not pairs:
        return None
    now = round(median([level for level, _ in pairs]), 3)
    pinned = round(median([pin_level for _, pin_level in pairs]), 3)
    return LatencyShift(pins_ms=pinned, run_ms=now, factor=round(now / pinned, 3), cases=len(pairs), subset=partial)


def shift_alert_message(shift: LatencyShift | None, t: Thresholds) -> str | None:
    """Why the run fails as ``latency_shift``: its level moved past ``latency_shift_slack`` from the pins'."""
    if shift is None or t.latency_shift_slack is None or shift.factor <= t.latency_shift_slack:
        return None
    return (f"endpoint latency x{shift.factor:.2f} vs pins: median {shift.pins_ms:.0f} → {shift.run_ms:.0f} ms, "
            f"past latency_shift_slack x{t.latency_shift_slack:g}: the endpoint or its load changed; "
            "run again where the pins were measured, or re-pin on purpose")
