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
    """One stratum as its own instrument: pass rate over its delivered cases."""

    n: int
    passed: int
    pass_rate: float | None
    cases: int
    undelivered: int


class LaneStats(Data, frozen=True):
    """How many cases were judged like-for-like against their pin, and what flipped."""

    matched_fingerprints: int
    fingerprint_mismatches: int
    grade_flips: int
    flipped: tuple[str, ...]
    unpinned: int
    undelivered: int


class FixtureChanges(Data, frozen=True):
    """Which cases (and files) the fixtures added, removed or modified since the pins were written."""

    hash: str
    pinned_hash: str | None
    changed: bool
    added: tuple[str, ...]
    removed: tuple[str, ...]
    modified: tuple[str, ...]
    files_changed: tuple[str, ...]


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
