"""The typed report: what a run found, as frozen ``msgspec.Struct``s; report.json is their JSON, encoded by msgspec.

Field order is key order in report.json. Renaming, removing or re-typing a field changes
the contract in docs/report.md: bump REPORT_VERSION. Every format reads this, never a dict.
A field with a default is left out of report.json while it holds its default (``omit_defaults``):
only the optional parts (``partial``, ``pins_update``, ``live``, ``shard``, a case's own
``temperature``) have one.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import msgspec

from ..findings import Alert, FixtureChanges, LaneStats, LatencyShift, PinBrief, PinsUpdate, StratumRow, Summary
from ..model import Channel, Data, Fingerprint, Gate, Label, Outcome, Pin, Thresholds, Verdict

# 2: every case row carries its ``gate``. 3: a stratum's ``passed`` counts a flaky case by its share of right
# repeats (a number, no longer an integer); rows carry ``level_ms`` and ``passes``; ``latency`` is new.
REPORT_VERSION = 3


class PartialRun(Data, frozen=True):
    """A ``--filter`` run: which filters, and how many of the suite's cases they selected."""

    filters: tuple[str, ...]
    selected: int
    total: int


class RunInfo(Data, frozen=True, omit_defaults=True):
    """How the run was made: enough to reproduce it."""

    mode: str  # live | replay | offline
    lane: str
    fixtures_dir: str
    pins: str
    repeats: int
    replay: str | None
    model_requested: str | None
    endpoint_class: str
    temperature: float
    thresholds: Thresholds
    config_file: str | None
    partial: PartialRun | None = None  # absent on a run of the whole suite
    allow_key_env: tuple[str, ...] = ()  # --allow-key-env: a live next step needs the same variables allowed


class BaseDiffRow(Data, frozen=True):
    """One case: the base branch's pin, the head's pin, this run; whether the PR moved the pin."""

    id: str
    base: PinBrief | None
    head: PinBrief | None
    run: PinBrief | None
    pin_changed: bool
    fixture: str | None  # added | removed | modified (by this PR), or None


class ModelChange(Data, frozen=True):
    """The model id the base branch's pins name and the one this PR's pins name, when they differ."""

    base: str | None
    head: str | None


class BaseDiff(Data, frozen=True):
    """The base branch's pins against this PR's: where they came from, the per-case diff, downgrades, a new model."""

    source: str | None
    error: str | None
    present: bool
    diff: tuple[BaseDiffRow, ...] = ()
    downgraded: tuple[str, ...] = ()
    model_change: ModelChange | None = None  # a PR that re-pins on another model says so at the top


class NextStep(Data, frozen=True):
    """What to do about a red or inconclusive run: a sentence, and the exact command when there is one."""

    why: str
    command: str | None


class CaseRow(Data, frozen=True):
    """One case: its label, channel, measurements, outcome against its pin, and its gate."""

    id: str
    stratum: str | None
    label: Label
    channel: Channel
    chars: int | None
    tokens: int | None
    tokens_estimated: bool
    ms: float | None
    ms_p95: float | None
    ttft_ms: float | None
    http_status: int | None
    finish_reason: str | None
    model_id: str | None
    attempts: int
    repeats: int
    passes: tuple[int, int]  # right repeats out of delivered ones
    outcome: Outcome
    comparable: bool | None
    reasons: tuple[str, ...]
    preview: str | None
    file: str
    line: int | None
    pin: Pin | None
    gate: Gate
    level_ms: float | None = None  # the level its time was judged at (docs/gate.md), when it had one of its own

    @property
    def stratum_name(self) -> str:
        """The stratum's row name: unstratified cases have their own."""
        return stratum_name(self.stratum)


def stratum_name(stratum: str | None) -> str:
    """A case's stratum by its row name (``CaseRow.stratum_name``), for a writer that names each stratum once, not
    each case's."""
    return stratum or "unstratified"


class ShardCase(Data, frozen=True, omit_defaults=True):
    """What the merge needs of one graded case beyond its row."""

    position: int  # the case's place in the whole suite's order: the merged report lists cases as the whole run would
    repeats: tuple[Label, ...]  # each repeat's label, in order: lost repeats are judged on the whole run
    temperature: float | None = None  # the case's own, when it is not the run's


class ShardInfo(Data, frozen=True):
    """A ``run --shard I/N`` report: which part of the suite, the marks that must agree across shards, and what the
    merge needs.

    A shard checks the whole suite, so its ``fixtures`` and base-diff removals are the whole
    run's; strata need every case, so a shard's own verdict is provisional: the merge of every
    shard's report (``envelope-ci merge``) is the gate.
    """

    index: int
    count: int
    tool_version: str
    fixtures_hash: str
    pins_digest: str | None  # sha256 of the pins judged against; None when there are none
    base_pins_digest: str | None  # sha256 of the base branch's pins, when they were found
    fingerprint: Fingerprint  # as configured (no model id: that is what the responses say)
    suite_cases: int
    model_ids: tuple[str, ...]  # every model id this shard's responses named
    replayed: int  # cases graded from a --replay file
    interrupted: tuple[str, ...]  # why a live shard stopped early
    remarks: tuple[str, ...]  # how the endpoint behaved for this shard
    stale: Mapping[str, str]  # offline: case id -> how its recording's request differs from today's
    unverified: tuple[str, ...]  # offline: cases whose recordings do not say what they answered
    cases: Mapping[str, ShardCase]
    level_ms: float | None = None  # a live shard's own latency level: its cases were judged against it


class ConcurrencyChange(Data, frozen=True):
    """From ``t_s`` seconds into the live calls on, at most ``limit`` requests at once."""

    t_s: float
    limit: int


class LiveRun(Data, frozen=True):
    """How a live run was paced: its concurrency over time and its wait on rate limits, so a slow run says why.

    Timing, not evidence: no verdict reads it, and ``envelope-ci merge`` leaves it out.
    """

    concurrency_max: int  # --concurrency, or fewer when the run had fewer calls
    concurrency_history: tuple[ConcurrencyChange, ...]  # the first point is (0, concurrency_max); then only changes
    rate_limit_wait_s: float


class Report(Data, frozen=True, kw_only=True, omit_defaults=True):
    """Everything a run found; report.json is ``to_json`` of this."""

    report_version: int
    verdict: Verdict
    alerts: tuple[str, ...]
    alert_details: tuple[Alert, ...]
    blockers: tuple[str, ...]
    notes: tuple[str, ...]
    summary: Summary
    strata: Mapping[str, StratumRow]
    lanes: LaneStats
    fixtures: FixtureChanges
    fingerprint: Fingerprint
    latency: LatencyShift | None = None  # the run's latency level against the pins', when both have one
    regressions: tuple[str, ...]
    known_failures: tuple[str, ...]
    improvements: tuple[str, ...]
    undelivered: tuple[str, ...]
    run: RunInfo
    base: BaseDiff | None
    pins_update: PinsUpdate | None = None
    next_steps: tuple[NextStep, ...]
    live: LiveRun | None = None  # a live run's report only
    shard: ShardInfo | None = None  # a --shard run's report only
    cases: tuple[CaseRow, ...]

    def to_json(self) -> dict[str, Any]:
        """report.json's data, as its JSON reads back (lists, not tuples)."""
        data: dict[str, Any] = msgspec.json.decode(_ENCODER.encode(self))
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Report:
        """A report read back from report.json's data (exactly what ``to_json`` gave)."""
        return msgspec.convert(data, cls)


def report_schema() -> dict[str, Any]:
    """The JSON Schema of report.json, generated by msgspec from the structs above."""
    schema = msgspec.json.schema(Report)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://github.com/envelope-ci/envelope-ci/report.schema.json",
        "title": f"envelope-ci report.json (report_version {REPORT_VERSION})",
        **schema,
    }


def dump_report(report: Report) -> str:
    """report.json text: indented at the top, one case per line (easy to diff); a shard's cases too."""
    return "".join(report_parts(report))


def report_parts(report: Report) -> Iterator[str]:
    """``dump_report``'s text in parts: the top, then each case's row encoded as it is asked for."""
    top: dict[str, Any] = msgspec.to_builtins(msgspec.structs.replace(report, cases=()))
    del top["cases"]
    shard_cases = top["shard"].pop("cases") if "shard" in top else None
    text = msgspec.json.format(_ENCODER.encode(top), indent=2).decode()[:-2]
    if shard_cases is not None:  # ``shard`` is the last key left: reopen it for its cases
        lines = [f"{_text(k)}: {_text(v)}" for k, v in shard_cases.items()]
        text = text[:-4] + ',\n    "cases": ' + "".join(_block(lines, "{}", 6)) + "\n  }"
    yield text + ',\n  "cases": '
    yield from _block(map(_text, report.cases), "[]", 4)
    yield "\n}\n"


_ENCODER = msgspec.json.Encoder()


def _text(value: Any) -> str:
    return _ENCODER.encode(value).decode()


def _block(lines: Iterator[str] | list[str], brackets: str, indent: int) -> Iterator[str]:
    """The parts of a JSON array or object with one item per line, closed at ``indent - 2``, as each line comes."""
    pad = " " * indent
    first, between = f"{brackets[0]}\n{pad}", f",\n{pad}"
    opened = False
    for line in lines:
        yield between if opened else first
        yield line
        opened = True
    yield f"\n{pad[:-2]}{brackets[1]}" if opened else brackets
