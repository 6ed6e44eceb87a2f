"""Plain data shared by every stage: labels, channels, lanes, cases, envelopes, grades.

Everything here is frozen and free of I/O so the grading core can be tested with
planted envelopes alone.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Any

# Bump whenever grading semantics change: it is part of every fingerprint, so pins
# written by an older grader stop being compared as like-for-like.
GRADER_VERSION = "1"


class Label(str, Enum):
    """What came back, in the order the classifier checks for it."""

    DROP = "drop"
    EMPTY = "empty"
    TRUNCATED = "truncated"
    SCHEMA = "schema"
    WRONG = "wrong"
    RIGHT = "right"

    @property
    def is_transport(self) -> bool:
        """Drops and empties say nothing about the model."""
        return self in (Label.DROP, Label.EMPTY)


class Channel(str, Enum):
    """The one channel a case is reported under: the first that broke, or stable."""

    TRANSPORT = "transport"
    TRUNCATED = "truncated"
    SCHEMA = "schema"
    CORRECTNESS = "correctness"
    SIZE = "size"
    TIME = "time"
    STABLE = "stable"


class Lane(str, Enum):
    """Smoke may explore; only adjudication may move the baseline."""

    SMOKE = "smoke"
    ADJUDICATION = "adjudication"


class Outcome(str, Enum):
    """A case's standing against its pin."""

    REGRESSION = "regression"
    KNOWN_FAILURE = "known_failure"
    IMPROVEMENT = "improvement"
    UNCHANGED = "unchanged"
    NEW = "new"
    UNDELIVERED = "undelivered"


class Verdict(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"


class ExitCode(IntEnum):
    """The only place exit codes are defined."""

    PASS = 0
    FAIL = 1
    USAGE = 2
    INCONCLUSIVE = 3


VERDICT_EXIT = {
    Verdict.PASS: ExitCode.PASS,
    Verdict.FAIL: ExitCode.FAIL,
    Verdict.INCONCLUSIVE: ExitCode.INCONCLUSIVE,
}

STRATA = ("easy", "medium", "stretch")
# Cases with no stratum are held to the easy floor but reported on their own row.
UNSTRATIFIED = "unstratified"


@dataclass(frozen=True)
class Case:
    """One golden case as loaded from a fixture file (validated already)."""

    id: str
    stratum: str | None
    messages: tuple[Mapping[str, Any], ...]
    file: str
    line: int | None
    digest: str
    expect_fragment: str | None = None
    must_include: tuple[str, ...] = ()
    must_not_include: tuple[str, ...] = ()
    expect_json: Any = None
    has_expect_json: bool = False
    schema: Mapping[str, Any] | None = None
    max_chars: int | None = None
    timeout_s: float | None = None
    completion: str | None = None
    recorded: tuple[Mapping[str, Any], ...] | None = None
    request: Mapping[str, Any] = field(default_factory=dict)

    @property
    def wants_json(self) -> bool:
        """A case whose answer must be JSON: it has a schema or a JSON expectation."""
        return self.schema is not None or self.has_expect_json


@dataclass(frozen=True)
class Envelope:
    """What one attempt brought back, as recorded: the raw material of a grade.

    ``error`` is set when no HTTP response arrived at all. ``body`` is the parsed
    JSON object when the server sent JSON, else the raw text. A bare fixture
    ``completion`` becomes an envelope with ``completion`` set and nothing else.
    """

    http_status: int | None = None
    elapsed_ms: float | None = None
    ttft_ms: float | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    error: str | None = None
    completion: str | None = None
    attempts: int = 1
    stream_complete: bool | None = None
    notes: tuple[str, ...] = ()  # what the transport did about it, e.g. why it stopped retrying


@dataclass(frozen=True)
class Grade:
    """The classifier's verdict on one envelope, with what it read to get there."""

    label: Label
    reasons: tuple[str, ...]
    text: str | None
    finish_reason: str | None
    model_id: str | None
    http_status: int | None
    chars: int | None
    tokens: int | None
    tokens_estimated: bool
    elapsed_ms: float | None
    ttft_ms: float | None
    attempts: int


@dataclass(frozen=True)
class Thresholds:
    """Slack, floors and watermarks; defaults are the method's."""

    size_slack: float = 1.10
    time_slack: float = 1.15
    time_floor_ms: float = 25.0
    easy_floor: float = 1.0
    medium_floor: float = 0.85
    stretch_high: float = 0.80
    ceiling_easy: float = 0.99
    ceiling_medium: float = 0.95
    thin_below: int = 2
    require_strata: bool = False
    min_delivered_share: float = 1.0


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries for transport failures only (drop, empty)."""

    max_attempts: int = 3
    run_budget: int = 100
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    max_retry_after_s: float = 60.0


@dataclass(frozen=True)
class Fingerprint:
    """Which experiment produced a measurement."""

    lane: str
    endpoint_class: str
    model_id: str | None
    temperature: float
    grader_version: str = GRADER_VERSION

    def comparable_key(self) -> tuple[Any, ...]:
        """Everything but the lane: the lane decides who may write pins, not comparability."""
        return (self.endpoint_class, self.model_id, float(self.temperature), self.grader_version)

    def differences(self, pinned: Fingerprint | None) -> str:
        """What makes this fingerprint another experiment than ``pinned``, in words."""
        if pinned is None:
            return "the pin has no fingerprint"
        names = ("endpoint class", "model id", "temperature", "grader version")
        diffs = [f"{n} {mine} (pinned {theirs})" for n, mine, theirs in zip(names, self.comparable_key(), pinned.comparable_key(), strict=True) if mine != theirs]
        return "; ".join(diffs) or "same experiment"

    def as_dict(self) -> dict[str, Any]:
        return {
            "lane": self.lane,
            "endpoint_class": self.endpoint_class,
            "model_id": self.model_id,
            "temperature": self.temperature,
            "grader_version": self.grader_version,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fingerprint:
        return cls(
            lane=str(data.get("lane", "")),
            endpoint_class=str(data.get("endpoint_class", "")),
            model_id=data.get("model_id"),
            temperature=float(data.get("temperature", 0.0)),
            grader_version=str(data.get("grader_version", "")),
        )


@dataclass(frozen=True)
class Pin:
    """The last-good measurement of one case."""

    hash: str
    label: str
    channel: str
    chars: int | None
    tokens: int | None
    tokens_estimated: bool
    ms: float | None
    ms_p95: float | None
    fingerprint: Fingerprint | None


@dataclass(frozen=True)
class Pins:
    """The whole pins file."""

    fixtures_hash: str
    fingerprint: Fingerprint | None
    cases: Mapping[str, Pin]
    files: Mapping[str, str] = field(default_factory=dict)  # path -> digest, to name what changed
