"""Plain data shared by every stage: labels, channels, lanes, cases, envelopes, grades.

Everything here is frozen and free of I/O so the grading core can be tested with
planted envelopes alone. The per-case types (``Case``, ``Envelope``, ``Grade``) have slots: a
100,000-case run holds hundreds of thousands of them.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import TYPE_CHECKING, Any

from .frozen import quick_init

if TYPE_CHECKING:
    from .grading.assertions.base import Expectation

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
        return self in _TRANSPORT  # a module tuple: asked of every grade, several times; Label.DROP is a slow lookup


_TRANSPORT = (Label.DROP, Label.EMPTY)


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


class Gate(str, Enum):
    """What one case does to the run: computed once, in analysis; every output reads it."""

    PASS = "pass"  # stable
    FAIL = "fail"  # a regression, or a case of a stratum whose floor alert fired
    UNDELIVERED = "undelivered"  # transport: makes the run inconclusive, never red
    TOLERATED = "tolerated"  # not stable, but not failing the gate (a known failure, a stretch miss)


class Verdict(str, Enum):
    """The run's answer: the exit code follows from it (``VERDICT_EXIT``)."""

    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"


class ExitCode(IntEnum):
    """The only place exit codes are defined."""

    PASS = 0
    FAIL = 1
    USAGE = 2  # bad input or usage, and also an internal error: never 1, which reads as a regression
    INCONCLUSIVE = 3
    SOFTWARE = 70  # the action's harness crashed (sysexits EX_SOFTWARE)
    INTERRUPTED = 130  # a second Ctrl-C: leave at once (128 + SIGINT)


VERDICT_EXIT = {
    Verdict.PASS: ExitCode.PASS,
    Verdict.FAIL: ExitCode.FAIL,
    Verdict.INCONCLUSIVE: ExitCode.INCONCLUSIVE,
}

# The pins file beside the fixtures, and the settings file the fixtures directory may hold.
PINS_NAME = "envelope-pins.json"
CONFIG_NAMES = ("envelope-ci.yaml", "envelope-ci.yml")
# ``envelope-ci import`` keeps a fixture file's recorded envelopes beside it: cases.yaml -> cases.yaml.recorded.jsonl.
RECORDED_SUFFIX = ".recorded.jsonl"


class Detail(str, Enum):
    """How much of the report a rendering shows: all, per-case tables folded, or only what is not stable."""

    FULL = "full"
    COLLAPSED = "collapsed"
    FAILING = "failing"


@dataclass(frozen=True)
class Stratum:
    """One difficulty band and the bars it is held to (names of ``Thresholds`` fields).

    ``floor`` fails the run below it (``floor_alert``); ``watermark`` is a pass rate at or
    above which the band has become too easy; ``ceiling`` is its share of the ceiling alarm.
    """

    name: str
    floor: str | None = None
    floor_alert: str | None = None
    watermark: str | None = None
    ceiling: str | None = None


# The one list of strata: the fixture schema, analysis, alerts and every table follow it.
STRATA_SPEC: tuple[Stratum, ...] = (
    Stratum("easy", floor="easy_floor", floor_alert="easy_regression", ceiling="ceiling_easy"),
    Stratum("medium", floor="medium_floor", floor_alert="medium_regression", ceiling="ceiling_medium"),
    Stratum("stretch", watermark="stretch_high", ceiling="stretch_high"),
)
# Cases with no stratum are held to the easy floor but reported on their own row.
UNSTRATIFIED = Stratum("unstratified", floor="easy_floor", floor_alert="easy_regression")
STRATA = tuple(s.name for s in STRATA_SPEC)


@quick_init
@dataclass(frozen=True, slots=True)
class Case:
    """One golden case as loaded from a fixture file (validated already).

    ``expectations`` are its assertions in order: the flat shorthands first, then its
    ``assert`` list (see ``grading.assertions``).
    """

    id: str
    stratum: str | None
    messages: tuple[Mapping[str, Any], ...]
    file: str
    line: int | None
    digest: str
    expectations: tuple[Expectation, ...] = ()
    timeout_s: float | None = None
    completion: str | None = None
    recorded: tuple[Mapping[str, Any], ...] | None = None
    request: Mapping[str, Any] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)  # files the case names (fixtures-hash key -> digest)
    sources: Mapping[str, str] = field(default_factory=dict)  # message role -> the file its text comes from
    tags: tuple[str, ...] = ()  # free labels; ``run --filter tag:NAME`` selects by them

    @property
    def wants_json(self) -> bool:
        """A case whose answer must be JSON: one of its assertions needs the parsed answer."""
        for e in self.expectations:  # a loop, not any() over a generator: asked of every case graded
            if e.kind.needs_json and not e.negated:
                return True
        return False

    @property
    def reads_json(self) -> bool:
        """A case with an assertion on the parsed answer, if there is one (``not-is-json`` reads it too)."""
        for e in self.expectations:
            if e.kind.needs_json:
                return True
        return False

    @property
    def max_chars(self) -> int | None:
        """The tightest size budget its assertions set, judged on the size channel."""
        tightest = None
        for e in self.expectations:  # asked of every case judged
            if e.kind.failure == "size" and not e.negated and (tightest is None or e.value < tightest):  # a str enum: no slow .value
                tightest = e.value
        return tightest


@quick_init
@dataclass(frozen=True, slots=True)
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
    request: Mapping[str, Any] | None = None  # what was asked (sources.requests): a recording proves what it answers
    judgements: Mapping[str, Envelope] = field(default_factory=dict)  # llm-rubric text -> the judge's own envelope (grading.rubric)


@quick_init
@dataclass(frozen=True, slots=True)
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
    judge: str | None = None  # the judges that graded it, "<model id>@<temperature>": part of the case's fingerprint


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
    fingerprint_change: str = "fail"  # fail | warn: a delivered case measured under another fingerprint than its pin's
    baseline_lowered: str = "warn"  # warn | fail: this PR's pins downgrade or drop a case the base branch had right and stable
    recordings: str = "lenient"  # lenient | strict: recordings that do not say what request they answered are a note, or an alert


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries for transport failures only (drop, empty)."""

    max_attempts: int = 3
    run_budget: int | None = None  # None: sized to the run's calls (transport.retry.Budget.for_run)
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    max_retry_after_s: float = 60.0
    # Waiting on 429s does not use up attempts; this bounds the whole run's waiting on them.
    max_rate_limit_wait_s: float = 600.0
    # 429s lower the run's concurrency and answers raise it back (transport.adaptive); False keeps
    # --concurrency fixed. No flag sets it: it is there to measure what adapting saves.
    adaptive_concurrency: bool = True


@dataclass(frozen=True)
class Fingerprint:
    """Which experiment produced a measurement."""

    lane: str
    endpoint_class: str
    model_id: str | None
    temperature: float
    grader_version: str = GRADER_VERSION
    # An llm-rubric case's judge(s), "<model id>@<temperature>": another judge is another experiment. Left out of
    # report.json while None, so reports of suites without a judge keep their bytes.
    judge: str | None = field(default=None, metadata={"omit_none": True})

    def comparable_key(self) -> tuple[Any, ...]:
        """Everything but the lane: the lane decides who may write pins, not comparability."""
        return (self.endpoint_class, self.model_id, float(self.temperature), self.grader_version, self.judge)

    def differences(self, pinned: Fingerprint | None) -> str:
        """What makes this fingerprint another experiment than ``pinned``, in words."""
        if pinned is None:
            return "the pin has no fingerprint"
        names = ("endpoint class", "model id", "temperature", "grader version", "judge")
        diffs = [f"{n} {theirs} → {mine}" for n, mine, theirs in zip(names, self.comparable_key(), pinned.comparable_key(), strict=True) if mine != theirs]
        return ", ".join(diffs) or "same experiment"

    def as_dict(self) -> dict[str, Any]:
        """Plain data; ``judge`` only when set, so suites without a judge keep their pins and reports byte for byte."""
        out = {
            "lane": self.lane,
            "endpoint_class": self.endpoint_class,
            "model_id": self.model_id,
            "temperature": self.temperature,
            "grader_version": self.grader_version,
        }
        return out | {"judge": self.judge} if self.judge is not None else out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fingerprint:
        return cls(
            lane=str(data.get("lane", "")),
            endpoint_class=str(data.get("endpoint_class", "")),
            model_id=data.get("model_id"),
            temperature=float(data.get("temperature", 0.0)),
            grader_version=str(data.get("grader_version", "")),
            judge=data.get("judge"),
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
