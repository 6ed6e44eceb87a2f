"""What analysis finds and the report carries: alerts, counts, strata, lanes, fixture changes, pin moves.

These types stand between the stages: ``analysis`` makes them, ``report`` lays them out, and
neither imports the other for them.
"""
from __future__ import annotations

from collections.abc import Mapping

import msgspec

from .model import Data


class Alert(Data, frozen=True):
    """A strata or fixtures alarm: a code other tools match on, and a sentence for people."""

    code: str
    stratum: str | None
    message: str


class Summary(Data, frozen=True):
    """Label and channel counts and the three rates, none derived from another."""

    total: int
    counts: Mapping[str, int]
    channels: Mapping[str, int]
    naive_pass_rate: float | None
    yield_: float | None = msgspec.field(name="yield")
    accuracy_on_yield: float | None
    delivered: int
    stable: int


class StratumRow(Data, frozen=True):
    """One stratum as its own instrument: pass rate over its delivered cases, each counted by its share of right
    repeats."""

    n: int
    passed: int | float  # a flaky case counts its share of right repeats
    pass_rate: float | None
    cases: int
    undelivered: int


class LatencyShift(Data, frozen=True):
    """The run's latency level against the pins': always reported, failing only past ``latency_shift_slack``."""

    pins_ms: float  # the median of the pins' levels, over the cases compared
    run_ms: float  # the median of the levels this run's cases were measured at
    factor: float  # run_ms / pins_ms
    cases: int  # the cases timed at a level of their own against a pin that has one
    subset: bool  # a --filter run: its level comes from the cases it selected


class LaneStats(Data, frozen=True):
    """How many cases were judged like-for-like against their pin, and what flipped."""

    matched_fingerprints: int
    fingerprint_mismatches: int
    grade_flips: int
    flipped: tuple[str, ...]
    unpinned: int
    undelivered: int


class FixtureChanges(Data, frozen=True, omit_defaults=True):
    """Which cases (and files) the fixtures added, removed or modified since the pins were written."""

    hash: str
    pinned_hash: str | None
    changed: bool
    added: tuple[str, ...]
    removed: tuple[str, ...]
    modified: tuple[str, ...]  # its request, an assertion or its recorded answer changed
    files_changed: tuple[str, ...]
    retimed: tuple[str, ...] = ()  # only its recordings' time or usage moved (re-recorded, same answer)


class PinBrief(Data, frozen=True):
    """A pin or a run, in brief: what the pin diffs show."""

    chars: int | None
    tokens: int | None
    ms: float | None
    label: str


class PinMove(Data, frozen=True):
    """One pin this run rewrote: before (None for a new case) and after."""

    id: str
    from_: PinBrief | None = msgspec.field(name="from")
    to: PinBrief


class PinsUpdate(Data, frozen=True):
    """What writing the pins changed, and the regressions the new baseline accepts."""

    moved: tuple[PinMove, ...]
    removed: tuple[str, ...]
    accepted_regressions: tuple[str, ...]
    previous_alerts: tuple[str, ...]
