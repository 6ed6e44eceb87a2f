"""Plain data shared by every stage: labels, channels, lanes, cases, envelopes, grades.

Everything here is a frozen ``msgspec.Struct`` free of I/O, so the grading core can be tested with
planted envelopes alone and every file format is encoded and decoded by msgspec from these
types. The types stand below every stage: this module imports no stage.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import Enum, IntEnum
from types import MappingProxyType
from typing import Any, Protocol

import msgspec


class Data(msgspec.Struct, frozen=True, gc=False):
    """The base of every type that flows between stages: frozen, and untracked by the cyclic garbage collector.

    They hold trees of plain data (parsed JSON, other records), never a cycle, so reference counting
    frees them; tracked, a big run's records made the collector walk them again and again.
    """


# Bump whenever grading semantics change: it is part of every fingerprint, so pins
# written by an older grader stop being compared as like-for-like.
GRADER_VERSION = "1"

# The wire format a recording, an envelope or a fingerprint that names none was made in (docs/pins.md).
DEFAULT_PROVIDER = "openai-chat"


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
        return self in _TRANSPORT


_TRANSPORT = frozenset((Label.DROP, Label.EMPTY))  # asked of every grade: a set made once, not two members looked up


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


class Stratum(Data, frozen=True):
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


class Failure(str, Enum):
    """What a failed assertion makes of the answer: a label, or (size) a channel."""

    SCHEMA = "schema"  # the answer's shape is wrong: label ``schema``
    WRONG = "wrong"  # the answer's content is wrong: label ``wrong``
    SIZE = "size"  # a size budget: judged on the size channel, the label is untouched
    TIME = "time"  # a time budget: judged on the time channel, the label is untouched


# The size budget whose value is not characters but dollars per call, and the built-in time budget (milliseconds).
COST_TYPE = "cost"
LATENCY_TYPE = "latency"


# check(answer, value, case) -> reasons; an empty list means the assertion holds (the answer is grading's ``Answer``).
Check = Callable[[Any, Any, Any], Sequence[str]]


class AssertionKind(Protocol):
    """What every stage may read of an assertion's type; ``grading.assertions.base.AssertionType`` is the one kind."""

    @property
    def name(self) -> str: ...
    @property
    def failure(self) -> Failure: ...
    @property
    def needs_json(self) -> bool: ...
    @property
    def judged_as(self) -> frozenset[Failure]: ...
    @property
    def check(self) -> Check: ...
    @property
    def check_not(self) -> Check | None: ...
    @property
    def check_shape(self) -> Check | None: ...


class Expectation(Data, frozen=True):
    """One assertion of one case, as loaded: its type, prepared value and whether negated."""

    kind: AssertionKind
    value: Any
    negated: bool = False

    @property
    def name(self) -> str:
        return ("not-" if self.negated else "") + self.kind.name

    def failures(self, answer: Any, case: Any) -> Sequence[str]:
        """Why the answer does not meet this expectation (empty when it does)."""
        if not self.negated:
            return self.kind.check(answer, self.value, case)
        assert self.kind.check_not is not None  # the schema offers not- only where it exists
        return self.kind.check_not(answer, self.value, case)

    def failures_as(self, failure: Failure, answer: Any, case: Any) -> list[str]:
        """Its failures of one kind: grading asks for the shape ones first, then the content ones (only those in
        ``kind.judged_as``)."""
        found = (list(self.kind.check_shape(answer, self.value, case))
                 if failure is Failure.SCHEMA and self.kind.check_shape else [])
        return found + list(self.failures(answer, case)) if self.kind.failure is failure else found


class Case(Data, frozen=True):
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
    request: Mapping[str, Any] = msgspec.field(default_factory=dict)
    files: Mapping[str, str] = msgspec.field(default_factory=dict)  # files the case names (fixtures-hash key -> digest)
    sources: Mapping[str, str] = msgspec.field(default_factory=dict)  # message role -> the file its text comes from
    tags: tuple[str, ...] = ()  # free labels; ``run --filter tag:NAME`` selects by them
    # the digest without its recordings' times and usage (sources.untimed); None when it records none
    answer_digest: str | None = None
    # model id -> {"input", "output"} dollars per million tokens: envelope-ci.yaml's ``prices``, bound to a case
    # that asks for ``cost`` (sources.settings.load_suite)
    prices: Mapping[str, Mapping[str, float]] | None = None

    @property
    def untimed_digest(self) -> str:
        """What must stay equal for a re-recorded case to be only ``retimed``: its request, assertions and answer."""
        return self.answer_digest or self.digest

    @property
    def wants_json(self) -> bool:
        """A case whose answer must be JSON: one of its assertions needs the parsed answer."""
        return any(e.kind.needs_json and not e.negated for e in self.expectations)

    @property
    def reads_json(self) -> bool:
        """A case with an assertion on the parsed answer, if there is one (``not-is-json`` reads it too)."""
        return any(e.kind.needs_json for e in self.expectations)

    @property
    def max_chars(self) -> int | None:
        """The tightest size budget in characters its assertions set (``cost`` is one in dollars), judged on the size
        channel."""
        budgets = [e.value for e in self.expectations
                   if e.kind.failure is Failure.SIZE and e.kind.name != COST_TYPE and not e.negated]
        return min(budgets, default=None)

    @property
    def max_cost(self) -> float | None:
        """The tightest ``cost`` budget, dollars per call, judged on the size channel."""
        return min((e.value for e in self.expectations if e.kind.name == COST_TYPE), default=None)

    @property
    def max_latency_ms(self) -> float | None:
        """The tightest time budget in milliseconds its assertions set (``latency``'s), judged on the time channel
        against the median of repeats."""
        return min((e.value for e in self.expectations if e.kind.failure is Failure.TIME and not e.negated),
                   default=None)


# An envelope with no judge's or embeddings' envelopes (almost all of them) shares this one empty mapping: a dict of
# its own each would be most of a big replay's growth.
NO_ENVELOPES: Mapping[str, Any] = MappingProxyType({})


class Envelope(Data, frozen=True):
    """What one attempt brought back, as recorded: the raw material of a grade.

    ``error`` is set when no HTTP response arrived at all. ``body`` is the parsed
    JSON object when the server sent JSON, else the raw text. A bare fixture
    ``completion`` becomes an envelope with ``completion`` set and nothing else.
    """

    http_status: int | None = None
    elapsed_ms: float | None = None
    ttft_ms: float | None = None
    headers: Mapping[str, str] = msgspec.field(default_factory=dict)
    body: Any = None
    error: str | None = None
    completion: str | None = None
    attempts: int = 1
    stream_complete: bool | None = None
    notes: tuple[str, ...] = ()  # what the transport did about it, e.g. why it stopped retrying
    # the median time of the live run that recorded it (analysis.levels): its time is judged against that level
    level_ms: float | None = None
    request: Mapping[str, Any] | None = None  # what was asked (sources.requests): a recording proves what it answers
    # llm-rubric text -> the judge's own envelope (grading.rubric)
    judgements: Mapping[str, Envelope] = NO_ENVELOPES
    # a text ``similar`` compares (the answer's, an expected one) -> its embeddings call's envelope
    embeddings: Mapping[str, Envelope] = NO_ENVELOPES
    provider: str = DEFAULT_PROVIDER  # the wire format ``body`` is in: grading reads it with that provider


class Grade(Data, frozen=True):
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
    level_ms: float | None = None  # the recording's level (``Envelope.level_ms``), offline
    cost_usd: float | None = None  # dollars this call cost, for a case with a ``cost`` budget
    cost_estimated: bool = False  # its usage was estimated from characters, in part or whole
    provider: str = DEFAULT_PROVIDER  # the wire format it came in (``Envelope.provider``): part of the fingerprint


class Thresholds(Data, frozen=True):
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
    # warn | fail: this PR's pins downgrade or drop a case the base branch had right and stable
    baseline_lowered: str = "warn"
    # lenient | strict: recordings that do not say what request they answered are a note, or an alert
    recordings: str = "lenient"
    # a flaky pin (right in some repeats) regresses when Fisher's exact test finds a drop at this level
    flip_alpha: float = 0.05
    # the run's latency level over the pins' past this factor fails the run (latency_shift); None: "off"
    latency_shift_slack: float | None = 2.0


class RetryPolicy(Data, frozen=True):
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


class Fingerprint(Data, frozen=True, omit_defaults=True):
    """Which experiment produced a measurement (``judge`` and ``provider``, the fields with a default, are left out of
    files while they hold it)."""

    lane: str
    endpoint_class: str
    model_id: str | None
    temperature: float
    grader_version: str
    # An llm-rubric case's judge(s), "<model id>@<temperature>": another judge is another experiment.
    judge: str | None = None
    # The wire format the answers came in (left out of files while it is the default): another is another experiment.
    provider: str = DEFAULT_PROVIDER

    def comparable_key(self) -> tuple[Any, ...]:
        """Everything but the lane: the lane decides who may write pins, not comparability."""
        return (self.endpoint_class, self.model_id, float(self.temperature), self.grader_version, self.judge,
                self.provider)

    def differences(self, pinned: Fingerprint | None) -> str:
        """What makes this fingerprint another experiment than ``pinned``, in words."""
        if pinned is None:
            return "the pin has no fingerprint"
        names = ("endpoint class", "model id", "temperature", "grader version", "judge", "provider")
        diffs = [f"{n} {theirs} → {mine}"
                 for n, mine, theirs in zip(names, self.comparable_key(), pinned.comparable_key(), strict=True)
                 if mine != theirs]
        return ", ".join(diffs) or "same experiment"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fingerprint:
        return cls(
            lane=str(data.get("lane", "")),
            endpoint_class=str(data.get("endpoint_class", "")),
            model_id=data.get("model_id"),
            temperature=float(data.get("temperature", 0.0)),
            grader_version=str(data.get("grader_version", "")),
            judge=data.get("judge"),
            provider=str(data.get("provider") or DEFAULT_PROVIDER),
        )


class Pin(Data, frozen=True, omit_defaults=True):
    """The last-good measurement of one case (the keys with a default are left out of the file while they hold it,
    docs/pins.md)."""

    hash: str
    label: str
    channel: str
    chars: int | None
    tokens: int | None
    tokens_estimated: bool
    ms: float | None
    ms_p95: float | None
    fingerprint: Fingerprint | None
    level_ms: float | None = None  # the median time of the batch that measured ``ms`` (analysis.levels)
    passes: tuple[int, int] | None = None  # right repeats out of delivered ones; None reads as 1/1 or 0/1
    answer: str | None = None  # the case's digest apart from its recorded times (Case.untimed_digest)

    @property
    def right_of(self) -> tuple[int, int]:
        """Its passes out of repeats: as pinned, or what a pin from before repeats were kept means."""
        return self.passes or ((1, 1) if self.label == Label.RIGHT.value else (0, 1))


class Pins(Data, frozen=True):
    """The whole pins file."""

    fixtures_hash: str
    fingerprint: Fingerprint | None
    cases: Mapping[str, Pin]
    files: Mapping[str, str] = msgspec.field(default_factory=dict)  # path -> digest, to name what changed
    unknown: tuple[str, ...] = ()  # keys of the file this release does not know (a newer one wrote them): read past
