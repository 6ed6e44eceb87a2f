"""Every shard's report.json read back as one run, for ``merging.merge``; what a shard writes for it is
``report.shard_info``."""
from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import NamedTuple, TypeVar

import msgspec
from msgspec.structs import fields, replace

from ..analysis.analyse import RunShape
from ..analysis.cases import lost_repeats_of
from ..errors import Problem, UsageError
from ..findings import FixtureChanges
from ..model import Channel, Fingerprint, Gate, Label, Lane, Outcome, Pin
from .model import REPORT_VERSION, BaseDiff, CaseRow, Report, RunInfo, ShardCase, ShardInfo


class RowResult(NamedTuple):
    """One case of a merge as the whole run's analysis reads it (``analysis.cases.Judged``): its shard's row, its
    repeats' labels.

    A tuple over what the row says, not a rebuilt ``CaseResult`` (with its case, measure and
    grades): the gates, strata, alerts and verdict read only these.
    """

    id: str
    stratum: str | None
    label: Label
    channel: Channel
    outcome: Outcome
    reasons: tuple[str, ...]
    pin: Pin | None
    comparable: bool | None
    fingerprint: Fingerprint
    repeat_labels: tuple[Label, ...]
    delivered: bool  # not dropped or empty: asked several times of each case, so worked out once
    level_ms: float | None
    passes: tuple[int, int]

    @property
    def repeats(self) -> int:
        return len(self.repeat_labels)

    @property
    def lost_repeats(self) -> tuple[int, ...]:
        return lost_repeats_of(self.label, self.repeat_labels)


@dataclass(frozen=True)
class Whole:
    """Every shard's report read back as one run: what ``conclude`` and the notes need."""

    run: RunInfo
    results: tuple[RowResult, ...]
    rows: tuple[CaseRow, ...]  # as the shards wrote them: only their gates are the whole run's
    row_gates: tuple[Gate, ...]  # each row's gate as its shard wrote it (read while the row was at hand)
    fingerprint: Fingerprint
    fixtures: FixtureChanges
    shape: RunShape
    base: BaseDiff | None
    pinned: bool
    replayed: int
    interrupted: tuple[str, ...]
    remarks: tuple[str, ...]

    @property
    def lowered(self) -> tuple[str, ...]:
        return self.base.downgraded if self.base else ()


@dataclass(frozen=True)
class _Shard:
    """One shard's report, where it came from."""

    path: str
    report: Report
    info: ShardInfo
    places: _Places


class _Places(NamedTuple):
    """What a shard's ``shard.cases`` says of each of its cases besides its row (``ShardCase``), as the merge reads
    it."""

    positions: dict[str, int]  # case id -> its place in the suite
    repeats: dict[str, tuple[Label, ...]]  # of the cases not graded exactly once: one repeat's label is its case's
    temperatures: dict[str, float]  # of the cases with a temperature of their own


_ONE_REPEAT = {label: (label,) for label in Label}


def _places_of(cases: Mapping[str, ShardCase]) -> _Places:
    """``shard.cases`` as the merge reads it: each case's place, its repeats' labels and its own temperature."""
    return _Places(
        {case_id: case.position for case_id, case in cases.items()},
        {case_id: case.repeats for case_id, case in cases.items() if len(case.repeats) != 1},
        {case_id: case.temperature for case_id, case in cases.items() if case.temperature is not None},
    )


# A shard's report.json as read: where it is, and its text.
ReportText = tuple[Path, str]


def read_texts(paths: Sequence[Path]) -> list[ReportText]:
    """Each report.json's text, read once: whatever else reads the reports reads these, so all see the same bytes."""
    texts = []
    for path in map(Path, paths):
        try:
            texts.append((path, path.read_text("utf-8")))
        except (OSError, ValueError) as exc:
            raise UsageError(f"{path}: not a readable envelope-ci report.json ({type(exc).__name__}: {exc})") from None
    return texts


def read_shards(texts: Sequence[ReportText]) -> Whole:
    """Every shard's report of one run as the whole run; UsageError (exit 2) naming each reason they cannot be merged.

    Each case was judged once, by its shard, and its row says all of that but its gate. What
    spans cases (strata, alerts, the gate, the verdict) is the merge's: it reads each case's
    result off its row (``RowResult``) for the same ``analysis.conclude``. What depends only on the suite
    and the pins (fixture changes, base-diff removals, lowered pins) every shard computed in
    full: the marks checked here make sure they agree.
    """
    shards = sorted((_read(path, text) for path, text in texts), key=lambda s: s.info.index)
    problems = refusals(shards)
    if problems:
        raise UsageError([Problem("", None, None, p) for p in problems])
    return _whole(shards)


class _Versioned(msgspec.Struct):
    """What is read of a report.json before its whole: which version wrote it, and whether it is a shard's (left
    unread)."""

    report_version: int | str | None = None
    shard: msgspec.Raw = msgspec.Raw(b"null")


def _read(path: Path, text: str) -> _Shard:
    """One shard's report.json, or why it is not one."""
    try:
        head = msgspec.json.decode(text, type=_Versioned)
        if head.report_version != REPORT_VERSION:
            raise UsageError(f"{path}: not an envelope-ci report.json of report_version {REPORT_VERSION}")
        if not bytes(head.shard).startswith(b"{"):
            raise UsageError(f"{path}: not a shard's report (it has no \"shard\" object); "
                             "merge takes the report.json of each run --shard I/N")
        report = msgspec.json.decode(text, type=Report)
    except (msgspec.MsgspecError, RecursionError) as exc:  # not JSON (NaN, Infinity), not the report's types,
        # nested too deep
        raise UsageError(f"{path}: not a readable envelope-ci report.json ({type(exc).__name__}: {exc})") from None
    assert report.shard is not None  # given above
    beyond = _counts_beyond(report, report.shard)
    if beyond:
        raise UsageError(f"{path}: not a report as a shard wrote it: {beyond}")
    return _Shard(path.as_posix(), report, report.shard, _places_of(report.shard.cases))


def _counts_beyond(report: Report, info: ShardInfo) -> str | None:
    """A count the report's own rows cannot hold: every later step may trust the shard's numbers."""
    if not 1 <= info.index <= info.count:
        return f"shard {info.index}/{info.count} is not a shard of {info.count}"
    if info.count > info.suite_cases or info.suite_cases < len(report.cases):
        return f"{info.count} shard(s) of a suite of {info.suite_cases} case(s), this one with {len(report.cases)}"
    if not 0 <= info.replayed <= len(report.cases):
        return f"{info.replayed} case(s) replayed of the shard's {len(report.cases)}"
    return None


# RunInfo fields that are part of the fingerprint, named as a reader knows them.
_FINGERPRINT = {"lane": "fingerprint (lane)", "endpoint_class": "fingerprint (endpoint class)",
                "temperature": "fingerprint (temperature)"}


def _marks(shard: _Shard) -> dict[str, object]:
    """What must be the same in every shard of one run, each by the name a reader knows it by."""
    info, run, base = shard.info, shard.report.run, shard.report.base
    settings = {_FINGERPRINT.get(f.name, f"run setting {f.name}"): getattr(run, f.name)
                for f in fields(run) if f.name not in ("partial", "thresholds")}
    return {
        "tool version": info.tool_version,
        "fingerprint (grader version)": info.fingerprint.grader_version,
        "fixtures hash": info.fixtures_hash,
        "pins": info.pins_digest or "no pins",
        "base branch pins": (info.base_pins_digest or "none found") if base else "not looked for",
        "base branch pins source": base.source if base else None,
        **settings,
        **{f"threshold {f.name}": getattr(run.thresholds, f.name) for f in fields(run.thresholds)},
        "shard count": info.count,
        "suite size": info.suite_cases,
    }


def refusals(shards: Sequence[_Shard]) -> list[str]:
    """Why these reports are not every shard of one run: other marks, a shard missing or twice, a case twice."""
    first = shards[0]
    mine = _marks(first)
    problems = [f"{s.path} ({s.info.index}/{s.info.count}) and {first.path} ({first.info.index}/{first.info.count}) "
                f"differ in {what}: "
                f"{theirs!r} vs {mine[what]!r}; they are not shards of one run (same commit, settings and pins)"
                for s in shards[1:] for what, theirs in _marks(s).items() if theirs != mine[what]]
    if problems:
        return problems
    count = first.info.count
    by_index: dict[int, list[str]] = {}
    for s in shards:
        by_index.setdefault(s.info.index, []).append(s.path)
    problems += [f"shard {i}/{count} given {len(ps)} times: {', '.join(ps)}"
                 for i, ps in by_index.items() if len(ps) > 1]
    if count > len(by_index):
        missing = [f"{i}/{count}" for i in islice((i for i in range(1, count + 1) if i not in by_index), 10)]
        problems.append(f"shard {', '.join(missing)}{' ...' if count - len(by_index) > 10 else ''} missing: "
                        "the merge needs the report of every shard "
                        f"(got {', '.join(f'{i}/{count}' for i in by_index)})")
    return problems or _case_problems(shards)


def _case_problems(shards: Sequence[_Shard]) -> list[str]:
    """A case in two shards' reports, or cases of the suite in none (sets made in C; each case named only when one is
    twice)."""
    seen = set().union(*(s.places.positions for s in shards))
    if len(seen) != sum(len(s.places.positions) for s in shards):
        return [_twice(shards)]
    total = shards[0].info.suite_cases
    positions = set().union(*(s.places.positions.values() for s in shards))
    if len(seen) != total or positions != set(range(total)):
        return [f"the shards' reports hold {len(seen)} of the suite's {total} case(s): "
                "they were not all graded by one shard each"]
    return []


def _twice(shards: Sequence[_Shard]) -> str:
    """Which cases more than one shard's report holds, and where."""
    first: dict[str, str] = {}
    twice = [f"{case_id} ({first[case_id]}, {s.path})" for s in shards for case_id in s.places.positions
             if first.setdefault(case_id, s.path) != s.path]
    return (f"{len(twice)} case(s) are in more than one shard's report: "
            f"{'; '.join(twice[:5])}{' ...' if len(twice) > 5 else ''}")


# What is put at a row's place in the suite (``_in_suite_order``): made from the row and its shard's places.
Placed = TypeVar("Placed")

# A row at its place, for the merge: with its result and its gate as its shard wrote it.
_Placed = tuple[CaseRow, RowResult, Gate]


def _in_suite_order(shards: Sequence[_Shard], place: Callable[[CaseRow, _Places], Placed]) -> list[Placed]:
    """What ``place`` makes of every shard's row, at the row's place in the suite.

    The places are 0 to N-1, each once (``refusals``): each row is put at its own, no sort. A
    row its shard's ``cases`` does not place, or a place no row fills, is a report edited by hand.
    """
    placed: list[Placed | None] = [None] * shards[0].info.suite_cases
    for s in shards:
        positions = s.places.positions
        for row in s.report.cases:
            position = positions.get(row.id)
            if position is None:
                raise UsageError(f"{s.path}: case {row.id!r} has a row but no place in the shard's \"cases\": "
                                 "not a report as a shard wrote it")
            placed[position] = place(row, s.places)
    filled = [each for each in placed if each is not None]
    if len(filled) != len(placed):
        raise UsageError(f"the shards' reports have rows for {len(filled)} of the suite's {len(placed)} case(s): "
                         "a row is missing from a report")
    return filled


def _whole(shards: Sequence[_Shard]) -> Whole:
    first = shards[0]
    in_order = _in_suite_order(shards, _placing(first.info.fingerprint))
    rows, results, gates = (tuple(column) for column in zip(*in_order, strict=True)) if in_order else ((), (), ())
    stale = {k: v for s in shards for k, v in s.info.stale.items()}
    unverified = {u for s in shards for u in s.info.unverified}
    model_ids = sorted({m for s in shards for m in s.info.model_ids})
    run = first.report.run
    return Whole(
        run=run,
        results=results,
        rows=rows,
        row_gates=gates,
        fingerprint=replace(first.info.fingerprint, model_id=",".join(model_ids) or None, judge=_judges(shards)),
        fixtures=first.report.fixtures,
        shape=RunShape(Lane(run.lane), run.endpoint_class, run.temperature, run.mode == "live", None,
                       {r.id: stale[r.id] for r in results if r.id in stale} if stale else {},
                       tuple(r.id for r in results if r.id in unverified) if unverified else ()),
        base=_base(shards),
        pinned=first.info.pins_digest is not None,
        replayed=sum(s.info.replayed for s in shards),
        interrupted=tuple(dict.fromkeys(m for s in shards for m in s.info.interrupted)),
        remarks=tuple(f"shard {s.info.index}/{s.info.count}: {m}" for s in shards for m in (*s.info.remarks,
                                                                                         *_level_remark(s.info))),
    )


def _judges(shards: Sequence[_Shard]) -> str | None:
    """Every judge that graded a case in any shard: the whole run's fingerprint names them, as one run's does."""
    found = {j for s in shards if s.report.fingerprint.judge for j in s.report.fingerprint.judge.split(",")}
    return ",".join(sorted(found)) or None


def _level_remark(info: ShardInfo) -> tuple[str, ...]:
    """A live shard's latency level: its cases' times were judged against it, not against the other shards'."""
    if info.level_ms is None:
        return ()
    return (f"latency level {info.level_ms:.0f} ms (this shard's cases were judged against it)",)


def _base(shards: Sequence[_Shard]) -> BaseDiff | None:
    """The base diff of the whole run: each shard's rows for its cases, in suite order, then the removed cases (the
    same in every shard)."""
    first = shards[0].report
    if first.base is None:
        return None
    own = [(s.places.positions.get(row.id), row)
           for s in shards if s.report.base for row in s.report.base.diff[:len(s.report.cases)]]
    if any(place is None for place, _ in own):
        raise UsageError("a shard's base-branch diff has a row for a case that is not the shard's: "
                         "not a report as a shard wrote it")
    placed = sorted(own, key=operator.itemgetter(0))
    return replace(first.base, diff=(*(row for _, row in placed), *first.base.diff[len(first.cases):]))


def _placing(declared: Fingerprint) -> Callable[[CaseRow, _Places], _Placed]:
    """A row at its place for the merge: the row, its result as its shard judged it, and its gate.

    The result is made from the row, and from its shard's places its repeats' labels (where it
    had other than one) and its own temperature. Most cases share their fingerprint with many
    others: each distinct one (immutable) is built once and shared, not once per case of a
    100k-case merge.
    """
    fingerprints: dict[tuple[str | None, float | None], Fingerprint] = {}
    made = RowResult._make

    def fingerprint(model_id: str | None, temperature: float | None) -> Fingerprint:
        built = fingerprints[(model_id, temperature)] = Fingerprint(
            declared.lane, declared.endpoint_class, model_id,
            declared.temperature if temperature is None else temperature, declared.grader_version,
            provider=declared.provider)
        return built

    def place(row: CaseRow, places: _Places) -> _Placed:
        case_id, label = row.id, row.label
        temperature = places.temperatures.get(case_id)
        result = made((*_JUDGED_OF_ROW(row),
                       fingerprints.get((row.model_id, temperature)) or fingerprint(row.model_id, temperature),
                       places.repeats.get(case_id) or _ONE_REPEAT[label], not label.is_transport, row.level_ms,
                       row.passes))
        return row, result, row.gate

    return place


# A RowResult's fields up to ``comparable`` are its row's fields of the same names: read off the row in one C call.
_JUDGED_OF_ROW = operator.attrgetter(*RowResult._fields[:RowResult._fields.index("comparable") + 1])
