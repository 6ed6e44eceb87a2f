"""Analysis -> Report: rows per case, the base-branch diff, the id lists. Deterministic and pure."""
from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from msgspec.structs import replace

from ..analysis.analyse import Analysis
from ..analysis.cases import CaseResult, Judged
from ..analysis.fixtures import change_of
from ..analysis.promotion import pin_brief
from ..canonical import LONE_SURROGATE
from ..findings import Alert, PinBrief, PinsUpdate
from ..model import Gate, Grade, Outcome, Pins
from .model import REPORT_VERSION, BaseDiff, BaseDiffRow, CaseRow, ModelChange, Report, RunInfo
from .next_steps import next_steps
from .notes import latency_note

PREVIEW_CHARS = 240


def as_kept(graded: Grade) -> Grade:
    """A grade as a run keeps it until the report: its text cut to the preview, so memory does not grow with the
    answers."""
    return replace(graded, text=graded.text[:PREVIEW_CHARS]) if graded.text is not None else graded


def scrub(value: Any) -> Any:
    """Text (or a list of texts) with every lone UTF-16 surrogate (a server's ``\\ud800`` escape) as U+FFFD.

    Such a string is not Unicode text: it could not be written as UTF-8 and would make
    report.json (or the comment) fail far from its cause.
    """
    if isinstance(value, str):
        return value if value.isascii() else LONE_SURROGATE.sub("\ufffd", value)  # only non-ASCII text can hold one
    if isinstance(value, (list, tuple)):
        return tuple(scrub(v) for v in value) if value else ()  # most rows give no reasons
    return value


def case_row(r: CaseResult, gate: Gate) -> CaseRow:
    """One case's row: the contract keys first, diagnosis after."""
    shown = r.shown
    return CaseRow(
        id=r.case.id,
        stratum=r.case.stratum,
        label=r.label,
        channel=r.channel,
        chars=r.measure.chars,
        tokens=r.measure.tokens,
        tokens_estimated=r.measure.tokens_estimated,
        ms=r.measure.ms,
        ms_p95=r.measure.ms_p95,
        ttft_ms=_ttft_ms(r.grades),
        http_status=shown.http_status,
        finish_reason=scrub(shown.finish_reason),
        model_id=scrub(r.fingerprint.model_id),
        attempts=r.grades[0].attempts if len(r.grades) == 1 else sum(g.attempts for g in r.grades),
        repeats=len(r.grades),
        outcome=r.outcome,
        comparable=r.comparable,
        reasons=scrub(r.reasons),
        preview=scrub(shown.text[:PREVIEW_CHARS]) if shown.text is not None else None,
        file=r.case.file,
        line=r.case.line,
        pin=r.pin,
        gate=gate,
        level_ms=r.level_ms,
        passes=r.passes,
    )


def _ttft_ms(grades: Sequence[Grade]) -> float | None:
    """The upper median time to first token over the delivered repeats that measured one (one repeat: its own)."""
    if len(grades) == 1:
        only = grades[0]
        return None if only.ttft_ms is None or only.label.is_transport else round(only.ttft_ms, 3)
    ttfts = sorted(g.ttft_ms for g in grades if g.ttft_ms is not None and not g.label.is_transport)
    return round(ttfts[len(ttfts) // 2], 3) if ttfts else None


def model_change(base: Pins | None, head: Pins | None) -> ModelChange | None:
    """The model id of the base branch's pins and of this PR's, when they differ: a re-pin on another model is the
    first thing a reviewer should see."""
    if base is None or head is None or base.fingerprint is None or head.fingerprint is None:
        return None
    before, after = base.fingerprint.model_id, head.fingerprint.model_id
    return None if before == after else ModelChange(scrub(before), scrub(after))


def base_diff_rows(results: Sequence[CaseResult], base: Pins | None, head: Pins | None,
                   elsewhere: Collection[str] = ()) -> tuple[BaseDiffRow, ...]:
    """Per case: the base branch's pin, the head's pin, and this run; which pins the PR moved.

    ``elsewhere`` are cases of the suite another shard graded: they have their rows there, and are not removed.
    """
    rows = []
    seen = set(elsewhere)
    for r in results:
        seen.add(r.case.id)
        b = base.cases.get(r.case.id) if base else None
        h = head.cases.get(r.case.id) if head else None
        fixture = None if base is None else change_of(b, r.case)  # the base pin's hash is the case as it was there
        rows.append(BaseDiffRow(
            id=r.case.id,
            base=pin_brief(b),
            head=pin_brief(h),
            run=PinBrief(r.measure.chars, r.measure.tokens, r.measure.ms, r.label.value),
            pin_changed=pin_brief(b) != pin_brief(h) or (b is not None and h is not None and b.hash != h.hash),
            fixture=fixture,
        ))
    for cid in sorted(set(base.cases if base else ()) - seen):
        rows.append(BaseDiffRow(cid, pin_brief(base.cases[cid]) if base else None, None, None, True, "removed"))
    return tuple(rows)


def build_report(
    analysis: Analysis[CaseResult],
    run: RunInfo,
    notes: Sequence[str] = (),
    base: BaseDiff | None = None,
    pins_update: PinsUpdate | None = None,
) -> Report:
    """The typed report of a run. Deterministic: fixture order, no timestamps."""
    return _report(analysis, run, notes, base, pins_update,
                   tuple(case_row(r, g) for r, g in zip(analysis.results, analysis.gates, strict=True)))


def merged_report(analysis: Analysis[Judged], run: RunInfo, notes: Sequence[str], base: BaseDiff | None,
                  rows: Sequence[CaseRow], written: Sequence[Gate]) -> Report:
    """The report of every shard's rows judged as one run: only the gates, which depend on the whole run, are set here.

    ``written`` are the rows' gates as their shards wrote them: a row the whole run gates the same is kept as it is.
    """
    gated = tuple(row if was is now else replace(row, gate=now)
                  for row, was, now in zip(rows, written, analysis.gates, strict=True))
    return _report(analysis, run, notes, base, None, gated)


def _report(analysis: Analysis[Judged], run: RunInfo, notes: Sequence[str], base: BaseDiff | None,
            pins_update: PinsUpdate | None, rows: tuple[CaseRow, ...]) -> Report:
    """The report around its rows: the id lists, the alerts, the notes and the next steps."""
    by_outcome: dict[Outcome, list[str]] = {o: [] for o in Outcome}
    for r in analysis.results:  # one pass, not one per outcome
        by_outcome[r.outcome].append(r.id)
    # Only text that came from a server can hold lone surrogates (fixtures reject them), so
    # only those fields are scrubbed: walking every value of a big report would dominate building it.
    return Report(
        report_version=REPORT_VERSION,
        verdict=analysis.verdict,
        alerts=tuple(dict.fromkeys(a.code for a in analysis.alerts)),
        alert_details=tuple(Alert(a.code, a.stratum, scrub(a.message)) for a in analysis.alerts),
        blockers=scrub(analysis.blockers),
        notes=scrub((*notes, *latency_note(analysis.latency), *analysis.warnings)),
        summary=analysis.summary,
        strata=analysis.strata,
        lanes=analysis.lanes,
        fixtures=analysis.fixtures,
        fingerprint=replace(analysis.fingerprint, model_id=scrub(analysis.fingerprint.model_id)),
        latency=analysis.latency,
        regressions=tuple(by_outcome[Outcome.REGRESSION]),
        known_failures=tuple(by_outcome[Outcome.KNOWN_FAILURE]),
        improvements=tuple(by_outcome[Outcome.IMPROVEMENT]),
        undelivered=tuple(by_outcome[Outcome.UNDELIVERED]),
        run=run,
        base=base,
        pins_update=pins_update,
        next_steps=next_steps(analysis, run),
        cases=rows,
    )
