"""The typed report: what a run found, as frozen dataclasses; report.json is their JSON.

Field order is key order in report.json. Renaming, removing or re-typing a field changes
the contract in docs/report.md: bump REPORT_VERSION. Every format reads this, never a dict.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..canonical import json_encoder
from ..frozen import quick_init
from ..model import Channel, Fingerprint, Gate, Label, Outcome, Pin, Thresholds, Verdict
from .codec import from_json, json_schema, to_json

# 2: every case row carries its ``gate``.
REPORT_VERSION = 2


@dataclass(frozen=True)
class Alert:
    """A strata or fixtures alarm: a code other tools match on, and a sentence for people."""

    code: str
    stratum: str | None
    message: str


@dataclass(frozen=True)
class Summary:
    """Label and channel counts and the three rates, none derived from another."""

    total: int
    counts: Mapping[str, int]
    channels: Mapping[str, int]
    naive_pass_rate: float | None
    yield_: float | None = field(metadata={"json": "yield"})
    accuracy_on_yield: float | None
    delivered: int
    stable: int


@dataclass(frozen=True)
class StratumRow:
    """One stratum as its own instrument: pass rate over its delivered cases."""

    n: int
    passed: int
    pass_rate: float | None
    cases: int
    undelivered: int


@dataclass(frozen=True)
class LaneStats:
    """How many cases were judged like-for-like against their pin, and what flipped."""

    matched_fingerprints: int
    fingerprint_mismatches: int
    grade_flips: int
    flipped: tuple[str, ...]
    unpinned: int
    undelivered: int


@dataclass(frozen=True)
class FixtureChanges:
    """Which cases (and files) the fixtures added, removed or modified since the pins were written."""

    hash: str
    pinned_hash: str | None
    changed: bool
    added: tuple[str, ...]
    removed: tuple[str, ...]
    modified: tuple[str, ...]
    files_changed: tuple[str, ...]


@dataclass(frozen=True)
class PartialRun:
    """A ``--filter`` run: which filters, and how many of the suite's cases they selected."""

    filters: tuple[str, ...]
    selected: int
    total: int


@dataclass(frozen=True)
class RunInfo:
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
    partial: PartialRun | None = field(default=None, metadata={"omit_none": True})  # absent on a run of the whole suite


@dataclass(frozen=True)
class PinBrief:
    """A pin or a run, in brief: what the pin diffs show."""

    chars: int | None
    tokens: int | None
    ms: float | None
    label: str


@dataclass(frozen=True)
class BaseDiffRow:
    """One case: the base branch's pin, the head's pin, this run; whether the PR moved the pin."""

    id: str
    base: PinBrief | None
    head: PinBrief | None
    run: PinBrief | None
    pin_changed: bool
    fixture: str | None  # added | removed | modified (by this PR), or None


@dataclass(frozen=True)
class BaseDiff:
    """The base branch's pins against this PR's: where they came from, the per-case diff, downgrades."""

    source: str | None
    error: str | None
    present: bool
    diff: tuple[BaseDiffRow, ...] = ()
    downgraded: tuple[str, ...] = ()


@dataclass(frozen=True)
class PinMove:
    """One pin this run rewrote: before (None for a new case) and after."""

    id: str
    from_: PinBrief | None = field(metadata={"json": "from"})
    to: PinBrief


@dataclass(frozen=True)
class PinsUpdate:
    """What writing the pins changed, and the regressions the new baseline accepts."""

    moved: tuple[PinMove, ...]
    removed: tuple[str, ...]
    accepted_regressions: tuple[str, ...]
    previous_alerts: tuple[str, ...]


@dataclass(frozen=True)
class NextStep:
    """What to do about a red or inconclusive run: a sentence, and the exact command when there is one."""

    why: str
    command: str | None


@quick_init
@dataclass(frozen=True)
class CaseRow:
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
    outcome: Outcome
    comparable: bool | None
    reasons: tuple[str, ...]
    preview: str | None
    file: str
    line: int | None
    pin: Pin | None
    gate: Gate

    @property
    def stratum_name(self) -> str:
        """The stratum's row name: unstratified cases have their own."""
        return stratum_name(self.stratum)


def stratum_name(stratum: str | None) -> str:
    """A case's stratum by its row name (``CaseRow.stratum_name``), for a writer that names each stratum once, not each case's."""
    return stratum or "unstratified"


@dataclass(frozen=True)
class ShardCase:
    """What the merge needs of one graded case beyond its row."""

    position: int  # the case's place in the whole suite's order: the merged report lists cases as the whole run would
    repeats: tuple[Label, ...]  # each repeat's label, in order: lost repeats are judged on the whole run
    temperature: float | None = field(default=None, metadata={"omit_none": True})  # the case's own, when it is not the run's


@dataclass(frozen=True)
class ShardInfo:
    """A ``run --shard I/N`` report: which part of the suite, the marks that must agree across shards, and what the merge needs.

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


@dataclass(frozen=True)
class ConcurrencyChange:
    """From ``t_s`` seconds into the live calls on, at most ``limit`` requests at once."""

    t_s: float
    limit: int


@dataclass(frozen=True)
class LiveRun:
    """How a live run was paced: its concurrency over time and its wait on rate limits, so a slow run says why.

    Timing, not evidence: no verdict reads it, and ``envelope-ci merge`` leaves it out.
    """

    concurrency_max: int  # --concurrency, or fewer when the run had fewer calls
    concurrency_history: tuple[ConcurrencyChange, ...]  # the first point is (0, concurrency_max); then only changes
    rate_limit_wait_s: float


@dataclass(frozen=True)
class Report:
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
    regressions: tuple[str, ...]
    known_failures: tuple[str, ...]
    improvements: tuple[str, ...]
    undelivered: tuple[str, ...]
    run: RunInfo
    base: BaseDiff | None
    pins_update: PinsUpdate | None = field(default=None, metadata={"omit_none": True})
    next_steps: tuple[NextStep, ...] = ()
    live: LiveRun | None = field(default=None, metadata={"omit_none": True})  # a live run's report only
    shard: ShardInfo | None = field(default=None, metadata={"omit_none": True})  # a --shard run's report only
    cases: tuple[CaseRow, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """report.json's data."""
        data: dict[str, Any] = to_json(self)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Report:
        """A report read back from report.json's data (exactly what ``to_json`` gave)."""
        report: Report = from_json(cls, data)
        return report


def report_schema() -> dict[str, Any]:
    """The JSON Schema of report.json, generated from the dataclasses above."""
    defs: dict[str, Any] = {}
    root = json_schema(Report, defs)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://github.com/envelope-ci/envelope-ci/report.schema.json",
        "title": f"envelope-ci report.json (report_version {REPORT_VERSION})",
        **root,
        "$defs": defs,
    }


def dump_report(report: Report, row_texts: Sequence[str | None] = ()) -> str:
    """report.json text: indented at the top, one case per line (fast to write, easy to diff); a shard's cases too.

    ``row_texts`` (aligned with the rows) are rows' text known already, None where it is not:
    a merge writes the rows its shards wrote as they wrote them (encoding them again was a fifth
    of a 100k-case merge).
    """
    return "".join(report_parts(report, row_texts))


def report_parts(report: Report, row_texts: Sequence[str | None] = ()) -> Iterator[str]:
    """``dump_report``'s text in parts, each case's row encoded as it is asked for: written as they come, no text is ever whole.

    The whole text of a 100,000-case report, joined and then encoded, was 95 MB of a run's peak
    memory on top of its rows (a row with one character past Latin-1 makes the text 2 bytes a
    character). The whole report as one tree of dicts, then copies of its text, was ~90 MB more.
    """
    data = to_json(replace(report, cases=()))
    del data["cases"]
    shard_cases = data["shard"].pop("cases") if "shard" in data else None
    text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)[:-2]
    if shard_cases is not None:  # ``shard`` is the last key left: reopen it for its cases
        text = text[:-4] + ',\n    "cases": ' + "".join(_block([f"{_dumps(k)}: {_dumps(v)}" for k, v in shard_cases.items()], "{}", 6)) + "\n  }"
    yield text + ',\n  "cases": '
    rows = (_dumps(_row_data(c)) for c in report.cases) if not row_texts else \
        (_dumps(_row_data(c)) if known is None else known for c, known in zip(report.cases, row_texts, strict=True))
    yield from _block(rows, "[]", 4)
    yield "\n}\n"


# How report.json's rows begin and end (``dump_report``): one per line, each line its own JSON; no row holds a line break.
ROWS_START = '\n  "cases": [\n    '
ROWS_END = "\n  ]\n}\n"
ROWS_BETWEEN = ",\n    "


def row_texts_of(text: str, rows: Sequence[CaseRow]) -> tuple[str, ...] | None:
    """Each row's own text in a report.json written by ``dump_report`` (``text``, read back as ``rows``), or None if it was not laid out so.

    A row's line is its JSON, a newline within it is escaped: the rows are what lies between the
    last ``"cases": [`` at the top level and the end, split at each line break. The count, and the
    first and last rows' ids, must match what the whole text parsed to, or nothing is taken from
    it (a row split over lines, or two on one, would shift the count or the last id).
    """
    start, end = text.rfind(ROWS_START), len(text) - len(ROWS_END)
    if start < 0 or not text.endswith(ROWS_END) or not rows:
        return None
    texts = text[start + len(ROWS_START):end].split(ROWS_BETWEEN)
    if len(texts) != len(rows) or not all(texts[i].startswith(f'{{"id": {_dumps(rows[i].id)}, ') for i in (0, -1)):
        return None
    return tuple(texts)


def _row_data(row: CaseRow) -> Any:
    """A row as data the encoder writes as its JSON (``to_json``'s text), building no dict when its own ``__dict__`` is that.

    The encoder writes a str enum as its value and a tuple as a list, and a row's JSON keys are
    its field names: only its pin (a dataclass) needs converting. Writing a 100k-case report.json
    then builds no dict per row (``to_json`` of every row cost 0.5 s).
    """
    state = row.__dict__
    if tuple(state) != _ROW_FIELDS:  # set some other way than by its fields: the key order is the report's
        return to_json(row)
    return state if row.pin is None else {**state, "pin": to_json(row.pin)}


_ROW_FIELDS = tuple(f.name for f in fields(CaseRow))

# One encoder for every row (report.json is written a row at a time).
_dumps = json_encoder(sort_keys=False, separators=(", ", ": "))


def _block(lines: Iterable[str], brackets: str, indent: int) -> Iterator[str]:
    """The parts of a JSON array or object with one item per line, closed at ``indent - 2``, as each line comes."""
    pad = " " * indent
    first, between = f"{brackets[0]}\n{pad}", f",\n{pad}"
    opened = False
    for line in lines:
        yield between if opened else first
        yield line
        opened = True
    yield f"\n{pad[:-2]}{brackets[1]}" if opened else brackets
