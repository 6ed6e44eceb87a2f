"""What a shard's report.json carries for the merge (its ``shard`` object); ``report.read_shards`` reads it back."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from msgspec.structs import replace

from .. import __version__
from ..analysis.analyse import Analysis
from ..analysis.cases import CaseResult
from ..canonical import digest_bytes
from ..model import Case, Grade, Pins
from ..shard import ShardSpec
from ..sources.pins import render_pins
from .build import scrub
from .model import ShardCase, ShardInfo


def pins_digest(pins: Pins | None) -> str | None:
    """A digest of the pins as judged against: shards judged against other pins cannot be merged."""
    return digest_bytes(render_pins(pins).encode("utf-8")) if pins is not None else None


@dataclass(frozen=True)
class ShardRun:
    """What one shard's run saw besides its analysis: the marks the merge checks and the inputs it judges again."""

    pins: Pins | None
    base_pins: Pins | None
    replayed: int
    interrupted: tuple[str, ...]
    remarks: tuple[str, ...]
    stale: Mapping[str, str]
    unverified: tuple[str, ...]


def shard_info(spec: ShardSpec, suite: Sequence[Case], analysis: Analysis[CaseResult],
               grades: Mapping[str, Sequence[Grade]], seen: ShardRun) -> ShardInfo:
    """The ``shard`` object of a shard's report.json."""
    position = {c.id: i for i, c in enumerate(suite)}
    run_fp = analysis.fingerprint
    cases = {r.case.id: ShardCase(position[r.case.id], tuple(g.label for g in r.grades),
                                  (r.fingerprint.temperature
                                   if r.fingerprint.temperature != run_fp.temperature else None))
             for r in analysis.results}
    return ShardInfo(
        index=spec.index,
        count=spec.count,
        tool_version=__version__,
        fixtures_hash=analysis.fixtures.hash,
        pins_digest=pins_digest(seen.pins),
        base_pins_digest=pins_digest(seen.base_pins),
        fingerprint=replace(run_fp, model_id=None, judge=None),  # as configured: the responses say the rest
        suite_cases=len(suite),
        model_ids=scrub(tuple(sorted({g.model_id for gs in grades.values() for g in gs if g.model_id}))),
        replayed=seen.replayed,
        interrupted=scrub(seen.interrupted),
        remarks=scrub(seen.remarks),
        stale=dict(seen.stale),
        unverified=seen.unverified,
        cases=cases,
        level_ms=analysis.level_ms,
    )
